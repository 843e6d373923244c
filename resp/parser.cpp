// RESP2 request parser. Requests are either arrays of bulk strings
//   *<count>\r\n $<len>\r\n <len bytes>\r\n ...
// or inline commands (a text line split on blanks, with Redis's quoting), as
// redis-server accepts them. Error texts match redis-server's networking.c.
//
// Memory contract: nothing is reserved from a declared length. A bulk's bytes
// sit in m_buf as they arrive and are copied out once complete; an oversized
// bulk is dropped as it arrives, so a client cannot make us hold more than what
// it actually sent (plus one command's cap).
#include <algorithm>
#include <charconv>
#include <cstring>

#include "resp/front.h"

namespace ccpool::resp {
namespace {

constexpr size_t kInlineMax = 64 * 1024;         // redis-server's PROTO_INLINE_MAX_SIZE
constexpr size_t kHeaderMax = 256;               // "*<count>" / "$<len>" lines are tiny
constexpr uint64_t kAbsurdFloor = 512ull << 20;  // redis-server's proto-max-bulk-len
constexpr size_t kReserveMax = 1024;             // cap on args.reserve() from a declared count

std::optional<int64_t> parse_int(std::string_view text) {
  int64_t value = 0;
  if (text.empty() || text[0] == '+') return std::nullopt;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

tl::unexpected<Error> protocol_error(std::string what) {
  return make_error(ErrorCode::kProtocol, "Protocol error: " + what);
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// redis-server's sdssplitargs: blanks separate arguments; "..." understands
// \n \r \t \b \a \\ \" and \xHH; '...' understands \'. A closing quote must be
// followed by a blank or the end. nullopt: unbalanced quotes.
std::optional<std::vector<std::string>> split_inline(std::string_view line) {
  std::vector<std::string> args;
  size_t i = 0;
  auto blank = [](char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
  };
  while (true) {
    while (i < line.size() && blank(line[i])) ++i;
    if (i == line.size()) return args;
    std::string arg;
    char quote = 0;
    bool done = false;
    while (!done) {
      if (quote == 0) {
        if (i == line.size() || blank(line[i])) {
          done = true;
        } else if (line[i] == '"' || line[i] == '\'') {
          quote = line[i++];
        } else {
          arg.push_back(line[i++]);
        }
        continue;
      }
      if (i == line.size()) return std::nullopt;
      char c = line[i];
      if (quote == '"' && c == '\\' && i + 3 < line.size() && line[i + 1] == 'x' &&
          hex_digit(line[i + 2]) >= 0 && hex_digit(line[i + 3]) >= 0) {
        arg.push_back(static_cast<char>(hex_digit(line[i + 2]) * 16 + hex_digit(line[i + 3])));
        i += 4;
      } else if (c == '\\' && i + 1 < line.size() && (quote == '"' || line[i + 1] == '\'')) {
        char e = line[i + 1];
        if (quote == '"') {
          e = e == 'n'   ? '\n'
              : e == 'r' ? '\r'
              : e == 't' ? '\t'
              : e == 'b' ? '\b'
              : e == 'a' ? '\a'
                         : e;
        }
        arg.push_back(e);
        i += 2;
      } else if (c == quote) {
        ++i;
        if (i < line.size() && !blank(line[i])) return std::nullopt;
        done = true;
      } else {
        arg.push_back(c);
        ++i;
      }
    }
    args.push_back(std::move(arg));
  }
}

}  // namespace

RespParser::RespParser(size_t max_bulk, size_t max_args)
    : m_max_bulk(max_bulk), m_max_args(max_args), m_max_command(uint64_t{max_bulk} + (1u << 20)) {}

void RespParser::set_limits(size_t max_bulk, size_t max_args, uint64_t max_command) {
  m_max_bulk = max_bulk;
  m_max_args = max_args;
  m_max_command = max_command;
}

void RespParser::compact() {
  if (m_pos == m_buf.size()) {
    m_buf.clear();
    m_pos = 0;
  } else if (m_pos > 64 * 1024 && m_pos > m_buf.size() / 2) {
    m_buf.erase(0, m_pos);
    m_pos = 0;
  }
}

void RespParser::feed(std::string_view data) {
  if (m_poisoned) return;
  compact();
  // Bytes of an oversized bulk never enter the buffer.
  if (m_skip_left > 0 && m_pos == m_buf.size()) {
    size_t drop = static_cast<size_t>(std::min<uint64_t>(m_skip_left, data.size()));
    m_skip_left -= drop;
    data.remove_prefix(drop);
  }
  m_buf.append(data);
}

// Returns the next CRLF-terminated line (without CRLF) and consumes it.
Result<std::optional<std::string_view>> RespParser::take_line(size_t limit, const char* what) {
  std::string_view rest(m_buf.data() + m_pos, m_buf.size() - m_pos);
  size_t end = rest.find("\r\n");
  if (end == std::string_view::npos) {
    if (rest.size() > limit) return protocol_error(std::string("too big ") + what + " string");
    return std::optional<std::string_view>();
  }
  if (end > limit) return protocol_error(std::string("too big ") + what + " string");
  m_pos += end + 2;
  return std::optional<std::string_view>(rest.substr(0, end));
}

Result<std::optional<std::vector<std::string>>> RespParser::parse_inline() {
  std::string_view rest(m_buf.data() + m_pos, m_buf.size() - m_pos);
  // Resume the search where the last call stopped: a line fed byte by byte
  // must cost O(n), not O(n^2).
  size_t end = rest.find('\n', m_inline_scanned);
  if (end == std::string_view::npos) {
    if (rest.size() > kInlineMax) return protocol_error("too big inline request");
    m_inline_scanned = rest.size();
    return std::optional<std::vector<std::string>>();
  }
  m_inline_scanned = 0;
  if (end > kInlineMax) return protocol_error("too big inline request");
  std::string_view line = rest.substr(0, end);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  auto args = split_inline(line);
  if (!args) return protocol_error("unbalanced quotes in request");
  if (args->size() > m_max_args) return protocol_error("invalid multibulk length");
  m_pos += end + 1;
  return std::optional<std::vector<std::string>>(std::move(*args));
}

Result<bool> RespParser::parse_bulk() {
  if (m_bulk_len < 0) {
    CCPOOL_TRY_ASSIGN(auto line, take_line(kHeaderMax, "bulk count"));
    if (!line) return false;
    if (line->empty() || (*line)[0] != '$') {
      char got = line->empty() ? '\r' : (*line)[0];
      return protocol_error(std::string("expected '$', got '") + got + "'");
    }
    auto len = parse_int(line->substr(1));
    uint64_t absurd = std::max<uint64_t>(2 * uint64_t{m_max_bulk}, kAbsurdFloor);
    if (!len || *len < 0 || static_cast<uint64_t>(*len) > absurd)
      return protocol_error("invalid bulk length");
    m_bulk_len = *len;
    bool too_large = static_cast<uint64_t>(*len) > m_max_bulk ||
                     m_command_bytes + static_cast<uint64_t>(*len) > m_max_command;
    if (too_large || m_discarding) {
      m_skip_left = static_cast<uint64_t>(*len) + 2;
      if (!m_discarding) {
        m_discarding = true;
        m_args.clear();
        m_args.shrink_to_fit();
        return make_error(ErrorCode::kFull, "value too large");
      }
    }
  }
  if (m_discarding) {
    size_t drop = static_cast<size_t>(std::min<uint64_t>(m_skip_left, m_buf.size() - m_pos));
    m_pos += drop;
    m_skip_left -= drop;
    if (m_skip_left > 0) return false;
  } else {
    size_t len = static_cast<size_t>(m_bulk_len);
    if (m_buf.size() - m_pos < len + 2) return false;
    if (m_buf[m_pos + len] != '\r' || m_buf[m_pos + len + 1] != '\n') {
      return protocol_error("expected CRLF after bulk data");
    }
    m_args.emplace_back(m_buf.data() + m_pos, len);
    m_command_bytes += len;
    m_pos += len + 2;
  }
  m_bulk_len = -1;
  --m_args_left;
  return true;
}

Result<std::optional<std::vector<std::string>>> RespParser::next() {
  if (m_poisoned) return protocol_error("connection already failed");
  auto result = [&]() -> Result<std::optional<std::vector<std::string>>> {
    while (true) {
      if (m_args_left < 0) {
        if (m_pos == m_buf.size()) return std::optional<std::vector<std::string>>();
        if (m_buf[m_pos] != '*') {
          CCPOOL_TRY_ASSIGN(auto args, parse_inline());
          if (args && args->empty()) continue;  // blank line: a keep-alive, ignored
          m_last_inline = true;
          return args;
        }
        CCPOOL_TRY_ASSIGN(auto line, take_line(kHeaderMax, "mbulk count"));
        if (!line) return std::optional<std::vector<std::string>>();
        auto count = parse_int(line->substr(1));
        if (!count || *count < -1 ||
            *count > static_cast<int64_t>(std::min<size_t>(m_max_args, INT32_MAX))) {
          return protocol_error("invalid multibulk length");
        }
        if (*count <= 0) continue;  // *0 and *-1 are empty requests, as in redis-server
        m_args_left = *count;
        m_args.clear();
        m_args.reserve(std::min<size_t>(static_cast<size_t>(*count), kReserveMax));
        m_command_bytes = 0;
        m_discarding = false;
      }
      while (m_args_left > 0) {
        CCPOOL_TRY_ASSIGN(bool done, parse_bulk());
        if (!done) return std::optional<std::vector<std::string>>();
      }
      m_args_left = -1;
      if (m_discarding) {  // already answered "value too large"
        m_discarding = false;
        continue;
      }
      m_last_inline = false;
      return std::optional<std::vector<std::string>>(std::move(m_args));
    }
  }();
  if (!result && result.error().code == ErrorCode::kProtocol) {
    m_poisoned = true;
    m_buf.clear();
    m_buf.shrink_to_fit();
    m_pos = 0;
  }
  return result;
}

}  // namespace ccpool::resp
