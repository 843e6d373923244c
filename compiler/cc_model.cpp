// The C/C++ model (gcc, g++, clang, clang++): plan() computes the direct key
// from everything but header contents; the first run adds dependency output;
// finish() records a manifest entry (headers with content hashes, negative
// paths that would shadow them, date dependence); lookup() validates entries
// newest first. Key material: docs/cache-keys.md.
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <map>

#include "base/fs.h"

#include "compiler/cc_args.h"
#include "compiler/cc_preprocessed.h"
#include "compiler/cc_probe.h"
#include "compiler/planner_impl.h"

namespace ccpool::compiler {
namespace {

// Environment that changes gcc/clang output bytes or diagnostics.
const std::vector<std::string> kCcEnv = {
    "CPATH", "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH", "OBJC_INCLUDE_PATH", "OBJCPLUS_INCLUDE_PATH",
    "LIBRARY_PATH", "COMPILER_PATH", "GCC_EXEC_PREFIX", "GCC_COMPARE_DEBUG", "SOURCE_DATE_EPOCH",
    "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "LC_MESSAGES", "CCC_OVERRIDE_OPTIONS", "TZ",
    "COLUMNS", "GCC_COLORS", "GCC_URLS", "TERM_URLS", "PATH", "LD_LIBRARY_PATH", "LD_RUN_PATH"};

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

// How the user's dependency file differs from the run's full -MD file. A
// directory counts as system only when known to be one (the compiler's
// defaults, -isystem, -idirafter, C/CPLUS_INCLUDE_PATH); any other is taken
// as a user directory, which can only add prerequisites.
DepfileView depfile_view(Family family, const CcArgs& a, const std::vector<std::string>& defaults,
                         const std::vector<std::string>& env, bool user_only, bool drop_main) {
  DepfileView view;
  view.gcc_layout = family == Family::kGcc;
  view.user_only = user_only;
  view.drop_main = drop_main;
  view.phony = a.dep_phony;
  view.system_dirs = defaults;
  for (size_t i = 0; i < a.args.size(); ++i) {
    for (std::string_view opt : {"-isystem", "-idirafter"}) {
      if (a.args[i] == opt && i + 1 < a.args.size()) {
        view.system_dirs.push_back(a.args[i + 1]);
      } else if (a.args[i].size() > opt.size() && a.args[i].compare(0, opt.size(), opt) == 0) {
        view.system_dirs.push_back(a.args[i].substr(opt.size()));
      }
    }
  }
  for (const char* name : {"C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH"}) {
    // gcc and clang search C's variable for preprocessed assembly too.
    bool c_like = a.language == "c" || a.language == "assembler-with-cpp";
    if (std::string(name) == "C_INCLUDE_PATH" ? !c_like : a.language != "c++") continue;
    std::optional<std::string> value = env_value(env, name);
    size_t start = 0;
    while (value && start <= value->size()) {
      size_t colon = value->find(':', start);
      if (colon == std::string::npos) colon = value->size();
      if (colon > start) view.system_dirs.push_back(value->substr(start, colon - start));
      start = colon + 1;
    }
  }
  return view;
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
  if (!a.refused.empty() || !(header_lang || header_source)) return parse_cc_args(request.argv, request.cwd);
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
  auto lower = [](char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); };
  auto ident = [](char c) { return c == '_' || c == '$' || std::isalnum(static_cast<unsigned char>(c)) != 0; };
  for (size_t at = text.find('.'); at != std::string_view::npos; at = text.find('.', at + 1)) {
    if (text.size() - at < directive.size()) return false;
    size_t i = 1;
    while (i < directive.size() && lower(text[at + i]) == directive[i]) ++i;
    if (i == directive.size() && (at + i == text.size() || !ident(text[at + i]))) return true;
  }
  return false;
}

bool has_time_macro_piece(std::string_view text) {
  constexpr std::string_view kNames[] = {"__TIMESTAMP__", "__DATE__"};  // __TIME__ prefixes __TIMESTAMP__
  auto ident = [](char c) { return c == '_' || std::isalnum(static_cast<unsigned char>(c)) != 0; };
  auto skip_quoted = [&](size_t i) {  // i at the opening quote; returns the index past the closing one
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
    } else if (c == '"' || (c == '\'' && (i == 0 || !std::isalnum(static_cast<unsigned char>(text[i - 1]))))) {
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
      for (std::string_view name : kNames) piece |= id.size() < name.size() && name.substr(0, id.size()) == id;
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
    std::lock_guard<std::mutex> lock(mutex);
    auto it = scans.find(content);
    if (it != scans.end()) return it->second;
  }
  CCPOOL_TRY_ASSIGN(std::string text, read_file(path));
  if (hash_bytes(text) != content) {
    return make_error(ErrorCode::kIo, "'" + path + "' changed while being scanned");
  }
  ScanInfo info;
  uint8_t& flags = info.flags;
  info.includes = std::make_shared<const IncludeScan>(scan_includes(text));
  if (text.find("__DATE__") != std::string::npos) flags |= kScanDate;
  if (text.find("__TIME__") != std::string::npos) flags |= kScanTime;
  if (text.find("__TIMESTAMP__") != std::string::npos) flags |= kScanTimestamp;
  if (text.find("__has_include") != std::string::npos) flags |= kScanHasInclude;
  if (has_asm_directive(text, ".incbin")) flags |= kScanIncbin;
  if (has_asm_directive(text, ".include")) flags |= kScanAsmInclude;
  if (has_time_macro_piece(text)) flags |= kScanPastePiece;
  std::lock_guard<std::mutex> lock(mutex);
  if (scans.size() >= 200000) scans.clear();
  scans.emplace(content, info);
  return info;
}

Result<Plan> Planner::Impl::plan_cc(const Request& request, const ToolIdentity& tool, Family family,
                                    const std::string& work_dir) {
  bool pch = false;
  CcArgs a = parse_cc_or_pch_args(request, pch);
  if (!a.refused.empty()) return passthrough_plan(request, a.refused_code, a.refused);
  if (pch && family != Family::kGcc) {
    // clang records every input's path, size and mtime in a PCH and rejects
    // it when they differ: a stored copy would fail on another checkout.
    return passthrough_plan(request, "pch_unsupported", "clang precompiled headers record input mtimes");
  }
  if (pch && a.mode == CcMode::kAssemble) return passthrough_plan(request, "pch_unsupported", "-S of a header");
  if (pch && a.dep_md && a.output.empty()) {
    return passthrough_plan(request, "pch_unsupported",
                            "-MD without -o for a header (gcc names the .d after the cwd)");
  }
  if (pch) a.mode = CcMode::kCompile;  // nothing is linked: the output is the PCH itself
  // gcc's environment form of -MMD (DEPENDENCIES_OUTPUT) and -MD without the
  // main file (SUNPRO_DEPENDENCIES): "FILE [TARGET]", appended to FILE.
  std::optional<std::string> dep_env = env_value(request.env, "DEPENDENCIES_OUTPUT");
  bool sunpro = !dep_env && env_value(request.env, "SUNPRO_DEPENDENCIES").has_value();
  if (sunpro) dep_env = env_value(request.env, "SUNPRO_DEPENDENCIES");
  std::string dep_env_file, dep_env_target;
  if (dep_env) {
    dep_env_file = dep_env->substr(0, dep_env->find(' '));
    if (dep_env->find(' ') != std::string::npos) dep_env_target = dep_env->substr(dep_env->find(' ') + 1);
    if (pch || family != Family::kGcc || a.dep_md || dep_env_file.empty() || a.mode != CcMode::kCompile) {
      return passthrough_plan(request, "depfile_env",
                              "DEPENDENCIES_OUTPUT/SUNPRO_DEPENDENCIES with clang, -M flags, a header or outside -c");
    }
  }
  ProbeContext ctx{*this, request, tool, a};
  auto detail = std::make_shared<PlanDetail>();
  detail->tools.emplace_back(tool.real_path, tool.stat);
  CcDetail cc;
  cc.family = family;
  cc.cwd = request.cwd;
  // gcc (>= 7) takes __DATE__/__TIME__ from SOURCE_DATE_EPOCH; clang only
  // from version 16, and Debian 12 ships 14, so for clang nothing is pinned.
  cc.sde_pinned =
      family == Family::kGcc && env_value(request.env, "SOURCE_DATE_EPOCH").has_value();
  cc.source = a.source;
  cc.dep_source = depfile_spelling(a.source);
  // Over-approximates: a value of another option spelled like -include...
  // only adds negative paths.
  for (size_t i = 0; i < a.args.size(); ++i) {
    const std::string& arg = a.args[i];
    for (std::string_view opt : {"-include", "-imacros"}) {
      if (arg == opt && i + 1 < a.args.size()) {
        cc.forced_includes.push_back(a.args[i + 1]);
      } else if (arg.size() > opt.size() && arg.compare(0, opt.size(), opt) == 0) {
        cc.forced_includes.push_back(arg.substr(opt.size()));
      }
    }
  }
  Result<SearchDirs> dirs = probe_search_dirs(ctx);
  if (!dirs) return passthrough_plan(request, "search_dirs_probe_failed", dirs.error().message);
  cc.dirs = std::move(*dirs);
  {
    CcArgs defaults = a;
    defaults.include_args.clear();
    Result<SearchDirs> system = probe_search_dirs(ProbeContext{*this, request, tool, defaults});
    if (!system) return passthrough_plan(request, "search_dirs_probe_failed", system.error().message);
    cc.dirs.system = system->bracket;
  }

  // Outputs: redirect -o into work_dir when the path cannot reach the bytes.
  bool redirect = !(a.split_dwarf || a.coverage || a.stack_usage || a.output_sensitive);
  std::string out_written = a.output;
  if (out_written.empty() && pch) {
    out_written = a.source + ".gch";  // gcc writes NAME.gch beside the header
  } else if (out_written.empty()) {
    out_written = a.mode == CcMode::kLink ? "a.out"
                  : strip_extension(base_name(a.source)) + (a.mode == CcMode::kCompile ? ".o" : ".s");
  }
  std::string out_abs = absolute_path(out_written, request.cwd);
  std::string run_out = work_dir + "/out" + (pch ? ".gch" : a.mode == CcMode::kCompile ? ".o" : a.mode == CcMode::kAssemble ? ".s" : "");
  std::string dep_target = a.dep_md && !a.dep_target ? out_written : "";

  Hasher h;
  h.add_field("ccpool-cc-v1");
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
    bool is_mf = std::find(a.dep_mf_indices.begin(), a.dep_mf_indices.end(), i) != a.dep_mf_indices.end();
    if ((is_output && redirect) || is_mf) {
      h.add_field("<path>");
      continue;
    }
    h.add_field(a.args[i]);
  }
  h.add_field(dep_target);
  bool cwd_in_key = !redirect || a.coverage || a.output_sensitive || (a.debug && a.prefix_maps.empty());
  h.add_u64(cwd_in_key ? 1 : 0);
  if (cwd_in_key) h.add_field(request.cwd);
  if (a.debug && !a.prefix_maps.empty()) hash_mapped_cwd(h, request.cwd, a.prefix_maps);
  hash_env(h, request.env, kCcEnv);
  h.add_u64(dep_env ? (sunpro ? 2 : 1) : 0);
  if (dep_env) h.add_field(dep_env_target);
  if (a.native) {
    Result<std::string> native = probe_native(ctx);
    if (!native) return passthrough_plan(request, "native_probe_failed", native.error().message);
    h.add_field(*native);
  }
  std::string source_abs = absolute_path(a.source, request.cwd);
  Result<HashedFile> source = hasher.hash(source_abs);
  if (!source) {
    return passthrough_plan(request, "source_unreadable", "source: " + source.error().message);
  }
  hash_digest(h, source->content);
  detail->inputs.push_back({source_abs, source->content});
  if (a.mode == CcMode::kLink) {
    Result<void> linked = hash_link_inputs(ctx, h, detail->inputs, detail->tools);
    if (!linked) return passthrough_plan(request, "link_probe_failed", linked.error().message);
  }

  Plan plan;
  plan.kind = PlanKind::kCompiler;
  plan.flight_key = h.digest();
  plan.direct_mode = true;
  plan.tool = base_name(request.argv[0]);
  plan.job_class = job_class(plan.tool, a);
  plan.run_program = request.program;
  plan.run_cwd = request.cwd;
  plan.run_env = environment_without_shim(request.env);
  if (dep_env) {
    std::erase_if(plan.run_env, [](const std::string& e) {
      return e.rfind("DEPENDENCIES_OUTPUT=", 0) == 0 || e.rfind("SUNPRO_DEPENDENCIES=", 0) == 0;
    });
  }
  plan.uses_work_dir = true;
  plan.inputs.push_back(source_abs);
  plan.run_argv.push_back(request.argv[0]);
  for (size_t i = 0; i < a.args.size(); ++i) {
    if (std::find(a.dep_mf_indices.begin(), a.dep_mf_indices.end(), i) != a.dep_mf_indices.end()) continue;
    if (std::find(a.dep_mmd_indices.begin(), a.dep_mmd_indices.end(), i) != a.dep_mmd_indices.end()) {
      plan.run_argv.push_back("-MD");  // the manifest needs system headers too
      continue;
    }
    if (redirect && !a.output.empty() && i == a.output_index) {
      plan.run_argv.push_back(a.output_joined ? "-o" + run_out : run_out);
      continue;
    }
    plan.run_argv.push_back(a.args[i]);
  }
  if (redirect && a.output.empty()) {
    plan.run_argv.push_back("-o");
    plan.run_argv.push_back(run_out);
  }
  plan.outputs.push_back({"out", redirect ? run_out : out_abs, out_abs, false});
  if (a.dep_md) {
    cc.dep_path = work_dir + "/dep.d";
    plan.run_argv.insert(plan.run_argv.end(), {"-MF", cc.dep_path});
    if (!dep_target.empty()) plan.run_argv.insert(plan.run_argv.end(), {"-MQ", dep_target});
    std::string dep_deliver = absolute_path(a.dep_mf.empty() ? strip_extension(out_written) + ".d" : a.dep_mf,
                                            request.cwd);
    plan.outputs.push_back({"dep", cc.dep_path, dep_deliver, false});
    if (a.dep_user_only) cc.dep_view = depfile_view(family, a, cc.dirs.system, request.env, true, false);
  } else if (dep_env) {
    cc.dep_path = work_dir + "/dep.d";
    plan.run_argv.insert(plan.run_argv.end(), {"-MD", "-MF", cc.dep_path});
    if (dep_env_target.empty()) {
      plan.run_argv.insert(plan.run_argv.end(), {"-MQ", strip_extension(base_name(a.source)) + ".o"});
    } else {
      plan.run_argv.insert(plan.run_argv.end(), {"-MT", dep_env_target});
    }
    plan.outputs.push_back({"dep", cc.dep_path, absolute_path(dep_env_file, request.cwd), false});
    cc.dep_view = depfile_view(family, a, cc.dirs.system, request.env, !sunpro, sunpro);
    cc.dep_append = true;
  } else {
    cc.dep_path = work_dir + "/ccpool.d";
    plan.run_argv.insert(plan.run_argv.end(), {"-MD", "-MF", cc.dep_path});
  }
  std::string stem = strip_extension(out_abs);
  if (a.split_dwarf) plan.outputs.push_back({"dwo", stem + ".dwo", stem + ".dwo", true});
  if (a.coverage) plan.outputs.push_back({"gcno", stem + ".gcno", stem + ".gcno", true});
  if (a.stack_usage) plan.outputs.push_back({"su", stem + ".su", stem + ".su", true});
  set_up_preprocessor_mode(cc, a, request, tool);
  detail->cc = std::move(cc);
  plan.detail = std::move(detail);
  return plan;
}

std::string Planner::deliver_bytes(const Plan& requester, const OutputSpec& output,
                                   std::string_view stored) const {
  // The .d target is pinned in the key (-MQ <the requester's -o as written>),
  // so stored bytes are already what this requester's own compile writes,
  // unless the user asked for less than the full -MD file.
  const PlanDetail* detail = requester.detail.get();
  if (output.name != "dep" || !detail || !detail->cc || !detail->cc->dep_view) return std::string(stored);
  // finish() refuses to store a file the model cannot derive; if this one is
  // such a run's own, the full file is a superset the build can still use.
  std::optional<std::string> derived = derive_depfile(stored, *detail->cc->dep_view);
  std::string bytes = derived ? std::move(*derived) : std::string(stored);
  if (!detail->cc->dep_append) return bytes;
  Result<std::string> existing = read_file(output.deliver_path);
  return (existing ? *existing : std::string()) + bytes;
}

}  // namespace ccpool::compiler
