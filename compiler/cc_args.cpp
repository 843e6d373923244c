#include "compiler/cc_args.h"

#include <sys/stat.h>

#include <set>

#include "base/fs.h"
#include "compiler/reason_code.h"

namespace ccpool::compiler {
namespace {

// Options whose value is the next argument when written alone.
const std::set<std::string> kSeparate = {"-o",
                                         "-I",
                                         "-isystem",
                                         "-iquote",
                                         "-idirafter",
                                         "-include",
                                         "-imacros",
                                         "-iprefix",
                                         "-iwithprefix",
                                         "-iwithprefixbefore",
                                         "-isysroot",
                                         "-D",
                                         "-U",
                                         "-L",
                                         "-l",
                                         "-x",
                                         "-MF",
                                         "-MT",
                                         "-MQ",
                                         "-target",
                                         "--target",
                                         "-B",
                                         "--sysroot",
                                         "-imultilib",
                                         "--param",
                                         "-u",
                                         "-z",
                                         "-Xlinker",
                                         "-Xassembler",
                                         "-Xpreprocessor",
                                         "-Xclang",
                                         "-specs",
                                         "-T",
                                         "-aux-info",
                                         "-wrapper",
                                         "-e",
                                         "-MJ",
                                         "--gcc-toolchain",
                                         "-resource-dir",
                                         "-arch",
                                         "-dumpbase",
                                         "-dumpdir",
                                         "-dumpbase-ext"};

// Read extra files we do not hash, write files we do not collect, or change
// what the driver does in ways we do not model.
const std::set<std::string> kRefused = {"-E",
                                        "-M",
                                        "-MM",
                                        "-MG",
                                        "-MJ",
                                        "-Xlinker",
                                        "-Xassembler",
                                        "-Xpreprocessor",
                                        "-Xclang",
                                        "-specs",
                                        "-T",
                                        "-aux-info",
                                        "-wrapper",
                                        "-v",
                                        "-###",
                                        "-H",
                                        "--help",
                                        "--version",
                                        "-dumpversion",
                                        "-dumpmachine",
                                        "-dumpspecs",
                                        "-dumpfullversion",
                                        "-arch",
                                        "-fsyntax-only",
                                        "-dumpbase",
                                        "-dumpdir",
                                        "-dumpbase-ext",
                                        "-Q",
                                        "--",
                                        "-combine",
                                        "-fpch-preprocess",
                                        "-emit-llvm"};

const char* const kRefusedPrefixes[] = {"-save-temps",
                                        "--save-temps",
                                        "-print-",
                                        "--print-",
                                        "-Wp,",
                                        "-fplugin",
                                        "-fprofile-use",
                                        "-fprofile-sample-use",
                                        "-fprofile-instr-use",
                                        "-fauto-profile",
                                        "-fsanitize-blacklist",
                                        "-fsanitize-ignorelist",
                                        "-fdump-",
                                        "-fopt-info",
                                        "-fcallgraph-info",
                                        "-fmodules",
                                        "-fmodule-",
                                        "-fcxx-modules",
                                        "-fimplicit-module",
                                        "-fprebuilt-module",
                                        "-fpch-",
                                        "-fcrash-diagnostics",
                                        "-fsave-optimization-record",
                                        "-fprofile-generate",
                                        "-fprofile-dir",
                                        "-fprofile-instr-generate",
                                        "-fcs-profile-generate",
                                        "-fprofile-list",
                                        "-fxray",
                                        "-fembed-bitcode",
                                        "-fexperimental-",
                                        "-ftime-trace",
                                        "-fproc-stat-report",
                                        "-fstats",
                                        "-fdiagnostics-format=sarif",
                                        "-fbuild-session",
                                        "-fdepfile",
                                        "-fasm-"};

// Options that take their value joined ("-Ifoo") as well as separate.
const char* const kJoinable[] = {"-I",      "-D",         "-U",       "-L",       "-l", "-o",
                                 "-x",      "-MF",        "-MT",      "-MQ",      "-B", "-isystem",
                                 "-iquote", "-idirafter", "-include", "-imacros", "-u", "-z"};

const std::set<std::string> kIncludeShaping = {
    "-I",           "-isystem",           "-iquote",    "-idirafter",      "-iprefix",
    "-iwithprefix", "-iwithprefixbefore", "-isysroot",  "--sysroot",       "-B",
    "-target",      "--target",           "-imultilib", "--gcc-toolchain", "-resource-dir"};

// Linker flags (inside -Wl,) that read no file and write nothing else.
const std::set<std::string> kSafeLinker = {"-rpath",
                                           "--rpath",
                                           "-soname",
                                           "--soname",
                                           "-h",
                                           "-z",
                                           "--as-needed",
                                           "--no-as-needed",
                                           "-O1",
                                           "-O2",
                                           "--gc-sections",
                                           "--no-gc-sections",
                                           "--no-undefined",
                                           "--allow-shlib-undefined",
                                           "-Bsymbolic",
                                           "-Bsymbolic-functions",
                                           "--build-id",
                                           "--hash-style",
                                           "--start-group",
                                           "--end-group",
                                           "-Bstatic",
                                           "-Bdynamic",
                                           "--enable-new-dtags",
                                           "--disable-new-dtags",
                                           "--export-dynamic",
                                           "-E",
                                           "--exclude-libs",
                                           "--no-whole-archive",
                                           "--whole-archive",
                                           "-s",
                                           "--strip-all",
                                           "--strip-debug",
                                           "-S",
                                           "--eh-frame-hdr",
                                           "--icf",
                                           "--sort-common",
                                           "--relax",
                                           "--no-relax",
                                           "-rpath-link",
                                           "--compress-debug-sections",
                                           "--push-state",
                                           "--pop-state",
                                           "--no-copy-dt-needed-entries",
                                           "-x",
                                           "--discard-all"};
const std::set<std::string> kLinkerWithValue = {"-rpath", "--rpath", "-soname",    "--soname",
                                                "-h",     "-z",      "-rpath-link"};

// Flags without a value that are known and harmless to key as written.
const std::set<std::string> kKnownFlags = {"-c",
                                           "-S",
                                           "-shared",
                                           "-static",
                                           "-static-libgcc",
                                           "-static-libstdc++",
                                           "-static-pie",
                                           "-rdynamic",
                                           "-pie",
                                           "-no-pie",
                                           "-pthread",
                                           "-pthreads",
                                           "-nostdlib",
                                           "-nodefaultlibs",
                                           "-nostartfiles",
                                           "-nostdinc",
                                           "-nostdinc++",
                                           "-s",
                                           "-w",
                                           "-ansi",
                                           "-pedantic",
                                           "-pedantic-errors",
                                           "-pipe",
                                           "-MD",
                                           "-MMD",
                                           "-MP",
                                           "-p",
                                           "-pg",
                                           "-undef",
                                           "-trigraphs",
                                           "-I-",
                                           "--coverage",
                                           "-m32",
                                           "-m64",
                                           "-mx32"};
// Families of options accepted by prefix (their values are keyed as written).
const char* const kKnownPrefixes[] = {"-f",
                                      "-m",
                                      "-W",
                                      "-O",
                                      "-g",
                                      "-std=",
                                      "--std=",
                                      "-stdlib=",
                                      "--sysroot=",
                                      "--target=",
                                      "--gcc-toolchain=",
                                      "--param",
                                      "-rtlib=",
                                      "--rtlib=",
                                      "-unwindlib="};

bool starts_with(const std::string& s, std::string_view prefix) {
  return s.size() >= prefix.size() && s.compare(0, prefix.size(), prefix) == 0;
}

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string language_of(const std::string& path) {
  size_t dot = path.rfind('.');
  if (dot == std::string::npos || path.find('/', dot) != std::string::npos) return "";
  std::string ext = path.substr(dot);
  if (ext == ".c") return "c";
  if (ext == ".i") return "cpp-output";
  if (ext == ".cc" || ext == ".cpp" || ext == ".cxx" || ext == ".c++" || ext == ".C" ||
      ext == ".cp" || ext == ".CPP") {
    return "c++";
  }
  if (ext == ".ii") return "c++-cpp-output";
  if (ext == ".S" || ext == ".sx")
    return "assembler-with-cpp";  // not .s: nothing lists what it reads
  return "";
}

bool is_link_input(const std::string& path) {
  return ends_with(path, ".o") || ends_with(path, ".a") || ends_with(path, ".so") ||
         path.find(".so.") != std::string::npos;
}

// Bounds on @file expansion: a file that names itself several times would
// otherwise grow as fanout^depth, and only small regular files are read (not
// /dev/zero, not a FIFO that would block the worker).
constexpr int kMaxResponseDepth = 10;
constexpr int kMaxResponseFiles = 64;
constexpr uint64_t kMaxResponseBytes = 1 << 20;  // per file
constexpr size_t kMaxExpandedArgs = 100000;

struct ResponseBudget {
  int files = 0;
};

// gcc's buildargv(): whitespace separates, quotes and backslash escape.
bool expand_response(const std::string& arg, const std::string& cwd, int depth,
                     std::vector<std::string>& out, ResponseBudget& budget) {
  if (depth > kMaxResponseDepth || ++budget.files > kMaxResponseFiles) return false;
  std::string path = arg.substr(1);
  if (path.empty() || path[0] != '/') path = cwd + "/" + path;
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) ||
      static_cast<uint64_t>(st.st_size) > kMaxResponseBytes) {
    return false;
  }
  Result<std::string> text = read_file(path);
  if (!text || text->size() > kMaxResponseBytes) return false;
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  char quote = 0;
  for (size_t i = 0; i < text->size(); ++i) {
    char c = (*text)[i];
    if (c == '\\' && i + 1 < text->size()) {
      word += (*text)[++i];
      in_word = true;
    } else if (quote) {
      if (c == quote)
        quote = 0;
      else
        word += c;
    } else if (c == '\'' || c == '"') {
      quote = c;
      in_word = true;
    } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v') {
      if (in_word) words.push_back(word);
      word.clear();
      in_word = false;
    } else {
      word += c;
      in_word = true;
    }
  }
  if (quote) return false;
  if (in_word) words.push_back(word);
  for (const std::string& w : words) {
    if (starts_with(w, "@")) {
      if (!expand_response(w, cwd, depth + 1, out, budget)) return false;
    } else {
      if (out.size() >= kMaxExpandedArgs) return false;
      out.push_back(w);
    }
  }
  return true;
}

// Returns the offending -Wl, part, or "".
std::string check_linker_flags(const std::string& arg) {
  std::vector<std::string> parts;
  size_t i = 4;  // after "-Wl,"
  while (i <= arg.size()) {
    size_t j = arg.find(',', i);
    if (j == std::string::npos) j = arg.size();
    parts.push_back(arg.substr(i, j - i));
    i = j + 1;
  }
  for (size_t k = 0; k < parts.size(); ++k) {
    std::string name = parts[k].substr(0, parts[k].find('='));
    if (!kSafeLinker.count(name)) return name.empty() ? "," : name;
    if (kLinkerWithValue.count(parts[k])) ++k;
  }
  return "";
}

// The first refusal wins: later ones keep its reason.
void refuse(CcArgs& r, std::string code, std::string why) {
  if (!r.refused.empty()) return;
  r.refused = std::move(why);
  r.refused_code = std::move(code);
}

// Joined values (-Wp,..., -fplugin=path) are not part of the code.
std::string option_name(const std::string& arg) {
  return arg.substr(0, arg.find_first_of("=,"));
}

// What the walk over the arguments has seen so far besides CcArgs itself.
struct ArgWalk {
  bool compile = false, assemble = false, have_source = false;
  std::string explicit_lang;
};

// One option split into name and value ("-opt value" / "-optvalue").
struct SplitOption {
  std::string name, value;
  bool separate = false;
};

// Step 1: argv[1..] into r.args with @files expanded; false when refused.
bool expand_arguments(const std::vector<std::string>& argv, const std::string& cwd, CcArgs& r) {
  ResponseBudget budget;
  for (size_t i = 1; i < argv.size(); ++i) {
    if (starts_with(argv[i], "@") && argv[i].size() > 1) {
      if (!expand_response(argv[i], cwd, 0, r.args, budget)) {
        r.refused = "response file '" + argv[i] +
                    "' unreadable, malformed or beyond the bounds on response files (" +
                    std::to_string(kMaxResponseFiles) + " files, depth " +
                    std::to_string(kMaxResponseDepth) + ", 1 MiB each, " +
                    std::to_string(kMaxExpandedArgs) + " arguments)";
        r.refused_code = "response_file_unreadable";
        return false;
      }
    } else {
      r.args.push_back(argv[i]);
    }
  }
  return true;
}

// A non-option argument (or "-"): the one source, or a refusal.
void take_input(CcArgs& r, ArgWalk& w, size_t i) {
  const std::string& arg = r.args[i];
  if (arg == "-") {
    refuse(r, "stdin_input", "input from stdin");
    return;
  }
  if (!w.explicit_lang.empty() || !language_of(arg).empty()) {
    if (w.have_source) {
      refuse(r, "multiple_sources", "several sources");
      return;
    }
    w.have_source = true;
    r.source = arg;
    r.source_index = i;
    r.language = w.explicit_lang.empty() ? language_of(arg) : w.explicit_lang;
  } else if (is_link_input(arg)) {
    refuse(r, "link_inputs", "link inputs other than one source ('" + arg + "') are not hashed");
  } else {
    refuse(r, "unknown_input_language", "input '" + arg + "' of unknown language");
  }
}

// Refuses an option of the refused lists; true when it did.
bool refuse_listed_option(CcArgs& r, const std::string& arg) {
  if (kRefused.count(arg)) {
    refuse(r, reason_code("unsupported_option", arg), "option " + arg);
    return true;
  }
  const char* refused_prefix = nullptr;
  for (const char* p : kRefusedPrefixes) {
    if (!refused_prefix && starts_with(arg, p)) refused_prefix = p;
  }
  if (refused_prefix) {
    refuse(r, reason_code("unsupported_option", option_name(arg)), "option " + arg);
    return true;
  }
  return false;
}

// Splits args[i] into name and value; false (refused) when a separate value
// is missing.
bool split_option(CcArgs& r, size_t i, SplitOption& o) {
  const std::vector<std::string>& a = r.args;
  const std::string& arg = a[i];
  o.name = arg;
  o.separate = kSeparate.count(arg) > 0;
  if (o.separate) {
    if (i + 1 >= a.size()) {
      refuse(r, reason_code("option_missing_value", arg), "option " + arg + " lacks its value");
      return false;
    }
    o.value = a[i + 1];
  } else {
    for (const char* p : kJoinable) {
      if (starts_with(arg, p) && arg.size() > std::string_view(p).size()) {
        // -include and -isystem also start with -i...: take the longest match.
        if (o.name == arg || std::string_view(p).size() > o.name.size()) {
          o.name = p;
          o.value = arg.substr(o.name.size());
        }
      }
    }
  }
  return true;
}

// The options that name files or the mode (-o, -x, the -M family, -c, -S);
// false when args[i] is none of them.
bool apply_file_option(CcArgs& r, ArgWalk& w, size_t i, const SplitOption& o) {
  const std::string& arg = r.args[i];
  const std::string& name = o.name;
  const std::string& value = o.value;
  if (name == "-o") {
    r.output = value;
    r.output_index = o.separate ? i + 1 : i;
    r.output_joined = !o.separate;
    if (value == "-") refuse(r, "output_to_stdout", "output to stdout (-o -)");
  } else if (name == "-x") {
    if (value == "c" || value == "c++" || value == "assembler-with-cpp")
      w.explicit_lang = value;
    else if (value == "none")
      w.explicit_lang.clear();
    else
      refuse(r, reason_code("unsupported_language", value), "language -x " + value);
  } else if (name == "-MF") {
    r.dep_mf = value;
    r.dep_mf_indices.push_back(i);
    if (o.separate) r.dep_mf_indices.push_back(i + 1);
  } else if (name == "-MT" || name == "-MQ") {
    r.dep_target = true;
  } else if (arg == "-MD" || arg == "-MMD") {
    r.dep_md = true;
    r.dep_user_only = arg == "-MMD";
    if (arg == "-MMD") r.dep_mmd_indices.push_back(i);
  } else if (arg == "-MP") {
    r.dep_phony = true;
  } else if (arg == "-c") {
    w.compile = true;
  } else if (arg == "-S") {
    w.assemble = true;
  } else {
    return false;
  }
  return true;
}

// The options that shape the code or its side outputs (linker and assembler
// pass-through, -g, coverage, prefix maps, -march=native, target and
// include-root flags).
void apply_code_option(CcArgs& r, const std::string& arg) {
  if (starts_with(arg, "-Wl,")) {
    std::string bad = check_linker_flags(arg);
    if (!bad.empty()) {
      refuse(r, reason_code("linker_option", bad),
             "linker option '" + bad + "' in " + arg + " not understood");
    }
  } else if (starts_with(arg, "-Wa,")) {
    if (arg != "-Wa,--noexecstack") {
      refuse(r, reason_code("assembler_option", arg.substr(4, arg.find_first_of("=,", 4) - 4)),
             "assembler option " + arg);
    }
  } else if (starts_with(arg, "-g")) {
    r.debug |= arg != "-g0";
    if (arg == "-g0") r.debug = false;
    r.split_dwarf |= arg == "-gsplit-dwarf";
  } else if (arg == "--coverage" || arg == "-fprofile-arcs" || arg == "-ftest-coverage") {
    r.coverage = true;
  } else if (arg == "-fstack-usage") {
    r.stack_usage = true;
  } else if (starts_with(arg, "-fdebug-prefix-map=") || starts_with(arg, "-ffile-prefix-map=")) {
    r.prefix_maps.push_back(arg.substr(arg.find('=') + 1));
  } else if (starts_with(arg, "-frecord-gcc-switches") || starts_with(arg, "-flto") ||
             starts_with(arg, "-fcoverage-mapping") || starts_with(arg, "-fprofile")) {
    r.output_sensitive = true;
  } else if (starts_with(arg, "-march=native") || starts_with(arg, "-mtune=native") ||
             starts_with(arg, "-mcpu=native")) {
    r.native = true;
    r.native_args.push_back(arg);
  } else if (arg == "-m32" || arg == "-m64" || arg == "-mx32" || starts_with(arg, "-stdlib=") ||
             arg == "-nostdinc" || arg == "-nostdinc++" || starts_with(arg, "--sysroot=") ||
             starts_with(arg, "--target=") || starts_with(arg, "--gcc-toolchain=") ||
             arg == "-I-") {
    r.include_args.push_back(arg);
  } else if (starts_with(arg, "-fuse-ld")) {
    refuse(r, "linker_choice", "option " + arg + " (linker choice not modelled)");
  }
}

// Refuses a flag no list knows (separate and joined options are known).
void refuse_unknown_option(CcArgs& r, const std::string& arg, const SplitOption& o) {
  if (!o.separate && o.name == arg && !kKnownFlags.count(arg)) {
    bool known = false;
    for (const char* p : kKnownPrefixes) known |= starts_with(arg, p);
    if (!known) refuse(r, reason_code("unknown_option", option_name(arg)), "unknown option " + arg);
  }
}

// After the walk: a source is required, and the mode decides which of the
// dependency, assembly and side-output flags may stand.
void check_mode(CcArgs& r, const ArgWalk& w) {
  if (!w.have_source) {
    refuse(r, "no_source", "no source file (link of objects only, or nothing to compile)");
    return;
  }
  if (r.language == "cpp-output" || r.language == "c++-cpp-output") {
    r.language = r.language == "cpp-output" ? "c" : "c++";
  }
  r.mode = w.compile ? CcMode::kCompile : w.assemble ? CcMode::kAssemble : CcMode::kLink;
  if (r.language == "assembler-with-cpp") {
    // Only `-c`; and no debug info, whose paths the assembler writes under
    // rules of its own (the prefix maps of -f*-prefix-map are C's).
    if (r.mode != CcMode::kCompile)
      refuse(r, "assembly_outside_compile", "preprocessed assembly without -c");
    if (r.debug) refuse(r, "assembly_debug_info", "preprocessed assembly with debug info (-g)");
  }
  if (r.dep_md && r.mode != CcMode::kCompile) {
    refuse(r, "depfile_outside_compile", "-MD/-MMD outside -c compiles");
  }
  if (!r.dep_md && (!r.dep_mf.empty() || r.dep_target || r.dep_phony)) {
    refuse(r, "depfile_flags_without_md", "-MF/-MT/-MQ/-MP without -MD or -MMD");
  }
  if ((r.split_dwarf || r.coverage || r.stack_usage) && r.mode != CcMode::kCompile) {
    refuse(r, "side_outputs_outside_compile", "side outputs (.dwo/.gcno/.su) outside -c compiles");
  }
}

}  // namespace

CcArgs parse_cc_args(const std::vector<std::string>& argv, const std::string& cwd) {
  CcArgs r;
  if (!expand_arguments(argv, cwd, r)) return r;
  ArgWalk w;
  const std::vector<std::string>& a = r.args;
  for (size_t i = 0; i < a.size() && r.refused.empty(); ++i) {
    const std::string& arg = a[i];
    if (arg.empty() || arg[0] != '-' || arg == "-") {
      take_input(r, w, i);
      continue;
    }
    if (refuse_listed_option(r, arg)) break;
    SplitOption o;
    if (!split_option(r, i, o)) break;
    if (kIncludeShaping.count(o.name)) {
      r.include_args.push_back(arg);
      if (o.separate) r.include_args.push_back(o.value);
    }
    if (!apply_file_option(r, w, i, o)) apply_code_option(r, arg);
    refuse_unknown_option(r, arg, o);
    if (o.separate) ++i;
  }
  if (!r.refused.empty()) return r;
  check_mode(r, w);
  return r;
}

}  // namespace ccpool::compiler
