// Planner::replay_blocker: whether a run's captured output may be replayed to
// requesters whose keys left out something the output names.
#include "compiler/planner_impl.h"

namespace ccpool::compiler {

std::string Planner::replay_blocker(const Plan& plan, std::string_view out,
                                    std::string_view err) const {
  if (!plan.detail) return "";
  for (const std::string& text : plan.detail->unkeyed_texts) {
    if (text.empty()) continue;
    if (out.find(text) != std::string_view::npos || err.find(text) != std::string_view::npos) {
      return "its output names '" + text + "', which the key leaves out";
    }
  }
  return "";
}

}  // namespace ccpool::compiler
