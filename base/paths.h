// Default locations. Precedence everywhere: explicit flag > environment > default.
#pragma once

#include <string>

namespace ccpool {

// --dir > CCPOOL_DIR > ${XDG_CACHE_HOME:-$HOME/.cache}/ccpool
std::string default_store_dir(const std::string& flag = "");

// --socket > CCPOOL_SOCKET > $XDG_RUNTIME_DIR/ccpool/sock >
// /run/user/$UID/ccpool/sock (when that directory is ours and 0700) >
// /tmp/ccpool-$UID/sock
std::string default_socket_path(const std::string& flag = "");

// The directory holding the socket also holds the lock, pid, log and slot
// files: the service's state directory.
std::string state_dir_for_socket(const std::string& socket_path);

}  // namespace ccpool
