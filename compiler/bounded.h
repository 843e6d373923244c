// Planning and looking up on a thread that must not wait (the service's I/O
// thread, which serves a hit there when it has nothing else to do). While a
// BoundedScope lives on the calling thread, the planner declines instead of
// doing what can take long or block: running a helper process (a compiler's
// version or search-path probe), reading a file larger than kBoundedReadBytes
// (a tool or a source it has not hashed yet), planning a tool other than a
// C/C++ compiler or a declared job, or validating a manifest entry the
// validation memo does not vouch for whole (ValidationMemo::note_served).
// declined() then says so, and the caller hands the request to a thread that
// may wait, which does that work without the scope (a plan made before a
// decline at the lookup is a whole plan, and can go along).
#pragma once

#include <cstdint>

namespace ccpool::compiler {

inline constexpr uint64_t kBoundedReadBytes = 4 << 20;

class BoundedScope {
 public:
  BoundedScope();
  ~BoundedScope();
  BoundedScope(const BoundedScope&) = delete;
  BoundedScope& operator=(const BoundedScope&) = delete;

  bool declined() const;
};

namespace bounded {
// Whether a BoundedScope lives on this thread.
bool active();
// Records that the work in progress was declined; returns true when a scope
// is active (then the caller stops), false otherwise (it goes on).
bool decline();
// Whether this thread's scope declined already.
bool declined();
}  // namespace bounded

}  // namespace ccpool::compiler
