// Deterministic keys and entries shared by cache_store_worker and the tests
// that check its work.
#pragma once

#include <cstring>
#include <random>
#include <string>

#include "cache/store.h"

namespace ccpool::cache {

inline Digest worker_key(int id, int i) {
  return hash_bytes("w" + std::to_string(id) + "-" + std::to_string(i));
}

inline Entry worker_entry(int id, int i, size_t size) {
  Entry e;
  e.tool = "worker";
  std::mt19937_64 rng(static_cast<uint64_t>(id) * 1000003u + static_cast<uint64_t>(i));
  std::string data(size, '\0');
  for (size_t k = 0; k < size; k += 8) {
    uint64_t v = rng() & 0x0f0f0f0f0f0f0f0full;  // half-compressible
    std::memcpy(data.data() + k, &v, std::min<size_t>(8, size - k));
  }
  e.outputs.push_back({"out.o", 0644, 0, {}, std::move(data)});
  e.stdout_data = "w" + std::to_string(id);
  return e;
}

}  // namespace ccpool::cache
