#include "compiler/bounded.h"

namespace ccpool::compiler {
namespace {

struct State {
  int depth = 0;
  bool declined = false;
};

thread_local State t_state;

}  // namespace

BoundedScope::BoundedScope() {
  if (t_state.depth++ == 0) t_state.declined = false;
}

BoundedScope::~BoundedScope() {
  --t_state.depth;
}

bool BoundedScope::declined() const {
  return t_state.declined;
}

namespace bounded {

bool active() {
  return t_state.depth > 0;
}

bool declined() {
  return t_state.depth > 0 && t_state.declined;
}

bool decline() {
  if (t_state.depth == 0) return false;
  t_state.declined = true;
  return true;
}

}  // namespace bounded
}  // namespace ccpool::compiler
