// Rendering for `ccpool cache`: stable JSON objects (keys documented in
// docs/cli.md), human-readable text, and a stderr progress bar.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "cache/store.h"

namespace ccpool::cli {

nlohmann::json stats_json(const cache::StoreStats& s, const std::string& dir);
nlohmann::json summary_json(const cache::EntrySummary& s);
nlohmann::json entry_json(const Digest& key, const cache::Entry& e);
std::string kind_name(cache::EntryKind kind);
std::string format_time(int64_t epoch_ms);  // local "YYYY-MM-DD HH:MM:SS", "-" for 0

void print_stats(const cache::StoreStats& s, const std::string& dir);
void print_entry(const Digest& key, const cache::Entry& e);
// Prints JSON on stdout; invalid UTF-8 (binary stdout of a tool) is replaced, not fatal.
void print_json(const nlohmann::json& j);

// A progress bar on stderr, drawn only when stderr is a TTY.
class ProgressBar {
 public:
  explicit ProgressBar(std::string label);
  ~ProgressBar();
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;
  cache::ProgressFn fn();

 private:
  void draw(uint64_t done, uint64_t total);
  std::string m_label;
  bool m_tty;
  bool m_drawn = false;
  int m_last_permille = -1;
};

}  // namespace ccpool::cli
