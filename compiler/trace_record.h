// The record libccpool-trace.so writes while a tool runs (trace/trace.c has
// the line layout): one event per lookup, exec, environment read or date
// conversion, from every process of the run. Pure parsing; what the events
// mean for a cache key is compiler/observed.h.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ccpool::compiler {

struct TraceEvent {
  char op = 0;  // S L O W T A R K D E X x P C G H ?
  int64_t pid = 0;
  int64_t a = 0, b = 0;  // errno/flags/mode/kind/child, per op (trace.c)
  std::string text;      // the path (or name, exe, function)
  std::string text2;     // readlink target, realpath result, environment value
  bool has_text2 = false;
};

// Every event of `text`, in file order; nullopt when a line is malformed or
// the record holds more than `max_events` events (a record the service
// cannot read whole must not be trusted).
std::optional<std::vector<TraceEvent>> parse_trace(std::string_view text,
                                                   size_t max_events = 2'000'000);

}  // namespace ccpool::compiler
