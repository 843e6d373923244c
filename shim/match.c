/* See match.h. Everything here is pure computation on caller memory. */
#include "shim/match.h"

static size_t str_len(const char* s) {
  size_t n = 0;
  while (s[n]) ++n;
  return n;
}

static int str_eq_n(const char* a, const char* b, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (a[i] != b[i]) return 0;
  return 1;
}

void ccpool_compiler_list_init(struct ccpool_compiler_list* list, const char* spec) {
  static const char kDefault[] = "gcc:g++:cc:c++:clang:clang++:ptxas:ar:ranlib";
  if (!spec) spec = kDefault;
  size_t out = 0;
  list->count = 0;
  while (*spec) {
    while (*spec == ':' || *spec == ',') ++spec;
    size_t n = 0;
    while (spec[n] && spec[n] != ':' && spec[n] != ',') ++n;
    if (n == 0) break;
    if (out + n + 1 > sizeof list->text || list->count == CCPOOL_SHIM_MAX_COMPILERS) break;
    for (size_t i = 0; i < n; ++i) list->text[out + i] = spec[i];
    list->text[out + n] = '\0';
    list->entries[list->count++] = list->text + out;
    out += n + 1;
    spec += n;
  }
}

const char* ccpool_basename(const char* path) {
  const char* base = path;
  for (const char* p = path; *p; ++p)
    if (*p == '/') base = p + 1;
  return base;
}

int ccpool_glob_match(const char* pattern, const char* text) {
  const char* star = 0;
  const char* resume = 0;
  while (*text) {
    if (*pattern == '*') {
      star = pattern++;
      resume = text;
    } else if (*pattern == '?' || *pattern == *text) {
      ++pattern;
      ++text;
    } else if (star) {
      pattern = star + 1;
      text = ++resume;
    } else {
      return 0;
    }
  }
  while (*pattern == '*') ++pattern;
  return *pattern == '\0';
}

/* Length of `name` without a trailing "-<digits and dots>" version. */
static size_t strip_version(const char* name, size_t n) {
  size_t i = n;
  while (i > 0 && ((name[i - 1] >= '0' && name[i - 1] <= '9') || name[i - 1] == '.')) --i;
  if (i == n || i == 0 || name[i - 1] != '-' || name[i] < '0' || name[i] > '9') return n;
  return i - 1;
}

/* name[0..n) ends in s[0..m). */
static int ends_in(const char* name, size_t n, const char* s, size_t m) {
  return n >= m && str_eq_n(name + n - m, s, m);
}

/* name[0..n) is E or ends in "-E", where what precedes "-E" is not gcc's or
   LLVM's own wrapper of E (gcc-ar, llvm-ranlib: other programs). */
static int is_entry_or_triplet(const char* name, size_t n, const char* entry, size_t e) {
  if (!ends_in(name, n, entry, e)) return 0;
  if (n == e) return 1;
  if (name[n - e - 1] != '-') return 0;
  size_t prefix = n - e - 1;
  return !ends_in(name, prefix, "gcc", 3) && !ends_in(name, prefix, "llvm", 4);
}

static int entry_matches(const char* entry, const char* name) {
  for (const char* p = entry; *p; ++p)
    if (*p == '*' || *p == '?') return ccpool_glob_match(entry, name);
  size_t e = str_len(entry);
  size_t n = str_len(name);
  if (is_entry_or_triplet(name, n, entry, e)) return 1;
  size_t stripped = strip_version(name, n);
  return stripped != n && is_entry_or_triplet(name, stripped, entry, e);
}

int ccpool_compiler_matches(const struct ccpool_compiler_list* list, const char* name) {
  if (!name[0]) return 0;
  for (int i = 0; i < list->count; ++i)
    if (entry_matches(list->entries[i], name)) return 1;
  return 0;
}

static int ends_with(const char* s, const char* suffix) {
  size_t n = str_len(s);
  size_t m = str_len(suffix);
  return n >= m && str_eq_n(s + n - m, suffix, m);
}

int ccpool_sidecar_workers_index(char* const argv[], int max_args) {
  static const char kSidecar[] = "torch/_inductor/compile_worker/__main__.py";
  static const char kWorkers[] = "--workers=";
  int sidecar = 0;
  int workers = -1;
  for (int i = 0; i < max_args && argv[i]; ++i) {
    if (!sidecar && ends_with(argv[i], kSidecar)) sidecar = 1;
    if (workers < 0 && str_eq_n(argv[i], kWorkers, sizeof kWorkers - 1)) workers = i;
  }
  return sidecar ? workers : -1;
}

long ccpool_parse_workers(const char* arg) {
  static const char kWorkers[] = "--workers=";
  if (!str_eq_n(arg, kWorkers, sizeof kWorkers - 1)) return -1;
  const char* p = arg + sizeof kWorkers - 1;
  long value = 0;
  if (!*p) return -1;
  for (; *p; ++p) {
    if (*p < '0' || *p > '9' || value > 1000000) return -1;
    value = value * 10 + (*p - '0');
  }
  return value > 0 ? value : -1;
}
