#include "compiler/nvcc_args.h"

#include <optional>

#include "compiler/reason_code.h"

namespace ccpool::compiler {
namespace {

enum class Kind { kFlag, kValue };

struct NvccOption {
  std::string_view name;  // canonical (short) spelling
  std::string_view long_name;
  Kind kind;
};

// Options whose whole effect reaches nvcc's inner steps as command-line text
// (so the dryrun, the preprocessed inputs and the keyed argv capture them) and
// which read or write no file of their own.
constexpr NvccOption kOptions[] = {
    {"-c", "--compile", Kind::kFlag},
    {"-o", "--output-file", Kind::kValue},
    {"-I", "--include-path", Kind::kValue},
    {"-isystem", "--system-include", Kind::kValue},
    {"-D", "--define-macro", Kind::kValue},
    {"-U", "--undefine-macro", Kind::kValue},
    {"-O", "--optimize", Kind::kValue},
    {"-arch", "--gpu-architecture", Kind::kValue},
    {"-code", "--gpu-code", Kind::kValue},
    {"-gencode", "--generate-code", Kind::kValue},
    {"-std", "--std", Kind::kValue},
    {"-Xcompiler", "--compiler-options", Kind::kValue},
    {"-x", "--x", Kind::kValue},
    {"-ccbin", "--compiler-bindir", Kind::kValue},
    {"-maxrregcount", "--maxrregcount", Kind::kValue},
    {"-lineinfo", "--generate-line-info", Kind::kFlag},
    {"-G", "--device-debug", Kind::kFlag},
    {"-g", "--debug", Kind::kFlag},
    {"-m64", "-m64", Kind::kFlag},
    {"-use_fast_math", "--use_fast_math", Kind::kFlag},
    {"-expt-relaxed-constexpr", "--expt-relaxed-constexpr", Kind::kFlag},
    {"-extended-lambda", "--extended-lambda", Kind::kFlag},
    {"-expt-extended-lambda", "--expt-extended-lambda", Kind::kFlag},
};

const NvccOption* find_option(std::string_view name) {
  for (const NvccOption& o : kOptions) {
    if (o.name == name || o.long_name == name) return &o;
  }
  return nullptr;
}

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

// gcc options in -Xcompiler that read or write files besides the compile's
// own input and output, or hide the -Wdate-time check of the -E runs.
constexpr std::string_view kHostRefused[] = {
    "-fplugin", "-fprofile", "-fauto-profile", "-fdump", "-fsave-optimization-record",
    "-fstack-usage", "-fcallgraph-info", "-ftest-coverage", "-fcoverage", "-fopt-info", "-flto",
    "-fdiagnostics-format", "-fdiagnostics-add-output", "-fdiagnostics-set-output",
    // The -E steps would leave macros (and __TIME__) for cudafe++/cicc to expand.
    "-fdirectives-only", "-fpreprocessed"};
constexpr std::string_view kHostAllowed[] = {"-O", "-g",    "-m", "-D", "-U",
                                             "-I", "-std=", "-f", "-W"};

bool host_option_ok(std::string_view item) {
  if (item == "-pthread" || item == "-g" || item == "-O") return true;
  // -Wp,X -Wa,X -Wl,X arrive split at the commas: "-Wp", "X".
  if (item == "-Wp" || item == "-Wa" || item == "-Wl") return false;
  // -march=native and friends: the host code would depend on this machine's CPU.
  if (item.size() >= 7 && item.substr(item.size() - 7) == "=native") return false;
  for (std::string_view bad : kHostRefused) {
    if (starts_with(item, bad)) return false;
  }
  for (std::string_view good : kHostAllowed) {
    if (starts_with(item, good) && item.size() > good.size()) return true;
  }
  return false;
}

std::string default_output(const std::string& source) {
  std::string base =
      source.substr(source.rfind('/') == std::string::npos ? 0 : source.rfind('/') + 1);
  size_t dot = base.rfind('.');
  if (dot != std::string::npos && dot > 0) base.resize(dot);
  return base + ".o";
}

}  // namespace

NvccArgs parse_nvcc_args(const std::vector<std::string>& argv) {
  NvccArgs a;
  auto refuse = [&](std::string code, std::string why) {
    a.refused_code = std::move(code);
    a.refused = std::move(why);
    return a;
  };
  auto unsupported = [&](std::string_view name, const std::string& why) {
    return refuse(reason_code("nvcc_unsupported_option", name),
                  "nvcc " + std::string(name) + ": " + why);
  };
  std::vector<std::string> sources;
  bool compile = false, language_cu = false, have_output = false;
  for (size_t i = 1; i < argv.size(); ++i) {
    const std::string& arg = argv[i];
    if (arg == "-") return refuse("stdin_input", "nvcc source from stdin");
    if (arg.empty() || arg[0] != '-') {
      if (!arg.empty() && arg[0] == '@') return unsupported("@file", "options from a file");
      sources.push_back(arg);
      continue;
    }
    size_t eq = arg.find('=');
    std::string name = arg.substr(0, eq);
    std::optional<std::string> value;
    const NvccOption* option = find_option(name);
    if (option == nullptr && arg.size() > 2 && arg[1] != '-' &&
        std::string_view("IDUO").find(arg[1]) != std::string_view::npos) {
      option = find_option(arg.substr(0, 2));  // attached: -Idir, -DX=1, -O3
      name = arg.substr(0, 2);
      value = arg.substr(2);
    }
    if (option == nullptr) return unsupported(name, "not known to be cacheable");
    if (option->kind == Kind::kFlag) {
      if (value || eq != std::string::npos) return unsupported(name, "takes no value");
      if (option->name == "-c") compile = true;
      continue;
    }
    if (!value) {
      if (eq != std::string::npos) {
        value = arg.substr(eq + 1);
      } else if (i + 1 < argv.size()) {
        value = argv[++i];
      } else {
        return refuse(reason_code("option_missing_value", name), "nvcc " + name + " lacks a value");
      }
    }
    std::string_view canonical = option->name;
    if (canonical == "-o") {
      if (have_output) return unsupported(name, "given twice");
      if (*value == "-") return refuse("output_to_stdout", "nvcc -o -");
      if (value->empty())
        return refuse(reason_code("option_missing_value", name), "nvcc -o with an empty name");
      have_output = true;
      a.output = *value;
    } else if (canonical == "-x") {
      if (*value != "cu")
        return refuse(reason_code("unsupported_language", *value), "nvcc -x " + *value);
      language_cu = true;
    } else if (canonical == "-Xcompiler") {
      size_t start = 0;
      while (true) {
        size_t comma = value->find(',', start);
        std::string item =
            value->substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        if (!host_option_ok(item)) {
          return refuse(reason_code("nvcc_unsupported_option", "-Xcompiler=" + item),
                        "nvcc -Xcompiler " + item + ": not known to be cacheable");
        }
        if (comma == std::string::npos) break;
        start = comma + 1;
      }
    }
  }
  if (!compile) return refuse("nvcc_not_compile", "nvcc without -c (a link, or several steps)");
  if (sources.empty()) return refuse("no_source", "nvcc -c without a source");
  if (sources.size() > 1) return refuse("multiple_sources", "nvcc -c with several sources");
  a.source = sources[0];
  bool cu = a.source.size() > 3 && a.source.compare(a.source.size() - 3, 3, ".cu") == 0;
  if (!cu && !language_cu)
    return refuse("unknown_input_language", "nvcc source '" + a.source + "' is not a .cu file");
  if (!have_output) a.output = default_output(a.source);
  return a;
}

namespace {

bool is_name_char(char c, bool first) {
  return c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
         (!first && c >= '0' && c <= '9');
}

// Shell words of one line: blanks separate, "..." quotes (with \" \\ \$ \`
// escapes), \ escapes outside quotes, $NAME expands from `vars`. Anything a
// shell would treat specially beyond that (single quotes, globs, operators,
// command substitution, ${...}) is refused: we would not know what ran.
std::optional<std::vector<std::string>> split_words(std::string_view line,
                                                    const std::map<std::string, std::string>& vars,
                                                    std::string& error) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false, quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (c == '$') {
      size_t j = i + 1;
      while (j < line.size() && is_name_char(line[j], j == i + 1)) ++j;
      std::string name(line.substr(i + 1, j - i - 1));
      auto it = vars.find(name);
      if (name.empty() || it == vars.end()) {
        error = "unknown variable in '" + std::string(line) + "'";
        return std::nullopt;
      }
      word += it->second;
      in_word = true;
      i = j - 1;
      continue;
    }
    if (quoted) {
      if (c == '"') {
        quoted = false;
      } else if (c == '\\' && i + 1 < line.size() &&
                 std::string_view("\"\\$`").find(line[i + 1]) != std::string_view::npos) {
        word += line[++i];
      } else if (c == '`') {
        error = "command substitution in '" + std::string(line) + "'";
        return std::nullopt;
      } else {
        word += c;
      }
      continue;
    }
    if (c == ' ' || c == '\t') {
      if (in_word) words.push_back(std::move(word));
      word.clear();
      in_word = false;
    } else if (c == '"') {
      quoted = true;
      in_word = true;
    } else if (c == '\\' && i + 1 < line.size()) {
      word += line[++i];
      in_word = true;
    } else if (std::string_view("'`;|&<>()*?[]{}~#!").find(c) != std::string_view::npos &&
               !(c == '#' && in_word)) {
      error = std::string("shell character '") + c + "' in '" + std::string(line) + "'";
      return std::nullopt;
    } else {
      word += c;
      in_word = true;
    }
  }
  if (quoted) {
    error = "unterminated quote in '" + std::string(line) + "'";
    return std::nullopt;
  }
  if (in_word) words.push_back(std::move(word));
  return words;
}

}  // namespace

std::string without_temp_ids(std::string_view word) {
  constexpr std::string_view kTemp = "tmpxft_";
  auto hex = [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
  };
  std::string out;
  size_t pos = 0;
  while (true) {
    size_t at = word.find(kTemp, pos);
    if (at == std::string_view::npos) break;
    size_t id = at + kTemp.size();
    out.append(word.substr(pos, id - pos));
    bool match = id + 17 <= word.size() && word[id + 8] == '_';
    for (size_t i = 0; match && i < 17; ++i) match = i == 8 || hex(word[id + i]);
    pos = match ? id + 17 : id;
  }
  out.append(word.substr(pos));
  return out;
}

Dryrun parse_dryrun(std::string_view text) {
  Dryrun d;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    if (line.substr(0, 3) != "#$ ") continue;
    line.remove_prefix(3);
    size_t n = 0;
    while (n < line.size() && is_name_char(line[n], n == 0)) ++n;
    if (n > 0 && n < line.size() && line[n] == '=') {
      std::optional<std::vector<std::string>> words =
          split_words(line.substr(n + 1), d.vars, d.error);
      if (!words) return d;
      std::string value;
      for (size_t i = 0; i < words->size(); ++i) value += (i ? " " : "") + (*words)[i];
      d.vars[std::string(line.substr(0, n))] = value;
      continue;
    }
    std::optional<std::vector<std::string>> words = split_words(line, d.vars, d.error);
    if (!words) return d;
    if (!words->empty()) d.commands.push_back({std::move(*words)});
  }
  if (d.commands.empty()) d.error = "nvcc --dryrun printed no command";
  return d;
}

}  // namespace ccpool::compiler
