// A Redis reply as the tier sees it, independent of hiredis.
#pragma once

#include <string>
#include <vector>

namespace ccpool::remote {

struct Reply {
  enum class Type { kNil, kString, kInteger, kStatus, kError, kArray };
  Type type = Type::kNil;
  std::string str;              // kString, kStatus, kError
  long long integer = 0;        // kInteger
  std::vector<Reply> elements;  // kArray

  bool is_error() const { return type == Type::kError; }
};

}  // namespace ccpool::remote
