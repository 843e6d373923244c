// Which libc entry points gcc 12 and clang 14 use, proven against the
// kernel: every path a real compile's processes hand to a file-lookup
// system call (strace -f) must be in the record libccpool-trace.so wrote,
// or be one the record explains another way (a path realpath(3) resolved
// component by component, the dynamic loader's own search, the record file
// itself). A lookup through an entry point the recorder does not hook shows
// up here as an unexplained path.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <regex>
#include <set>
#include <sstream>

#include "compiler/subprocess.h"
#include "compiler/trace_record.h"
#include "tests/compiler/executor.h"
#include "tests/support/scratch.h"

namespace ccpool::compiler::testing {
namespace {

std::string trace_library() {
  return std::string(CCPOOL_BIN_DIR) + "/../lib/libccpool-trace.so";
}

// "/a/b/../c" -> "/a/c" (no filesystem access).
std::string lexical(const std::string& path) {
  std::vector<std::string> parts;
  std::stringstream in(path);
  std::string part;
  while (std::getline(in, part, '/')) {
    if (part.empty() || part == ".") continue;
    if (part == "..") {
      if (!parts.empty()) parts.pop_back();
      continue;
    }
    parts.push_back(part);
  }
  std::string out;
  for (const std::string& p : parts) out += "/" + p;
  return out.empty() ? "/" : out;
}

void add_with_ancestors(const std::string& path, std::set<std::string>& out) {
  std::string p = lexical(path);
  while (!p.empty() && p != "/") {
    out.insert(p);
    p = p.substr(0, p.rfind('/'));
  }
}

// ld.so's own search for a program's shared objects (before any preloaded
// code runs): its opens are O_RDONLY|O_CLOEXEC of shared objects, its
// stats the hwcaps subdirectories. The objects it loads are recorded by
// content (L lines); its search is documented as not recorded.
bool by_the_loader(const std::string& call, const std::string& path, const std::string& rest) {
  if (path.find("ld.so.cache") != std::string::npos ||
      path.find("ld.so.preload") != std::string::npos)
    return true;
  bool library = path.find(".so") != std::string::npos;
  if ((call == "openat" || call == "open") && library &&
      rest.rfind("\", O_RDONLY|O_CLOEXEC)", 0) == 0)
    return true;
  for (const char* sub : {"glibc-hwcaps", "/tls", "avx512", "x86-64-v", "haswell", "/x86_64"}) {
    if (path.find(sub) != std::string::npos && call != "execve" && !library) return true;
  }
  return false;
}

// Paths of file-lookup system calls in an strace -f log (relative ones made
// absolute against `cwd`; those relative to a directory fd left out).
std::set<std::string> kernel_paths(const std::string& log, const std::string& cwd) {
  static const std::regex kCall(
      R"(^\d+\s+(openat|open|creat|stat|lstat|newfstatat|statx|access|faccessat|faccessat2|readlink|readlinkat|execve)\((.*))");
  std::set<std::string> out;
  std::stringstream in(log);
  std::string line;
  while (std::getline(in, line)) {
    std::smatch m;
    if (!std::regex_search(line, m, kCall)) continue;
    std::string args = m[2];
    bool at =
        std::string(m[1]).find("at") != std::string::npos && m[1] != "stat" && m[1] != "lstat";
    if (at && args.rfind("AT_FDCWD, ", 0) != 0)
      continue;  // relative to a directory fd (or fstat of one)
    size_t q = args.find('"');
    if (q == std::string::npos) continue;
    size_t end = args.find('"', q + 1);
    if (end == std::string::npos) continue;
    std::string path = args.substr(q + 1, end - q - 1);
    if (path.empty() || by_the_loader(m[1], path, args.substr(end))) continue;
    out.insert(lexical(path[0] == '/' ? path : cwd + "/" + path));
  }
  return out;
}

bool special(const std::string& p, const std::string& record) {
  return p == record || p.rfind("/proc/", 0) == 0 || p.rfind("/dev/", 0) == 0 ||
         p.rfind("/sys/", 0) == 0;
}

// Every link a realpath(3) of `path` read on the way (glibc's realpath
// calls its internal readlink on each): the record's K line stands for them.
void add_link_chain(const std::string& path, std::set<std::string>& out) {
  std::string p = path;
  for (int hops = 0; hops < 16; ++hops) {
    char buf[4096];
    ssize_t n = ::readlink(p.c_str(), buf, sizeof buf);
    if (n <= 0) return;
    std::string target(buf, static_cast<size_t>(n));
    p = target[0] == '/' ? target : p.substr(0, p.rfind('/') + 1) + target;
    add_with_ancestors(p, out);
  }
}

class TraceCompleteness : public ::testing::TestWithParam<std::vector<std::string>> {};

std::string case_name(const ::testing::TestParamInfo<std::vector<std::string>>& info) {
  static const char* const kNames[] = {"gcc_compile", "gcc_link", "clang_compile", "clang_link"};
  return kNames[info.index];
}

TEST_P(TraceCompleteness, EveryKernelLookupIsRecorded) {
  if (::access("/usr/bin/strace", X_OK) != 0)
    GTEST_SKIP() << "strace is not installed (scripts/setup-deps.sh)";
  ASSERT_EQ(::access(trace_library().c_str(), R_OK), 0)
      << trace_library() << " is missing: build ccpool-trace";
  std::string dir = ::ccpool::testing::scratch_dir();
  write_text(dir + "/inc/h.h", "#define V 2\n");
  write_text(dir + "/k.cpp",
             "#include <vector>\n#include <string>\n#include \"h.h\"\n"
             "#if __has_include(\"maybe.h\")\n#endif\n"
             "extern \"C\" int k() { std::vector<std::string> v{\"a\"}; return V + v.size(); }\n");
  std::string record = dir + "/record";
  write_text(record, "");
  std::vector<std::string> argv = {
      "/usr/bin/strace",
      "-f",
      "-qq",
      "-s",
      "4096",
      "-o",
      dir + "/strace.log",
      "-e",
      "trace=openat,open,creat,stat,lstat,newfstatat,statx,access,faccessat,"
      "faccessat2,readlink,readlinkat,execve"};
  for (const std::string& a : GetParam()) argv.push_back(a);
  std::vector<std::string> env = base_env();
  env.push_back("LD_PRELOAD=" + trace_library());
  env.push_back("CCPOOL_TRACE=" + record);
  Result<HelperOutput> ran = run_helper(argv, env, dir, std::chrono::seconds(300));
  ASSERT_TRUE(ran) << ran.error().message;
  ASSERT_EQ(ran->exit_code, 0) << ran->err;
  std::optional<std::vector<TraceEvent>> events = parse_trace(read_text(record));
  ASSERT_TRUE(events);
  std::set<std::string> recorded, explained;
  for (const TraceEvent& e : *events) {
    if (e.text.empty()) continue;
    std::string p = lexical(e.text[0] == '/' ? e.text : dir + "/" + e.text);
    recorded.insert(p);
    if (e.op == 'K') {  // glibc's realpath walks each component with its own lstat/readlink
      add_with_ancestors(p, explained);
      add_link_chain(p, explained);
      if (!e.text2.empty()) add_with_ancestors(e.text2, explained);
    }
  }
  std::vector<std::string> missing;
  for (const std::string& p : kernel_paths(read_text(dir + "/strace.log"), dir)) {
    if (recorded.count(p) || explained.count(p) || special(p, record)) continue;
    missing.push_back(p);
  }
  EXPECT_TRUE(missing.empty()) << missing.size() << " lookups the record does not hold, first: "
                               << (missing.empty() ? "" : missing[0])
                               << (missing.size() > 1 ? ", " + missing[1] : "");
  EXPECT_GT(recorded.size(), 50u);
}

INSTANTIATE_TEST_SUITE_P(
    Compilers, TraceCompleteness,
    ::testing::Values(std::vector<std::string>{"/usr/bin/g++", "-O2", "-g", "-Iinc", "-c", "k.cpp",
                                               "-o", "k.o"},
                      std::vector<std::string>{"/usr/bin/g++", "-O2", "-shared", "-fPIC", "-Iinc",
                                               "k.cpp", "-o", "k.so"},
                      std::vector<std::string>{"/usr/bin/clang++", "-O2", "-g", "-Iinc", "-c",
                                               "k.cpp", "-o", "k.o"},
                      std::vector<std::string>{"/usr/bin/clang++", "-O2", "-shared", "-fPIC",
                                               "-Iinc", "k.cpp", "-o", "k.so"}),
    case_name);

}  // namespace
}  // namespace ccpool::compiler::testing
