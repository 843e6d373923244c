#include "remote/endpoint.h"

#include <charconv>

namespace ccpool::remote {
namespace {

Result<int> parse_int(std::string_view text, int lo, int hi, std::string_view what,
                      std::string_view url) {
  int value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || value < lo ||
      value > hi) {
    return make_error(ErrorCode::kInvalidArgument,
                      "remote URL '" + std::string(url) + "': " + std::string(what) + " '" +
                          std::string(text) + "' is not a number in [" + std::to_string(lo) + ", " +
                          std::to_string(hi) + "]");
  }
  return value;
}

Result<Endpoint> parse_unix(std::string_view rest, std::string_view url) {
  Endpoint ep;
  ep.kind = Endpoint::Kind::kUnix;
  size_t query = rest.find('?');
  ep.path = std::string(rest.substr(0, query));
  if (ep.path.empty() || ep.path[0] != '/') {
    return make_error(
        ErrorCode::kInvalidArgument,
        "remote URL '" + std::string(url) +
            "': a unix socket URL needs an absolute path, e.g. unix:///run/redis.sock");
  }
  if (query != std::string_view::npos) {
    std::string_view q = rest.substr(query + 1);
    if (q.substr(0, 3) != "db=") {
      return make_error(ErrorCode::kInvalidArgument,
                        "remote URL '" + std::string(url) + "': only ?db=N is understood");
    }
    CCPOOL_TRY_ASSIGN(ep.db, parse_int(q.substr(3), 0, 1 << 20, "db", url));
  }
  return ep;
}

Result<Endpoint> parse_tcp(std::string_view rest, std::string_view url) {
  Endpoint ep;
  size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  if (slash != std::string_view::npos && slash + 1 < rest.size()) {
    CCPOOL_TRY_ASSIGN(ep.db, parse_int(rest.substr(slash + 1), 0, 1 << 20, "db", url));
  }
  if (authority.find('@') != std::string_view::npos) {
    return make_error(ErrorCode::kInvalidArgument,
                      "remote URL '" + std::string(url).substr(0, url.find("//") + 2) +
                          "...@...': credentials in the URL would show on argv; put the password "
                          "in the file named by CCPOOL_REMOTE_PASSWORD_FILE instead");
  }
  std::string_view port_text;
  if (!authority.empty() && authority[0] == '[') {
    size_t close = authority.find(']');
    if (close == std::string_view::npos) {
      return make_error(ErrorCode::kInvalidArgument,
                        "remote URL '" + std::string(url) + "': unterminated '[' in IPv6 host");
    }
    ep.host = std::string(authority.substr(1, close - 1));
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after[0] != ':') {
        return make_error(ErrorCode::kInvalidArgument,
                          "remote URL '" + std::string(url) + "': expected ':port' after ']'");
      }
      port_text = after.substr(1);
    }
  } else {
    size_t colon = authority.rfind(':');
    ep.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) port_text = authority.substr(colon + 1);
  }
  if (ep.host.empty()) ep.host = "127.0.0.1";
  if (!port_text.empty()) {
    CCPOOL_TRY_ASSIGN(ep.port, parse_int(port_text, 1, 65535, "port", url));
  }
  return ep;
}

}  // namespace

std::string Endpoint::describe() const {
  std::string out = kind == Kind::kUnix ? "unix://" + path : "redis://";
  if (kind == Kind::kTcp) {
    bool v6 = host.find(':') != std::string::npos;
    out.append(v6 ? "[" : "").append(host).append(v6 ? "]" : "");
    out.append(":").append(std::to_string(port));
  }
  if (db != 0) out.append(kind == Kind::kUnix ? "?db=" : "/").append(std::to_string(db));
  return out;
}

Result<Endpoint> parse_endpoint(std::string_view url) {
  if (url.substr(0, 8) == "redis://") return parse_tcp(url.substr(8), url);
  if (url.substr(0, 7) == "unix://") return parse_unix(url.substr(7), url);
  if (url.substr(0, 9) == "rediss://") {
    return make_error(
        ErrorCode::kUnsupported,
        "remote URL '" + std::string(url) +
            "': TLS (rediss://) is not available: Debian's hiredis 0.14 is built "
            "without SSL. Use redis:// through a TLS tunnel (stunnel, spiped) instead");
  }
  return make_error(ErrorCode::kInvalidArgument,
                    "remote URL '" + std::string(url) +
                        "' is not understood; use redis://host:port[/db] or unix:///path");
}

}  // namespace ccpool::remote
