/* Pure C building blocks shared by the two LD_PRELOAD libraries,
 * libccpool-shim.so (shim/shim.c) and libccpool-trace.so (trace/trace.c).
 *
 * Contract: every function here is async-signal-safe, so a hook may call it
 * after vfork and after fork in a threaded parent: no malloc, no stdio, no
 * locks, no getenv, no errno change. They work on the caller's buffers and on
 * libc's string functions (strlen, strncmp, strchrnul, memcpy) only. Plain C11
 * on libc: this folder includes nothing of ours, and its users link nothing for it. */
#ifndef CCPOOL_PRELOAD_SIGNAL_SAFE_H
#define CCPOOL_PRELOAD_SIGNAL_SAFE_H

/* strchrnul: the including file defines _GNU_SOURCE before its first include. */
#ifndef _GNU_SOURCE
#error "preload/signal_safe.h needs _GNU_SOURCE defined before the first include"
#endif

#include <limits.h>
#include <stddef.h>
#include <string.h>

/* 1 when p is not NULL. glibc declares the path arguments of the hooked
 * functions nonnull, so the compiler would drop a plain `p != 0` test: the
 * empty asm hides the pointer's origin from the optimizer. */
static inline int ccpool_present(const void* p) {
  __asm__("" : "+r"(p));
  return p != 0;
}

/* Writes the decimal digits of v (at least one, no NUL) to out, which has
 * room for 20; returns how many it wrote. */
static inline size_t ccpool_decimal(char* out, unsigned long long v) {
  char digits[20];
  size_t n = 0;
  do {
    digits[n++] = (char)('0' + v % 10);
    v /= 10;
  } while (v);
  for (size_t i = 0; i < n; ++i) out[i] = digits[n - 1 - i];
  return n;
}

/* PATH as a p-variant of exec searches it: the value of the first PATH= entry
 * of env (glibc's exec functions read the caller's environ, not the envp they
 * pass on), or "/bin:/usr/bin" when there is none. */
static inline const char* ccpool_search_path(char* const* env) {
  for (char* const* e = env; e && *e; ++e)
    if (strncmp(*e, "PATH=", 5) == 0) return *e + 5;
  return "/bin:/usr/bin";
}

/* The candidates of a PATH search for a file name without a slash, in
 * execvp's order: each entry of the colon-separated list joined with the
 * name, an empty entry being the cwd (the name alone). An entry whose
 * candidate would not fit PATH_MAX is skipped, as glibc skips it.
 *   struct ccpool_path_walk w = ccpool_path_walk_start(path, file);
 *   while (ccpool_path_next(&w, buf)) try(buf);                        */
struct ccpool_path_walk {
  const char* next; /* the entry not yet joined, NULL after the last */
  const char* file;
  size_t flen;
};

static inline struct ccpool_path_walk ccpool_path_walk_start(const char* path, const char* file) {
  struct ccpool_path_walk w = {path, file, strlen(file)};
  return w;
}

/* Fills out with the next candidate and returns 1, or returns 0 when the
 * list is exhausted. */
static inline int ccpool_path_next(struct ccpool_path_walk* w, char out[PATH_MAX]) {
  while (w->next) {
    const char* dir = w->next;
    const char* end = strchrnul(dir, ':');
    size_t dlen = (size_t)(end - dir);
    w->next = *end ? end + 1 : 0;
    if (dlen + 1 + w->flen + 1 <= PATH_MAX) {
      size_t n = 0;
      if (dlen) {
        memcpy(out, dir, dlen);
        n = dlen;
        out[n++] = '/';
      }
      memcpy(out + n, w->file, w->flen + 1);
      return 1;
    }
  }
  return 0;
}

/* The execl variants collect their arguments into a stack array as glibc
 * does (unbounded, like glibc's VLA), then behave as execv/execve/execvp:
 * declares `char* argv_name[]` holding `first` and the NULL-terminated
 * arguments that follow in ap_start, then runs `extra` (va_end, and for
 * execle the envp that follows the NULL). */
#define CCPOOL_COLLECT_VARARGS(first, ap_start, argv_name, extra)                 \
  size_t argc_ = 1;                                                               \
  va_list count_;                                                                 \
  va_copy(count_, ap_start);                                                      \
  while (va_arg(count_, char*)) ++argc_;                                          \
  va_end(count_);                                                                 \
  char* argv_name[argc_ + 1];                                                     \
  argv_name[0] = (char*)(first);                                                  \
  for (size_t i_ = 1; i_ <= argc_; ++i_) argv_name[i_] = va_arg(ap_start, char*); \
  extra

#endif
