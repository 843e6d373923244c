/* ccpool-client-fast: what libccpool-shim.so execs when it is installed
 * beside ccpool-client. It sends the request and replays a completed reply,
 * as ccpool-client does; for anything else it execs ccpool-client (its
 * sibling), which handles every other case.
 *
 * Why it exists: on a hit, starting the client is most of the cost. A static
 * glibc program spends about 0.3 ms in exec and in glibc's start-up before
 * main (its CPU-feature and cache probes are CPUID instructions, which trap
 * in a VM); this program has no libc and starts in about 0.06 ms
 * (BENCHMARKS.md). No library does this: it is raw system calls, and it does
 * no more than the common case.
 *
 * What it does itself (ipc/PROTOCOL.md): the checks ipc::Client makes before
 * it sends anything (the socket's directory is the caller's own and no
 * ancestor is writable by everyone without the sticky bit; the listener runs
 * as the caller or root), hello and exec in one write with the caller's
 * stdin attached, hello-ok and the exec reply read and checked field by
 * field, the tool's output replayed and its exit code returned.
 *
 * What it leaves to ccpool-client, by exec'ing it with the same arguments:
 * CCPOOL_DISABLE and CCPOOL_CLIENT_TIMEOUT set, a socket path that comes
 * from neither CCPOOL_SOCKET nor --inherited-socket, a relative program
 * path, a request over the protocol's bounds, a check that fails, a service
 * that is not there (ccpool-client starts it), an error frame, a reply that
 * is not `completed`, anything malformed. ccpool-client then asks again or
 * runs the tool itself. When even that exec fails, the tool runs here. */
#include <asm/unistd.h>
#include <linux/fcntl.h>
#include <linux/stat.h>
#include <stddef.h>
#include <stdint.h>

#define FD_STDIN 0
#define AF_UNIX_ 1
#define SOCK_STREAM_ 1
#define SOCK_CLOEXEC_ 02000000
#define SOL_SOCKET_ 1
#define SO_PEERCRED_ 17
#define SO_SNDTIMEO_ 21
#define SCM_RIGHTS_ 1
#define MSG_NOSIGNAL_ 0x4000
#define POLLIN_ 1
#define PROT_RW 3
#define MAP_PRIVATE_ANON 0x22
#define EINTR_ 4

#define PATH_CAP 4096
#define MAX_FRAME (64u << 20)
#define MAX_ARGS 32768u
#define MAX_ENV_ENTRIES 8192u
#define MAX_ENV_BYTES (1u << 20)
#define HELLO_WAIT_MS 2000
#define REPLY_WAIT_MS (3600 * 1000)

/* ---- system calls ---- */

#if defined(__x86_64__)
static long sys6(long n, long a, long b, long c, long d, long e, long f) {
  register long r10 __asm__("r10") = d;
  register long r8 __asm__("r8") = e;
  register long r9 __asm__("r9") = f;
  long ret;
  __asm__ volatile("syscall"
                   : "=a"(ret)
                   : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
                   : "rcx", "r11", "memory");
  return ret;
}
__asm__(
    ".text\n.global _start\n.type _start,@function\n_start:\n"
    "  xor %rbp, %rbp\n  mov %rsp, %rdi\n  and $-16, %rsp\n  call fast_main\n  hlt\n");
#elif defined(__aarch64__)
static long sys6(long n, long a, long b, long c, long d, long e, long f) {
  register long x8 __asm__("x8") = n;
  register long x0 __asm__("x0") = a;
  register long x1 __asm__("x1") = b;
  register long x2 __asm__("x2") = c;
  register long x3 __asm__("x3") = d;
  register long x4 __asm__("x4") = e;
  register long x5 __asm__("x5") = f;
  __asm__ volatile("svc 0"
                   : "+r"(x0)
                   : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5)
                   : "memory");
  return x0;
}
__asm__(
    ".text\n.global _start\n.type _start,%function\n_start:\n"
    "  mov x29, #0\n  mov x30, #0\n  mov x0, sp\n  bl fast_main\n  brk #0\n");
#else
#error "ccpool-client-fast: x86_64 and aarch64 only (CMake builds it only there)"
#endif

#define SYS(n, a, b, c) sys6((n), (long)(a), (long)(b), (long)(c), 0, 0, 0)

struct iov {
  const void* base;
  size_t len;
};
struct msg_header {
  void* name;
  int namelen;
  struct iov* iov;
  size_t iovlen;
  void* control;
  size_t controllen;
  int flags;
};
struct poll_fd {
  int fd;
  short events, revents;
};
struct peer_cred {
  int32_t pid;
  uint32_t uid, gid;
};
struct sockaddr_unix {
  uint16_t family;
  char path[108];
};

__attribute__((noreturn)) static void exit_with(int code) {
  for (;;) SYS(__NR_exit_group, code, 0, 0);
}

/* ---- freestanding helpers (the compiler may call these by name) ---- */

void* memcpy(void* dst, const void* src, size_t n) {
  unsigned char* d = dst;
  const unsigned char* s = src;
  while (n--) *d++ = *s++;
  return dst;
}

void* memset(void* dst, int c, size_t n) {
  unsigned char* d = dst;
  while (n--) *d++ = (unsigned char)c;
  return dst;
}

static size_t str_len(const char* s) {
  size_t n = 0;
  while (s[n]) ++n;
  return n;
}

static int starts_with(const char* s, const char* prefix) {
  while (*prefix)
    if (*s++ != *prefix++) return 0;
  return 1;
}

/* The value of NAME in envp, or 0 when unset. */
static const char* env_get(char** envp, const char* name) {
  size_t n = str_len(name);
  for (; *envp; ++envp) {
    const char* e = *envp;
    size_t i = 0;
    while (i < n && e[i] == name[i]) ++i;
    if (i == n && e[n] == '=') return e + n + 1;
  }
  return 0;
}

static void* map_bytes(size_t n) {
  long p = sys6(__NR_mmap, 0, (long)n, PROT_RW, MAP_PRIVATE_ANON, -1, 0);
  return p < 0 && p > -4096 ? 0 : (void*)p;
}

/* ---- hand-off to ccpool-client ---- */

static char** g_argv;
static char** g_envp;
static char g_full[PATH_CAP]; /* <our own directory>/ccpool-client */
static const char* g_program; /* the resolved tool */
static char** g_tool_argv;    /* argv of the tool */

/* Execs ccpool-client with our arguments; if that fails, the tool itself. */
__attribute__((noreturn)) static void hand_off(void) {
  if (g_full[0]) {
    g_argv[0] = g_full;
    SYS(__NR_execve, g_full, g_argv, g_envp);
  }
  if (g_program && g_tool_argv) SYS(__NR_execve, g_program, g_tool_argv, g_envp);
  static const char kMsg[] = "ccpool-client-fast: cannot exec ccpool-client or the tool\n";
  SYS(__NR_write, 2, kMsg, sizeof kMsg - 1);
  exit_with(127);
}

/* ccpool-client beside us: the shim execs us by our full path (argv[0]);
 * run by a bare name, our executable's path from /proc. */
/* After the request was sent: ccpool-client runs the tool locally at once
 * (--fallback=REASON), as it does when it loses its own request, instead of
 * asking again (a service that went away would be started again; a job that
 * failed would run again). */
__attribute__((noreturn)) static void fall_back(const char* reason, const unsigned char* detail,
                                                size_t detail_n) {
  static char arg[512];
  static const char kFlag[] = "--fallback=";
  size_t n = 0;
  for (const char* c = kFlag; *c; ++c) arg[n++] = *c;
  for (const char* c = reason; *c && n < sizeof arg - 1; ++c) arg[n++] = *c;
  for (size_t i = 0; i < detail_n && n < sizeof arg - 1; ++i)
    if (detail[i]) arg[n++] = (char)detail[i];
  arg[n] = 0;
  /* Our argv with the flag after the optional --inherited-socket. */
  int argc = 0;
  while (g_argv[argc]) ++argc;
  char** argv = map_bytes(sizeof(char*) * (size_t)(argc + 2));
  if (!argv || !g_full[0]) hand_off();
  int at = starts_with(g_argv[1], "--inherited-socket=") ? 2 : 1;
  for (int i = 0, j = 0; i <= argc; ++i) {
    if (i == at) argv[j++] = arg;
    argv[j++] = g_argv[i];
  }
  g_argv = argv;
  hand_off();
}

static void find_full_client(const char* argv0) {
  static const char kName[] = "ccpool-client";
  long n = 0;
  int has_slash = 0;
  for (const char* c = argv0; c && *c; ++c) has_slash |= *c == '/';
  if (has_slash) {
    n = (long)str_len(argv0);
    if (n < PATH_CAP) memcpy(g_full, argv0, (size_t)n);
  } else {
    n = sys6(__NR_readlinkat, AT_FDCWD, (long)"/proc/self/exe", (long)g_full, PATH_CAP - 1, 0, 0);
  }
  if (n <= 0 || n >= PATH_CAP - (long)sizeof kName) {
    g_full[0] = 0;
    return;
  }
  long slash = n - 1;
  while (slash >= 0 && g_full[slash] != '/') --slash;
  if (slash < 0) {
    g_full[0] = 0;
    return;
  }
  memcpy(g_full + slash + 1, kName, sizeof kName);
}

/* ---- the checks ipc::Client makes (base/unix_socket.cpp) ---- */

static int statx_of(const char* path, int flags, struct statx* st) {
  return sys6(__NR_statx, AT_FDCWD, (long)path, flags, STATX_TYPE | STATX_MODE | STATX_UID,
              (long)st, 0) == 0
             ? 0
             : -1;
}

/* The socket's directory is ours and not writable by others, and no
 * ancestor of its real path is writable by everyone without the sticky bit.
 * 1: passed (or the directory is missing: the connect fails then). */
static int socket_dir_ok(const char* socket_path, uint32_t euid) {
  char dir[PATH_CAP];
  size_t n = str_len(socket_path);
  while (n > 0 && socket_path[n - 1] != '/') --n;
  if (n == 0) return 0; /* not absolute: ccpool-client's business */
  size_t len = n == 1 ? 1 : n - 1;
  memcpy(dir, socket_path, len);
  dir[len] = 0;
  struct statx st;
  if (statx_of(dir, AT_SYMLINK_NOFOLLOW, &st) != 0) return 0;
  if ((st.stx_mode & 0170000) != 0040000 || st.stx_uid != euid || (st.stx_mode & 022)) return 0;
  /* The real path, as the kernel resolved it. */
  long fd = SYS(__NR_openat, AT_FDCWD, dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return 0;
  char link[64] = "/proc/self/fd/";
  size_t l = str_len(link);
  char digits[20];
  int d = 0;
  for (long v = fd; v > 0 || d == 0; v /= 10) digits[d++] = (char)('0' + v % 10);
  while (d > 0) link[l++] = digits[--d];
  link[l] = 0;
  char real[PATH_CAP];
  long r = sys6(__NR_readlinkat, AT_FDCWD, (long)link, (long)real, PATH_CAP - 1, 0, 0);
  SYS(__NR_close, fd, 0, 0);
  if (r <= 0 || r >= PATH_CAP - 1 || real[0] != '/') return 0; /* cut off: not checked */
  real[r] = 0;
  while (r > 1) {
    while (r > 1 && real[r - 1] != '/') --r; /* cut the last component */
    if (r > 1) --r;                          /* and its slash, except the root's */
    char saved = real[r];
    real[r] = 0;
    int ok = statx_of(real, 0, &st) == 0 && !((st.stx_mode & 02) && !(st.stx_mode & 01000));
    real[r] = saved;
    if (!ok) return 0;
    if (r == 1) break;
  }
  return 1;
}

/* ---- the request (ipc/PROTOCOL.md) ---- */

struct out {
  unsigned char* p;
  size_t n;
};

static void put_u32(struct out* o, uint32_t v) {
  for (int i = 0; i < 4; ++i) o->p[o->n++] = (unsigned char)(v >> (8 * i));
}
static void put_u64(struct out* o, uint64_t v) {
  for (int i = 0; i < 8; ++i) o->p[o->n++] = (unsigned char)(v >> (8 * i));
}
static void put_bytes(struct out* o, const char* s, size_t n) {
  put_u32(o, (uint32_t)n);
  memcpy(o->p + o->n, s, n);
  o->n += n;
}
static void put_header(struct out* o, uint8_t type, uint32_t length) {
  o->p[o->n++] = 'C';
  o->p[o->n++] = 'C';
  o->p[o->n++] = 'P';
  o->p[o->n++] = 'L';
  o->p[o->n++] = 1; /* framing version */
  o->p[o->n++] = type;
  o->p[o->n++] = 0;
  o->p[o->n++] = 0;
  put_u32(o, length);
}

/* An LD_PRELOAD entry names the shim: "libccpool-shim.so" or ".../libccpool-shim.so". */
static int names_shim(const char* s, size_t n) {
  static const char kShim[] = "libccpool-shim.so";
  size_t k = sizeof kShim - 1;
  if (n < k) return 0;
  for (size_t i = 0; i < k; ++i)
    if (s[n - k + i] != kShim[i]) return 0;
  return n == k || s[n - k - 1] == '/';
}

/* The LD_PRELOAD value without the shim (base/shim_env.cpp): entries split on
 * ':' or ' ', kept ones joined by ':'. Writes into `dst` (when non-null) and
 * returns the length. */
static size_t preload_without_shim(const char* value, char* dst) {
  size_t out = 0;
  const char* start = value;
  for (;;) {
    const char* end = start;
    while (*end && *end != ':' && *end != ' ') ++end;
    size_t n = (size_t)(end - start);
    if (n > 0 && !names_shim(start, n)) {
      if (out > 0) {
        if (dst) dst[out] = ':';
        ++out;
      }
      if (dst) memcpy(dst + out, start, n);
      out += n;
    }
    if (!*end) break;
    start = end + 1;
  }
  return out;
}

/* RANK, else LOCAL_RANK, read as ccpool-client's strtol reads it (leading
 * white space, a sign, decimal digits and nothing after them) and kept when
 * it lies in 0..INT32_MAX; else -1. */
static int32_t rank_of(char** envp) {
  const char* names[2] = {"RANK", "LOCAL_RANK"};
  for (int i = 0; i < 2; ++i) {
    const char* c = env_get(envp, names[i]);
    if (!c) continue;
    while (*c == ' ' || (*c >= '\t' && *c <= '\r')) ++c;
    int negative = *c == '-';
    if (*c == '-' || *c == '+') ++c;
    int64_t value = 0;
    const char* digits = c;
    for (; *c >= '0' && *c <= '9' && value <= 0x7fffffff; ++c) value = value * 10 + (*c - '0');
    if (c == digits || *c != 0 || value > 0x7fffffff || (negative && value != 0)) continue;
    return (int32_t)value;
  }
  return -1;
}

/* Walks the environment the request carries: the caller's, with the shim
 * taken out of LD_PRELOAD. Returns the bytes the list takes on the wire, or
 * 0 past the bounds; writes it when `o` is non-null. */
static size_t env_list(char** envp, struct out* o) {
  static const char kPreload[] = "LD_PRELOAD=";
  size_t count = 0, bytes = 0, wire = 4;
  for (char** e = envp; *e; ++e) {
    size_t n = str_len(*e);
    if (starts_with(*e, kPreload)) {
      size_t kept = preload_without_shim(*e + sizeof kPreload - 1, 0);
      if (kept == 0) continue;
      n = sizeof kPreload - 1 + kept;
    }
    ++count;
    bytes += n;
    wire += 4 + n;
  }
  if (count > MAX_ENV_ENTRIES || bytes > MAX_ENV_BYTES) return 0;
  if (!o) return wire;
  put_u32(o, (uint32_t)count);
  for (char** e = envp; *e; ++e) {
    if (starts_with(*e, kPreload)) {
      size_t kept = preload_without_shim(*e + sizeof kPreload - 1, 0);
      if (kept == 0) continue;
      put_u32(o, (uint32_t)(sizeof kPreload - 1 + kept));
      memcpy(o->p + o->n, kPreload, sizeof kPreload - 1);
      o->n += sizeof kPreload - 1;
      o->n += preload_without_shim(*e + sizeof kPreload - 1, (char*)o->p + o->n);
      continue;
    }
    put_bytes(o, *e, str_len(*e));
  }
  return wire;
}

/* ---- the reply ---- */

struct in {
  unsigned char* p;
  size_t n, at;
};

static int take(struct in* in, size_t n, const unsigned char** where) {
  if (in->n - in->at < n) return 0;
  *where = in->p + in->at;
  in->at += n;
  return 1;
}
static uint32_t u32_at(const unsigned char* b) {
  return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

/* Reads exactly n bytes, waiting at most `wait_ms` for each arrival. */
static int read_exact(int fd, unsigned char* dst, size_t n, int wait_ms) {
  size_t got = 0;
  while (got < n) {
    struct poll_fd p = {fd, POLLIN_, 0};
    struct {
      long sec, nsec;
    } ts = {wait_ms / 1000, (long)(wait_ms % 1000) * 1000000};
    long r = sys6(__NR_ppoll, (long)&p, 1, (long)&ts, 0, 8, 0);
    if (r == -EINTR_) continue;
    if (r <= 0) return 0;
    r = SYS(__NR_read, fd, dst + got, n - got);
    if (r == -EINTR_) continue;
    if (r <= 0) return 0;
    got += (size_t)r;
  }
  return 1;
}

/* One frame of `type`: 1 and its payload in a fresh mapping; -1 for an
 * error frame in its place; 0 for anything else. */
static int read_frame(int fd, uint8_t type, int wait_ms, struct in* in) {
  unsigned char h[12];
  if (!read_exact(fd, h, sizeof h, wait_ms)) return 0;
  if (h[0] != 'C' || h[1] != 'C' || h[2] != 'P' || h[3] != 'L' || h[4] != 1 || h[6] != 0 ||
      h[7] != 0)
    return 0;
  if (h[5] == 11) return -1;
  if (h[5] != type) return 0;
  uint32_t length = u32_at(h + 8);
  if (length > MAX_FRAME) return 0;
  in->p = map_bytes(length ? length : 1);
  in->n = length;
  in->at = 0;
  return in->p && read_exact(fd, in->p, length, wait_ms);
}

static void write_all(int fd, const unsigned char* p, size_t n) {
  while (n > 0) {
    long w = SYS(__NR_write, fd, p, n);
    if (w == -EINTR_) continue;
    if (w <= 0) return; /* a closed stdout is the reader's choice, as for the tool */
    p += w;
    n -= (size_t)w;
  }
}

/* ---- main ---- */

__attribute__((used)) void fast_main(long* sp) {
  int argc = (int)sp[0];
  g_argv = (char**)(sp + 1);
  g_envp = g_argv + argc + 1;
  if (argc < 1) exit_with(127); /* no argv[0] to hand anything to */
  find_full_client(argc > 0 ? g_argv[0] : 0);
  int first = 1;
  const char* inherited = 0;
  static const char kInherited[] = "--inherited-socket=";
  if (argc >= 2 && starts_with(g_argv[1], kInherited)) {
    inherited = g_argv[1] + sizeof kInherited - 1;
    first = 2;
  }
  if (argc < first + 2) hand_off(); /* ccpool-client prints the usage */
  g_program = g_argv[first];
  g_tool_argv = g_argv + first + 1;

  const char* disable = env_get(g_envp, "CCPOOL_DISABLE");
  if (disable && *disable && !(disable[0] == '0' && disable[1] == 0)) hand_off();
  if (env_get(g_envp, "CCPOOL_CLIENT_TIMEOUT")) hand_off();
  const char* socket_path = env_get(g_envp, "CCPOOL_SOCKET");
  if (!socket_path) socket_path = inherited;
  if (!socket_path || socket_path[0] != '/' || str_len(socket_path) >= 108) hand_off();
  if (g_program[0] != '/' || str_len(g_program) > PATH_CAP) hand_off();

  uint32_t euid = (uint32_t)SYS(__NR_geteuid, 0, 0, 0);
  if (!socket_dir_ok(socket_path, euid)) hand_off();

  char cwd[PATH_CAP];
  long cwd_len = SYS(__NR_getcwd, cwd, sizeof cwd, 0);
  if (cwd_len <= 1 || cwd[0] != '/') hand_off();
  size_t cwd_n = str_len(cwd);

  /* The frames' size first: hello, then exec. */
  size_t argc_tool = 0, argv_wire = 4;
  for (char** a = g_tool_argv; *a; ++a) {
    ++argc_tool;
    argv_wire += 4 + str_len(*a);
  }
  if (argc_tool > MAX_ARGS) hand_off();
  size_t env_wire = env_list(g_envp, 0);
  if (env_wire == 0) hand_off();
  size_t exec_len = 4 + str_len(g_program) + argv_wire + 4 + cwd_n + env_wire + 4 + 4 + 4 + 4 + 4;
  if (exec_len > MAX_FRAME) hand_off();
  size_t total = 12 + 16 + 12 + exec_len;
  struct out o = {map_bytes(total), 0};
  if (!o.p) hand_off();
  int32_t pid = (int32_t)SYS(__NR_getpid, 0, 0, 0);
  put_header(&o, 1, 16); /* hello */
  put_u32(&o, 1);        /* protocol version */
  put_u64(&o, 0);        /* capabilities */
  put_u32(&o, (uint32_t)pid);
  put_header(&o, 3, (uint32_t)exec_len);
  put_bytes(&o, g_program, str_len(g_program));
  put_u32(&o, (uint32_t)argc_tool);
  for (char** a = g_tool_argv; *a; ++a) put_bytes(&o, *a, str_len(*a));
  put_bytes(&o, cwd, cwd_n);
  env_list(g_envp, &o);
  put_u32(&o, (uint32_t)pid);
  put_u32(&o, (uint32_t)rank_of(g_envp));
  long mask = SYS(__NR_umask, 0, 0, 0);
  SYS(__NR_umask, mask, 0, 0);
  put_u32(&o, (uint32_t)mask);
  put_u32(&o, 0); /* inputs */
  put_u32(&o, 0); /* outputs */
  if (o.n != total) hand_off();

  long fd = SYS(__NR_socket, AF_UNIX_, SOCK_STREAM_ | SOCK_CLOEXEC_, 0);
  if (fd < 0) hand_off();
  struct sockaddr_unix addr;
  memset(&addr, 0, sizeof addr);
  addr.family = AF_UNIX_;
  memcpy(addr.path, socket_path, str_len(socket_path));
  /* ccpool-client gives the connect and the send 2 s: a service whose queue
   * is full or that reads nothing must not hold the compile. */
  struct {
    long sec, usec;
  } send_wait = {2, 0};
  if (sys6(__NR_setsockopt, fd, SOL_SOCKET_, SO_SNDTIMEO_, (long)&send_wait, sizeof send_wait, 0) !=
      0)
    hand_off();
  if (SYS(__NR_connect, fd, &addr, sizeof addr) != 0) hand_off(); /* ccpool-client starts it */
  struct peer_cred cred;
  uint32_t cred_len = sizeof cred;
  if (sys6(__NR_getsockopt, fd, SOL_SOCKET_, SO_PEERCRED_, (long)&cred, (long)&cred_len, 0) != 0 ||
      (cred.uid != euid && cred.uid != 0))
    hand_off();

  /* Our stdin goes along with the first bytes (a pass-through tool reads it). */
  int has_stdin = SYS(__NR_fcntl, FD_STDIN, F_GETFD, 0) >= 0;
  union {
    struct {
      size_t len;
      int level, type;
      int fd;
    } c;
    unsigned char raw[24];
  } control;
  memset(&control, 0, sizeof control);
  control.c.len = sizeof(size_t) + 2 * sizeof(int) + sizeof(int);
  control.c.level = SOL_SOCKET_;
  control.c.type = SCM_RIGHTS_;
  control.c.fd = FD_STDIN;
  struct iov iov = {o.p, total};
  struct msg_header m = {0, 0, &iov, 1, has_stdin ? &control : 0, has_stdin ? 24 : 0, 0};
  long sent;
  do {
    sent = SYS(__NR_sendmsg, fd, &m, MSG_NOSIGNAL_);
  } while (sent == -EINTR_);
  if (sent <= 0) hand_off();
  while ((size_t)sent < total) {
    long w = sys6(__NR_sendto, fd, (long)(o.p + sent), (long)(total - (size_t)sent), MSG_NOSIGNAL_,
                  0, 0);
    if (w == -EINTR_) continue;
    if (w <= 0) hand_off();
    sent += w;
  }

  /* hello-ok (16 bytes, our version), then the reply. An error frame in
   * place of either (a refusal, a bound) goes to ccpool-client, which asks
   * again and reports it; anything else lost after the send falls back. */
  static const char kLost[] = "the ccpool service closed the connection";
  static const char kBad[] = "the ccpool service's reply is malformed";
  struct in in;
  const unsigned char* b;
  int got = read_frame((int)fd, 2, HELLO_WAIT_MS, &in);
  if (got < 0) hand_off();
  if (!got) fall_back(kLost, 0, 0);
  if (in.n != 16 || u32_at(in.p) != 1) fall_back(kBad, 0, 0);
  got = read_frame((int)fd, 4, REPLY_WAIT_MS, &in);
  if (got < 0) hand_off();
  if (!got) fall_back(kLost, 0, 0);
  if (!take(&in, 1, &b) || b[0] > 2) fall_back(kBad, 0, 0);
  uint8_t status = b[0];
  if (!take(&in, 4, &b)) fall_back(kBad, 0, 0);
  int exit_code = (int)(u32_at(b) & 0xff);
  const unsigned char *out_p, *err_p, *msg_p;
  if (!take(&in, 4, &b)) fall_back(kBad, 0, 0);
  uint32_t out_n = u32_at(b);
  if (!take(&in, out_n, &out_p) || !take(&in, 4, &b)) fall_back(kBad, 0, 0);
  uint32_t err_n = u32_at(b);
  if (!take(&in, err_n, &err_p) || !take(&in, 1, &b) || b[0] > 5 || !take(&in, 4, &b))
    fall_back(kBad, 0, 0);
  uint32_t msg_n = u32_at(b);
  if (!take(&in, msg_n, &msg_p) || in.at != in.n) fall_back(kBad, 0, 0);
  if (status == 1) fall_back(msg_n ? "service stopping: " : "service stopping", msg_p, msg_n);
  if (status == 2) fall_back(msg_n ? "service failed: " : "service failed", msg_p, msg_n);
  write_all(1, out_p, out_n);
  write_all(2, err_p, err_n);
  exit_with(exit_code);
}
