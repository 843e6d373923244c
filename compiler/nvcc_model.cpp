// nvcc -c of one .cu source as one cached job: a preprocessor-mode key.
//
// nvcc's inner steps (cudafe++, cicc, ptxas, fatbinary, the host compile) use
// random tmpxft_* names that reach its objects, so two direct runs differ and
// no step's own key can make the whole command hit. Instead:
// - plan(): `nvcc --dryrun` with the same arguments lists every command nvcc
//   would run. The flight key holds nvcc's identity and that of every program
//   the dryrun names (resolved through the PATH it prints), nvcc.profile, the
//   libdevice files, the arguments, the cwd (cudafe++ and cicc get the
//   source's absolute path), the environment allowlist and the source.
// - lookup() and finish() (nvcc_manifest.cpp): run the dryrun's own `gcc -E` steps (the host one
// and one per
//   GPU architecture, with -Wdate-time) and keys their output and the content
//   of every file their line markers name: what cudafe++, cicc and ptxas
//   read is exactly that output. The final host compile also includes files
//   the -E steps never read (crt/host_runtime.h, fatbinary_section.h and
//   what they include, from nvcc's stub in the temp dir); the run lists them
//   (SUNPRO_DEPENDENCIES: every gcc step appends its full dependency list),
//   and a manifest under the preprocessor key records each with its content,
//   plus the paths that must not become regular files (the same spelling in
//   every search and includer directory: a new header there would shadow).
//   Result key = H(preprocessor key, manifest).
//   finish() reruns the -E steps and stores only if the key did not change
//   during the run and no input was modified.
// See docs/cache-keys.md, "nvcc".
#include <dirent.h>

#include <algorithm>

#include "base/process.h"
#include "compiler/cc_probe.h"
#include "compiler/nvcc_args.h"
#include "compiler/planner_impl.h"
#include "compiler/probe_output.h"

namespace ccpool::compiler {
namespace {

// Environment nvcc or its host compiler read (besides the C/C++ list).
const std::vector<std::string> kNvccEnv = {"CPATH",
                                           "C_INCLUDE_PATH",
                                           "CPLUS_INCLUDE_PATH",
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
                                           "TZ",
                                           "COLUMNS",
                                           "GCC_COLORS",
                                           "GCC_URLS",
                                           "TERM_URLS",
                                           "PATH",
                                           "LD_LIBRARY_PATH",
                                           "TMPDIR",
                                           "NVCC_CCBIN",
                                           "NVCC_PREPEND_FLAGS",
                                           "NVCC_APPEND_FLAGS"};

bool has_arg(const std::vector<std::string>& words, std::string_view arg) {
  return std::find(words.begin(), words.end(), arg) != words.end();
}

// Files nvcc's tools read besides the source and headers: nvcc.profile
// beside nvcc and every file of libdevice (NVVMIR_LIBRARY_DIR), sorted.
std::vector<std::string> nvcc_data_files(const ToolIdentity& nvcc,
                                         const std::map<std::string, std::string>& vars) {
  std::vector<std::string> files = {dir_name(nvcc.real_path) + "/nvcc.profile"};
  auto it = vars.find("NVVMIR_LIBRARY_DIR");
  if (it == vars.end()) return files;
  std::vector<std::string> names;
  if (DIR* dp = ::opendir(it->second.c_str())) {
    while (dirent* e = ::readdir(dp)) {
      if (e->d_name[0] != '.') names.push_back(e->d_name);
    }
    ::closedir(dp);
  }
  std::sort(names.begin(), names.end());
  for (const std::string& n : names) files.push_back(it->second + "/" + n);
  return files;
}

// Fills nv.search_dirs (the temp dir and the host compiler's search list for
// this command, memoized; as written and as realpaths, since gcc writes system
// headers' paths canonicalized into dependency files) and nv.trusted_dirs:
// trusted like the C/C++ model's system directories (installed by a package
// manager, not scanned for pasted date macros), the host compiler's default
// list (probed without the environment's include variables) and the CUDA
// toolkit (TOP in the dryrun). False when a probe fails.
bool find_dirs(Planner::Impl& impl, NvccDetail& nv, const ToolIdentity& host,
               const std::string& source, const std::map<std::string, std::string>& vars) {
  std::vector<std::string> probe = nv.pp_steps[0];
  std::replace(probe.begin(), probe.end(), source, std::string("/dev/null"));
  probe.push_back("-v");
  Hasher ph;
  ph.add_field("nvcc-search-v1");
  hash_digest(ph, host.key);
  for (const std::string& a : probe) ph.add_field(a);
  for (const std::string& e : nv.pp_env) ph.add_field(e);
  ph.add_field(nv.cwd);
  Result<HelperOutput> listed =
      impl.memo_helper(ph.digest(), probe, nv.pp_env, nv.cwd, nv.pp_programs[0]);
  std::optional<SearchList> search = listed ? parse_search_list(listed->err) : std::nullopt;
  if (!search) return false;
  nv.search_dirs.push_back(nv.temp_dir);
  for (const auto* list : {&search->missing, &search->quote, &search->bracket}) {
    for (const std::string& dir : *list) {
      nv.search_dirs.push_back(absolute_path(dir, nv.cwd));
      if (std::optional<std::string> real = real_path(nv.search_dirs.back()))
        nv.search_dirs.push_back(*real);
    }
  }
  std::vector<std::string> defaults_env = {"LC_ALL=C"};
  if (vars.count("PATH")) defaults_env.push_back("PATH=" + vars.at("PATH"));
  Hasher dh;
  dh.add_field("nvcc-default-dirs-v1");
  hash_digest(dh, host.key);
  for (const std::string& e : defaults_env) dh.add_field(e);
  Result<HelperOutput> defaults =
      impl.memo_helper(dh.digest(), {nv.pp_steps[0][0], "-E", "-v", "-x", "c++", "/dev/null"},
                       defaults_env, "/", nv.pp_programs[0]);
  std::optional<SearchList> default_dirs =
      defaults ? parse_search_list(defaults->err) : std::nullopt;
  if (!default_dirs) return false;
  for (const std::string& dir : default_dirs->bracket) {
    if (std::optional<std::string> real = real_path(dir)) nv.trusted_dirs.push_back(*real);
  }
  if (auto top = vars.find("TOP"); top != vars.end()) {
    if (std::optional<std::string> real = real_path(top->second)) nv.trusted_dirs.push_back(*real);
  }
  return true;
}

}  // namespace

Result<Plan> Planner::Impl::plan_nvcc(const Request& request, const ToolIdentity& tool,
                                      const std::string& work_dir) {
  NvccArgs args = parse_nvcc_args(request.argv);
  if (!args.refused.empty()) return passthrough_plan(request, args.refused_code, args.refused);
  for (const char* name : {"NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS"}) {
    std::optional<std::string> v = env_value(request.env, name);
    if (v && !v->empty()) {
      return passthrough_plan(request, reason_code("nvcc_env", name),
                              std::string(name) + " adds unchecked options");
    }
  }
  for (const char* name : {"DEPENDENCIES_OUTPUT", "SUNPRO_DEPENDENCIES"}) {
    if (env_value(request.env, name))
      return passthrough_plan(request, "depfile_env", std::string(name) + " with nvcc");
  }
  if (work_dir.find_first_of(" \t\n") != std::string::npos) {
    return passthrough_plan(request, "nvcc_work_dir", "work dir path holds a blank");
  }
  auto no = [&](std::string code, std::string why) {
    return passthrough_plan(request, code, "nvcc: " + why);
  };
  std::vector<std::string> run_env = environment_without_shim(request.env);

  std::vector<std::string> dry_argv = {request.argv[0], "--dryrun"};
  dry_argv.insert(dry_argv.end(), request.argv.begin() + 1, request.argv.end());
  Result<HelperOutput> dry =
      run_helper(dry_argv, run_env, request.cwd, std::chrono::seconds(30), request.program);
  if (!dry || dry->exit_code != 0) return no("nvcc_dryrun_failed", "--dryrun failed");
  Dryrun d = parse_dryrun(dry->err);
  if (!d.error.empty()) return no("nvcc_dryrun_not_understood", d.error);
  std::string dry_path = d.vars.count("PATH") ? d.vars["PATH"] : std::string(kDefaultSearchPath);

  auto detail = std::make_shared<PlanDetail>();
  detail->tools.emplace_back(tool.real_path, tool.stat);
  Hasher h;
  h.add_field("ccpool-nvcc-v1");
  hash_digest(h, tool.key);
  h.add_field(request.program);
  h.add_u64(request.argv.size());
  for (const std::string& a : request.argv) h.add_field(a);
  h.add_field(request.cwd);
  hash_env(h, request.env, kNvccEnv);
  for (const auto& [name, value] : d.vars) {
    h.add_field(name);
    h.add_field(without_temp_ids(value));
  }

  NvccDetail nv;
  nv.cwd = request.cwd;
  std::optional<ToolIdentity> host;
  for (const DryrunCommand& c : d.commands) {
    const std::string& prog = c.words[0];
    std::string path = prog.find('/') != std::string::npos
                           ? absolute_path(prog, request.cwd)
                           : search_path(prog, dry_path, request.cwd);
    if (path.empty()) return no("nvcc_dryrun_not_understood", "cannot find '" + prog + "'");
    Result<ToolIdentity> id = tool_identity(path);
    if (!id) return no("tool_unknown", id.error().message);
    h.add_field(path);
    hash_digest(h, id->key);
    detail->tools.emplace_back(id->real_path, id->stat);
    // Everything nvcc decided (-arch=native's answer, the host compiler
    // version it passes cudafe++, per-arch flags), its temp ids left out.
    h.add_u64(c.words.size());
    for (const std::string& w : c.words) h.add_field(without_temp_ids(w));
    if (!has_arg(c.words, "-E")) continue;
    host = *id;
    std::vector<std::string> step;
    for (size_t i = 0; i < c.words.size(); ++i) {
      if (c.words[i] == "-o" && i + 1 < c.words.size()) {
        ++i;
        continue;
      }
      step.push_back(c.words[i]);
    }
    step.insert(step.end(), {"-Wdate-time", "-Wsystem-headers", "-Wno-error"});
    nv.pp_steps.push_back(std::move(step));
    nv.pp_programs.push_back(path);
  }
  if (nv.pp_steps.empty() || !host)
    return no("nvcc_dryrun_not_understood", "no preprocessing step");
  if (family(*host, run_env) != Family::kGcc)
    return no("nvcc_host_compiler", "the host compiler is not gcc");

  std::vector<std::string> data_files = nvcc_data_files(tool, d.vars);
  data_files.push_back(absolute_path(args.source, request.cwd));
  for (const std::string& f : data_files) {
    Result<HashedFile> file = hasher.hash(f);
    if (!file) return no("source_unreadable", file.error().message);
    h.add_field(f);
    hash_digest(h, file->content);
    detail->inputs.push_back({f, file->content});
  }

  nv.pp_env = helper_env(request.env);
  for (const char* name : {"PATH", "LD_LIBRARY_PATH"}) {
    if (!d.vars.count(name)) continue;
    std::string prefix = std::string(name) + "=";
    std::erase_if(nv.pp_env, [&](const std::string& e) { return e.rfind(prefix, 0) == 0; });
    nv.pp_env.push_back(prefix + d.vars[name]);
  }
  nv.sde_pinned = env_value(request.env, "SOURCE_DATE_EPOCH").has_value();
  std::optional<std::string> tmpdir = env_value(request.env, "TMPDIR");
  nv.temp_dir = squeeze_slashes(tmpdir && !tmpdir->empty() ? *tmpdir : "/tmp");

  if (!find_dirs(*this, nv, *host, args.source, d.vars))
    return no("search_dirs_probe_failed", "host compiler -E -v");
  nv.deps_path = work_dir + "/nvcc-deps.d";

  Plan plan;
  plan.kind = PlanKind::kCompiler;
  plan.direct_mode = true;  // the result key comes from lookup()/finish()
  plan.key_mode = KeyMode::kPreprocessor;
  plan.flight_key = h.digest();
  plan.tool = "nvcc";
  plan.job_class = "nvcc";
  plan.run_program = request.program;
  plan.run_argv = request.argv;  // in place: nvcc writes the requester's own -o
  plan.run_cwd = request.cwd;
  plan.run_env = run_env;
  plan.run_env.push_back("SUNPRO_DEPENDENCIES=" + nv.deps_path);
  plan.uses_work_dir = true;
  std::string output = absolute_path(args.output, request.cwd);
  plan.outputs.push_back({"out", output, output, false});
  plan.inputs.push_back(absolute_path(args.source, request.cwd));
  detail->nvcc = std::move(nv);
  plan.detail = std::move(detail);
  return plan;
}

}  // namespace ccpool::compiler
