// The -E output of nvcc's host-compiler steps (nvcc_manifest.cpp).
#pragma once

#include <set>
#include <string>

#include "compiler/subprocess.h"
#include "compiler/why_not.h"

namespace ccpool::compiler {

// File names of the line markers (`# 12 "path" flags`) of -E output,
// C-unescaped; names starting with '<' (<built-in>, <command-line>) left out.
std::set<std::string> marker_files(const std::string& text);

// Why one -E run's output does not determine the compile's result (empty when
// it does): a __TIME__/__DATE__/__TIMESTAMP__ expansion its -Wdate-time
// warning shows (with gcc and SOURCE_DATE_EPOCH, __DATE__/__TIME__ are
// pinned), a pragma that could silence that warning, or an assembler
// directive that reads a file (.incbin, .include). Shared by the C/C++ and
// nvcc preprocessor keys.
WhyNot unsafe_preprocessed(const HelperOutput& out, bool sde_pinned);

}  // namespace ccpool::compiler
