/* Pure, async-signal-safe string matching used by the shim's hooks: compiler
 * basenames and the Inductor sidecar argv. No allocation, no libc calls that
 * may lock; safe after vfork. Plain C so the shim links only libc and libdl;
 * the unit tests include it from C++. */
#ifndef CCPOOL_SHIM_MATCH_H
#define CCPOOL_SHIM_MATCH_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Up to this many entries in a compiler list; extra entries are ignored. */
#define CCPOOL_SHIM_MAX_COMPILERS 64

/* A parsed compiler list. `text` holds NUL-separated entries. */
struct ccpool_compiler_list {
  char text[4096];
  const char* entries[CCPOOL_SHIM_MAX_COMPILERS];
  int count;
};

/* Parses a colon- or comma-separated list (empty entries skipped, overlong
 * input truncated at an entry boundary). NULL spec gives the default list:
 * gcc g++ cc c++ clang clang++ ptxas. */
void ccpool_compiler_list_init(struct ccpool_compiler_list* list, const char* spec);

/* The part of `path` after its last '/'. */
const char* ccpool_basename(const char* path);

/* True when basename `name` matches an entry. An entry with '*' or '?' is a
 * glob over the whole basename. Any other entry E matches E itself and its
 * triplet and version forms: E, <prefix>-E, E-<ver>, <prefix>-E-<ver>, where
 * <ver> is digits and dots starting with a digit (g++-12, clang++-14,
 * x86_64-linux-gnu-gcc-12). "gcc-ar", "c++filt" and "nvcc" do not match "gcc",
 * "c++" and "cc". */
int ccpool_compiler_matches(const struct ccpool_compiler_list* list, const char* name);

/* The simple glob used above: '*' any run, '?' one char, no classes. */
int ccpool_glob_match(const char* pattern, const char* text);

/* Inductor sidecar detection: returns the index in argv of a "--workers=N"
 * argument when some argument ends in "torch/_inductor/compile_worker/__main__.py",
 * else -1. Scans at most `max_args` arguments. */
int ccpool_sidecar_workers_index(char* const argv[], int max_args);

/* Parses the N of "--workers=N"; -1 when not a positive decimal. */
long ccpool_parse_workers(const char* arg);

#ifdef __cplusplus
}
#endif

#endif
