// Preprocessor-mode fallback of the C/C++ model (cc_preprocessed.cpp).
#pragma once

#include "compiler/cc_args.h"
#include "compiler/planner_impl.h"

namespace ccpool::compiler {

// Fills cc.pp_argv/pp_env/pp_marker when `a` may use preprocessor mode
// (-c or -S, no -w); needs cc.family and cc.dirs set.
void set_up_preprocessor_mode(CcDetail& cc, const CcArgs& a, const Request& request, const ToolIdentity& tool);

}  // namespace ccpool::compiler
