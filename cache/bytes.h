// Little-endian append/parse helpers for the store's byte layouts. The reader
// never reads past its input: every accessor reports failure instead.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "base/hash.h"

namespace ccpool::cache {

class ByteWriter {
 public:
  void u8(uint8_t v) { m_out.push_back(static_cast<char>(v)); }
  void u32(uint32_t v) { raw(&v, 4); }
  void u64(uint64_t v) { raw(&v, 8); }
  void i64(int64_t v) { raw(&v, 8); }
  void digest(const Digest& d) { raw(d.bytes.data(), 16); }
  void str(std::string_view s) {
    u32(static_cast<uint32_t>(s.size()));
    m_out.append(s);
  }
  void bytes(std::string_view s) { m_out.append(s); }
  std::string& out() { return m_out; }

 private:
  void raw(const void* p, size_t n) { m_out.append(static_cast<const char*>(p), n); }
  std::string m_out;
};

class ByteReader {
 public:
  explicit ByteReader(std::string_view in) : m_in(in) {}
  bool u8(uint8_t& v) { return raw(&v, 1); }
  bool u32(uint32_t& v) { return raw(&v, 4); }
  bool u64(uint64_t& v) { return raw(&v, 8); }
  bool i64(int64_t& v) { return raw(&v, 8); }
  bool i32(int32_t& v) { return raw(&v, 4); }
  bool digest(Digest& d) { return raw(d.bytes.data(), 16); }
  bool view(size_t n, std::string_view& out) {
    if (m_in.size() < n) return false;
    out = m_in.substr(0, n);
    m_in.remove_prefix(n);
    return true;
  }
  bool str(std::string& s) {
    uint32_t n;
    std::string_view v;
    if (!u32(n) || !view(n, v)) return false;
    s.assign(v);
    return true;
  }
  size_t left() const { return m_in.size(); }

 private:
  bool raw(void* p, size_t n) {
    if (m_in.size() < n) return false;
    std::memcpy(p, m_in.data(), n);
    m_in.remove_prefix(n);
    return true;
  }
  std::string_view m_in;
};

}  // namespace ccpool::cache
