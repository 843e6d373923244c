#include "cli/logging.h"

#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/rotating_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "base/fs.h"
#include "base/process_facts.h"
#include "service/activation.h"

namespace ccpool::cli {
namespace {

// One line per record on stderr, "<N>message": journald's stream protocol
// reads the priority from the prefix (SyslogLevelPrefix=yes, the default) and
// stamps the time itself.
class JournalStreamSink : public spdlog::sinks::base_sink<std::mutex> {
 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    spdlog::memory_buf_t formatted;
    formatter_->format(msg, formatted);
    char prefix[8];
    int n = std::snprintf(prefix, sizeof prefix, "<%d>", journal_priority(msg.level));
    std::string line(prefix, static_cast<size_t>(n));
    line.append(formatted.data(), formatted.size());
    [[maybe_unused]] auto r = write_all(STDERR_FILENO, line);
  }
  void flush_() override {}
};

}  // namespace

int journal_priority(int level) {
  switch (level) {
    case spdlog::level::critical:
      return 2;
    case spdlog::level::err:
      return 3;
    case spdlog::level::warn:
      return 4;
    case spdlog::level::info:
      return 6;
    default:
      return 7;
  }
}

void setup_serve_logging(const std::string& state_dir, bool foreground) {
  std::vector<spdlog::sink_ptr> sinks;
  // The log names commands, paths and clients: owner-only, whatever the umask
  // and the state directory's mode, including the files rotation creates.
  spdlog::file_event_handlers handlers;
  handlers.after_open = [](const spdlog::filename_t&, std::FILE* file) {
    ::fchmod(::fileno(file), 0600);
  };
  sinks.push_back(std::make_shared<spdlog::sinks::rotating_file_sink_mt>(
      state_dir + "/ccpool.log", 10u << 20, 3, false, handlers));
  if (service::stderr_is_journal()) {
    auto journal = std::make_shared<JournalStreamSink>();
    journal->set_pattern("%v");
    sinks.push_back(journal);
  } else if (foreground) {
    sinks.push_back(std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
  }
  auto logger = std::make_shared<spdlog::logger>("ccpool", sinks.begin(), sinks.end());
  std::string level = own_env("CCPOOL_LOG").value_or("");
  logger->set_level(spdlog::level::from_str(level.empty() ? "info" : level));
  logger->flush_on(spdlog::level::info);
  spdlog::set_default_logger(logger);
}

}  // namespace ccpool::cli
