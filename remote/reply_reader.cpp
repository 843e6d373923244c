#include "remote/reply_reader.h"

#include <charconv>

namespace ccpool::remote {
namespace {

constexpr size_t kFraming = 64;  // type byte, digits and CRLFs around one value

bool parse_int(std::string_view text, long long& value) {
  if (text.empty()) return false;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  return ec == std::errc() && end == text.data() + text.size();
}

}  // namespace

ReplyLimits ReplyLimits::value(uint64_t bulk, size_t elements) {
  ReplyLimits limits;
  limits.max_bulk = bulk;
  limits.max_elements = elements;
  limits.max_depth = elements > 0 ? 1 : 0;
  limits.max_total = bulk + (elements + 1) * (limits.max_line + kFraming);
  return limits;
}

tl::unexpected<Error> ReplyReader::fail(std::string what) {
  m_failed = true;
  m_bulk = nullptr;
  m_stack.clear();
  m_line.clear();
  m_line.shrink_to_fit();
  m_root = Reply{};
  return make_error(ErrorCode::kProtocol, "reply refused: " + what);
}

Reply& ReplyReader::next_slot() {
  if (m_stack.empty()) return m_root;
  Frame& frame = m_stack.back();
  --frame.left;
  return frame.array->elements.emplace_back();  // reserved to the declared count: no reallocation
}

void ReplyReader::value_done() {
  while (!m_stack.empty() && m_stack.back().left == 0) m_stack.pop_back();
  if (m_stack.empty()) m_done = true;
}

Result<void> ReplyReader::on_line(std::string_view line) {
  char type = line.empty() ? '\0' : line[0];
  std::string_view rest = line.substr(line.empty() ? 0 : 1);
  long long n = 0;
  switch (type) {
    case '+':
    case '-': {
      Reply& r = next_slot();
      r.type = type == '+' ? Reply::Type::kStatus : Reply::Type::kError;
      r.str.assign(rest);
      value_done();
      return ok();
    }
    case ':': {
      if (!parse_int(rest, n)) break;
      Reply& r = next_slot();
      r.type = Reply::Type::kInteger;
      r.integer = n;
      value_done();
      return ok();
    }
    case '$': {
      if (!parse_int(rest, n) || n < -1) break;
      if (n > 0 && static_cast<uint64_t>(n) > m_limits.max_bulk) {
        return fail("a bulk of " + std::to_string(n) + " bytes, above the " +
                    std::to_string(m_limits.max_bulk) + " this command may read");
      }
      Reply& r = next_slot();
      if (n == -1) {
        value_done();  // nil
        return ok();
      }
      r.type = Reply::Type::kString;
      m_bulk = &r;
      m_bulk_left = static_cast<uint64_t>(n) + 2;
      return ok();
    }
    case '*': {
      if (!parse_int(rest, n) || n < -1) break;
      if (n > 0) {
        if (m_stack.size() + 1 > m_limits.max_depth) {
          return fail("an array nested " + std::to_string(m_stack.size() + 1) +
                      " deep, above the " + std::to_string(m_limits.max_depth) +
                      " this command may read");
        }
        if (static_cast<uint64_t>(n) > m_limits.max_elements - m_elements) {
          return fail("an array of " + std::to_string(n) + " elements, above the " +
                      std::to_string(m_limits.max_elements - m_elements) +
                      " this command may still read");
        }
        m_elements += static_cast<size_t>(n);
      }
      Reply& r = next_slot();
      if (n <= 0) {  // nil array or empty array
        if (n == 0) r.type = Reply::Type::kArray;
        value_done();
        return ok();
      }
      r.type = Reply::Type::kArray;
      r.elements.reserve(static_cast<size_t>(n));
      m_stack.push_back(Frame{&r, static_cast<size_t>(n)});
      return ok();
    }
    default:
      return fail("unexpected type byte " + std::to_string(static_cast<unsigned char>(type)) +
                  " (RESP2 '+', '-', ':', '$' or '*' expected)");
  }
  return fail("malformed " + std::string(1, type) + " header");
  return ok();
}

Result<bool> ReplyReader::feed(std::string_view data) {
  if (m_failed) return make_error(ErrorCode::kProtocol, "reply refused: the reader already failed");
  if (data.empty()) return m_done;
  if (m_done) return fail(std::to_string(data.size()) + " bytes after the reply");
  m_total += data.size();
  if (m_total > m_limits.max_total) {
    return fail("more than " + std::to_string(m_limits.max_total) + " bytes for one reply");
  }
  while (!data.empty()) {
    if (m_done) return fail(std::to_string(data.size()) + " bytes after the reply");
    if (m_bulk != nullptr) {
      size_t take = static_cast<size_t>(std::min<uint64_t>(m_bulk_left, data.size()));
      m_bulk->str.append(data.substr(0, take));
      data.remove_prefix(take);
      m_bulk_left -= take;
      if (m_bulk_left > 0) continue;
      std::string& s = m_bulk->str;
      if (s.size() < 2 || s[s.size() - 2] != '\r' || s.back() != '\n')
        return fail("a bulk not ended by CRLF");
      s.resize(s.size() - 2);
      m_bulk = nullptr;
      value_done();
      continue;
    }
    size_t nl = data.find('\n');
    size_t take = nl == std::string_view::npos ? data.size() : nl + 1;
    if (m_line.size() + take > m_limits.max_line + 2) {
      return fail("a line longer than " + std::to_string(m_limits.max_line) + " bytes");
    }
    m_line.append(data.substr(0, take));
    data.remove_prefix(take);
    if (nl == std::string_view::npos) continue;
    if (m_line.size() < 2 || m_line[m_line.size() - 2] != '\r')
      return fail("a line not ended by CRLF");
    std::string line = std::move(m_line);
    m_line.clear();
    line.resize(line.size() - 2);
    auto handled = on_line(line);
    if (!handled) return tl::unexpected(handled.error());
  }
  return m_done;
}

}  // namespace ccpool::remote
