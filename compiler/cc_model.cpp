#include "compiler/planner_impl.h"

namespace ccpool::compiler {

Result<Plan> Planner::Impl::plan_cc(const Request& request, const ToolIdentity& tool, Family family,
                                    const std::string& work_dir) {
  return passthrough_plan(request, "C/C++ model not yet enabled");
}

Result<std::optional<Digest>> Planner::Impl::lookup_cc(const Plan& plan,
                                                       const ManifestStorage& manifests) {
  return std::optional<Digest>();
}

Result<Finished> Planner::Impl::finish_cc(const Plan& plan, std::chrono::system_clock::time_point started,
                                          const ManifestStorage& manifests) {
  return Finished{};
}

std::string Planner::deliver_bytes(const Plan& requester, const OutputSpec& output,
                                   std::string_view stored) const {
  return std::string(stored);
}

}  // namespace ccpool::compiler
