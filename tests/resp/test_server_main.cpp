// resp_test_server: a Front over an InMemoryKv, for the integration tests and
// for trying redis-cli / redis-py by hand.
//   resp_test_server --unix PATH [--tcp-port N|-1] [--password P] [--max-value BYTES]
//                    [--max-connections N] [--io-threads N] [--ready-file PATH]
// Once listening it writes "<tcp port>\n" to --ready-file (atomically), then
// serves until SIGTERM or SIGINT.
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "base/fs.h"
#include "resp/front.h"

namespace {

int usage(const char* why) {
  std::fprintf(stderr, "resp_test_server: %s\n", why);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  ccpool::resp::FrontOptions options;
  std::string ready_file;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (i + 1 >= argc) return usage(("missing value for " + flag).c_str());
    std::string value = argv[++i];
    if (flag == "--unix")
      options.unix_path = value;
    else if (flag == "--tcp-port")
      options.tcp_port = std::atoi(value.c_str());
    else if (flag == "--password")
      options.password = value;
    else if (flag == "--max-value")
      options.max_value = std::strtoull(value.c_str(), nullptr, 10);
    else if (flag == "--max-connections")
      options.max_connections = std::strtoul(value.c_str(), nullptr, 10);
    else if (flag == "--io-threads")
      options.io_threads = std::strtoul(value.c_str(), nullptr, 10);
    else if (flag == "--ready-file")
      ready_file = value;
    else
      return usage(("unknown flag " + flag).c_str());
  }
  // Block the stop signals before any thread starts so only sigwait sees them.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);

  ccpool::resp::InMemoryKv kv;
  auto front = ccpool::resp::Front::start(options, kv);
  if (!front) return usage(front.error().message.c_str());
  if (!ready_file.empty()) {
    auto written =
        ccpool::write_file_atomic(ready_file, std::to_string((*front)->tcp_port()) + "\n", 0644);
    if (!written) return usage(written.error().message.c_str());
  }
  int signal_number = 0;
  sigwait(&stop, &signal_number);
  auto counters = (*front)->counters();
  std::printf("connections=%llu commands=%llu refused_peers=%llu protocol_errors=%llu\n",
              static_cast<unsigned long long>(counters.connections),
              static_cast<unsigned long long>(counters.commands),
              static_cast<unsigned long long>(counters.refused_peers),
              static_cast<unsigned long long>(counters.protocol_errors));
  return 0;
}
