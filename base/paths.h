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

// The service's state directory (lock, pid, log, fallbacks.log, slot files,
// resp.sock, work/): one per socket. A socket named `sock` (the default name,
// in a directory made for it) uses its own directory; any other name S gets
// `S.d` beside it, so two services with sockets in one directory never share
// a lock, a log or a work directory.
inline constexpr const char* kDefaultSocketName = "sock";
std::string state_dir_for_socket(const std::string& socket_path);

}  // namespace ccpool
