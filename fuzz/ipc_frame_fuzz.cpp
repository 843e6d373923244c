// libFuzzer target for ipc::FrameReader and the payload decoders.
//
// The input is split into chunks (chunk sizes come from the input itself) and
// fed to one FrameReader, pulling messages after each chunk, the way the
// service's non-blocking reader sees a connection. Every decoded message must
// re-encode to a frame that decodes to the same bytes again, and the reader
// must never buffer more than it was fed.
//
// Short run: the `ipc_frame_fuzz` CTest test (-runs=20000). Long run:
//   build-x/bin/ipc_frame_fuzz -max_total_time=3600 -max_len=65536 corpus/
#include <cstddef>
#include <cstdint>
#include <string>

#include "ipc/protocol.h"

namespace {

void check(bool condition) {
  if (!condition) __builtin_trap();
}

void check_round_trip(const ccpool::ipc::Message& m) {
  std::string frame = ccpool::ipc::encode(m);
  ccpool::ipc::FrameReader again;
  again.feed(frame.data(), frame.size());
  auto decoded = again.next();
  check(decoded.has_value() && decoded->has_value());
  check(ccpool::ipc::encode(**decoded) == frame);
  check(again.buffered() == 0);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  size_t chunk = 1 + data[0] % 64;  // 1..64-byte chunks, or whole when the first byte is > 200
  if (data[0] > 200) chunk = size;
  ++data;
  --size;
  ccpool::ipc::FrameReader reader;
  size_t fed = 0;
  while (fed < size) {
    size_t n = size - fed < chunk ? size - fed : chunk;
    reader.feed(reinterpret_cast<const char*>(data + fed), n);
    fed += n;
    check(reader.buffered() <= fed);
    for (;;) {
      auto next = reader.next();
      if (!next) {
        check(next.error().code == ccpool::ErrorCode::kProtocol);
        check(!reader.next().has_value());  // stays poisoned
        return 0;
      }
      if (!next->has_value()) break;
      check_round_trip(**next);
    }
  }
  return 0;
}
