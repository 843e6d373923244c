// libFuzzer target for the direct-mode manifest parser (compiler/manifest.cpp).
// Lengths come from the blob (the store's blob entries, and so from archives
// and Redis): a parsed manifest must serialize and parse back to itself, and
// parsing must never cost more than a small multiple of the input.
//
// Replay: the `fuzz.manifest_fuzz` CTest test. Long run: docs/fuzzing.md.
#include <cstddef>
#include <cstdint>
#include <string>

#include "compiler/manifest.h"

namespace {

void check(bool condition) {
  if (!condition) __builtin_trap();
}

bool same(const ccpool::compiler::Manifest& a, const ccpool::compiler::Manifest& b) {
  if (a.entries.size() != b.entries.size()) return false;
  for (size_t i = 0; i < a.entries.size(); ++i) {
    const auto& x = a.entries[i];
    const auto& y = b.entries[i];
    if (x.result_key != y.result_key || x.date_bucket != y.date_bucket || x.files != y.files ||
        x.negatives != y.negatives || x.absent != y.absent || x.dirs != y.dirs ||
        x.checks != y.checks) {
      return false;
    }
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ccpool::compiler;
  std::string text(reinterpret_cast<const char*>(data), size);
  auto parsed = parse_manifest(text);
  if (!parsed) return 0;
  size_t bytes = 0;
  for (const ManifestEntry& e : parsed->entries) {
    for (const auto& f : e.files) bytes += f.first.size();
    for (const auto& n : e.negatives) bytes += n.size();
    for (const auto& a : e.absent) bytes += a.size();
    for (const auto& d : e.dirs) bytes += d.first.size();
  }
  check(bytes <= size);
  auto again = parse_manifest(serialize_manifest(*parsed));
  check(again.has_value() && same(*parsed, *again));
  return 0;
}
