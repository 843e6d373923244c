#include "compiler/trace_record.h"

#include <algorithm>
#include <charconv>

namespace ccpool::compiler {
namespace {

class LineReader {
 public:
  explicit LineReader(std::string_view text) : m_text(text) {}
  bool done() const { return m_pos >= m_text.size(); }
  bool op(char& out) {
    if (m_pos >= m_text.size()) return false;
    out = m_text[m_pos++];
    return true;
  }
  bool space() { return literal(' '); }
  bool literal(char c) {
    if (m_pos >= m_text.size() || m_text[m_pos] != c) return false;
    ++m_pos;
    return true;
  }
  bool number(int64_t& out) {
    const char* begin = m_text.data() + m_pos;
    auto [ptr, ec] = std::from_chars(begin, m_text.data() + m_text.size(), out);
    if (ec != std::errc()) return false;
    m_pos += static_cast<size_t>(ptr - begin);
    return true;
  }
  bool text(std::string& out) {
    int64_t len = 0;
    if (!number(len) || len < 0 || !literal(':') ||
        static_cast<uint64_t>(len) > m_text.size() - m_pos)
      return false;
    out.assign(m_text.substr(m_pos, static_cast<size_t>(len)));
    m_pos += static_cast<size_t>(len);
    return true;
  }

 private:
  std::string_view m_text;
  size_t m_pos = 0;
};

}  // namespace

std::optional<std::vector<TraceEvent>> parse_trace(std::string_view text, size_t max_events) {
  std::vector<TraceEvent> events;
  // One event per line: sized once (a compile's record holds thousands).
  events.reserve(std::min<size_t>(max_events,
                                  static_cast<size_t>(std::count(text.begin(), text.end(), '\n'))));
  LineReader r(text);
  while (!r.done()) {
    if (events.size() >= max_events) return std::nullopt;
    TraceEvent e;
    if (!r.op(e.op) || !r.space() || !r.number(e.pid) || !r.space() || !r.number(e.a) ||
        !r.space() || !r.number(e.b) || !r.space() || !r.text(e.text)) {
      return std::nullopt;
    }
    if (r.literal(' ')) {
      if (!r.text(e.text2)) return std::nullopt;
      e.has_text2 = true;
    }
    if (!r.literal('\n')) return std::nullopt;
    events.push_back(std::move(e));
  }
  return events;
}

}  // namespace ccpool::compiler
