// Reads one Redis reply (RESP2) as its bytes arrive, refusing whatever is
// outside the caller's bounds *before* it is buffered: a Redis server (or a
// man in the middle) is outside the node's trust, and hiredis 0.14 buffers any
// reply whole, whatever it declares. Pure: no sockets, no redis* calls
// (remote/connection.cpp feeds it), fuzzed by fuzz/remote_reply_fuzz.cpp.
//
// Bounds, checked on each header as it completes:
//   $<len>   len <= max_bulk; the bytes are appended as they arrive
//   *<n>     n elements counted against max_elements for the whole reply,
//            nesting at most max_depth (0 elements allowed: no arrays at all)
//   + - :    a line of at most max_line bytes
//   total    at most max_total bytes fed for the reply, and none after it
// RESP3 types (the tier never sends HELLO 3), inline text and malformed
// numbers are protocol errors. Nothing is reserved from a declared length
// beyond max_elements reply slots.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "remote/reply.h"

namespace ccpool::remote {

struct ReplyLimits {
  uint64_t max_bulk = 4096;
  size_t max_elements = 0;
  size_t max_depth = 0;
  size_t max_line = 4096;
  uint64_t max_total = 16384;

  // Status, integer, nil or error replies only (SET, PTTL, AUTH, the lease scripts).
  static ReplyLimits small() { return ReplyLimits{}; }
  // One bulk of at most `bulk` bytes, inside an array of at most `elements`
  // elements when elements > 0 (GETRANGE, the lease poll script).
  static ReplyLimits value(uint64_t bulk, size_t elements);
};

class ReplyReader {
 public:
  explicit ReplyReader(const ReplyLimits& limits) : m_limits(limits) {}

  // Consumes `data`. true: the reply is complete (take() it). A violation is
  // kProtocol naming the bound; the reader then refuses everything.
  Result<bool> feed(std::string_view data);
  Reply take() { return std::move(m_root); }

 private:
  Result<void> on_line(std::string_view line);
  Reply& next_slot();
  void value_done();
  tl::unexpected<Error> fail(std::string what);  // poisons the reader

  struct Frame {
    Reply* array;
    size_t left;
  };

  const ReplyLimits m_limits;
  Reply m_root;
  std::vector<Frame> m_stack;  // open arrays, innermost last
  std::string m_line;          // the header or line being read, without CRLF
  Reply* m_bulk = nullptr;     // the string whose bytes are arriving
  uint64_t m_bulk_left = 0;    // bytes of m_bulk still to come, CRLF included
  uint64_t m_total = 0;
  size_t m_elements = 0;
  bool m_done = false;
  bool m_failed = false;
};

}  // namespace ccpool::remote
