// What a scan of source text finds (defined in cc_model.cpp): the scan flags
// and the text tests the C/C++ model and the -E output checks share. The
// bottom of compiler/: includes nothing of its own.
#pragma once

#include <cstdint>
#include <string_view>

namespace ccpool::compiler {

// What a scan of a source or header found (bit flags).
enum ScanFlag : uint8_t {
  kScanDate = 1,        // __DATE__
  kScanTime = 2,        // __TIME__
  kScanTimestamp = 4,   // __TIMESTAMP__
  kScanHasInclude = 8,  // __has_include / __has_include_next
  kScanIncbin = 16,     // .incbin: the assembler reads a file the .d does not list
  kScanPastePiece =
      32,  // an identifier that token pasting could grow into __TIME__/__DATE__/__TIMESTAMP__
  kScanAsmInclude = 64,  // .include: the assembler reads a file the .d does not list
};

// True when `text` holds an identifier that is a proper prefix of __TIME__,
// __DATE__ or __TIMESTAMP__ ("__TI", "__"; not a lone "_", which is too common),
// outside comments and literals and not itself the right operand of `##`:
// the leftmost piece of a paste that makes one of them, which no text search
// for the whole name finds.
bool has_time_macro_piece(std::string_view text);

// True when `text` holds the assembler directive `directive` (".incbin",
// ".include"), matched without regard to case and followed by anything but an
// identifier character: wherever it sits (a .S file, inline asm, a comment),
// so a miss is the worst it can cause. `included()` does not match.
bool has_asm_directive(std::string_view text, std::string_view directive);

struct ScanInfo {
  uint8_t flags = 0;  // ScanFlag bits
};

}  // namespace ccpool::compiler
