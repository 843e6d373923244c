/* libccpool-shim.so: LD_PRELOAD interposer that sends compiler executions to
 * ccpool-client (the Bear pattern) and caps Inductor's compile-worker sidecar.
 *
 * Contract of every hook (they run after vfork and after fork in threaded
 * parents): no malloc, no stdio, no locks, no getenv, no dlsym. Only syscalls
 * and pure code over stack buffers and the statics the constructor filled,
 * which are never written afterwards. errno is restored before any real call,
 * so the caller sees exactly the errno the real function gives.
 *
 * Redirect: exec `<client> [--inherited-socket=PATH] <resolved program>
 * <argv[0]> <argv[1]> ...` with the caller's envp unchanged; the client strips
 * the shim from the environment it gives the real compiler. PATH is the socket
 * this process saw when it started, so a caller that cleans the envp of the
 * exec still reaches its own service.
 *
 * Stack: a hook uses O(argc) pointers (VLAs sized by the argv it got, at most
 * MAX_REDIRECT_ARGS) plus one PATH_MAX buffer for the p-variants, so it works
 * on small thread stacks (64 KiB) as glibc's own exec functions do. We redirect only when the
 * resolved program is an executable regular file; in every other case, and when exec'ing the client
 * fails, the real function is called with the original arguments. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "preload/signal_safe.h"
#include "shim/match.h"

#define EXPORT __attribute__((visibility("default")))
/* Longer argv pass through unredirected and unrewritten. */
#define MAX_REDIRECT_ARGS 4096

extern char** environ;

typedef int (*execve_fn)(const char*, char* const[], char* const[]);
typedef int (*execvpe_fn)(const char*, char* const[], char* const[]);
typedef int (*execveat_fn)(int, const char*, char* const[], char* const[], int);
typedef int (*spawn_fn)(pid_t*, const char*, const posix_spawn_file_actions_t*,
                        const posix_spawnattr_t*, char* const[], char* const[]);

static execve_fn g_real_execve;
static execvpe_fn g_real_execvpe;
static execveat_fn g_real_execveat;
static spawn_fn g_real_posix_spawn;
static spawn_fn g_real_posix_spawnp;

static int g_enabled; /* 0 when CCPOOL_DISABLE is set or the client is unknown */
static char g_client[PATH_MAX];
/* "--inherited-socket=<CCPOOL_SOCKET or $XDG_RUNTIME_DIR/ccpool/sock>" or "" */
static char g_socket_arg[PATH_MAX + 32];
static struct ccpool_compiler_list g_compilers;
static long g_workers;         /* CCPOOL_WORKERS; 0: no sidecar rewrite */
static char g_workers_arg[32]; /* "--workers=<g_workers>" */

static void copy_str(char* dst, size_t cap, const char* src) {
  size_t i = 0;
  for (; src[i] && i + 1 < cap; ++i) dst[i] = src[i];
  dst[i] = '\0';
}

static void default_client_path(void) {
  Dl_info info;
  char so_path[PATH_MAX];
  if (!dladdr((void*)&default_client_path, &info) || !info.dli_fname) return;
  if (!realpath(info.dli_fname, so_path)) copy_str(so_path, sizeof so_path, info.dli_fname);
  char* slash = strrchr(so_path, '/');
  if (!slash) return;
  *slash = '\0';
  static const char kTail[] = "/../bin/ccpool-client";
  if (strlen(so_path) + sizeof kTail > sizeof g_client) return;
  memcpy(g_client, so_path, strlen(so_path));
  memcpy(g_client + strlen(so_path), kTail, sizeof kTail);
}

static int is_executable_file(const char* path);

/* ccpool-client-fast, when it lies beside ccpool-client: the same arguments
 * and a start without libc (client/fast_client.c); it hands anything but a
 * completed reply to ccpool-client. */
static void prefer_fast_client(void) {
  static const char kFast[] = "ccpool-client-fast";
  const char* base = ccpool_basename(g_client);
  if (strcmp(base, "ccpool-client") != 0) return;
  size_t dir = (size_t)(base - g_client);
  char fast[PATH_MAX];
  if (dir + sizeof kFast > sizeof fast) return;
  memcpy(fast, g_client, dir);
  memcpy(fast + dir, kFast, sizeof kFast);
  if (is_executable_file(fast)) copy_str(g_client, sizeof g_client, fast);
}

/* read_workers() and capture_socket() run in the constructor only (getenv is
 * not async-signal-safe); the hooks read what they stored. */
static void read_workers(void) {
  const char* w = getenv("CCPOOL_WORKERS");
  long value = 0;
  if (!w || !*w) return;
  for (; *w; ++w) {
    if (*w < '0' || *w > '9' || value > 1000000) return;
    value = value * 10 + (*w - '0');
  }
  if (value <= 0) return;
  g_workers = value;
  memcpy(g_workers_arg, "--workers=", 10);
  g_workers_arg[10 + ccpool_decimal(g_workers_arg + 10, (unsigned long long)value)] = '\0';
}

/* The socket the client should use when the exec's envp no longer says. */
static void capture_socket(void) {
  static const char kPrefix[] = "--inherited-socket=";
  static const char kTail[] = "/ccpool/sock";
  const char* socket = getenv("CCPOOL_SOCKET");
  const char* runtime = getenv("XDG_RUNTIME_DIR");
  size_t p = sizeof kPrefix - 1;
  if (socket && *socket) {
    size_t n = strlen(socket);
    if (n >= PATH_MAX) return;
    memcpy(g_socket_arg, kPrefix, p);
    memcpy(g_socket_arg + p, socket, n + 1);
  } else if (runtime && *runtime) {
    size_t n = strlen(runtime);
    if (n + sizeof kTail > PATH_MAX) return;
    memcpy(g_socket_arg, kPrefix, p);
    memcpy(g_socket_arg + p, runtime, n);
    memcpy(g_socket_arg + p + n, kTail, sizeof kTail);
  }
}

__attribute__((constructor)) static void ccpool_shim_init(void) {
  g_real_execve = (execve_fn)dlsym(RTLD_NEXT, "execve");
  g_real_execvpe = (execvpe_fn)dlsym(RTLD_NEXT, "execvpe");
  g_real_execveat = (execveat_fn)dlsym(RTLD_NEXT, "execveat");
  g_real_posix_spawn = (spawn_fn)dlsym(RTLD_NEXT, "posix_spawn");
  g_real_posix_spawnp = (spawn_fn)dlsym(RTLD_NEXT, "posix_spawnp");
  const char* disable = getenv("CCPOOL_DISABLE");
  if (disable && *disable && strcmp(disable, "0") != 0) return;
  const char* client = getenv("CCPOOL_CLIENT");
  if (client && *client)
    copy_str(g_client, sizeof g_client, client);
  else
    default_client_path();
  const char* list = getenv("CCPOOL_COMPILERS");
  ccpool_compiler_list_init(&g_compilers, list && *list ? list : NULL);
  prefer_fast_client();
  read_workers();
  capture_socket();
  g_enabled = g_client[0] != '\0';
}

/* ---- helpers for the hook path: async-signal-safe only ---- */

static int is_executable_file(const char* path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

static int wants_redirect(const char* file) {
  if (!g_enabled) return 0;
  const char* base = ccpool_basename(file);
  return ccpool_compiler_matches(&g_compilers, base) && strcmp(base, "ccpool-client") != 0 &&
         strcmp(base, "ccpool-client-fast") != 0;
}

/* PATH search with execvp's semantics for the success case: the first entry
 * holding an executable regular file wins (empty entry = cwd). Entries that
 * would fail with ENOENT/ENOTDIR/EACCES are skipped exactly as glibc skips
 * them; when nothing is found the caller runs the real function, which
 * produces the real errno. Returns 1 and fills `out` on success. */
static int resolve_in_path(const char* file, char out[PATH_MAX]) {
  size_t flen = strlen(file);
  if (flen == 0 || flen >= NAME_MAX + 1) return 0;
  struct ccpool_path_walk w = ccpool_path_walk_start(ccpool_search_path(environ), file);
  while (ccpool_path_next(&w, out))
    if (is_executable_file(out)) return 1;
  return 0;
}

/* argc of argv, or -1 when it has MAX_REDIRECT_ARGS entries or more. */
static int count_args(char* const argv[]) {
  int n = 0;
  for (; argv && argv[n]; ++n)
    if (n + 5 >= MAX_REDIRECT_ARGS) return -1;
  return n;
}

/* Fills `out` (argc + 5 entries) with `client [socket] resolved argv... NULL`;
 * an empty argv gets `resolved` as its argv[0]. */
static void build_client_argv(const char* resolved, char* const argv[], int argc, char** out) {
  int n = 0;
  out[n++] = g_client;
  if (g_socket_arg[0]) out[n++] = g_socket_arg;
  out[n++] = (char*)resolved;
  for (int i = 0; i < argc; ++i) out[n++] = argv[i];
  if (argc == 0) out[n++] = (char*)resolved;
  out[n] = 0;
}

/* Index of the sidecar's --workers argument to cap, or -1 to leave argv as it is. */
static int sidecar_rewrite_index(char* const argv[]) {
  if (!g_enabled || g_workers <= 0 || !argv || count_args(argv) < 0) return -1;
  int idx = ccpool_sidecar_workers_index(argv, MAX_REDIRECT_ARGS - 1);
  if (idx < 0) return -1;
  long asked = ccpool_parse_workers(argv[idx]);
  return asked > 0 && asked <= g_workers ? -1 : idx;
}

/* Copies argv into `buf` (argc + 1 entries) with argv[idx] replaced by the cap. */
static char* const* capped_argv(char* const argv[], int idx, char** buf) {
  int n = 0;
  for (; argv[n]; ++n) buf[n] = n == idx ? g_workers_arg : argv[n];
  buf[n] = 0;
  return buf;
}

/* The real calls, with the sidecar's --workers capped. The copy is a VLA of
 * argc + 1 pointers, made only when a rewrite is needed. `real` is
 * g_real_execve or g_real_execvpe (the same signature). */
__attribute__((noinline)) static int real_exec_capped(execve_fn real, const char* path,
                                                      char* const argv[], char* const envp[],
                                                      int saved) {
  int idx = sidecar_rewrite_index(argv);
  if (idx < 0) {
    errno = saved;
    return real(path, argv, envp);
  }
  char* buf[count_args(argv) + 1];
  char* const* args = capped_argv(argv, idx, buf);
  errno = saved;
  return real(path, args, envp);
}

__attribute__((noinline)) static int real_spawn_capped(spawn_fn real, pid_t* pid, const char* path,
                                                       const posix_spawn_file_actions_t* fa,
                                                       const posix_spawnattr_t* attr,
                                                       char* const argv[], char* const envp[],
                                                       int saved) {
  int idx = sidecar_rewrite_index(argv);
  if (idx < 0) {
    errno = saved;
    return real(pid, path, fa, attr, argv, envp);
  }
  char* buf[count_args(argv) + 1];
  char* const* args = capped_argv(argv, idx, buf);
  errno = saved;
  return real(pid, path, fa, attr, args, envp);
}

/* Tries the client via execve; returns only when that failed. */
__attribute__((noinline)) static void redirect_execve(const char* resolved, char* const argv[],
                                                      char* const envp[]) {
  int argc = count_args(argv);
  if (argc < 0) return;
  char* args[argc + 5];
  build_client_argv(resolved, argv, argc, args);
  g_real_execve(g_client, args, envp);
}

__attribute__((noinline)) static int redirect_spawn(int* ok, pid_t* pid, const char* resolved,
                                                    const posix_spawn_file_actions_t* fa,
                                                    const posix_spawnattr_t* attr,
                                                    char* const argv[], char* const envp[]) {
  *ok = 0;
  int argc = count_args(argv);
  if (argc < 0) return 0;
  char* args[argc + 5];
  build_client_argv(resolved, argv, argc, args);
  int rc = g_real_posix_spawn(pid, g_client, fa, attr, args, envp);
  *ok = rc == 0;
  return rc;
}

/* ---- exec family ---- */

/* A NULL path is the caller's bug: fail as the kernel does for execve
 * instead of crashing in our string code (ccpool_present: a test the
 * compiler keeps although glibc declares these functions nonnull). */
static int is_null(const void* p) {
  return !ccpool_present(p);
}

static int efault(void) {
  errno = EFAULT;
  return -1;
}

static int exec_common(const char* path, char* const argv[], char* const envp[]) {
  if (is_null(path)) return efault();
  int saved = errno;
  if (wants_redirect(path) && is_executable_file(path)) redirect_execve(path, argv, envp);
  return real_exec_capped(g_real_execve, path, argv, envp, saved);
}

/* The PATH search and its PATH_MAX buffer live here, out of the common path. */
__attribute__((noinline)) static void redirect_execvp(const char* file, char* const argv[],
                                                      char* const envp[]) {
  char resolved[PATH_MAX];
  if (resolve_in_path(file, resolved)) redirect_execve(resolved, argv, envp);
}

static int execp_common(const char* file, char* const argv[], char* const envp[]) {
  if (is_null(file)) return efault();
  if (strchr(file, '/')) return exec_common(file, argv, envp);
  int saved = errno;
  if (wants_redirect(file)) redirect_execvp(file, argv, envp);
  return real_exec_capped(g_real_execvpe, file, argv, envp, saved);
}

EXPORT int execve(const char* path, char* const argv[], char* const envp[]) {
  return exec_common(path, argv, envp);
}

EXPORT int execv(const char* path, char* const argv[]) {
  return exec_common(path, argv, environ);
}

EXPORT int execvpe(const char* file, char* const argv[], char* const envp[]) {
  return execp_common(file, argv, envp);
}

EXPORT int execvp(const char* file, char* const argv[]) {
  return execp_common(file, argv, environ);
}

/* execveat is redirected only in its execve-equivalent form (AT_FDCWD or an
 * absolute path, no flags); fd-relative and AT_EMPTY_PATH forms pass through. */
EXPORT int execveat(int dirfd, const char* path, char* const argv[], char* const envp[],
                    int flags) {
  if (is_null(path)) return efault();
  if (flags == 0 && (dirfd == AT_FDCWD || path[0] == '/')) return exec_common(path, argv, envp);
  return g_real_execveat(dirfd, path, argv, envp, flags);
}

/* The execl variants collect their arguments as glibc does
 * (CCPOOL_COLLECT_VARARGS), then behave as execv/execve/execvp. */
EXPORT int execl(const char* path, const char* arg, ...) {
  va_list ap;
  va_start(ap, arg);
  CCPOOL_COLLECT_VARARGS(arg, ap, argv, va_end(ap););
  return exec_common(path, argv, environ);
}

EXPORT int execlp(const char* file, const char* arg, ...) {
  va_list ap;
  va_start(ap, arg);
  CCPOOL_COLLECT_VARARGS(arg, ap, argv, va_end(ap););
  return execp_common(file, argv, environ);
}

EXPORT int execle(const char* path, const char* arg, ...) {
  va_list ap;
  va_start(ap, arg);
  CCPOOL_COLLECT_VARARGS(arg, ap, argv, char* const* envp = va_arg(ap, char* const*); va_end(ap););
  return exec_common(path, argv, envp);
}

/* ---- posix_spawn family (glibc's spawn calls the internal __execve) ---- */

EXPORT int posix_spawn(pid_t* pid, const char* path, const posix_spawn_file_actions_t* fa,
                       const posix_spawnattr_t* attr, char* const argv[], char* const envp[]) {
  if (is_null(path)) return EFAULT; /* the spawn family returns the error number */
  int saved = errno;
  if (wants_redirect(path) && is_executable_file(path)) {
    int ok;
    int rc = redirect_spawn(&ok, pid, path, fa, attr, argv, envp);
    if (ok) {
      errno = saved;
      return rc;
    }
  }
  return real_spawn_capped(g_real_posix_spawn, pid, path, fa, attr, argv, envp, saved);
}

__attribute__((noinline)) static int redirect_spawnp(int* ok, pid_t* pid, const char* file,
                                                     const posix_spawn_file_actions_t* fa,
                                                     const posix_spawnattr_t* attr,
                                                     char* const argv[], char* const envp[]) {
  char resolved[PATH_MAX];
  *ok = 0;
  if (!resolve_in_path(file, resolved)) return 0;
  return redirect_spawn(ok, pid, resolved, fa, attr, argv, envp);
}

EXPORT int posix_spawnp(pid_t* pid, const char* file, const posix_spawn_file_actions_t* fa,
                        const posix_spawnattr_t* attr, char* const argv[], char* const envp[]) {
  if (is_null(file)) return EFAULT;
  if (strchr(file, '/')) return posix_spawn(pid, file, fa, attr, argv, envp);
  int saved = errno;
  if (wants_redirect(file)) {
    int ok;
    int rc = redirect_spawnp(&ok, pid, file, fa, attr, argv, envp);
    if (ok) {
      errno = saved;
      return rc;
    }
  }
  return real_spawn_capped(g_real_posix_spawnp, pid, file, fa, attr, argv, envp, saved);
}
