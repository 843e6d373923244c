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
// (the keyed argv) or as files the record names, and which write no file of
// their own.
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

// gcc options in -Xcompiler that write files besides the compile's own
// output, or would leave date macros in the -E output for nvcc's front ends
// to expand (defense in depth: the record's nvcc rule refuses a date macro in
// any file the run opened).
constexpr std::string_view kHostRefused[] = {
    "-fplugin", "-fprofile", "-fauto-profile", "-fdump", "-fsave-optimization-record",
    "-fstack-usage", "-fcallgraph-info", "-ftest-coverage", "-fcoverage", "-fopt-info", "-flto",
    "-fdiagnostics-format", "-fdiagnostics-add-output", "-fdiagnostics-set-output",
    // The -E steps would leave macros for cudafe++/cicc to expand.
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
    } else if ((canonical == "-arch" || canonical == "-code" || canonical == "-gencode") &&
               value->find("native") != std::string::npos) {
      // nvcc asks the GPU (__nvcc_device_query): no file holds the answer.
      return refuse("nvcc_arch_native", "nvcc " + name + " native: the GPU's answer is not keyed");
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

}  // namespace ccpool::compiler
