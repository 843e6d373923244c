// The one error convention below the CLI: functions that can fail return
// Result<T> (tl::expected<T, Error>). Error carries a category the caller can
// branch on and a message for humans that names the path or value and the fix.
#pragma once

#include <string>
#include <tl/expected.hpp>
#include <utility>

namespace ccpool {

enum class ErrorCode {
  kInvalidArgument,  // bad input from the user: a malformed key, size, archive
  kNotFound,         // the thing asked for does not exist
  kCorruption,       // stored or received bytes fail a checksum or a parse
  kIo,               // the OS refused: permission, full disk, missing dir
  kUnsupported,      // a newer format, a network filesystem, an unknown option
  kFull,             // a bound was reached: map at its cap, value too large
  kTimeout,          // a deadline passed
  kUnreachable,      // no peer listens (service or remote tier)
  kProtocol,         // the peer spoke nonsense
  kPermission,       // the peer or path belongs to someone else
  kStopping,         // the service is shutting down
  kCancelled,        // the work was abandoned
  kInternal,         // a bug: should not happen
};

const char* error_code_name(ErrorCode code);

// strerror(err) as a string, for messages.
std::string errno_text(int err);

struct Error {
  ErrorCode code;
  std::string message;

  Error(ErrorCode c, std::string m) : code(c), message(std::move(m)) {}
};

template <typename T>
using Result = tl::expected<T, Error>;

// Result<void> success value.
inline Result<void> ok() {
  return {};
}

inline tl::unexpected<Error> make_error(ErrorCode code, std::string message) {
  return tl::unexpected<Error>(Error(code, std::move(message)));
}

}  // namespace ccpool

// Propagates the error of an expression returning Result<T>.
//   CCPOOL_TRY(write_all(fd, data));
#define CCPOOL_TRY(expr)                                                             \
  do {                                                                               \
    auto ccpool_try_result_ = (expr);                                                \
    if (!ccpool_try_result_) {                                                       \
      return tl::unexpected<::ccpool::Error>(std::move(ccpool_try_result_).error()); \
    }                                                                                \
  } while (false)

// Assigns the value of a Result<T> expression or propagates its error.
//   CCPOOL_TRY_ASSIGN(auto data, read_file(path));
#define CCPOOL_TRY_CONCAT_(a, b) a##b
#define CCPOOL_TRY_CONCAT(a, b) CCPOOL_TRY_CONCAT_(a, b)
#define CCPOOL_TRY_ASSIGN(lhs, expr) \
  CCPOOL_TRY_ASSIGN_IMPL_(CCPOOL_TRY_CONCAT(ccpool_try_tmp_, __LINE__), lhs, expr)
#define CCPOOL_TRY_ASSIGN_IMPL_(tmp, lhs, expr)                             \
  auto tmp = (expr);                                                        \
  if (!tmp) return tl::unexpected<::ccpool::Error>(std::move(tmp).error()); \
  lhs = std::move(*tmp)
