#include "compiler/manifest.h"

#include <charconv>
#include <string_view>

namespace ccpool::compiler {
namespace {

constexpr std::string_view kVersionLine = "ccpool-manifest v3\n";

class Reader {
 public:
  explicit Reader(std::string_view text) : m_text(text) {}
  bool literal(std::string_view s) {
    if (m_text.substr(m_pos, s.size()) != s) return false;
    m_pos += s.size();
    return true;
  }
  template <typename T>
  bool number(T& out) {
    const char* begin = m_text.data() + m_pos;
    auto [ptr, ec] = std::from_chars(begin, m_text.data() + m_text.size(), out);
    if (ec != std::errc()) return false;
    m_pos += static_cast<size_t>(ptr - begin);
    return true;
  }
  bool digest(Digest& out) {
    if (32 > m_text.size() - m_pos) return false;
    std::optional<Digest> d = Digest::from_hex(m_text.substr(m_pos, 32));
    if (!d) return false;
    out = *d;
    m_pos += 32;
    return true;
  }
  bool path(std::string& out) {
    size_t len = 0;
    if (!number(len) || !literal(":") || len > m_text.size() - m_pos) return false;
    out.assign(m_text.substr(m_pos, len));
    m_pos += len;
    return true;
  }
  bool kind(char& out) {
    if (m_pos >= m_text.size()) return false;
    out = m_text[m_pos++];
    return out > ' ';
  }
  bool done() const { return m_pos == m_text.size(); }

 private:
  std::string_view m_text;
  size_t m_pos = 0;
};

}  // namespace

std::string serialize_manifest(const Manifest& manifest) {
  std::string out(kVersionLine);
  for (const ManifestEntry& e : manifest.entries) {
    out += "entry " + e.result_key.hex() + " " + std::to_string(e.date_bucket) + " " +
           std::to_string(e.files.size()) + " " + std::to_string(e.negatives.size()) + " " +
           std::to_string(e.absent.size()) + " " + std::to_string(e.dirs.size()) + " " +
           std::to_string(e.checks.size()) + "\n";
    for (const auto& [path, digest] : e.files) {
      out += "f " + digest.hex() + " " + std::to_string(path.size()) + ":" + path + "\n";
    }
    for (const std::string& path : e.negatives) {
      out += "n " + std::to_string(path.size()) + ":" + path + "\n";
    }
    for (const std::string& path : e.absent) {
      out += "a " + std::to_string(path.size()) + ":" + path + "\n";
    }
    for (const auto& [path, digest] : e.dirs) {
      out += "d " + digest.hex() + " " + std::to_string(path.size()) + ":" + path + "\n";
    }
    for (const ManifestCheck& c : e.checks) {
      out += std::string("c ") + c.kind + " " + std::to_string(c.path.size()) + ":" + c.path + " " +
             std::to_string(c.answer.size()) + ":" + c.answer + "\n";
    }
  }
  return out;
}

std::optional<Manifest> parse_manifest(const std::string& text) {
  Reader r(text);
  if (!r.literal(kVersionLine)) return std::nullopt;
  Manifest m;
  while (!r.done()) {
    ManifestEntry e;
    size_t files = 0, negatives = 0, absent = 0, dirs = 0, checks = 0;
    if (!r.literal("entry ") || !r.digest(e.result_key) || !r.literal(" ") ||
        !r.number(e.date_bucket) || !r.literal(" ") || !r.number(files) || !r.literal(" ") ||
        !r.number(negatives) || !r.literal(" ") || !r.number(absent) || !r.literal(" ") ||
        !r.number(dirs) || !r.literal(" ") || !r.number(checks) || !r.literal("\n")) {
      return std::nullopt;
    }
    if (files > kMaxManifestFiles || negatives > kMaxManifestNegatives ||
        absent > kMaxManifestNegatives - negatives || dirs > kMaxManifestDirs ||
        checks > kMaxManifestChecks || m.entries.size() >= kMaxManifestEntries) {
      return std::nullopt;
    }
    for (size_t i = 0; i < files; ++i) {
      std::pair<std::string, Digest> f;
      if (!r.literal("f ") || !r.digest(f.second) || !r.literal(" ") || !r.path(f.first) ||
          !r.literal("\n")) {
        return std::nullopt;
      }
      e.files.push_back(std::move(f));
    }
    for (size_t i = 0; i < negatives; ++i) {
      std::string p;
      if (!r.literal("n ") || !r.path(p) || !r.literal("\n")) return std::nullopt;
      e.negatives.push_back(std::move(p));
    }
    for (size_t i = 0; i < absent; ++i) {
      std::string p;
      if (!r.literal("a ") || !r.path(p) || !r.literal("\n")) return std::nullopt;
      e.absent.push_back(std::move(p));
    }
    for (size_t i = 0; i < dirs; ++i) {
      std::pair<std::string, Digest> d;
      if (!r.literal("d ") || !r.digest(d.second) || !r.literal(" ") || !r.path(d.first) ||
          !r.literal("\n")) {
        return std::nullopt;
      }
      e.dirs.push_back(std::move(d));
    }
    for (size_t i = 0; i < checks; ++i) {
      ManifestCheck c;
      if (!r.literal("c ") || !r.kind(c.kind) || !r.literal(" ") || !r.path(c.path) ||
          !r.literal(" ") || !r.path(c.answer) || !r.literal("\n")) {
        return std::nullopt;
      }
      e.checks.push_back(std::move(c));
    }
    m.entries.push_back(std::move(e));
  }
  return m;
}

int64_t date_bucket(int64_t unix_seconds) {
  return unix_seconds / 900;
}

}  // namespace ccpool::compiler
