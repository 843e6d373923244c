// libFuzzer target for the record parser (compiler/trace_record.cpp). The
// record is written by the tools a compile runs (any process of the run can
// write any bytes to it): parsing must never crash, never read past the end,
// and every event must re-serialize to exactly the line it came from.
//
// Replay: the `fuzz.trace_record_fuzz` CTest test. Long run: docs/fuzzing.md.
#include <cstddef>
#include <cstdint>
#include <string>

#include "compiler/trace_record.h"

namespace {

void check(bool condition) {
  if (!condition) __builtin_trap();
}

std::string line_of(const ccpool::compiler::TraceEvent& e) {
  std::string out(1, e.op);
  out += " " + std::to_string(e.pid) + " " + std::to_string(e.a) + " " + std::to_string(e.b) + " " +
         std::to_string(e.text.size()) + ":" + e.text;
  if (e.has_text2) out += " " + std::to_string(e.text2.size()) + ":" + e.text2;
  return out + "\n";
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  auto events = ccpool::compiler::parse_trace(text, 10000);
  if (!events) return 0;
  std::string again;
  for (const auto& e : *events) again += line_of(e);
  // Numbers may be written with leading zeros or '+': compare by re-parsing.
  auto reparsed = ccpool::compiler::parse_trace(again, 10000);
  check(reparsed && reparsed->size() == events->size());
  for (size_t i = 0; i < events->size(); ++i) {
    check(line_of((*reparsed)[i]) == line_of((*events)[i]));
  }
  return 0;
}
