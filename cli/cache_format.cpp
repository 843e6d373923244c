#include "cli/cache_format.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <map>

#include "base/units.h"

namespace ccpool::cli {

using nlohmann::json;

std::string kind_name(cache::EntryKind kind) {
  return kind == cache::EntryKind::kBlob ? "blob" : "compile";
}

std::string format_time(int64_t epoch_ms) {
  if (epoch_ms <= 0) return "-";
  time_t t = static_cast<time_t>(epoch_ms / 1000);
  struct tm tm;
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

// The store's event counters "<kind>:<code>" as {code: n} for one kind.
static std::map<std::string, uint64_t> reasons(const cache::StoreStats& s,
                                               const std::string& kind) {
  std::map<std::string, uint64_t> out;
  std::string prefix = kind + ":";
  for (const auto& [name, n] : s.events) {
    if (name.compare(0, prefix.size(), prefix) == 0) out[name.substr(prefix.size())] += n;
  }
  return out;
}

static void print_reasons(const cache::StoreStats& s, const std::string& kind, const char* label) {
  std::map<std::string, uint64_t> by_code = reasons(s, kind);
  uint64_t total = 0;
  for (const auto& [code, n] : by_code) total += n;
  std::printf("%-15s %llu\n", label, static_cast<unsigned long long>(total));
  for (const auto& [code, n] : by_code) {
    std::printf("  %-40s %llu\n", code.c_str(), static_cast<unsigned long long>(n));
  }
}

json stats_json(const cache::StoreStats& s, const std::string& dir) {
  double ratio = s.stored_bytes
                     ? static_cast<double>(s.logical_bytes) / static_cast<double>(s.stored_bytes)
                     : 0.0;
  return json{{"dir", dir},
              {"passthrough_reasons", reasons(s, "passthrough")},
              {"not_stored_reasons", reasons(s, "not_stored")},
              {"schema_version", s.schema_version},
              {"entries", s.entries},
              {"bodies", s.bodies},
              {"logical_bytes", s.logical_bytes},
              {"stored_bytes", s.stored_bytes},
              {"compression_ratio", ratio},
              {"hits", s.hits},
              {"misses", s.misses},
              {"time_saved_ms", s.time_saved_ms},
              {"evictions", s.evictions},
              {"corrupt_evictions", s.corrupt_evictions},
              {"oldest_ms", s.oldest_ms},
              {"newest_ms", s.newest_ms},
              {"map_size", s.map_size},
              {"map_used", s.map_used},
              {"max_size", s.max_size}};
}

json summary_json(const cache::EntrySummary& s) {
  return json{{"key", s.key.hex()},
              {"kind", kind_name(s.kind)},
              {"tool", s.tool},
              {"label", s.label},
              {"outputs", s.output_count},
              {"logical_bytes", s.logical_bytes},
              {"hits", s.hits},
              {"time_saved_ms", s.time_saved_ms},
              {"created_ms", s.created_ms},
              {"last_used_ms", s.last_used_ms},
              {"expires_ms", s.expires_ms}};
}

json entry_json(const Digest& key, const cache::Entry& e) {
  json outputs = json::array();
  for (const auto& o : e.outputs) {
    outputs.push_back(
        {{"name", o.name}, {"mode", o.mode}, {"size", o.size}, {"checksum", o.checksum.hex()}});
  }
  return json{{"key", key.hex()},
              {"kind", kind_name(e.kind)},
              {"created_ms", e.created_ms},
              {"last_used_ms", e.last_used_ms},
              {"expires_ms", e.expires_ms},
              {"hits", e.hits},
              {"time_saved_ms", e.time_saved_ms},
              {"exit_code", e.exit_code},
              {"tool", e.tool},
              {"cwd", e.cwd},
              {"argv", e.argv},
              {"inputs", e.inputs},
              {"label", e.label},
              {"outputs", outputs},
              {"stdout", e.stdout_data},
              {"stderr", e.stderr_data}};
}

void print_json(const json& j) {
  std::string text = j.dump(2, ' ', false, json::error_handler_t::replace);
  std::printf("%s\n", text.c_str());
}

void print_stats(const cache::StoreStats& s, const std::string& dir) {
  double ratio = s.stored_bytes
                     ? static_cast<double>(s.logical_bytes) / static_cast<double>(s.stored_bytes)
                     : 0.0;
  std::printf("store           %s\n", dir.c_str());
  std::printf("entries         %llu (%llu unique bodies)\n",
              static_cast<unsigned long long>(s.entries),
              static_cast<unsigned long long>(s.bodies));
  std::printf("logical size    %s\n", format_size(s.logical_bytes).c_str());
  std::printf("stored size     %s (compression %.2fx)\n", format_size(s.stored_bytes).c_str(),
              ratio);
  std::printf("hits / misses   %llu / %llu\n", static_cast<unsigned long long>(s.hits),
              static_cast<unsigned long long>(s.misses));
  std::printf("time saved      %s\n",
              format_duration(std::chrono::milliseconds(s.time_saved_ms)).c_str());
  std::printf("evictions       %llu (%llu corrupt)\n", static_cast<unsigned long long>(s.evictions),
              static_cast<unsigned long long>(s.corrupt_evictions));
  std::printf("oldest entry    %s\n", format_time(s.oldest_ms).c_str());
  std::printf("newest entry    %s\n", format_time(s.newest_ms).c_str());
  std::printf("map             %s used of %s\n", format_size(s.map_used).c_str(),
              format_size(s.map_size).c_str());
  std::printf("max size        %s\n", format_size(s.max_size).c_str());
  print_reasons(s, "passthrough", "pass-through");
  print_reasons(s, "not_stored", "not stored");
}

void print_entry(const Digest& key, const cache::Entry& e) {
  auto join = [](const std::vector<std::string>& v) {
    std::string out;
    for (const auto& s : v) out += (out.empty() ? "" : " ") + s;
    return out;
  };
  std::printf("key          %s\nkind         %s\n", key.hex().c_str(), kind_name(e.kind).c_str());
  if (!e.label.empty()) std::printf("label        %s\n", e.label.c_str());
  std::printf("created      %s\nlast used    %s\n", format_time(e.created_ms).c_str(),
              format_time(e.last_used_ms).c_str());
  if (e.expires_ms) std::printf("expires      %s\n", format_time(e.expires_ms).c_str());
  std::printf("hits         %llu\ntime saved   %s per hit\nexit code    %d\n",
              static_cast<unsigned long long>(e.hits),
              format_duration(std::chrono::milliseconds(e.time_saved_ms)).c_str(), e.exit_code);
  std::printf("tool         %s\ncwd          %s\nargv         %s\ninputs       %s\n",
              e.tool.c_str(), e.cwd.c_str(), join(e.argv).c_str(), join(e.inputs).c_str());
  std::printf("outputs      %zu\n", e.outputs.size());
  for (const auto& o : e.outputs) {
    std::printf("  %-24s %04o %10s  %s\n", o.name.c_str(), o.mode, format_size(o.size).c_str(),
                o.checksum.hex().c_str());
  }
  std::printf("stdout       %s\nstderr       %s\n", format_size(e.stdout_data.size()).c_str(),
              format_size(e.stderr_data.size()).c_str());
}

ProgressBar::ProgressBar(std::string label)
    : m_label(std::move(label)), m_tty(::isatty(STDERR_FILENO) == 1) {}

ProgressBar::~ProgressBar() {
  if (m_drawn) std::fprintf(stderr, "\n");
}

cache::ProgressFn ProgressBar::fn() {
  if (!m_tty) return {};
  return [this](uint64_t done, uint64_t total) { draw(done, total); };
}

void ProgressBar::draw(uint64_t done, uint64_t total) {
  constexpr int kWidth = 30;
  if (total == 0) {
    std::fprintf(stderr, "\r%s %llu", m_label.c_str(), static_cast<unsigned long long>(done));
  } else {
    int permille = static_cast<int>(done * 1000 / total);
    if (permille == m_last_permille) return;
    m_last_permille = permille;
    int filled = permille * kWidth / 1000;
    std::fprintf(stderr, "\r%s [%s%s] %3d%% %llu/%llu", m_label.c_str(),
                 std::string(filled, '#').c_str(), std::string(kWidth - filled, ' ').c_str(),
                 permille / 10, static_cast<unsigned long long>(done),
                 static_cast<unsigned long long>(total));
  }
  m_drawn = true;
  std::fflush(stderr);
}

}  // namespace ccpool::cli
