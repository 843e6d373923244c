// libFuzzer target for resp::RespParser and the command handlers.
//
// The input is split into chunks (chunk sizes come from the input itself) and
// fed to one parser, pulling commands after each chunk, as the front's epoll
// loop does. Every command must survive a round trip (encode as a RESP array,
// parse again, same arguments) and is then executed by a Session over an
// InMemoryKv, so reply encoding and argument checks are fuzzed too. The parser
// must never hold more bytes than it was fed.
//
// Short run: the `resp_parser_fuzz` CTest test. Long run:
//   build-x/bin/resp_parser_fuzz -max_total_time=3600 -max_len=65536 corpus/
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "resp/front.h"
#include "resp/session.h"

namespace {

void check(bool condition) {
  if (!condition) __builtin_trap();
}

std::string encode(const std::vector<std::string>& args) {
  std::string wire = "*" + std::to_string(args.size()) + "\r\n";
  for (const auto& arg : args) wire += "$" + std::to_string(arg.size()) + "\r\n" + arg + "\r\n";
  return wire;
}

void check_round_trip(const std::vector<std::string>& args) {
  ccpool::resp::RespParser again(4096, 64);
  again.feed(encode(args));
  auto parsed = again.next();
  check(parsed.has_value() && parsed->has_value() && **parsed == args);
  check(again.buffered() == 0);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ccpool::resp::InMemoryKv kv([] { return int64_t{1'700'000'000'000}; });
  ccpool::resp::SharedState shared(kv, size % 2 ? "pw" : "",
                                   [] { return int64_t{1'700'000'000'000}; });
  ccpool::resp::Session session(shared);
  ccpool::resp::RespParser parser(4096, 64);
  size_t fed = 0;
  size_t pos = 0;
  while (pos < size) {
    size_t chunk = 1 + data[pos] % 64;  // the first byte of each chunk picks its length
    chunk = std::min(chunk, size - pos);
    parser.feed(std::string_view(reinterpret_cast<const char*>(data) + pos, chunk));
    fed += chunk;
    pos += chunk;
    check(parser.buffered() <= fed);
    while (true) {
      auto next = parser.next();
      if (!next) {
        if (next.error().code == ccpool::ErrorCode::kProtocol)
          return 0;  // the connection would close
        check(next.error().code == ccpool::ErrorCode::kFull);
        continue;
      }
      if (!*next) break;
      check(!(*next)->empty());
      check((*next)->size() <= 64);
      check_round_trip(**next);
      std::string out;
      session.execute(**next, out);
      check(out.size() >= 3 && out.compare(out.size() - 2, 2, "\r\n") == 0);
    }
  }
  return 0;
}
