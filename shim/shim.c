/* libccpool-shim.so: LD_PRELOAD interposer that sends compiler executions to
 * ccpool-client (the Bear pattern) and caps Inductor's compile-worker sidecar.
 *
 * Contract of every hook (they run after vfork and after fork in threaded
 * parents): no malloc, no stdio, no locks, no getenv, no dlsym. Only syscalls
 * and pure code over stack buffers and the statics the constructor filled,
 * which are never written afterwards. errno is restored before any real call,
 * so the caller sees exactly the errno the real function gives.
 *
 * Redirect: exec `<client> <resolved program> <argv[0]> <argv[1]> ...` with the
 * caller's envp unchanged; the client strips the shim from the environment it
 * gives the real compiler. We redirect only when the resolved program is an
 * executable regular file; in every other case, and when exec'ing the client
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

#include "shim/match.h"

#define EXPORT __attribute__((visibility("default")))
/* Redirected argv must fit in a stack array; longer ones pass through. */
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

static int g_enabled;          /* 0 when CCPOOL_DISABLE is set or the client is unknown */
static char g_client[PATH_MAX];
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
  char digits[24];
  int n = 0;
  for (long v = value; v > 0; v /= 10) digits[n++] = (char)('0' + v % 10);
  memcpy(g_workers_arg, "--workers=", 10);
  for (int i = 0; i < n; ++i) g_workers_arg[10 + i] = digits[n - 1 - i];
  g_workers_arg[10 + n] = '\0';
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
  read_workers();
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
  return ccpool_compiler_matches(&g_compilers, base) && strcmp(base, "ccpool-client") != 0;
}

/* PATH as the real p-variant sees it: glibc reads the caller's environ (not
 * envp) and falls back to "/bin:/usr/bin". */
static const char* path_from_environ(void) {
  for (char** e = environ; e && *e; ++e)
    if (strncmp(*e, "PATH=", 5) == 0) return *e + 5;
  return "/bin:/usr/bin";
}

/* PATH search with execvp's semantics for the success case: the first entry
 * holding an executable regular file wins (empty entry = cwd). Entries that
 * would fail with ENOENT/ENOTDIR/EACCES are skipped exactly as glibc skips
 * them; when nothing is found the caller runs the real function, which
 * produces the real errno. Returns 1 and fills `out` on success. */
static int resolve_in_path(const char* file, char out[PATH_MAX]) {
  size_t flen = strlen(file);
  if (flen == 0 || flen >= NAME_MAX + 1) return 0;
  const char* p = path_from_environ();
  for (;;) {
    const char* end = strchrnul(p, ':');
    size_t dlen = (size_t)(end - p);
    if (dlen + 1 + flen + 1 <= PATH_MAX) {
      size_t n = 0;
      if (dlen) {
        memcpy(out, p, dlen);
        n = dlen;
        out[n++] = '/';
      }
      memcpy(out + n, file, flen + 1);
      if (is_executable_file(out)) return 1;
    }
    if (!*end) return 0;
    p = end + 1;
  }
}

/* Builds `client resolved argv...` into `out`; 0 when argv is too long. */
static int build_client_argv(const char* resolved, char* const argv[], char** out) {
  out[0] = g_client;
  out[1] = (char*)resolved;
  int n = 2;
  for (int i = 0; argv && argv[i]; ++i) {
    if (n + 1 >= MAX_REDIRECT_ARGS) return 0;
    out[n++] = argv[i];
  }
  if (n == 2) out[n++] = (char*)resolved; /* empty argv: give the client an argv[0] */
  out[n] = 0;
  return 1;
}

/* argv with the sidecar's --workers capped to g_workers, or argv itself. The
 * cap only lowers: a sidecar asked for fewer workers keeps its number. */
static char* const* sidecar_argv(char* const argv[], char** buf) {
  if (!g_enabled || g_workers <= 0 || !argv) return argv;
  int idx = ccpool_sidecar_workers_index(argv, MAX_REDIRECT_ARGS - 1);
  if (idx < 0) return argv;
  long asked = ccpool_parse_workers(argv[idx]);
  if (asked > 0 && asked <= g_workers) return argv;
  int n = 0;
  for (; argv[n]; ++n) {
    if (n + 1 >= MAX_REDIRECT_ARGS) return argv;
    buf[n] = n == idx ? g_workers_arg : argv[n];
  }
  buf[n] = 0;
  return buf;
}

/* Tries the client via execve; returns only when that failed. */
__attribute__((noinline)) static void redirect_execve(const char* resolved, char* const argv[],
                                                      char* const envp[]) {
  char* args[MAX_REDIRECT_ARGS];
  if (build_client_argv(resolved, argv, args)) g_real_execve(g_client, args, envp);
}

__attribute__((noinline)) static int redirect_spawn(int* ok, pid_t* pid, const char* resolved,
                                                    const posix_spawn_file_actions_t* fa,
                                                    const posix_spawnattr_t* attr,
                                                    char* const argv[], char* const envp[]) {
  char* args[MAX_REDIRECT_ARGS];
  *ok = 0;
  if (!build_client_argv(resolved, argv, args)) return 0;
  int rc = g_real_posix_spawn(pid, g_client, fa, attr, args, envp);
  *ok = rc == 0;
  return rc;
}

/* ---- exec family ---- */

static int exec_common(const char* path, char* const argv[], char* const envp[]) {
  int saved = errno;
  if (wants_redirect(path) && is_executable_file(path)) redirect_execve(path, argv, envp);
  char* buf[MAX_REDIRECT_ARGS];
  char* const* args = sidecar_argv(argv, buf);
  errno = saved;
  return g_real_execve(path, args, envp);
}

static int execp_common(const char* file, char* const argv[], char* const envp[]) {
  if (strchr(file, '/')) return exec_common(file, argv, envp);
  int saved = errno;
  if (wants_redirect(file)) {
    char resolved[PATH_MAX];
    if (resolve_in_path(file, resolved)) redirect_execve(resolved, argv, envp);
  }
  char* buf[MAX_REDIRECT_ARGS];
  char* const* args = sidecar_argv(argv, buf);
  errno = saved;
  return g_real_execvpe(file, args, envp);
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
  if (flags == 0 && (dirfd == AT_FDCWD || path[0] == '/'))
    return exec_common(path, argv, envp);
  return g_real_execveat(dirfd, path, argv, envp, flags);
}

/* The execl variants collect their arguments into a stack array as glibc
 * does (unbounded, like glibc's VLA), then behave as execv/execve/execvp. */
#define COLLECT_VARARGS(first, ap_start, argv_name, extra)           \
  size_t argc_ = 1;                                                  \
  va_list count_;                                                    \
  va_copy(count_, ap_start);                                         \
  while (va_arg(count_, char*)) ++argc_;                             \
  va_end(count_);                                                    \
  char* argv_name[argc_ + 1];                                        \
  argv_name[0] = (char*)(first);                                     \
  for (size_t i_ = 1; i_ <= argc_; ++i_) argv_name[i_] = va_arg(ap_start, char*); \
  extra

EXPORT int execl(const char* path, const char* arg, ...) {
  va_list ap;
  va_start(ap, arg);
  COLLECT_VARARGS(arg, ap, argv, va_end(ap););
  return exec_common(path, argv, environ);
}

EXPORT int execlp(const char* file, const char* arg, ...) {
  va_list ap;
  va_start(ap, arg);
  COLLECT_VARARGS(arg, ap, argv, va_end(ap););
  return execp_common(file, argv, environ);
}

EXPORT int execle(const char* path, const char* arg, ...) {
  va_list ap;
  va_start(ap, arg);
  COLLECT_VARARGS(arg, ap, argv, char* const* envp = va_arg(ap, char* const*); va_end(ap););
  return exec_common(path, argv, envp);
}

/* ---- posix_spawn family (glibc's spawn calls the internal __execve) ---- */

EXPORT int posix_spawn(pid_t* pid, const char* path, const posix_spawn_file_actions_t* fa,
                       const posix_spawnattr_t* attr, char* const argv[], char* const envp[]) {
  int saved = errno;
  if (wants_redirect(path) && is_executable_file(path)) {
    int ok;
    int rc = redirect_spawn(&ok, pid, path, fa, attr, argv, envp);
    if (ok) {
      errno = saved;
      return rc;
    }
  }
  char* buf[MAX_REDIRECT_ARGS];
  char* const* args = sidecar_argv(argv, buf);
  errno = saved;
  return g_real_posix_spawn(pid, path, fa, attr, args, envp);
}

EXPORT int posix_spawnp(pid_t* pid, const char* file, const posix_spawn_file_actions_t* fa,
                        const posix_spawnattr_t* attr, char* const argv[], char* const envp[]) {
  if (strchr(file, '/')) return posix_spawn(pid, file, fa, attr, argv, envp);
  int saved = errno;
  if (wants_redirect(file)) {
    char resolved[PATH_MAX];
    if (resolve_in_path(file, resolved)) {
      int ok;
      int rc = redirect_spawn(&ok, pid, resolved, fa, attr, argv, envp);
      if (ok) {
        errno = saved;
        return rc;
      }
    }
  }
  char* buf[MAX_REDIRECT_ARGS];
  char* const* args = sidecar_argv(argv, buf);
  errno = saved;
  return g_real_posix_spawnp(pid, file, fa, attr, args, envp);
}
