#include "compiler/key_hash.h"

#include <optional>

#include "base/process_facts.h"

namespace ccpool::compiler {

void hash_tool_head(Hasher& h, std::string_view tag, const Digest& tool_key,
                    const std::string& program, const std::string& argv0) {
  h.add_field(tag);
  hash_digest(h, tool_key);
  h.add_field(program);
  h.add_field(argv0);
}

void hash_env(Hasher& h, const std::vector<std::string>& env,
              const std::vector<std::string>& names) {
  for (const std::string& name : names) {
    h.add_field(name);
    std::optional<std::string> value = env_value(env, name);
    h.add_u64(value ? 1 : 0);
    if (value) h.add_field(*value);
  }
}

}  // namespace ccpool::compiler
