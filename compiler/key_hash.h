// Pieces the models' keys share (key_hash.cpp): a digest and environment
// variables added to a Hasher, and the environment names generic jobs and
// ptxas key.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/hash.h"

namespace ccpool::compiler {

inline void hash_digest(Hasher& h, const Digest& d) {
  h.update(std::string_view(reinterpret_cast<const char*>(d.bytes.data()), d.bytes.size()));
}

// The head of a tool's key (ptxas, ar/ranlib): the model's tag, the tool's
// identity, the program path as given and argv[0] as given.
void hash_tool_head(Hasher& h, std::string_view tag, const Digest& tool_key,
                    const std::string& program, const std::string& argv0);

// Adds NAME=value (or NAME unset) for each name, in the given order.
void hash_env(Hasher& h, const std::vector<std::string>& env,
              const std::vector<std::string>& names);

// Environment names keyed for generic jobs and ptxas (generic_model.cpp).
const std::vector<std::string>& generic_env_names();

}  // namespace ccpool::compiler
