// GNU ar (`q`/`r`, making or updating one archive) and ranlib, keyed like a
// C/C++ compile: a direct key from the command line, the cwd, the generic
// environment allowlist and the archive operand's state before the run
// (absent, or its content), then the record of everything the run read (its
// members, the LTO plugin bfd loads, the program and its libraries). The
// archive operand is redirected into the work dir; an existing archive is
// copied there first (Plan::seeds), so the run never rewrites the file its
// key holds. A stored archive is deterministic (ar_args.h). See
// docs/cache-keys.md, "Static archives".
#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "base/fs.h"
#include "base/process_facts.h"
#include "compiler/ar_args.h"
#include "compiler/key_hash.h"
#include "compiler/path_names.h"
#include "compiler/plan_helpers.h"
#include "compiler/planner_impl.h"

namespace ccpool::compiler {
namespace {

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// "ar" or "<triplet>-ar" (x86_64-linux-gnu-ar, /usr/bin/ar's target), not
// gcc-ar or llvm-ar: other programs with other options. The same for ranlib.
bool archiver_name(std::string_view name, std::string_view tool) {
  if (name == tool) return true;
  if (name.size() <= tool.size() + 1 || !ends_with(name, tool) ||
      name[name.size() - tool.size() - 1] != '-')
    return false;
  std::string_view prefix = name.substr(0, name.size() - tool.size() - 1);
  return !ends_with(prefix, "gcc") && !ends_with(prefix, "llvm");
}

// The archive operand's place in the key (argv strings never hold a NUL).
const std::string kArchiveMark("\0archive", 8);

}  // namespace

bool Planner::Impl::is_archiver_tool(std::string_view real_name) {
  return archiver_name(real_name, "ranlib") || archiver_name(real_name, "ar");
}

std::optional<Result<Plan>> Planner::Impl::plan_archiver(const Request& request,
                                                         const ToolIdentity& tool,
                                                         const std::string& work_dir) {
  std::string real = base_name(tool.real_path);
  bool ranlib = archiver_name(real, "ranlib");
  if (!ranlib && !archiver_name(real, "ar")) return std::nullopt;
  // GNU binutils' only: its modifiers and its D mode are what ar_args.h reads.
  Hasher banner_key;
  banner_key.add_field("archiver-banner-v1");
  hash_digest(banner_key, tool.key);
  Result<HelperOutput> banner =
      memo_helper(banner_key.digest(), {tool.real_path, "--version"}, {"LC_ALL=C"}, "/");
  std::string_view want = ranlib ? "GNU ranlib " : "GNU ar ";
  if (!banner || banner->exit_code != 0 || banner->out.compare(0, want.size(), want) != 0)
    return std::nullopt;

  ArArgs a = ranlib ? parse_ranlib_args(request.argv) : parse_ar_args(request.argv);
  if (!a.refused.empty()) return passthrough_plan(request, a.refused_code, a.refused);
  if (trace_library.empty()) {
    return passthrough_plan(
        request, "trace_unavailable",
        "libccpool-trace.so not found (set CCPOOL_TRACE_LIBRARY or install it beside ccpool)");
  }
  const std::string& operand = request.argv[a.archive_index];
  std::string archive = absolute_path(operand, request.cwd);
  struct stat st {};
  bool exists = ::lstat(archive.c_str(), &st) == 0;
  if (!exists && errno != ENOENT) {
    return passthrough_plan(request, "ar_archive_unreadable",
                            "archive '" + archive + "': " + std::strerror(errno));
  }
  if (exists && !S_ISREG(st.st_mode)) {
    return passthrough_plan(request, "ar_archive_not_regular",
                            "archive '" + archive + "' is not a regular file");
  }
  if (exists) {
    // A thin archive holds its members' paths relative to its own
    // directory: a copy in the work dir would name other files.
    Result<std::string> head = read_file_head(archive, 8);
    if (!head || *head != "!<arch>\n") {
      return passthrough_plan(
          request, "ar_archive_not_plain",
          "archive '" + archive + "' is not a plain ar archive (thin, or other)");
    }
  }
  for (size_t i = a.archive_index + 1; exists && i < request.argv.size(); ++i) {
    // The archive again among its members, by any spelling or a hard link.
    struct stat member {};
    std::string path = absolute_path(request.argv[i], request.cwd);
    if (::stat(path.c_str(), &member) == 0 && member.st_dev == st.st_dev &&
        member.st_ino == st.st_ino) {
      return passthrough_plan(
          request, "ar_archive_is_member",
          "archive '" + archive + "' is also the member '" + request.argv[i] + "'");
    }
  }
  if (!exists && ranlib)
    return passthrough_plan(request, "ranlib_no_archive", "ranlib of a missing archive");
  if (!exists && !a.create_quietly) {
    // ar tells stderr it creates the archive, by the name it writes to.
    return passthrough_plan(request, "ar_creates_without_c",
                            "ar creating '" + operand + "' without c names it on stderr");
  }

  auto detail = std::make_shared<PlanDetail>();
  detail->tools.emplace_back(tool.real_path, tool.stat);
  detail->archive_output = true;
  std::string run_archive = work_dir + "/out.a";
  detail->unkeyed_texts = {run_archive};

  Hasher h;
  hash_tool_head(h, "ccpool-ar-v1", tool.key, request.program, request.argv[0]);
  h.add_u64(request.argv.size());
  for (size_t i = 1; i < request.argv.size(); ++i)
    h.add_field(i == a.archive_index ? kArchiveMark : request.argv[i]);
  h.add_field(request.cwd);
  hash_env(h, request.env, generic_env_names());

  Plan plan;
  if (exists) {
    Result<HashedFile> old = hasher.hash(archive);
    if (!old)
      return passthrough_plan(request, "ar_archive_unreadable", "archive: " + old.error().message);
    h.add_field("existing");
    hash_digest(h, old->content);
    detail->inputs.push_back({archive, old->content});
    plan.seeds.push_back({archive, run_archive, old->content});
  } else {
    h.add_field("absent");
    detail->absent_paths.push_back(archive);
  }
  CcDetail cc;
  cc.cwd = request.cwd;
  cc.work_dir = work_dir;
  detail->cc = std::move(cc);

  plan.kind = PlanKind::kCompiler;
  plan.flight_key = h.digest();
  plan.direct_mode = true;
  plan.key_mode = KeyMode::kDirect;
  plan.tool = base_name(request.argv[0]);
  plan.job_class = plan.tool;
  plan.run_program = request.program;
  plan.run_argv = request.argv;
  plan.run_argv[a.archive_index] = run_archive;
  plan.run_cwd = request.cwd;
  plan.trace_path = work_dir + "/trace";
  plan.run_env = traced_environment(request, trace_library, plan.trace_path);
  plan.uses_work_dir = true;
  plan.outputs.push_back({"out", run_archive, archive, false});
  for (size_t i = a.archive_index + 1; i < request.argv.size(); ++i)
    plan.inputs.push_back(absolute_path(request.argv[i], request.cwd));
  plan.detail = std::move(detail);
  return plan;
}

}  // namespace ccpool::compiler
