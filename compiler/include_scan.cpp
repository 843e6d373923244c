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
    if (q >= t.size() || t[q] == '\n') continue;
    if (t[q] == '<') {
      size_t close = t.find_first_of(">\n", q + 1);
      if (close != std::string_view::npos && t[close] == '>' && close > q + 1) {
        out.angle.emplace(t.substr(q + 1, close - q - 1));
      }
      continue;
    }
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

size_t skip_hspace(std::string_view t, size_t i) {
  while (i < t.size() && is_hspace(t[i])) ++i;
  return i;
}

// The identifier that ends just before `pos` (blanks and one '(' skipped), or
// "". Used to tell `defined(__has_include)`, `#ifdef __has_include` and
// `#define __has_include(x) 0` (compatibility shims) from probes.
std::string_view word_before(std::string_view t, size_t pos) {
  size_t i = pos;
  while (i > 0 && is_hspace(t[i - 1])) --i;
  if (i > 0 && t[i - 1] == '(') {
    --i;
    while (i > 0 && is_hspace(t[i - 1])) --i;
  }
  size_t end = i;
  while (i > 0 && is_ident(static_cast<unsigned char>(t[i - 1]))) --i;
  return t.substr(i, end - i);
}

// Does a comment opened in `head` run to its end? A quote outside comments
// ends the reading with "no": a literal could hold what looks like a comment.
bool ends_in_comment(std::string_view head) {
  bool block = false;
  for (size_t i = 0; i + 1 <= head.size(); ++i) {
    std::string_view two = head.substr(i, 2);
    if (block) {
      if (two == "*/") {
        block = false;
        ++i;
      }
    } else if (two == "/*") {
      block = true;
      ++i;
    } else if (two == "//") {
      return true;
    } else if (head[i] == '"' || head[i] == '\'') {
      return false;
    }
  }
  return block;
}

// Could `pos` be evaluated inside a preprocessing directive? Its logical
// line starts with '#' or '%:', or a block comment ends before it on that
// line (the line may continue a directive whose comment spanned lines), and
// no comment opened earlier on the line still runs.
bool may_be_in_directive(std::string_view t, size_t pos) {
  size_t nl = pos == 0 ? std::string_view::npos : t.rfind('\n', pos - 1);
  size_t line = nl == std::string_view::npos ? 0 : nl + 1;
  std::string_view head = t.substr(line, pos - line);
  // In a comment that starts on this line (`#endif  // __has_include`).
  if (ends_in_comment(head)) return false;
  size_t i = skip_hspace(head, 0);
  if (i < head.size() && (head[i] == '#' || head.substr(i, 2) == "%:")) return true;
  return head.find("*/") != std::string_view::npos;
}

// Is `pos` in the body of a #define? A <name> there is not one header-name
// token: wherever the macro is expanded, each identifier in it is
// macro-expanded first (gcc and clang: `#define O __has_include(<foo/x.h>)`
// with -Dfoo=bar probes bar/x.h), so the name as written proves nothing.
bool on_define_line(std::string_view t, size_t pos) {
  size_t nl = pos == 0 ? std::string_view::npos : t.rfind('\n', pos - 1);
  size_t i = skip_hspace(t, nl == std::string_view::npos ? 0 : nl + 1);
  if (t.substr(i, 1) == "#") {
    i += 1;
  } else if (t.substr(i, 2) == "%:") {
    i += 2;
  } else {
    return false;
  }
  i = skip_hspace(t, i);
  return t.substr(i, 6) == "define" && (i + 6 >= t.size() || !is_ident(static_cast<unsigned char>(t[i + 6])));
}

// Reads `( <name> )` or `( "name" )` at t[i]; false if the argument is not
// such a literal (gcc and clang read a literal header-name directly; any
// other argument is macro-expanded first, which a textual scan cannot do).
bool literal_probe(std::string_view t, size_t i, HasIncludeProbe& probe) {
  i = skip_hspace(t, i);
  if (i >= t.size() || t[i] != '(') return false;
  i = skip_hspace(t, i + 1);
  if (i >= t.size() || (t[i] != '<' && t[i] != '"')) return false;
  probe.angle = t[i] == '<';
  size_t close = t.find_first_of(probe.angle ? ">\n" : "\"\n", i + 1);
  if (close == std::string_view::npos || t[close] == '\n' || close == i + 1) return false;
  probe.name.assign(t.substr(i + 1, close - i - 1));
  size_t end = skip_hspace(t, close + 1);
  return end < t.size() && t[end] == ')';
}

void scan_probes(std::string_view t, IncludeScan& out) {
  constexpr std::string_view kWord = "__has_include";
  for (size_t pos = t.find(kWord); pos != std::string_view::npos; pos = t.find(kWord, pos + 1)) {
    if (pos > 0 && is_ident(static_cast<unsigned char>(t[pos - 1]))) continue;
    HasIncludeProbe probe;
    size_t end = pos + kWord.size();
    if (t.substr(end, 5) == "_next") {
      probe.next = true;
      end += 5;
    }
    if (t.substr(end, 2) == "__") end += 2;  // gcc < 10 spelled the operator __has_include__
    if (end < t.size() && is_ident(static_cast<unsigned char>(t[end]))) continue;  // another word
    std::string_view before = word_before(t, pos);
    if (before == "defined" || before == "ifdef" || before == "ifndef" || before == "undef" ||
        before == "define" || before == "elifdef" || before == "elifndef") {
      continue;
    }
    if (literal_probe(t, end, probe) && !(probe.angle && on_define_line(t, pos))) {
      out.probes.insert(std::move(probe));
    } else if (may_be_in_directive(t, pos)) {
      out.probe_nonliteral = true;  // outside a directive it cannot be evaluated
    }
  }
}

}  // namespace

IncludeScan scan_includes(std::string_view text) {
  IncludeScan out;
  // Trigraphs (-trigraphs, strict -std modes) can spell '#' (??=) and a line
  // splice (??/): not worth reading, assume the worst.
  if (text.find("??=") != std::string_view::npos || text.find("??/") != std::string_view::npos) {
    out.opaque = true;
    // A trigraph line splice (??/ then a newline) could split __has_include.
    bool splice = false;
    for (size_t i = text.find("?\?/"); i != std::string_view::npos && !splice; i = text.find("?\?/", i + 1)) {
      size_t j = i + 3;
      while (j < text.size() && is_hspace(text[j])) ++j;
      splice = j < text.size() && text[j] == '\n';
    }
    out.probe_nonliteral = splice || text.find("__has_include") != std::string_view::npos;
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
  scan_probes(text, out);
  return out;
}

}  // namespace ccpool::compiler
