// The C/C++ model (gcc, g++, clang, clang++): plan() computes the direct key
// from the command and the source and runs the compile with the recorder
// preloaded; finish() (cc_manifest.cpp) turns the record of what the run
// read into a manifest entry; lookup() validates entries newest first. Key
// material: docs/cache-keys.md.
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <map>

#include "base/fs.h"
#include "base/process_facts.h"
#include "compiler/bounded.h"
#include "compiler/cc_args.h"
#include "compiler/cc_probe.h"
#include "compiler/key_hash.h"
#include "compiler/path_names.h"
#include "compiler/plan_helpers.h"
#include "compiler/planner_impl.h"

namespace ccpool::compiler {
namespace {

// Environment that changes gcc/clang output bytes or diagnostics.
const std::vector<std::string> kCcEnv = {"CPATH",
                                         "C_INCLUDE_PATH",
                                         "CPLUS_INCLUDE_PATH",
                                         "OBJC_INCLUDE_PATH",
                                         "OBJCPLUS_INCLUDE_PATH",
                                         "LIBRARY_PATH",
                                         "COMPILER_PATH",
                                         "GCC_EXEC_PREFIX",
                                         "GCC_COMPARE_DEBUG",
                                         "SOURCE_DATE_EPOCH",
                                         "LANG",
                                         "LANGUAGE",
                                         "LC_ALL",
                                         "LC_CTYPE",
                                         "LC_MESSAGES",
                                         "CCC_OVERRIDE_OPTIONS",
                                         "TZ",
                                         "COLUMNS",
                                         "GCC_COLORS",
                                         "GCC_URLS",
                                         "TERM_URLS",
                                         "PATH",
                                         "LD_LIBRARY_PATH",
                                         "LD_RUN_PATH"};

std::string strip_extension(const std::string& path) {
  size_t slash = path.rfind('/');
  size_t dot = path.rfind('.');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash) ||
      dot == (slash == std::string::npos ? 0 : slash + 1)) {
    return path;
  }
  return path.substr(0, dot);
}

// The cwd as -g would embed it under each plausible prefix-map rule (first or
// last match wins, string or path-component prefix): two cwds share a key only
// if every rule maps them alike.
void hash_mapped_cwd(Hasher& h, const std::string& cwd, const std::vector<std::string>& maps) {
  for (int rule = 0; rule < 4; ++rule) {
    bool last_wins = rule & 1, components = rule & 2;
    std::string mapped = cwd;
    for (size_t k = 0; k < maps.size(); ++k) {
      const std::string& m = maps[last_wins ? maps.size() - 1 - k : k];
      size_t eq = m.find('=');
      if (eq == std::string::npos) continue;
      std::string from = m.substr(0, eq);
      if (cwd.compare(0, from.size(), from) != 0) continue;
      if (components && cwd.size() > from.size() && cwd[from.size()] != '/' &&
          (from.empty() || from.back() != '/')) {
        continue;
      }
      mapped = m.substr(eq + 1) + cwd.substr(from.size());
      break;
    }
    h.add_field(mapped);
  }
}

std::string job_class(const std::string& tool, const CcArgs& a) {
  std::string out = tool;
  for (const std::string& arg : a.args) {
    if (arg.rfind("-O", 0) == 0) {
      out += " " + arg;
      break;
    }
  }
  if (a.mode == CcMode::kLink) out += " -shared";
  if (a.debug) out += " -g";
  return out;
}

bool has_header_extension(const std::string& path) {
  for (std::string_view ext : {".h", ".hh", ".hpp", ".hxx", ".H", ".h++", ".HPP"}) {
    if (path.size() > ext.size() && path.compare(path.size() - ext.size(), ext.size(), ext) == 0 &&
        path[path.size() - ext.size() - 1] != '/') {
      return true;
    }
  }
  return false;
}

// A precompiled-header build (`-x c-header` / `-x c++-header`, or a header
// named by its extension) is classified by parse_cc_args as the compile of
// the same text as C or C++: the header languages are rewritten in a copy of
// argv (same argument count, so indices hold; positional headers get a
// suffix that reads as C++), parsed, and every rewritten argument is put back
// afterwards. Sets `pch` when the parsed source is such a header; anything
// else is parsed from the original argv, exactly as before. Response files
// are not rewritten (a PCH build behind @file passes through as before).
constexpr std::string_view kPchSourceMark = ".ccpool-pch-source.cpp";

std::string unmark(const std::string& s) {
  size_t n = kPchSourceMark.size();
  if (s.size() > n && s.compare(s.size() - n, n, kPchSourceMark) == 0 &&
      has_header_extension(s.substr(0, s.size() - n))) {
    return s.substr(0, s.size() - n);
  }
  return s;
}

CcArgs parse_cc_or_pch_args(const Request& request, bool& pch) {
  pch = false;
  std::vector<std::string> argv = request.argv;
  std::map<size_t, std::string> rewritten;  // index in argv -> original text
  bool header_lang = false;
  for (size_t i = 1; i < argv.size(); ++i) {
    std::string& arg = argv[i];
    if (!arg.empty() && arg[0] == '@') return parse_cc_args(request.argv, request.cwd);
    bool joined = arg.size() > 2 && arg.compare(0, 2, "-x") == 0;
    if ((arg == "-x" && i + 1 < argv.size()) || joined) {
      size_t at = joined ? i : i + 1;
      std::string value = joined ? arg.substr(2) : argv[at];
      if (value == "c-header" || value == "c++-header") {
        rewritten.emplace(at, argv[at]);
        argv[at] = (joined ? "-x" : "") + value.substr(0, value.size() - 7);
        header_lang = true;
      }
      i = at;
    } else if (!arg.empty() && arg[0] != '-' && has_header_extension(arg)) {
      rewritten.emplace(i, arg);  // maybe an option's value: put back below
      arg += kPchSourceMark;
    }
  }
  if (rewritten.empty()) return parse_cc_args(request.argv, request.cwd);
  CcArgs a = parse_cc_args(argv, request.cwd);
  bool header_source = !a.source.empty() && rewritten.count(a.source_index + 1) > 0;
  if (!a.refused.empty() || !(header_lang || header_source))
    return parse_cc_args(request.argv, request.cwd);
  for (const auto& [index, original] : rewritten) a.args[index - 1] = original;
  a.source = a.args[a.source_index];
  a.output = unmark(a.output);
  a.dep_mf = unmark(a.dep_mf);
  for (std::string& arg : a.include_args) arg = unmark(arg);
  pch = true;
  return a;
}

}  // namespace

bool has_asm_directive(std::string_view text, std::string_view directive) {
  auto lower = [](char c) {
    return static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  };
  auto ident = [](char c) {
    return c == '_' || c == '$' || std::isalnum(static_cast<unsigned char>(c)) != 0;
  };
  for (size_t at = text.find('.'); at != std::string_view::npos; at = text.find('.', at + 1)) {
    if (text.size() - at < directive.size()) return false;
    size_t i = 1;
    while (i < directive.size() && lower(text[at + i]) == directive[i]) ++i;
    if (i == directive.size() && (at + i == text.size() || !ident(text[at + i]))) return true;
  }
  return false;
}

bool has_time_macro_piece(std::string_view text) {
  constexpr std::string_view kNames[] = {"__TIMESTAMP__",
                                         "__DATE__"};  // __TIME__ prefixes __TIMESTAMP__
  auto ident = [](char c) { return c == '_' || std::isalnum(static_cast<unsigned char>(c)) != 0; };
  auto skip_quoted =
      [&](size_t i) {  // i at the opening quote; returns the index past the closing one
        char q = text[i];
        for (++i; i < text.size() && text[i] != q && text[i] != '\n'; ++i) {
          if (text[i] == '\\') ++i;
        }
        return i + 1;
      };
  for (size_t i = 0; i < text.size();) {
    char c = text[i];
    if (c == '/' && i + 1 < text.size() && text[i + 1] == '/') {
      size_t nl = text.find('\n', i);
      i = nl == std::string_view::npos ? text.size() : nl;
    } else if (c == '/' && i + 1 < text.size() && text[i + 1] == '*') {
      size_t close = text.find("*/", i + 2);
      i = close == std::string_view::npos ? text.size() : close + 2;
    } else if (c == '"' ||
               (c == '\'' && (i == 0 || !std::isalnum(static_cast<unsigned char>(text[i - 1]))))) {
      i = skip_quoted(i);  // a ' after a digit is a digit separator, not a character literal
    } else if (ident(c)) {
      size_t end = i;
      while (end < text.size() && ident(text[end])) ++end;
      std::string_view id = text.substr(i, end - i);
      size_t before = text.find_last_not_of(" \t", i == 0 ? 0 : i - 1);
      bool right_operand = i >= 2 && before != std::string_view::npos && before >= 1 &&
                           text.substr(before - 1, 2) == "##";
      i = end;
      if (right_operand) continue;  // a##_##b: not the leftmost piece of a paste
      bool piece = false;
      for (std::string_view name : kNames)
        piece |= id.size() < name.size() && name.substr(0, id.size()) == id;
      if (!piece || id == "__TIME__") continue;
      // A lone `_` is everywhere (gettext's _("text"), PyTorch's X-macro
      // parameter `_`): it does not count, a documented limit.
      if (id == "_") continue;
      return true;
    } else {
      ++i;
    }
  }
  return false;
}

Result<ScanInfo> Planner::Impl::scan(const std::string& path, const Digest& content) {
  {
    MutexLock lock(&mutex);
    auto it = scans.find(content);
    if (it != scans.end()) return it->second;
  }
  CCPOOL_TRY_ASSIGN(std::string text, read_file(path));
  if (hash_bytes(text) != content) {
    return make_error(ErrorCode::kIo, "'" + path + "' changed while being scanned");
  }
  ScanInfo info;
  uint8_t& flags = info.flags;
  if (text.find("__DATE__") != std::string::npos) flags |= kScanDate;
  if (text.find("__TIME__") != std::string::npos) flags |= kScanTime;
  if (text.find("__TIMESTAMP__") != std::string::npos) flags |= kScanTimestamp;
  if (text.find("__has_include") != std::string::npos) flags |= kScanHasInclude;
  if (has_asm_directive(text, ".incbin")) flags |= kScanIncbin;
  if (has_asm_directive(text, ".include")) flags |= kScanAsmInclude;
  if (has_time_macro_piece(text)) flags |= kScanPastePiece;
  MutexLock lock(&mutex);
  if (scans.size() >= 200000) scans.clear();
  scans.emplace(content, info);
  return info;
}

namespace {

// gcc's environment forms of -MMD (DEPENDENCIES_OUTPUT) and of -MD without
// the main file (SUNPRO_DEPENDENCIES): "FILE [TARGET]", appended to FILE.
struct DepEnv {
  bool set = false, sunpro = false;
  std::string file, target;
};

DepEnv dep_env_of(const Request& request) {
  DepEnv d;
  std::optional<std::string> value = env_value(request.env, "DEPENDENCIES_OUTPUT");
  if (!value) {
    value = env_value(request.env, "SUNPRO_DEPENDENCIES");
    d.sunpro = value.has_value();
  }
  if (!value) return d;
  d.set = true;
  size_t space = value->find(' ');
  d.file = value->substr(0, space);
  if (space != std::string::npos) d.target = value->substr(space + 1);
  return d;
}

// Why this command cannot be cached as a compile, or "" (a header build and
// the dependency-file forms the run cannot reproduce).
WhyNot refuse_shape(Family family, const CcArgs& a, bool pch, const DepEnv& dep_env) {
  if (pch && family != Family::kGcc) {
    // clang records every input's path, size and mtime in a PCH and rejects
    // it when they differ: a stored copy would fail on another checkout.
    return {std::string(kReasonPchUnsupported), "clang precompiled headers record input mtimes"};
  }
  if (pch && a.mode == CcMode::kAssemble)
    return {std::string(kReasonPchUnsupported), "-S of a header"};
  if (pch && a.dep_md && a.output.empty()) {
    return {std::string(kReasonPchUnsupported),
            "-MD without -o for a header (gcc names the .d after the cwd)"};
  }
  if (dep_env.set && (pch || family != Family::kGcc || a.dep_md || dep_env.file.empty() ||
                      a.mode != CcMode::kCompile)) {
    return {"depfile_env",
            "DEPENDENCIES_OUTPUT/SUNPRO_DEPENDENCIES with clang, -M flags, a header or outside -c"};
  }
  return {};
}

// Where the compiler writes its output when nobody says (-o absent).
std::string default_output(const CcArgs& a, bool pch) {
  if (!a.output.empty()) return a.output;
  if (pch) return a.source + ".gch";  // gcc writes NAME.gch beside the header
  if (a.mode == CcMode::kLink) return "a.out";
  return strip_extension(base_name(a.source)) + (a.mode == CcMode::kCompile ? ".o" : ".s");
}

// -o leaves the key (and the run writes into the work dir) only where the
// output's path cannot reach the bytes.
bool redirects_output(const CcArgs& a) {
  return !(a.split_dwarf || a.coverage || a.stack_usage || a.output_sensitive);
}

// The flight key: everything of the command that may reach the output
// bytes and is known before the run (docs/cache-keys.md, "The direct key").
// What the run then reads is the record's.
Digest direct_key(const Request& request, const ToolIdentity& tool, Family family, const CcArgs& a,
                  bool pch, const std::string& dep_target, const DepEnv& dep_env,
                  const std::string& native, const Digest& source) {
  bool redirect = redirects_output(a);
  Hasher h;
  h.add_field("ccpool-cc-v2");
  if (pch) h.add_field("precompiled-header");
  hash_digest(h, tool.key);
  h.add_field(request.program);
  h.add_field(base_name(request.argv[0]));
  h.add_u64(static_cast<uint64_t>(family));
  h.add_u64(static_cast<uint64_t>(a.mode));
  h.add_field(a.language);
  h.add_u64(redirect ? 1 : 0);
  for (size_t i = 0; i < a.args.size(); ++i) {
    bool is_output = !a.output.empty() && i == a.output_index;
    bool is_mf =
        std::find(a.dep_mf_indices.begin(), a.dep_mf_indices.end(), i) != a.dep_mf_indices.end();
    h.add_field((is_output && redirect) || is_mf ? std::string("<path>") : a.args[i]);
  }
  h.add_field(dep_target);
  bool cwd_in_key =
      !redirect || a.coverage || a.output_sensitive || (a.debug && a.prefix_maps.empty());
  h.add_u64(cwd_in_key ? 1 : 0);
  if (cwd_in_key) h.add_field(request.cwd);
  if (a.debug && !a.prefix_maps.empty()) hash_mapped_cwd(h, request.cwd, a.prefix_maps);
  hash_env(h, request.env, kCcEnv);
  h.add_u64(dep_env.set ? (dep_env.sunpro ? 2 : 1) : 0);
  if (dep_env.set) h.add_field(dep_env.target);
  h.add_field(native);
  hash_digest(h, source);
  return h.digest();
}

// The environment the compile runs with: the requester's, without the shim
// and the dependency variables (replaced by the work dir's file), with the
// recorder preloaded before anything the requester preloads.
std::vector<std::string> run_environment(const Request& request, const std::string& trace_library,
                                         const std::string& trace_path, const DepEnv& dep_env,
                                         const std::string& dep_path,
                                         const std::string& dep_target) {
  std::vector<std::string> env = traced_environment(request, trace_library, trace_path);
  std::erase_if(env, [](const std::string& e) {
    return e.rfind("DEPENDENCIES_OUTPUT=", 0) == 0 || e.rfind("SUNPRO_DEPENDENCIES=", 0) == 0;
  });
  if (dep_env.set) {
    env.push_back(std::string(dep_env.sunpro ? "SUNPRO_DEPENDENCIES=" : "DEPENDENCIES_OUTPUT=") +
                  dep_path + " " + dep_target);
  }
  return env;
}

// The paths of one compile: what the requester gets, where the run writes
// (in the work dir), and the dependency file's target and place.
struct CcPaths {
  bool redirect = false;  // redirects_output()
  std::string out_written, out_abs, run_out;
  std::string dep_target, dep_env_target, dep_path;
};

CcPaths cc_paths(const Request& request, const CcArgs& a, bool pch, const std::string& work_dir,
                 const DepEnv& dep_env) {
  CcPaths p;
  p.redirect = redirects_output(a);
  p.out_written = default_output(a, pch);
  p.out_abs = absolute_path(p.out_written, request.cwd);
  p.run_out = work_dir + "/out" +
              (pch                           ? ".gch"
               : a.mode == CcMode::kCompile  ? ".o"
               : a.mode == CcMode::kAssemble ? ".s"
                                             : "");
  // The .d target: what gcc's driver itself passes (-MQ <the -o text>).
  p.dep_target = a.dep_md && !a.dep_target ? p.out_written : "";
  p.dep_env_target =
      dep_env.target.empty() ? strip_extension(base_name(a.source)) + ".o" : dep_env.target;
  p.dep_path = work_dir + "/dep.d";
  return p;
}

// The command as given, with -o and -MF pointed into the work dir: the
// compiler writes exactly the files it would write for the requester. Also
// the outputs it delivers.
void add_run_command(Plan& plan, const Request& request, const CcArgs& a, const CcPaths& paths,
                     const DepEnv& dep_env) {
  bool redirect = paths.redirect;
  const std::string& run_out = paths.run_out;
  const std::string& out_abs = paths.out_abs;
  const std::string& out_written = paths.out_written;
  const std::string& dep_path = paths.dep_path;
  const std::string& dep_target = paths.dep_target;
  plan.run_argv.push_back(request.argv[0]);
  for (size_t i = 0; i < a.args.size(); ++i) {
    if (std::find(a.dep_mf_indices.begin(), a.dep_mf_indices.end(), i) != a.dep_mf_indices.end())
      continue;
    if (redirect && !a.output.empty() && i == a.output_index) {
      plan.run_argv.push_back(a.output_joined ? "-o" + run_out : run_out);
      continue;
    }
    plan.run_argv.push_back(a.args[i]);
  }
  if (redirect && a.output.empty()) plan.run_argv.insert(plan.run_argv.end(), {"-o", run_out});
  plan.outputs.push_back({"out", redirect ? run_out : out_abs, out_abs, false});
  if (a.dep_md) {
    plan.run_argv.insert(plan.run_argv.end(), {"-MF", dep_path});
    if (!dep_target.empty()) plan.run_argv.insert(plan.run_argv.end(), {"-MQ", dep_target});
    std::string dep_deliver = absolute_path(
        a.dep_mf.empty() ? strip_extension(out_written) + ".d" : a.dep_mf, request.cwd);
    plan.outputs.push_back({"dep", dep_path, dep_deliver, false});
  } else if (dep_env.set) {
    plan.outputs.push_back({"dep", dep_path, absolute_path(dep_env.file, request.cwd), false});
  }
  std::string stem = strip_extension(out_abs);
  if (a.split_dwarf) plan.outputs.push_back({"dwo", stem + ".dwo", stem + ".dwo", true});
  if (a.coverage) plan.outputs.push_back({"gcno", stem + ".gcno", stem + ".gcno", true});
  if (a.stack_usage) plan.outputs.push_back({"su", stem + ".su", stem + ".su", true});
}

}  // namespace

Result<Digest> Planner::Impl::source_digest(const std::string& abs, bool memo_view) {
  if (memo_view) {
    std::optional<Digest> kept;
    if (bounded::active()) {
      kept = memo->content_if_free(abs);
    } else {
      memo->sync();
      kept = memo->content(abs);
    }
    if (kept) return *kept;
  }
  CCPOOL_TRY_ASSIGN(HashedFile file, hasher.hash(abs));
  return file.content;
}

Result<Plan> Planner::Impl::plan_cc(const Request& request, const ToolIdentity& tool, Family family,
                                    const std::string& work_dir) {
  bool pch = false;
  CcArgs a = parse_cc_or_pch_args(request, pch);
  if (!a.refused.empty()) return passthrough_plan(request, a.refused_code, a.refused);
  DepEnv dep_env = dep_env_of(request);
  if (WhyNot why = refuse_shape(family, a, pch, dep_env); !why.empty()) {
    return passthrough_plan(request, why.code, why.text);
  }
  if (trace_library.empty()) {
    return passthrough_plan(
        request, "trace_unavailable",
        "libccpool-trace.so not found (set CCPOOL_TRACE_LIBRARY or install it beside ccpool)");
  }
  if (pch) a.mode = CcMode::kCompile;  // nothing is linked: the output is the PCH itself
  ProbeContext ctx{*this, request, tool, a};
  std::string native;
  if (a.native) {
    Result<std::string> probed = probe_native(ctx);
    if (!probed) return passthrough_plan(request, "native_probe_failed", probed.error().message);
    native = *probed;
  }
  std::string source_abs = absolute_path(a.source, request.cwd);
  bool memo_view = memo && memo->in_own_view();
  Result<Digest> source = source_digest(source_abs, memo_view);
  if (!source)
    return passthrough_plan(request, "source_unreadable", "source: " + source.error().message);

  CcPaths paths = cc_paths(request, a, pch, work_dir, dep_env);

  auto detail = std::make_shared<PlanDetail>();
  detail->tools.emplace_back(tool.real_path, tool.stat);
  detail->inputs.push_back({source_abs, *source});
  CcDetail cc;
  cc.family = family;
  cc.cwd = request.cwd;
  cc.work_dir = work_dir;
  // gcc (>= 7) takes __DATE__/__TIME__ from SOURCE_DATE_EPOCH (through
  // gmtime); clang only from version 16: Debian 12's 14 calls localtime.
  cc.sde_pinned = family == Family::kGcc && env_value(request.env, "SOURCE_DATE_EPOCH").has_value();
  cc.dep_append = dep_env.set;
  cc.memo_view = memo_view;

  Plan plan;
  plan.kind = PlanKind::kCompiler;
  plan.flight_key =
      direct_key(request, tool, family, a, pch, paths.dep_target, dep_env, native, *source);
  plan.direct_mode = true;
  plan.key_mode = KeyMode::kDirect;
  plan.tool = base_name(request.argv[0]);
  plan.job_class = job_class(plan.tool, a);
  plan.run_program = request.program;
  plan.run_cwd = request.cwd;
  plan.trace_path = work_dir + "/trace";
  plan.run_env = run_environment(request, trace_library, plan.trace_path, dep_env, paths.dep_path,
                                 paths.dep_env_target);
  plan.uses_work_dir = true;
  plan.inputs.push_back(source_abs);
  add_run_command(plan, request, a, paths, dep_env);
  detail->cc = std::move(cc);
  plan.detail = std::move(detail);
  return plan;
}

std::optional<std::string> Planner::deliver_bytes(const Plan& requester, const OutputSpec& output,
                                                  std::string_view stored) const {
  // The run wrote exactly the requester's file (the .d target is pinned in
  // the key); the environment forms append to FILE, as gcc does.
  const PlanDetail* detail = requester.detail.get();
  if (output.name != "dep" || !detail || !detail->cc || !detail->cc->dep_append)
    return std::nullopt;
  Result<std::string> existing = read_file(output.deliver_path);
  return (existing ? *existing : std::string()) + std::string(stored);
}

}  // namespace ccpool::compiler
