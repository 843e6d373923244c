// RESP2 reply encoders. Each appends one complete reply to `out`.
//   +<text>\r\n   -<CODE text>\r\n   :<int>\r\n   $<len>\r\n<bytes>\r\n   $-1\r\n   *<n>\r\n
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace ccpool::resp::reply {

// Simple strings and errors cannot carry CR or LF: they are turned into blanks,
// as redis-server does for error texts built from user input.
inline void append_line_safe(std::string& out, std::string_view text) {
  for (char c : text) out.push_back(c == '\r' || c == '\n' ? ' ' : c);
}

inline void simple(std::string& out, std::string_view text) {
  out.push_back('+');
  append_line_safe(out, text);
  out.append("\r\n");
}

// `text` starts with the error code: "ERR syntax error", "NOAUTH ...".
inline void error(std::string& out, std::string_view text) {
  out.push_back('-');
  append_line_safe(out, text);
  out.append("\r\n");
}

inline void integer(std::string& out, int64_t value) {
  out.push_back(':');
  out.append(std::to_string(value));
  out.append("\r\n");
}

inline void bulk(std::string& out, std::string_view bytes) {
  out.push_back('$');
  out.append(std::to_string(bytes.size()));
  out.append("\r\n");
  out.append(bytes);
  out.append("\r\n");
}

inline void null_bulk(std::string& out) {
  out.append("$-1\r\n");
}
inline void null_resp3(std::string& out) {
  out.append("_\r\n");
}

// RESP3 map of `count` key/value pairs (HELLO 3 answers with one).
inline void map_header(std::string& out, size_t count) {
  out.push_back('%');
  out.append(std::to_string(count));
  out.append("\r\n");
}

inline void array_header(std::string& out, size_t count) {
  out.push_back('*');
  out.append(std::to_string(count));
  out.append("\r\n");
}

inline void ok(std::string& out) {
  out.append("+OK\r\n");
}

}  // namespace ccpool::resp::reply
