#include "base/error.h"

#include <cstring>

namespace ccpool {

const char* error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument:
      return "invalid-argument";
    case ErrorCode::kNotFound:
      return "not-found";
    case ErrorCode::kCorruption:
      return "corruption";
    case ErrorCode::kIo:
      return "io";
    case ErrorCode::kUnsupported:
      return "unsupported";
    case ErrorCode::kFull:
      return "full";
    case ErrorCode::kTimeout:
      return "timeout";
    case ErrorCode::kUnreachable:
      return "unreachable";
    case ErrorCode::kProtocol:
      return "protocol";
    case ErrorCode::kPermission:
      return "permission";
    case ErrorCode::kStopping:
      return "stopping";
    case ErrorCode::kCancelled:
      return "cancelled";
    case ErrorCode::kInternal:
      return "internal";
  }
  return "unknown";
}

std::string errno_text(int err) {
  return std::strerror(err);
}

}  // namespace ccpool
