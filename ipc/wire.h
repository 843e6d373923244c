// Little-endian primitive writers and a bounds-checked reader for frame
// payloads. Internal to ipc/ (not installed, not included by other folders).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace ccpool::ipc::wire {

inline void put_u8(std::string& out, uint8_t v) {
  out.push_back(static_cast<char>(v));
}
inline void put_u16(std::string& out, uint16_t v) {
  char b[2] = {static_cast<char>(v), static_cast<char>(v >> 8)};
  out.append(b, 2);
}
inline void put_u32(std::string& out, uint32_t v) {
  char b[4];
  for (int i = 0; i < 4; ++i) b[i] = static_cast<char>(v >> (8 * i));
  out.append(b, 4);
}
inline void put_u64(std::string& out, uint64_t v) {
  char b[8];
  for (int i = 0; i < 8; ++i) b[i] = static_cast<char>(v >> (8 * i));
  out.append(b, 8);
}
inline void put_i32(std::string& out, int32_t v) {
  put_u32(out, static_cast<uint32_t>(v));
}
// str = u32 length, then the bytes (no terminator).
inline void put_str(std::string& out, std::string_view s) {
  put_u32(out, static_cast<uint32_t>(s.size()));
  out.append(s.data(), s.size());
}
// list = u32 count, then count strs.
inline void put_list(std::string& out, const std::vector<std::string>& list) {
  put_u32(out, static_cast<uint32_t>(list.size()));
  for (const std::string& s : list) put_str(out, s);
}

inline uint32_t load_u32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<uint8_t>(p[i])) << (8 * i);
  return v;
}

// Reads fields off one payload. Every read checks the remaining length first;
// a failed read sets `failed` and the caller reports it once at the end, so
// the decoders stay linear. Nothing is allocated from a wire length until the
// bytes it promises are known to be present.
class Cursor {
 public:
  Cursor(const char* data, size_t n) : m_p(data), m_left(n) {}

  bool failed() const { return m_failed; }
  size_t left() const { return m_left; }
  const char* what() const { return m_what; }

  uint8_t u8(const char* field) {
    uint8_t v = 0;
    if (take(1, field)) v = static_cast<uint8_t>(m_p[-1]);
    return v;
  }
  uint16_t u16(const char* field) {
    uint16_t v = 0;
    if (take(2, field))
      v = static_cast<uint16_t>(static_cast<uint8_t>(m_p[-2]) |
                                (static_cast<uint8_t>(m_p[-1]) << 8));
    return v;
  }
  uint32_t u32(const char* field) {
    uint32_t v = 0;
    if (take(4, field)) v = load_u32(m_p - 4);
    return v;
  }
  uint64_t u64(const char* field) {
    uint64_t lo = u32(field), hi = u32(field);
    return lo | (hi << 32);
  }
  int32_t i32(const char* field) { return static_cast<int32_t>(u32(field)); }

  // A string of at most `max` bytes.
  std::string str(const char* field, uint32_t max) {
    uint32_t n = u32(field);
    if (m_failed) return {};
    if (n > max) return fail(field, "longer than its bound"), std::string();
    if (!take(n, field)) return {};
    return std::string(m_p - n, n);
  }
  // A list of at most `max_count` strings, each at most `max_len` bytes, whose
  // lengths sum to at most `max_total`. The count is checked against both the
  // bound and the bytes left (each entry takes >= 4) before reserving.
  std::vector<std::string> list(const char* field, uint32_t max_count, uint32_t max_len,
                                uint64_t max_total) {
    std::vector<std::string> out;
    uint32_t count = u32(field);
    if (m_failed) return out;
    if (count > max_count) return fail(field, "has more entries than its bound"), out;
    if (count > m_left / 4) return fail(field, "count exceeds the frame"), out;
    out.reserve(count);
    uint64_t total = 0;
    for (uint32_t i = 0; i < count && !m_failed; ++i) {
      out.push_back(str(field, max_len));
      total += out.back().size();
      if (total > max_total) fail(field, "total size exceeds its bound");
    }
    return out;
  }

  void fail(const char* field, const char* why) {
    if (m_failed) return;
    m_failed = true;
    m_field = field;
    m_what = why;
  }
  const char* field() const { return m_field; }

 private:
  bool take(size_t n, const char* field) {
    if (m_failed) return false;
    if (n > m_left) {
      fail(field, "truncated");
      return false;
    }
    m_p += n;
    m_left -= n;
    return true;
  }

  const char* m_p;
  size_t m_left;
  bool m_failed = false;
  const char* m_field = "";
  const char* m_what = "";
};

}  // namespace ccpool::ipc::wire
