/* libccpool-trace.so: the recording interposer the service preloads into
 * every tool it caches (and, through the inherited environment, into every
 * process the tool starts: driver, cc1/cc1plus, as, collect2, ld, clang).
 * It appends one line per lookup to the record file named by CCPOOL_TRACE:
 * each path opened, stat'ed, accessed, read as a link, resolved or listed
 * (found or not, with errno), each environment variable read, each exec and
 * spawn, each call that turns the clock into a date (localtime & co), each
 * chdir. The service hashes what was found when it concludes the run
 * (compiler/trace_record.h); this file only observes.
 *
 * Contract of every hook (they run after vfork and after fork in threaded
 * parents): no malloc, no stdio, no locks, no getenv on the hook path. Only
 * syscalls and pure code over stack buffers and the statics the constructor
 * filled. errno is what the real call left. A hook called before the
 * constructor (another library's constructor) runs the constructor first:
 * that only happens before main, never after vfork.
 *
 * Record line (one write(2) each, O_APPEND, so lines of concurrent processes
 * never interleave):  <op> <pid> <a> <b> <len>:<text>[ <len>:<text2>]\n
 *   S pid ppid 0 exe          a process image started (exe = /proc/self/exe)
 *   L pid 0 0 lib             a shared object loaded (at start, or by dlopen)
 *   O pid errno flags path    open/openat/fopen/freopen/creat for reading
 *   W pid errno flags path    the same, for writing (O_WRONLY/O_RDWR/O_CREAT/O_TRUNC)
 *   T pid errno kind path     stat family; kind = 16*nofollow + (st_mode >> 12)
 *   A pid errno mode path     access/faccessat/eaccess
 *   R pid errno 0 path target readlink/readlinkat
 *   K pid errno 0 path result realpath/canonicalize_file_name
 *   D pid errno 0 path        opendir/scandir
 *   E pid set 0 name value    getenv/secure_getenv (set: 1, unset: 0)
 *   X pid 0 0 path            about to exec path (execve & co, each PATH candidate)
 *   x pid errno 0 path        that exec failed
 *   P pid child rc path       posix_spawn returned (child 0 when rc != 0)
 *   C pid 0 0 fn              localtime, localtime_r, ctime, ctime_r, gmtime, gmtime_r
 *   G pid errno 0 cwd         getcwd
 *   H pid 0 0 path            chdir/fchdir (path "" for fchdir)
 *   ? pid errno 0 what        a lookup whose path could not be formed (fd-relative)
 * Temp files made by mkstemp & co (glibc opens them with its internal open)
 * and the targets of rename, link and symlink are recorded as W lines: the
 * run made them, they are not inputs.
 * Relative paths are as the process passed them (the process's cwd is the
 * job's: a chdir is recorded, and the service then refuses the run); a path
 * relative to a directory fd is made absolute through /proc/self/fd/N. */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "preload/signal_safe.h"

#define EXPORT __attribute__((visibility("default")))
#define REC_MAX (2 * PATH_MAX + 128)

extern char** environ;

static int g_fd = -1;
static volatile int g_inited;

#define REAL(name) real_##name
#define DECLARE(ret, name, ...)          \
  typedef ret (*name##_fn)(__VA_ARGS__); \
  static name##_fn real_##name

DECLARE(int, open, const char*, int, ...);
DECLARE(int, open64, const char*, int, ...);
DECLARE(int, openat, int, const char*, int, ...);
DECLARE(int, openat64, int, const char*, int, ...);
DECLARE(int, __open_2, const char*, int);
DECLARE(int, __open64_2, const char*, int);
DECLARE(int, __openat_2, int, const char*, int);
DECLARE(int, __openat64_2, int, const char*, int);
DECLARE(int, creat, const char*, mode_t);
DECLARE(int, creat64, const char*, mode_t);
DECLARE(FILE*, fopen, const char*, const char*);
DECLARE(FILE*, fopen64, const char*, const char*);
DECLARE(FILE*, freopen, const char*, const char*, FILE*);
DECLARE(FILE*, freopen64, const char*, const char*, FILE*);
DECLARE(int, stat, const char*, struct stat*);
DECLARE(int, stat64, const char*, struct stat64*);
DECLARE(int, lstat, const char*, struct stat*);
DECLARE(int, lstat64, const char*, struct stat64*);
DECLARE(int, fstatat, int, const char*, struct stat*, int);
DECLARE(int, fstatat64, int, const char*, struct stat64*, int);
DECLARE(int, __xstat, int, const char*, struct stat*);
DECLARE(int, __xstat64, int, const char*, struct stat64*);
DECLARE(int, __lxstat, int, const char*, struct stat*);
DECLARE(int, __lxstat64, int, const char*, struct stat64*);
DECLARE(int, __fxstatat, int, int, const char*, struct stat*, int);
DECLARE(int, __fxstatat64, int, int, const char*, struct stat64*, int);
DECLARE(int, statx, int, const char*, int, unsigned int, struct statx*);
DECLARE(int, access, const char*, int);
DECLARE(int, faccessat, int, const char*, int, int);
DECLARE(int, eaccess, const char*, int);
DECLARE(int, euidaccess, const char*, int);
DECLARE(ssize_t, readlink, const char*, char*, size_t);
DECLARE(ssize_t, readlinkat, int, const char*, char*, size_t);
DECLARE(char*, realpath, const char*, char*);
DECLARE(char*, canonicalize_file_name, const char*);
DECLARE(DIR*, opendir, const char*);
DECLARE(int, scandir, const char*, struct dirent***, int (*)(const struct dirent*),
        int (*)(const struct dirent**, const struct dirent**));
DECLARE(char*, getenv, const char*);
DECLARE(char*, secure_getenv, const char*);
DECLARE(int, execve, const char*, char* const[], char* const[]);
DECLARE(int, execveat, int, const char*, char* const[], char* const[], int);
DECLARE(int, posix_spawn, pid_t*, const char*, const posix_spawn_file_actions_t*,
        const posix_spawnattr_t*, char* const[], char* const[]);
DECLARE(struct tm*, localtime, const time_t*);
DECLARE(struct tm*, localtime_r, const time_t*, struct tm*);
DECLARE(char*, ctime, const time_t*);
DECLARE(char*, ctime_r, const time_t*, char*);
DECLARE(struct tm*, gmtime, const time_t*);
DECLARE(struct tm*, gmtime_r, const time_t*, struct tm*);
DECLARE(char*, getcwd, char*, size_t);
DECLARE(int, chdir, const char*);
DECLARE(int, fchdir, int);
DECLARE(void*, dlopen, const char*, int);
DECLARE(int, mkstemp, char*);
DECLARE(int, mkstemp64, char*);
DECLARE(int, mkostemp, char*, int);
DECLARE(int, mkostemp64, char*, int);
DECLARE(int, mkstemps, char*, int);
DECLARE(int, mkstemps64, char*, int);
DECLARE(int, mkostemps, char*, int, int);
DECLARE(int, mkostemps64, char*, int, int);
DECLARE(char*, mkdtemp, char*);
DECLARE(int, rename, const char*, const char*);
DECLARE(int, renameat, int, const char*, int, const char*);
DECLARE(int, renameat2, int, const char*, int, const char*, unsigned int);
DECLARE(int, link, const char*, const char*);
DECLARE(int, symlink, const char*, const char*);

/* ---- record writing: async-signal-safe ---- */

struct rec {
  char buf[REC_MAX];
  size_t n;
  int full;
};

static void put_bytes(struct rec* r, const char* s, size_t len) {
  if (r->n + len > sizeof r->buf) {
    r->full = 1;
    return;
  }
  memcpy(r->buf + r->n, s, len);
  r->n += len;
}

static void put_char(struct rec* r, char c) {
  put_bytes(r, &c, 1);
}

static void put_num(struct rec* r, long long v) {
  char digits[20];
  unsigned long long u = v < 0 ? (unsigned long long)(-v) : (unsigned long long)v;
  if (v < 0) put_char(r, '-');
  put_bytes(r, digits, ccpool_decimal(digits, u));
}

static void put_text(struct rec* r, const char* s, size_t len) {
  put_char(r, ' ');
  put_num(r, (long long)len);
  put_char(r, ':');
  put_bytes(r, s, len);
}

/* Writes one line; a line that does not fit is written as an overflow
 * marker the service refuses (a lookup it cannot see must not be dropped). */
static void emit(char op, long long a, long long b, const char* t1, size_t l1, const char* t2,
                 size_t l2, int two) {
  if (g_fd < 0) return;
  struct rec r;
  r.n = 0;
  r.full = 0;
  put_char(&r, op);
  put_char(&r, ' ');
  put_num(&r, (long long)syscall(SYS_getpid));
  put_char(&r, ' ');
  put_num(&r, a);
  put_char(&r, ' ');
  put_num(&r, b);
  put_text(&r, t1 ? t1 : "", t1 ? l1 : 0);
  if (two) put_text(&r, t2 ? t2 : "", t2 ? l2 : 0);
  put_char(&r, '\n');
  if (r.full) {
    r.n = 0;
    r.full = 0;
    put_bytes(&r, "? 0 0 0 8:overflow\n", 19);
  }
  size_t off = 0;
  while (off < r.n) {
    ssize_t w = write(g_fd, r.buf + off, r.n - off);
    if (w <= 0) {
      if (w < 0 && errno == EINTR) continue;
      return;
    }
    off += (size_t)w;
  }
}

static void emit1(char op, long long a, long long b, const char* s) {
  emit(op, a, b, s, s ? strlen(s) : 0, 0, 0, 0);
}

static void emit2(char op, long long a, long long b, const char* s1, const char* s2, size_t l2) {
  emit(op, a, b, s1, s1 ? strlen(s1) : 0, s2, l2, 1);
}

/* `path` relative to `dirfd`, as an absolute path in `out` when dirfd is a
 * real descriptor; `path` itself otherwise. NULL when it cannot be formed. */
static const char* at_path(int dirfd, const char* path, char out[PATH_MAX]) {
  if (!path) return 0;
  if (path[0] == '/' || dirfd == AT_FDCWD) return path;
  char link[64];
  memcpy(link, "/proc/self/fd/", 14);
  size_t n = 14;
  n += ccpool_decimal(link + n, (unsigned)dirfd);
  link[n] = '\0';
  ssize_t len = REAL(readlink) ? REAL(readlink)(link, out, PATH_MAX - 1) : -1;
  size_t plen = strlen(path);
  if (len <= 0 || (size_t)len + 1 + plen + 1 > PATH_MAX) return 0;
  if (plen == 0) {
    out[len] = '\0';
    return out;
  }
  out[len] = '/';
  memcpy(out + len + 1, path, plen + 1);
  return out;
}

static void emit_at(char op, int dirfd, const char* path, long long a, long long b) {
  char buf[PATH_MAX];
  const char* p = at_path(dirfd, path, buf);
  if (p)
    emit1(op, a, b, p);
  else
    emit1('?', a, 0, "fd-relative path");
}

static int writes(int flags) {
  return (flags & O_ACCMODE) != O_RDONLY || (flags & (O_CREAT | O_TRUNC)) != 0;
}

static int fopen_flags(const char* mode) {
  if (!mode) return O_RDONLY;
  int plus = strchr(mode, '+') != 0;
  if (mode[0] == 'r') return plus ? O_RDWR : O_RDONLY;
  return (plus ? O_RDWR : O_WRONLY) | O_CREAT;
}

/* ---- constructor ---- */

static int record_library(struct dl_phdr_info* info, size_t size, void* data) {
  (void)size;
  (void)data;
  if (info->dlpi_name && info->dlpi_name[0] == '/') emit1('L', 0, 0, info->dlpi_name);
  return 0;
}

static void resolve_all(void) {
#define R(name) real_##name = (name##_fn)dlsym(RTLD_NEXT, #name)
  R(open);
  R(open64);
  R(openat);
  R(openat64);
  R(__open_2);
  R(__open64_2);
  R(__openat_2);
  R(__openat64_2);
  R(creat);
  R(creat64);
  R(fopen);
  R(fopen64);
  R(freopen);
  R(freopen64);
  R(stat);
  R(stat64);
  R(lstat);
  R(lstat64);
  R(fstatat);
  R(fstatat64);
  R(__xstat);
  R(__xstat64);
  R(__lxstat);
  R(__lxstat64);
  R(__fxstatat);
  R(__fxstatat64);
  R(statx);
  R(access);
  R(faccessat);
  R(eaccess);
  R(euidaccess);
  R(readlink);
  R(readlinkat);
  R(realpath);
  R(canonicalize_file_name);
  R(opendir);
  R(scandir);
  R(getenv);
  R(secure_getenv);
  R(execve);
  R(execveat);
  R(posix_spawn);
  R(localtime);
  R(localtime_r);
  R(ctime);
  R(ctime_r);
  R(gmtime);
  R(gmtime_r);
  R(getcwd);
  R(chdir);
  R(fchdir);
  R(dlopen);
  R(mkstemp);
  R(mkstemp64);
  R(mkostemp);
  R(mkostemp64);
  R(mkstemps);
  R(mkstemps64);
  R(mkostemps);
  R(mkostemps64);
  R(mkdtemp);
  R(rename);
  R(renameat);
  R(renameat2);
  R(link);
  R(symlink);
#undef R
}

__attribute__((constructor(101))) static void ccpool_trace_init(void) {
  if (g_inited) return;
  g_inited = 1;
  resolve_all();
  const char* path = REAL(getenv) ? REAL(getenv)("CCPOOL_TRACE") : 0;
  if (!path || path[0] != '/' || !REAL(open)) return;
  /* Never created here and never through a link: the service made the file
   * in its private work dir before starting the tool. */
  int fd = REAL(open)(path, O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return;
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid()) {
    close(fd);
    return;
  }
  g_fd = fd;
  char exe[PATH_MAX];
  ssize_t n = REAL(readlink) ? REAL(readlink)("/proc/self/exe", exe, sizeof exe - 1) : -1;
  exe[n > 0 ? n : 0] = '\0';
  emit1('S', (long long)getppid(), 0, exe);
  dl_iterate_phdr(record_library, 0);
}

#define ENSURE()                        \
  do {                                  \
    if (!g_inited) ccpool_trace_init(); \
  } while (0)

/* ---- open family ---- */

static int open_common(int (*real)(const char*, int, ...), const char* path, int flags,
                       mode_t mode) {
  ENSURE();
  int fd = real(path, flags, mode);
  int saved = errno;
  if (ccpool_present(path)) emit1(writes(flags) ? 'W' : 'O', fd < 0 ? saved : 0, flags, path);
  errno = saved;
  return fd;
}

static int openat_common(int (*real)(int, const char*, int, ...), int dirfd, const char* path,
                         int flags, mode_t mode) {
  ENSURE();
  int fd = real(dirfd, path, flags, mode);
  int saved = errno;
  if (ccpool_present(path))
    emit_at(writes(flags) ? 'W' : 'O', dirfd, path, fd < 0 ? saved : 0, flags);
  errno = saved;
  return fd;
}

static mode_t mode_arg(int flags, va_list ap) {
  return (flags & O_CREAT) || (flags & __O_TMPFILE) == __O_TMPFILE ? (mode_t)va_arg(ap, int) : 0;
}

EXPORT int open(const char* path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  mode_t mode = mode_arg(flags, ap);
  va_end(ap);
  ENSURE();
  return open_common(REAL(open), path, flags, mode);
}

EXPORT int open64(const char* path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  mode_t mode = mode_arg(flags, ap);
  va_end(ap);
  ENSURE();
  return open_common(REAL(open64) ? REAL(open64) : REAL(open), path, flags, mode);
}

EXPORT int openat(int dirfd, const char* path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  mode_t mode = mode_arg(flags, ap);
  va_end(ap);
  ENSURE();
  return openat_common(REAL(openat), dirfd, path, flags, mode);
}

EXPORT int openat64(int dirfd, const char* path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  mode_t mode = mode_arg(flags, ap);
  va_end(ap);
  ENSURE();
  return openat_common(REAL(openat64) ? REAL(openat64) : REAL(openat), dirfd, path, flags, mode);
}

EXPORT int __open_2(const char* path, int flags) {
  ENSURE();
  return open_common(REAL(open), path, flags, 0);
}

EXPORT int __open64_2(const char* path, int flags) {
  ENSURE();
  return open_common(REAL(open), path, flags, 0);
}

EXPORT int __openat_2(int dirfd, const char* path, int flags) {
  ENSURE();
  return openat_common(REAL(openat), dirfd, path, flags, 0);
}

EXPORT int __openat64_2(int dirfd, const char* path, int flags) {
  ENSURE();
  return openat_common(REAL(openat), dirfd, path, flags, 0);
}

EXPORT int creat(const char* path, mode_t mode) {
  ENSURE();
  return open_common(REAL(open), path, O_CREAT | O_WRONLY | O_TRUNC, mode);
}

EXPORT int creat64(const char* path, mode_t mode) {
  ENSURE();
  return open_common(REAL(open), path, O_CREAT | O_WRONLY | O_TRUNC, mode);
}

/* The O or W line of an fopen-like call that returned f (errno `saved`). */
static void record_fopen(const char* path, const char* mode, const FILE* f, int saved) {
  int flags = fopen_flags(mode);
  if (ccpool_present(path)) emit1(writes(flags) ? 'W' : 'O', f ? 0 : saved, flags, path);
}

static FILE* fopen_common(FILE* (*real)(const char*, const char*), const char* path,
                          const char* mode) {
  ENSURE();
  FILE* f = real(path, mode);
  int saved = errno;
  record_fopen(path, mode, f, saved);
  errno = saved;
  return f;
}

EXPORT FILE* fopen(const char* path, const char* mode) {
  ENSURE();
  return fopen_common(REAL(fopen), path, mode);
}

EXPORT FILE* fopen64(const char* path, const char* mode) {
  ENSURE();
  return fopen_common(REAL(fopen64) ? REAL(fopen64) : REAL(fopen), path, mode);
}

static FILE* freopen_common(FILE* (*real)(const char*, const char*, FILE*), const char* path,
                            const char* mode, FILE* stream) {
  ENSURE();
  FILE* f = real(path, mode, stream);
  int saved = errno;
  record_fopen(path, mode, f, saved);
  errno = saved;
  return f;
}

EXPORT FILE* freopen(const char* path, const char* mode, FILE* stream) {
  ENSURE();
  return freopen_common(REAL(freopen), path, mode, stream);
}

EXPORT FILE* freopen64(const char* path, const char* mode, FILE* stream) {
  ENSURE();
  return freopen_common(REAL(freopen64) ? REAL(freopen64) : REAL(freopen), path, mode, stream);
}

/* ---- stat family ---- */

static long long stat_kind(int rc, mode_t mode, int nofollow) {
  return (nofollow ? 16 : 0) + (rc == 0 ? (long long)((mode & S_IFMT) >> 12) : 0);
}

/* The T line of a stat of `path` that returned rc (errno `saved`; mode is
 * the answer's st_mode, read only when rc is 0). */
static void record_stat(const char* path, int rc, int saved, mode_t mode, int nofollow) {
  if (ccpool_present(path)) emit1('T', rc ? saved : 0, stat_kind(rc, mode, nofollow), path);
}

#define STAT_HOOK(name, params, args, nofollow)                        \
  EXPORT int name params {                                             \
    ENSURE();                                                          \
    int rc = REAL(name) args;                                          \
    int saved = errno;                                                 \
    record_stat(path, rc, saved, rc == 0 ? st->st_mode : 0, nofollow); \
    errno = saved;                                                     \
    return rc;                                                         \
  }
STAT_HOOK(stat, (const char* path, struct stat* st), (path, st), 0)
STAT_HOOK(stat64, (const char* path, struct stat64* st), (path, st), 0)
STAT_HOOK(lstat, (const char* path, struct stat* st), (path, st), 1)
STAT_HOOK(lstat64, (const char* path, struct stat64* st), (path, st), 1)
STAT_HOOK(__xstat, (int ver, const char* path, struct stat* st), (ver, path, st), 0)
STAT_HOOK(__xstat64, (int ver, const char* path, struct stat64* st), (ver, path, st), 0)
STAT_HOOK(__lxstat, (int ver, const char* path, struct stat* st), (ver, path, st), 1)
STAT_HOOK(__lxstat64, (int ver, const char* path, struct stat64* st), (ver, path, st), 1)

/* The T line of a stat relative to dirfd; an empty path with AT_EMPTY_PATH
 * is fstat of the descriptor: no lookup, no line. */
static void record_stat_at(int dirfd, const char* path, int flags, int rc, int saved, mode_t mode) {
  if (!ccpool_present(path) || (path[0] == '\0' && (flags & AT_EMPTY_PATH))) return;
  emit_at('T', dirfd, path, rc ? saved : 0,
          stat_kind(rc, mode, (flags & AT_SYMLINK_NOFOLLOW) != 0));
}

#define FSTATAT_HOOK(name, params, args)                                      \
  EXPORT int name params {                                                    \
    ENSURE();                                                                 \
    int rc = REAL(name) args;                                                 \
    int saved = errno;                                                        \
    record_stat_at(dirfd, path, flags, rc, saved, rc == 0 ? st->st_mode : 0); \
    errno = saved;                                                            \
    return rc;                                                                \
  }
FSTATAT_HOOK(fstatat, (int dirfd, const char* path, struct stat* st, int flags),
             (dirfd, path, st, flags))
FSTATAT_HOOK(fstatat64, (int dirfd, const char* path, struct stat64* st, int flags),
             (dirfd, path, st, flags))
FSTATAT_HOOK(__fxstatat, (int ver, int dirfd, const char* path, struct stat* st, int flags),
             (ver, dirfd, path, st, flags))
FSTATAT_HOOK(__fxstatat64, (int ver, int dirfd, const char* path, struct stat64* st, int flags),
             (ver, dirfd, path, st, flags))

EXPORT int statx(int dirfd, const char* path, int flags, unsigned int mask, struct statx* st) {
  ENSURE();
  int rc = REAL(statx)(dirfd, path, flags, mask, st);
  int saved = errno;
  record_stat_at(dirfd, path, flags, rc, saved, rc == 0 ? st->stx_mode : 0);
  errno = saved;
  return rc;
}

/* ---- access, links, realpath, directories ---- */

#define ACCESS_HOOK(name)                                             \
  EXPORT int name(const char* path, int mode) {                       \
    ENSURE();                                                         \
    int rc = REAL(name)(path, mode);                                  \
    int saved = errno;                                                \
    if (ccpool_present(path)) emit1('A', rc ? saved : 0, mode, path); \
    errno = saved;                                                    \
    return rc;                                                        \
  }
ACCESS_HOOK(access)
ACCESS_HOOK(eaccess)
ACCESS_HOOK(euidaccess)

EXPORT int faccessat(int dirfd, const char* path, int mode, int flags) {
  ENSURE();
  int rc = REAL(faccessat)(dirfd, path, mode, flags);
  int saved = errno;
  if (ccpool_present(path)) emit_at('A', dirfd, path, rc ? saved : 0, mode);
  errno = saved;
  return rc;
}

EXPORT ssize_t readlink(const char* path, char* buf, size_t size) {
  ENSURE();
  ssize_t n = REAL(readlink)(path, buf, size);
  int saved = errno;
  if (ccpool_present(path)) emit2('R', n < 0 ? saved : 0, 0, path, buf, n > 0 ? (size_t)n : 0);
  errno = saved;
  return n;
}

EXPORT ssize_t readlinkat(int dirfd, const char* path, char* buf, size_t size) {
  ENSURE();
  ssize_t n = REAL(readlinkat)(dirfd, path, buf, size);
  int saved = errno;
  char abs[PATH_MAX];
  const char* p = at_path(dirfd, path, abs);
  if (p)
    emit2('R', n < 0 ? saved : 0, 0, p, buf, n > 0 ? (size_t)n : 0);
  else if (ccpool_present(path))
    emit1('?', 0, 0, "fd-relative readlink");
  errno = saved;
  return n;
}

/* The K line of a realpath-like call that returned r (errno `saved`). */
static void record_real_path(const char* path, const char* r, int saved) {
  if (ccpool_present(path)) emit2('K', r ? 0 : saved, 0, path, r, r ? strlen(r) : 0);
}

EXPORT char* realpath(const char* path, char* resolved) {
  ENSURE();
  char* r = REAL(realpath)(path, resolved);
  int saved = errno;
  record_real_path(path, r, saved);
  errno = saved;
  return r;
}

EXPORT char* canonicalize_file_name(const char* path) {
  ENSURE();
  char* r = REAL(canonicalize_file_name)(path);
  int saved = errno;
  record_real_path(path, r, saved);
  errno = saved;
  return r;
}

EXPORT DIR* opendir(const char* path) {
  ENSURE();
  DIR* d = REAL(opendir)(path);
  int saved = errno;
  if (ccpool_present(path)) emit1('D', d ? 0 : saved, 0, path);
  errno = saved;
  return d;
}

EXPORT int scandir(const char* path, struct dirent*** list, int (*filter)(const struct dirent*),
                   int (*cmp)(const struct dirent**, const struct dirent**)) {
  ENSURE();
  int n = REAL(scandir)(path, list, filter, cmp);
  int saved = errno;
  if (ccpool_present(path)) emit1('D', n < 0 ? saved : 0, 0, path);
  errno = saved;
  return n;
}

/* ---- environment ---- */

static void record_env(const char* name, const char* value) {
  if (ccpool_present(name)) emit2('E', value ? 1 : 0, 0, name, value, value ? strlen(value) : 0);
}

EXPORT char* getenv(const char* name) {
  ENSURE();
  char* v = REAL(getenv)(name);
  int saved = errno;
  record_env(name, v);
  errno = saved;
  return v;
}

EXPORT char* secure_getenv(const char* name) {
  ENSURE();
  char* v = REAL(secure_getenv) ? REAL(secure_getenv)(name) : REAL(getenv)(name);
  int saved = errno;
  record_env(name, v);
  errno = saved;
  return v;
}

/* ---- exec and spawn ---- */

static int exec_recorded(const char* path, char* const argv[], char* const envp[]) {
  emit1('X', 0, 0, path);
  int rc = REAL(execve)(path, argv, envp);
  int saved = errno;
  emit1('x', saved, 0, path);
  errno = saved;
  return rc;
}

/* execvpe's PATH search with each candidate exec recorded: glibc's search
 * calls its internal execve, which no interposer sees. Same rules as glibc
 * for the candidates skipped (ENOENT, ENOTDIR, EACCES remembered, ...). */
static int execp_recorded(const char* file, char* const argv[], char* const envp[]) {
  if (!file || !*file) {
    errno = ENOENT;
    return -1;
  }
  if (strchr(file, '/')) return exec_recorded(file, argv, envp);
  struct ccpool_path_walk w = ccpool_path_walk_start(ccpool_search_path(environ), file);
  int got_eacces = 0;
  char buf[PATH_MAX];
  while (ccpool_path_next(&w, buf)) {
    exec_recorded(buf, argv, envp);
    switch (errno) {
      case EACCES:
        got_eacces = 1;
        break;
      case ENOENT:
      case ESTALE:
      case ENOTDIR:
      case ENODEV:
      case ETIMEDOUT:
        break;
      default:
        return -1;
    }
  }
  if (got_eacces) errno = EACCES;
  return -1;
}

EXPORT int execve(const char* path, char* const argv[], char* const envp[]) {
  ENSURE();
  return exec_recorded(path, argv, envp);
}

EXPORT int execv(const char* path, char* const argv[]) {
  ENSURE();
  return exec_recorded(path, argv, environ);
}

EXPORT int execvp(const char* file, char* const argv[]) {
  ENSURE();
  return execp_recorded(file, argv, environ);
}

EXPORT int execvpe(const char* file, char* const argv[], char* const envp[]) {
  ENSURE();
  return execp_recorded(file, argv, envp);
}

EXPORT int execveat(int dirfd, const char* path, char* const argv[], char* const envp[],
                    int flags) {
  ENSURE();
  if (ccpool_present(path) && flags == 0 && (dirfd == AT_FDCWD || path[0] == '/'))
    return exec_recorded(path, argv, envp);
  emit1('?', 0, 0, "execveat");
  return REAL(execveat)(dirfd, path, argv, envp, flags);
}

EXPORT int execl(const char* path, const char* arg, ...) {
  ENSURE();
  va_list ap;
  va_start(ap, arg);
  CCPOOL_COLLECT_VARARGS(arg, ap, argv, va_end(ap););
  return exec_recorded(path, argv, environ);
}

EXPORT int execlp(const char* file, const char* arg, ...) {
  ENSURE();
  va_list ap;
  va_start(ap, arg);
  CCPOOL_COLLECT_VARARGS(arg, ap, argv, va_end(ap););
  return execp_recorded(file, argv, environ);
}

EXPORT int execle(const char* path, const char* arg, ...) {
  ENSURE();
  va_list ap;
  va_start(ap, arg);
  CCPOOL_COLLECT_VARARGS(arg, ap, argv, char* const* envp = va_arg(ap, char* const*); va_end(ap););
  return exec_recorded(path, argv, envp);
}

EXPORT int posix_spawn(pid_t* pid, const char* path, const posix_spawn_file_actions_t* fa,
                       const posix_spawnattr_t* attr, char* const argv[], char* const envp[]) {
  ENSURE();
  pid_t child = 0;
  int rc = REAL(posix_spawn)(&child, path, fa, attr, argv, envp);
  int saved = errno;
  if (pid) *pid = child;
  emit1('P', rc == 0 ? child : 0, rc, path);
  errno = saved;
  return rc;
}

/* glibc searches PATH in the child with its internal execve: search here,
 * recording each candidate, and spawn the one found. */
EXPORT int posix_spawnp(pid_t* pid, const char* file, const posix_spawn_file_actions_t* fa,
                        const posix_spawnattr_t* attr, char* const argv[], char* const envp[]) {
  ENSURE();
  if (!ccpool_present(file) || !*file) return ENOENT;
  if (strchr(file, '/')) return posix_spawn(pid, file, fa, attr, argv, envp);
  struct ccpool_path_walk w = ccpool_path_walk_start(ccpool_search_path(environ), file);
  char buf[PATH_MAX];
  while (ccpool_path_next(&w, buf)) {
    struct stat st;
    if (access(buf, X_OK) == 0 && stat(buf, &st) == 0 && S_ISREG(st.st_mode))
      return posix_spawn(pid, buf, fa, attr, argv, envp);
  }
  return ENOENT;
}

/* ---- clock to date, cwd, chdir, dlopen ---- */

EXPORT struct tm* localtime(const time_t* t) {
  ENSURE();
  emit1('C', 0, 0, "localtime");
  return REAL(localtime)(t);
}

EXPORT struct tm* localtime_r(const time_t* t, struct tm* out) {
  ENSURE();
  emit1('C', 0, 0, "localtime_r");
  return REAL(localtime_r)(t, out);
}

EXPORT char* ctime(const time_t* t) {
  ENSURE();
  emit1('C', 0, 0, "ctime");
  return REAL(ctime)(t);
}

EXPORT char* ctime_r(const time_t* t, char* buf) {
  ENSURE();
  emit1('C', 0, 0, "ctime_r");
  return REAL(ctime_r)(t, buf);
}

EXPORT struct tm* gmtime(const time_t* t) {
  ENSURE();
  emit1('C', 0, 0, "gmtime");
  return REAL(gmtime)(t);
}

EXPORT struct tm* gmtime_r(const time_t* t, struct tm* out) {
  ENSURE();
  emit1('C', 0, 0, "gmtime_r");
  return REAL(gmtime_r)(t, out);
}

EXPORT char* getcwd(char* buf, size_t size) {
  ENSURE();
  char* r = REAL(getcwd)(buf, size);
  int saved = errno;
  emit1('G', r ? 0 : saved, 0, r ? r : "");
  errno = saved;
  return r;
}

EXPORT int chdir(const char* path) {
  ENSURE();
  emit1('H', 0, 0, path);
  return REAL(chdir)(path);
}

EXPORT int fchdir(int fd) {
  ENSURE();
  emit1('H', 0, 0, "");
  return REAL(fchdir)(fd);
}

EXPORT void* dlopen(const char* name, int flags) {
  ENSURE();
  void* h = REAL(dlopen)(name, flags);
  int saved = errno;
  if (h && ccpool_present(name)) {
    struct link_map* lm = 0;
    if (dlinfo(h, RTLD_DI_LINKMAP, &lm) == 0 && lm && lm->l_name && lm->l_name[0] == '/')
      emit1('L', 0, 0, lm->l_name);
    else
      emit1('?', 0, 0, "dlopen");
  }
  errno = saved;
  return h;
}

/* ---- temp files: glibc creates them with its internal open ---- */

#define MKSTEMP_HOOK(name, params, args)                         \
  EXPORT int name params {                                       \
    ENSURE();                                                    \
    int fd = REAL(name) args;                                    \
    int saved = errno;                                           \
    if (fd >= 0) emit1('W', 0, O_CREAT | O_EXCL | O_RDWR, tmpl); \
    errno = saved;                                               \
    return fd;                                                   \
  }
MKSTEMP_HOOK(mkstemp, (char* tmpl), (tmpl))
MKSTEMP_HOOK(mkstemp64, (char* tmpl), (tmpl))
MKSTEMP_HOOK(mkostemp, (char* tmpl, int flags), (tmpl, flags))
MKSTEMP_HOOK(mkostemp64, (char* tmpl, int flags), (tmpl, flags))
MKSTEMP_HOOK(mkstemps, (char* tmpl, int suffixlen), (tmpl, suffixlen))
MKSTEMP_HOOK(mkstemps64, (char* tmpl, int suffixlen), (tmpl, suffixlen))
MKSTEMP_HOOK(mkostemps, (char* tmpl, int suffixlen, int flags), (tmpl, suffixlen, flags))
MKSTEMP_HOOK(mkostemps64, (char* tmpl, int suffixlen, int flags), (tmpl, suffixlen, flags))

EXPORT char* mkdtemp(char* tmpl) {
  ENSURE();
  char* r = REAL(mkdtemp)(tmpl);
  int saved = errno;
  if (r) emit1('W', 0, O_CREAT | O_DIRECTORY, r);
  errno = saved;
  return r;
}

/* ---- names the run creates by renaming or linking ---- */

/* rename(from, to), link(from, to), symlink(target, to): `to` is made. */
#define NEW_NAME_HOOK(name)                                          \
  EXPORT int name(const char* from, const char* to) {                \
    ENSURE();                                                        \
    int rc = REAL(name)(from, to);                                   \
    int saved = errno;                                               \
    if (ccpool_present(to)) emit1('W', rc ? saved : 0, O_CREAT, to); \
    errno = saved;                                                   \
    return rc;                                                       \
  }
NEW_NAME_HOOK(rename)
NEW_NAME_HOOK(link)
NEW_NAME_HOOK(symlink)

static void record_new_name_at(int tofd, const char* to, int rc, int saved) {
  if (ccpool_present(to)) emit_at('W', tofd, to, rc ? saved : 0, O_CREAT);
}

EXPORT int renameat(int fromfd, const char* from, int tofd, const char* to) {
  ENSURE();
  int rc = REAL(renameat)(fromfd, from, tofd, to);
  int saved = errno;
  record_new_name_at(tofd, to, rc, saved);
  errno = saved;
  return rc;
}

EXPORT int renameat2(int fromfd, const char* from, int tofd, const char* to, unsigned int flags) {
  ENSURE();
  int rc = REAL(renameat2) ? REAL(renameat2)(fromfd, from, tofd, to, flags) : (errno = ENOSYS, -1);
  int saved = errno;
  record_new_name_at(tofd, to, rc, saved);
  errno = saved;
  return rc;
}
