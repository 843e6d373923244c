#include "compiler/probe_output.h"

namespace ccpool::compiler {
namespace {

std::string trim_slashes(std::string s) {
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

// Calls fn(line) for each '\n'-separated line, the last one unterminated or empty.
template <typename Fn>
void for_each_line(std::string_view text, Fn fn) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string_view::npos) eol = text.size();
    fn(text.substr(pos, eol - pos));
    pos = eol + 1;
  }
}

}  // namespace

std::optional<SearchList> parse_search_list(std::string_view text) {
  constexpr std::string_view kMissing = "ignoring nonexistent directory \"";
  SearchList list;
  int section = 0;  // 1: quote list, 2: bracket list
  bool ended = false;
  for_each_line(text, [&](std::string_view line) {
    if (starts_with(line, kMissing) && line.size() > kMissing.size() && line.back() == '"') {
      list.missing.push_back(trim_slashes(
          std::string(line.substr(kMissing.size(), line.size() - kMissing.size() - 1))));
    } else if (starts_with(line, "#include \"...\" search starts here")) {
      section = 1;
    } else if (starts_with(line, "#include <...> search starts here")) {
      section = 2;
    } else if (starts_with(line, "End of search list.")) {
      ended = true;
      section = 0;
    } else if (section != 0 && line.size() > 1 && line[0] == ' ') {
      std::string dir(line.substr(1));
      size_t framework = dir.find(" (framework directory)");
      if (framework != std::string::npos) dir.resize(framework);
      (section == 1 ? list.quote : list.bracket).push_back(trim_slashes(dir));
    }
  });
  if (!ended) return std::nullopt;
  return list;
}

std::vector<std::string> split_command_line(std::string_view line) {
  std::vector<std::string> out;
  std::string cur;
  bool in = false, quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (quoted) {
      if (c == '\\' && i + 1 < line.size())
        cur += line[++i];
      else if (c == '"')
        quoted = false;
      else
        cur += c;
    } else if (c == '"') {
      quoted = in = true;
    } else if (c == ' ' || c == '\t') {
      if (in) out.push_back(cur);
      cur.clear();
      in = false;
    } else {
      cur += c;
      in = true;
    }
  }
  if (in) out.push_back(cur);
  return out;
}

std::vector<std::string> last_command_words(std::string_view text) {
  std::string_view last;
  for_each_line(text, [&](std::string_view line) {
    if (!line.empty() && line[0] == ' ') last = line;
  });
  return split_command_line(last);
}

}  // namespace ccpool::compiler
