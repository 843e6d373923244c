// Parsing of the remote tier's URL. No Redis calls here.
#pragma once

#include <string>
#include <string_view>

#include "base/error.h"

namespace ccpool::remote {

struct Endpoint {
  enum class Kind { kTcp, kUnix };
  Kind kind = Kind::kTcp;
  std::string host;  // kTcp: name or address (IPv6 without brackets)
  int port = 6379;   // kTcp
  std::string path;  // kUnix: socket path
  int db = 0;        // SELECT after connect when non-zero

  std::string describe() const;  // for error messages; never contains a password
};

// Accepts redis://[host][:port][/db], redis://[::1]:port, unix:///path[?db=N].
// rediss:// is refused: Debian's hiredis 0.14 has no TLS. A password inside
// the URL is refused too: URLs end up on argv; use the password file.
Result<Endpoint> parse_endpoint(std::string_view url);

}  // namespace ccpool::remote
