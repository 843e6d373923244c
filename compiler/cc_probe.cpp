#include "compiler/cc_probe.h"

#include <sys/stat.h>

#include "base/fs.h"
#include "base/process.h"
#include "compiler/probe_output.h"

namespace ccpool::compiler {
namespace {

// Environment that changes what the driver searches or links.
const std::vector<std::string> kProbeEnv = {
    "CPATH", "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH", "OBJC_INCLUDE_PATH", "LIBRARY_PATH",
    "COMPILER_PATH", "GCC_EXEC_PREFIX", "CCC_OVERRIDE_OPTIONS", "PATH", "LD_LIBRARY_PATH"};

Digest probe_key(const ProbeContext& ctx, std::string_view kind,
                 const std::vector<std::string>& argv) {
  Hasher h;
  h.add_field(kind);
  hash_digest(h, ctx.tool.key);
  h.add_field(ctx.request.program);
  h.add_field(ctx.request.cwd);
  h.add_u64(argv.size());
  for (const std::string& a : argv) h.add_field(a);
  hash_env(h, ctx.request.env, kProbeEnv);
  return h.digest();
}

void add_hashed(const std::string& path, const HashedFile& f, Hasher& h, std::vector<CheckedInput>& checked) {
  h.add_field(path);
  hash_digest(h, f.content);
  checked.push_back({path, f.content});
}

Result<void> add_file(const ProbeContext& ctx, const std::string& path, Hasher& h,
                      std::vector<CheckedInput>& checked) {
  CCPOOL_TRY_ASSIGN(HashedFile f, ctx.impl.hasher.hash(path));
  add_hashed(path, f, h, checked);
  return ok();
}

// add_file() when `path` is a regular file, with the one stat FileHasher
// makes anyway: nullopt when it is missing or not a regular file (skipped,
// as the linker skips it); an error when it exists but cannot be read.
Result<std::optional<HashedFile>> add_if_regular(const ProbeContext& ctx, const std::string& path, Hasher& h,
                                                 std::vector<CheckedInput>& checked) {
  Result<HashedFile> f = ctx.impl.hasher.hash(path);
  if (!f) {
    if (f.error().code == ErrorCode::kNotFound || f.error().code == ErrorCode::kUnsupported) {
      return std::optional<HashedFile>();
    }
    return tl::unexpected(f.error());
  }
  add_hashed(path, *f, h, checked);
  return std::optional<HashedFile>(std::move(*f));
}

// A GNU ld script (libc.so) names the real libraries; hash those too. The
// names a script lists are kept by the script's content (it was just hashed),
// so a library that is not a script is read once, not on every plan.
Result<void> follow_linker_script(const ProbeContext& ctx, const std::string& path, const HashedFile& file,
                                  Hasher& h, std::vector<CheckedInput>& checked) {
  if (file.stat.size > 64 * 1024) return ok();
  std::optional<std::vector<std::string>> targets = ctx.impl.linker_script_targets(file.content);
  if (!targets) {
    Result<std::string> text = read_file(path);
    if (!text) return tl::unexpected(text.error());
    std::vector<std::string> named;
    if (text->rfind("\x7f" "ELF", 0) != 0 && text->rfind("!<arch>", 0) != 0) {
      for (const std::string& word : split_command_line(*text)) {
        if (word.find('/') != 0) continue;
        named.push_back(word.substr(0, word.find_first_of("()")));
      }
    }
    // Filed under the bytes read, which may differ from file.content if the
    // file changed in between; then this plan uses what it read.
    ctx.impl.remember_linker_script(hash_bytes(*text), named);
    targets = std::move(named);
  }
  for (const std::string& p : *targets) CCPOOL_TRY(add_if_regular(ctx, p, h, checked));
  return ok();
}

std::string resolve_in_path(const std::string& name, const std::vector<std::string>& env) {
  if (name.find('/') != std::string::npos) return name;
  std::optional<std::string> path = env_value(env, "PATH");
  return search_path(name, path ? std::string_view(*path) : kDefaultSearchPath, ".");
}

}  // namespace

std::vector<std::string> helper_env(const std::vector<std::string>& env) {
  std::vector<std::string> out;
  for (const std::string& kv : environment_without_shim(env)) {
    if (kv.rfind("LC_", 0) == 0 || kv.rfind("LANG=", 0) == 0 || kv.rfind("LANGUAGE=", 0) == 0) continue;
    out.push_back(kv);
  }
  out.push_back("LC_ALL=C");
  return out;
}

namespace {

// The request's environment as a helper's, built only if a memo misses.
std::function<std::vector<std::string>()> helper_env_of(const ProbeContext& ctx) {
  return [&ctx] { return helper_env(ctx.request.env); };
}

}  // namespace

Result<SearchDirs> probe_search_dirs(const ProbeContext& ctx) {
  std::vector<std::string> argv = {ctx.request.argv[0]};
  argv.insert(argv.end(), ctx.args.include_args.begin(), ctx.args.include_args.end());
  for (const std::string& s : {std::string("-E"), std::string("-v"), std::string("-x"),
                               ctx.args.language, std::string("/dev/null"), std::string("-o"),
                               std::string("/dev/null")}) {
    argv.push_back(s);
  }
  Digest key = probe_key(ctx, "search-dirs", argv);
  CCPOOL_TRY_ASSIGN(HelperOutput out, ctx.impl.memo_helper(key, argv, helper_env_of(ctx),
                                                           ctx.request.cwd, ctx.request.program));
  if (out.exit_code != 0) {
    return make_error(ErrorCode::kUnsupported, "include search probe failed: " + out.err.substr(0, 200));
  }
  std::optional<SearchList> list = parse_search_list(out.err);
  if (!list) return make_error(ErrorCode::kUnsupported, "include search probe: no search list");
  SearchDirs dirs;
  dirs.quote = std::move(list->quote);
  dirs.bracket = std::move(list->missing);
  dirs.bracket.insert(dirs.bracket.end(), list->bracket.begin(), list->bracket.end());
  return dirs;
}

Result<std::string> probe_native(const ProbeContext& ctx) {
  std::vector<std::string> argv = {ctx.request.argv[0], "-###", "-E", "-"};
  argv.insert(argv.end(), ctx.args.native_args.begin(), ctx.args.native_args.end());
  Digest key = probe_key(ctx, "native", argv);
  CCPOOL_TRY_ASSIGN(HelperOutput out, ctx.impl.memo_helper(key, argv, helper_env_of(ctx),
                                                           ctx.request.cwd, ctx.request.program));
  if (out.exit_code != 0 || out.err.empty()) {
    return make_error(ErrorCode::kUnsupported, "-march=native probe failed");
  }
  return out.err;
}

Result<void> hash_link_inputs(const ProbeContext& ctx, Hasher& h, std::vector<CheckedInput>& checked,
                              std::vector<std::pair<std::string, FileStat>>& tools) {
  // The link line does not depend on the source's or the output's name, so the
  // memo key uses placeholders and every kernel with the same flags shares it.
  std::vector<std::string> argv = {ctx.request.argv[0]};
  std::vector<std::string> key_argv = argv;
  for (size_t i = 0; i < ctx.args.args.size(); ++i) {
    argv.push_back(ctx.args.args[i]);
    bool named = i == ctx.args.source_index || (!ctx.args.output.empty() && i == ctx.args.output_index);
    key_argv.push_back(named ? "<named>" : ctx.args.args[i]);
  }
  argv.push_back("-###");
  key_argv.push_back("-###");
  Digest key = probe_key(ctx, "link-line", key_argv);
  CCPOOL_TRY_ASSIGN(HelperOutput out, ctx.impl.memo_helper(key, argv, helper_env_of(ctx),
                                                           ctx.request.cwd, ctx.request.program));
  if (out.exit_code != 0) return make_error(ErrorCode::kUnsupported, "link probe (-###) failed");
  // The link command is the last command line printed.
  std::vector<std::string> words = last_command_words(out.err);
  if (words.empty() || words[0].empty() || words[0][0] != '/') {
    return make_error(ErrorCode::kUnsupported, "link probe: no link command");
  }
  std::vector<std::string> linkers = {words[0]};
  if (base_name(words[0]) == "collect2") {
    // collect2 runs the ld the driver names with -print-prog-name=ld.
    std::vector<std::string> pargv = {ctx.request.argv[0], "-print-prog-name=ld"};
    CCPOOL_TRY_ASSIGN(HelperOutput ld, ctx.impl.memo_helper(probe_key(ctx, "ld", pargv), pargv,
                                                            helper_env_of(ctx), ctx.request.cwd,
                                                            ctx.request.program));
    std::string name = ld.out.substr(0, ld.out.find('\n'));
    std::string resolved = resolve_in_path(name, ctx.request.env);
    if (resolved.empty()) return make_error(ErrorCode::kUnsupported, "cannot find the linker '" + name + "'");
    linkers.push_back(resolved);
  }
  for (const std::string& linker : linkers) {
    CCPOOL_TRY_ASSIGN(ToolIdentity id, ctx.impl.tool_identity(linker));
    h.add_field("linker");
    hash_digest(h, id.key);
    tools.emplace_back(id.real_path, id.stat);
  }
  std::vector<std::string> lib_dirs, libs;
  for (size_t i = 1; i < words.size(); ++i) {
    const std::string& w = words[i];
    if (w == "-o") { ++i; continue; }
    if (w.rfind("-L", 0) == 0 && w.size() > 2) lib_dirs.push_back(w.substr(2));
    else if (w.rfind("-l", 0) == 0 && w.size() > 2) libs.push_back(w.substr(2));
    else if (w == "-plugin" && i + 1 < words.size()) CCPOOL_TRY(add_file(ctx, words[++i], h, checked));
    else if (w[0] == '/') CCPOOL_TRY(add_if_regular(ctx, w, h, checked));
  }
  // ld's built-in directories come after every -L.
  for (const char* d : {"/usr/local/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu",
                        "/usr/lib/x86_64-linux-gnu", "/usr/local/lib64", "/lib64", "/usr/lib64",
                        "/usr/local/lib", "/lib", "/usr/lib"}) {
    lib_dirs.push_back(d);
  }
  for (const std::string& lib : libs) {
    h.add_field("-l" + lib);
    std::vector<std::string> names;
    if (lib[0] == ':') names = {lib.substr(1)};
    else names = {"lib" + lib + ".so", "lib" + lib + ".a"};
    bool found = false;
    for (const std::string& dir : lib_dirs) {
      for (const std::string& n : names) {
        std::string p = absolute_path(dir + "/" + n, ctx.request.cwd);
        CCPOOL_TRY_ASSIGN(std::optional<HashedFile> f, add_if_regular(ctx, p, h, checked));
        if (!f) continue;
        found = true;
        CCPOOL_TRY(follow_linker_script(ctx, p, *f, h, checked));
      }
      if (found) break;
    }
    h.add_u64(found ? 1 : 0);
  }
  return ok();
}

}  // namespace ccpool::compiler
