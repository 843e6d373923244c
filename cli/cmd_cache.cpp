// `ccpool cache ...`: inspect and maintain the store. Exit codes: 0 OK,
// 1 operational error (missing/corrupt store, corruption found, I/O),
// 2 usage error (malformed key, size or duration). JSON keys: docs/cli.md.
#include <sys/stat.h>

#include <cstdio>
#include <memory>

#include "base/paths.h"
#include "base/units.h"
#include "cache/store.h"
#include "cli/cache_format.h"
#include "cli/commands.h"
#include "service/delivery.h"

namespace ccpool::cli {
namespace {

using cache::Store;

struct CacheArgs {
  std::string dir;
  bool json = false;
  std::string sort = "used";
  size_t limit = 0;
  std::string key;
  std::vector<std::string> keys;
  std::string output_name, out_file, file;
  std::string max_size, older_than;
  bool fix = false;
};

int exit_code_for(const Error& e) {
  return e.code == ErrorCode::kInvalidArgument ? kExitUsage : kExitError;
}

std::unique_ptr<Store> open_store(const CacheArgs& a, bool create) {
  cache::StoreOptions options;
  options.dir = default_store_dir(a.dir);
  options.create_if_missing = create;
  options.faults = &process_faults();
  auto store = Store::open(options);
  if (!store) fail(kExitError, store.error().message);
  return std::move(*store);
}

template <typename T>
T check(Result<T> r) {
  if (!r) fail(exit_code_for(r.error()), r.error().message);
  return std::move(*r);
}
void check(Result<void> r) {
  if (!r) fail(exit_code_for(r.error()), r.error().message);
}

// A full key or a unique hex prefix; an ambiguous prefix lists the candidates.
Digest resolve_key(Store& store, const std::string& text) {
  auto matches = store.find_prefix(text, 8);
  if (!matches) fail(kExitUsage, matches.error().message);
  if (matches->empty()) {
    fail(kExitError, "no entry matches key '" + text + "' in '" + store.dir() +
                         "'; list keys with 'ccpool cache ls'");
  }
  if (matches->size() > 1) {
    std::string list;
    for (const Digest& d : *matches) list += "\n  " + d.hex();
    fail(kExitError,
         "key prefix '" + text + "' is ambiguous; give more digits. Candidates:" + list);
  }
  return (*matches)[0];
}

CLI::App* add_command(CLI::App* group, const std::shared_ptr<CacheArgs>& a, const std::string& name,
                      const std::string& help, bool json) {
  CLI::App* sub = group->add_subcommand(name, help);
  sub->add_option(
      "--dir", a->dir,
      "Store directory (default: $CCPOOL_DIR, else ${XDG_CACHE_HOME:-~/.cache}/ccpool)");
  if (json) sub->add_flag("--json", a->json, "Print JSON (stable keys, see docs/cli.md)");
  return sub;
}

// A store that does not exist yet is an empty one, as ccache reports it: its
// zeros and exit 0 (the service creates it on the first compile).
void cmd_stats(const CacheArgs& a) {
  cache::StoreOptions options;
  options.dir = default_store_dir(a.dir);
  options.create_if_missing = false;
  auto store = Store::open(options);
  if (!store && store.error().code == ErrorCode::kNotFound) {
    cache::StoreStats empty;
    empty.max_size = options.max_size;
    if (a.json) {
      nlohmann::json j = stats_json(empty, options.dir);
      j["exists"] = false;
      print_json(j);
    } else {
      print_stats(empty, options.dir);
      std::printf("(the store does not exist yet: the service creates it on its first compile)\n");
    }
    return;
  }
  if (!store) fail(kExitError, store.error().message);
  auto s = check((*store)->stats());
  if (a.json) {
    nlohmann::json j = stats_json(s, (*store)->dir());
    j["exists"] = true;
    print_json(j);
  } else {
    print_stats(s, (*store)->dir());
  }
}

void cmd_ls(const CacheArgs& a) {
  cache::SortBy sort = a.sort == "size"   ? cache::SortBy::kSize
                       : a.sort == "hits" ? cache::SortBy::kHits
                                          : cache::SortBy::kUsed;
  auto store = open_store(a, false);
  auto entries = check(store->list(sort, a.limit));
  if (a.json) {
    nlohmann::json arr = nlohmann::json::array();
    for (const auto& e : entries) arr.push_back(summary_json(e));
    print_json(arr);
    return;
  }
  for (const auto& e : entries) {
    std::printf("%s  %-7s %10s  %5llu hits  %s  %s%s%s\n", e.key.hex().c_str(),
                kind_name(e.kind).c_str(), format_size(e.logical_bytes).c_str(),
                static_cast<unsigned long long>(e.hits), format_time(e.last_used_ms).c_str(),
                e.tool.c_str(), e.label.empty() ? "" : "  ", e.label.c_str());
  }
}

void cmd_show(const CacheArgs& a) {
  auto store = open_store(a, false);
  Digest key = resolve_key(*store, a.key);
  auto e = check(store->peek(key, true));
  if (!e) fail(kExitError, "entry " + key.hex() + " was removed meanwhile");
  if (a.json)
    print_json(entry_json(key, *e));
  else
    print_entry(key, *e);
}

void cmd_cat(const CacheArgs& a) {
  auto store = open_store(a, false);
  Digest key = resolve_key(*store, a.key);
  auto e = check(store->peek(key, true));
  if (!e) fail(kExitError, "entry " + key.hex() + " was removed meanwhile");
  std::string names;
  for (const auto& o : e->outputs) {
    if (o.name != a.output_name) {
      names += (names.empty() ? "" : ", ") + o.name;
      continue;
    }
    if (!a.out_file.empty()) {
      // As a compile would create it: 0666/0777 under the umask, never the
      // setuid/setgid/sticky bits a crafted entry might carry.
      mode_t mask = ::umask(0);
      ::umask(mask);
      check(write_file_atomic(a.out_file, o.data, service::delivered_mode(o.mode, mask)));
    } else {
      std::fwrite(o.data.data(), 1, o.data.size(), stdout);
      std::fflush(stdout);
    }
    return;
  }
  fail(kExitError, "entry " + key.hex() + " has no output named '" + a.output_name +
                       "'; it has: " + (names.empty() ? "(none)" : names));
}

void cmd_rm(const CacheArgs& a) {
  auto store = open_store(a, false);
  nlohmann::json removed = nlohmann::json::array();
  for (const auto& text : a.keys) {
    Digest key = resolve_key(*store, text);
    if (check(store->remove(key))) removed.push_back(key.hex());
  }
  if (a.json)
    print_json({{"removed", removed}});
  else
    std::printf("removed %zu entries\n", removed.size());
}

void cmd_clear(const CacheArgs& a) {
  auto store = open_store(a, false);
  uint64_t n = check(store->clear());
  if (a.json)
    print_json({{"removed", n}});
  else
    std::printf("removed %llu entries from %s\n", static_cast<unsigned long long>(n),
                store->dir().c_str());
}

void cmd_gc(const CacheArgs& a) {
  cache::GcOptions options;
  if (!a.max_size.empty()) options.max_size = check(parse_size(a.max_size));
  if (!a.older_than.empty()) options.older_than_ms = check(parse_duration(a.older_than)).count();
  auto store = open_store(a, false);
  cache::GcResult r;
  {
    ProgressBar bar("gc");
    r = check(store->gc(options, bar.fn()));
  }
  if (a.json) {
    print_json({{"removed_entries", r.removed_entries},
                {"expired", r.expired},
                {"freed_bytes", r.freed_bytes}});
  } else {
    std::printf("removed %llu entries (%llu expired), freed %s\n",
                static_cast<unsigned long long>(r.removed_entries),
                static_cast<unsigned long long>(r.expired), format_size(r.freed_bytes).c_str());
  }
}

void cmd_verify(const CacheArgs& a) {
  auto store = open_store(a, false);
  cache::VerifyResult r;
  {
    ProgressBar bar("verify");
    r = check(store->verify(a.fix, bar.fn()));
  }
  if (a.json) {
    nlohmann::json corrupt = nlohmann::json::array();
    for (const auto& c : r.corrupt)
      corrupt.push_back({{"key", c.key.hex()}, {"problem", c.problem}});
    print_json({{"checked_entries", r.checked_entries},
                {"checked_bodies", r.checked_bodies},
                {"corrupt", corrupt},
                {"removed", r.removed}});
  } else {
    for (const auto& c : r.corrupt)
      std::printf("corrupt %s: %s\n", c.key.hex().c_str(), c.problem.c_str());
    std::printf("checked %llu entries, %llu corrupt, %llu removed\n",
                static_cast<unsigned long long>(r.checked_entries),
                static_cast<unsigned long long>(r.corrupt.size()),
                static_cast<unsigned long long>(r.removed));
  }
  if (!r.corrupt.empty() && !a.fix) {
    fail(kExitError, std::to_string(r.corrupt.size()) + " corrupt entries in '" + store->dir() +
                         "'; run 'ccpool cache verify --fix' to remove them");
  }
}

void cmd_archive(const CacheArgs& a, bool do_export) {
  auto store = open_store(a, !do_export);
  cache::ArchiveResult r;
  {
    ProgressBar bar(do_export ? "export" : "import");
    auto done =
        do_export ? store->export_to(a.file, bar.fn()) : store->import_from(a.file, bar.fn());
    if (!done) fail(kExitError, done.error().message);  // a bad archive is an operational error
    r = *done;
  }
  if (a.json) {
    print_json(
        {{"path", a.file}, {"entries", r.entries}, {"skipped", r.skipped}, {"bytes", r.bytes}});
  } else {
    std::printf("%s %llu entries (%s), skipped %llu\n", do_export ? "exported" : "imported",
                static_cast<unsigned long long>(r.entries), format_size(r.bytes).c_str(),
                static_cast<unsigned long long>(r.skipped));
  }
}

}  // namespace

void register_cache_commands(CLI::App& app) {
  CLI::App* group = app.add_subcommand("cache", "Inspect and maintain the node-local store");
  group->require_subcommand(1);
  auto a = std::make_shared<CacheArgs>();

  add_command(group, a, "stats",
              "Show entries, sizes, compression, hits, misses, time saved and map use", true)
      ->callback([a] { cmd_stats(*a); });
  CLI::App* ls = add_command(group, a, "ls", "List the entries, one line each", true);
  ls->add_option("--sort", a->sort, "Sort by: used, size or hits")
      ->check(CLI::IsMember({"used", "size", "hits"}));
  ls->add_option("--limit", a->limit, "Show at most N entries");
  ls->callback([a] { cmd_ls(*a); });
  CLI::App* show = add_command(group, a, "show", "Show every field of one entry", true);
  show->add_option("KEY", a->key, "Key or unique hex prefix")->required();
  show->callback([a] { cmd_show(*a); });
  CLI::App* cat = add_command(
      group, a, "cat", "Write one output of an entry, byte-exact, to stdout or a file", false);
  cat->add_option("KEY", a->key, "Key or unique hex prefix")->required();
  cat->add_option("OUTPUT", a->output_name, "Output name")->required();
  cat->add_option("-o,--output", a->out_file, "Write to FILE instead of stdout");
  cat->callback([a] { cmd_cat(*a); });
  CLI::App* rm = add_command(group, a, "rm", "Remove entries", true);
  rm->add_option("KEY", a->keys, "Keys or unique hex prefixes")->required();
  rm->callback([a] { cmd_rm(*a); });
  add_command(group, a, "clear", "Remove every entry", true)->callback([a] { cmd_clear(*a); });
  CLI::App* gc =
      add_command(group, a, "gc", "Evict down to a size bound, by age, and expired entries", true);
  gc->add_option("--max-size", a->max_size,
                 "Evict least-recently-used entries down to SIZE (e.g. 5G)");
  gc->add_option("--older-than", a->older_than, "Evict entries unused for DURATION (e.g. 7d, 12h)");
  gc->callback([a] { cmd_gc(*a); });
  CLI::App* verify = add_command(group, a, "verify", "Decompress and checksum every entry", true);
  verify->add_flag("--fix", a->fix, "Remove corrupt entries");
  verify->callback([a] { cmd_verify(*a); });
  CLI::App* exp = add_command(group, a, "export", "Write a portable, checksummed archive", true);
  exp->add_option("FILE", a->file, "Archive path")->required();
  exp->callback([a] { cmd_archive(*a, true); });
  CLI::App* imp = add_command(group, a, "import",
                              "Add the entries of an archive (present keys are skipped)", true);
  imp->add_option("FILE", a->file, "Archive path")->required();
  imp->callback([a] { cmd_archive(*a, false); });
}

}  // namespace ccpool::cli
