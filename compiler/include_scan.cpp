#include "compiler/include_scan.h"

#include <array>

namespace ccpool::compiler {
namespace {

bool is_ident(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '$' || c >= 0x80;
}

bool is_hspace(char c) { return c == ' ' || c == '\t' || c == '\v' || c == '\f' || c == '\r'; }

// Translation phase 2: backslash, optional trailing blanks (gcc accepts them
// with a warning), newline are removed, joining physical lines.
std::string splice_lines(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\\') {
      size_t j = i + 1;
      while (j < text.size() && is_hspace(text[j])) ++j;
      if (j < text.size() && text[j] == '\n') {
        i = j;
        continue;
      }
    }
    out.push_back(text[i]);
  }
  return out;
}

// Does a block comment end just before position i?
bool ends_comment(std::string_view t, size_t i) { return i >= 2 && t[i - 1] == '/' && t[i - 2] == '*'; }

// Could the keyword at `pos` be the name of a directive? True when it is
// preceded, on its logical line, by `#` (or the digraph `%:`) with only
// blanks before and between. The end of a block comment (`*/`) in either
// place also counts: the scan does not parse comments, so it assumes the
// worst.
bool may_be_directive(std::string_view t, size_t pos) {
  size_t i = pos;
  while (i > 0 && is_hspace(t[i - 1])) --i;
  if (i == 0) return false;
  if (ends_comment(t, i)) return true;
  if (t[i - 1] == '#') {
    --i;
  } else if (t[i - 1] == ':' && i >= 2 && t[i - 2] == '%') {
    i -= 2;
  } else {
    return false;
  }
  while (i > 0 && is_hspace(t[i - 1])) --i;
  return i == 0 || t[i - 1] == '\n' || ends_comment(t, i);
}

void scan_keyword(std::string_view t, std::string_view keyword, IncludeScan& out) {
  for (size_t pos = t.find(keyword); pos != std::string_view::npos; pos = t.find(keyword, pos + 1)) {
    if (pos > 0 && is_ident(static_cast<unsigned char>(t[pos - 1]))) continue;
    size_t end = pos + keyword.size();
    if (keyword == "include" && t.substr(end, 5) == "_next") end += 5;
    if (end < t.size() && is_ident(static_cast<unsigned char>(t[end]))) continue;  // another word
    size_t q = end;
    while (q < t.size() && is_hspace(t[q])) ++q;
    if (q >= t.size() || t[q] == '\n' || t[q] == '<') continue;
    if (t[q] == '"') {
      size_t close = t.find_first_of("\"\n", q + 1);
      if (close != std::string_view::npos && t[close] == '"' && close > q + 1) {
        out.quote.emplace(t.substr(q + 1, close - q - 1));
      }
      continue;
    }
    // An identifier (a macro naming the header) or a comment: the target is
    // unknown. Other punctuation after a real directive is a compile error.
    bool unknown = is_ident(static_cast<unsigned char>(t[q])) || t.substr(q, 2) == "/*";
    if (unknown && may_be_directive(t, pos)) out.opaque = true;
  }
}

}  // namespace

IncludeScan scan_includes(std::string_view text) {
  IncludeScan out;
  // Trigraphs (-trigraphs, strict -std modes) can spell '#' (??=) and a line
  // splice (??/): not worth reading, assume the worst.
  if (text.find("??=") != std::string_view::npos || text.find("??/") != std::string_view::npos) {
    out.opaque = true;
    return out;
  }
  std::string spliced;
  if (text.find('\\') != std::string_view::npos) {
    spliced = splice_lines(text);
    text = spliced;
  }
  for (std::string_view keyword : std::array<std::string_view, 2>{"include", "import"}) {
    scan_keyword(text, keyword, out);
  }
  return out;
}

}  // namespace ccpool::compiler
