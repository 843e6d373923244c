// A small tool the pool tests run as a real child process.
//   exit N | raise SIG | sleep MS | alloc MB | env | emit BYTES
//   forkgrand FILE   fork a grandchild; write "leader grandchild" to FILE; both sleep
//   orphan FILE      fork a grandchild that holds stdout and sleeps; write its pid; exit 0
//   ignoreterm FILE  ignore SIGTERM, write FILE, sleep
//   concurrency FILE MS   count itself in FILE ("current max", flock'd) while sleeping MS
//   fds              print its open descriptors, e.g. "0 1 2"
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

extern char** environ;

namespace {

void write_all(int fd, const char* data, size_t size) {
  while (size > 0) {
    ssize_t n = write(fd, data, size);
    if (n <= 0) std::exit(90);
    data += n;
    size -= static_cast<size_t>(n);
  }
}

// Written to a temp name and renamed, so a reader never sees half a file.
void publish(const std::string& path, const std::string& text) {
  std::string tmp = path + ".tmp";
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  write_all(fd, text.data(), text.size());
  close(fd);
  rename(tmp.c_str(), path.c_str());
}

[[noreturn]] void sleep_forever() {
  for (;;) pause();
}

// Patterns shared with the test: every byte value, including 0 and '\n'.
char out_byte(size_t i) {
  return static_cast<char>((i * 7 + (i >> 9)) & 0xff);
}
char err_byte(size_t i) {
  return static_cast<char>((i * 13 + 5) & 0xff);
}

int emit(size_t bytes) {
  // Alternate streams so a runner that drains only one pipe at a time deadlocks.
  std::vector<char> out(bytes), err(bytes);
  for (size_t i = 0; i < bytes; ++i) {
    out[i] = out_byte(i);
    err[i] = err_byte(i);
  }
  const size_t chunk = 4096;
  for (size_t off = 0; off < bytes; off += chunk) {
    size_t n = std::min(chunk, bytes - off);
    write_all(1, out.data() + off, n);
    write_all(2, err.data() + off, n);
  }
  return 0;
}

int concurrency(const std::string& path, int ms) {
  int fd = open(path.c_str(), O_RDWR | O_CREAT, 0644);
  auto update = [fd](int delta) {
    flock(fd, LOCK_EX);
    char buf[64] = {};
    pread(fd, buf, sizeof buf - 1, 0);
    long cur = 0, max = 0;
    std::sscanf(buf, "%ld %ld", &cur, &max);
    cur += delta;
    if (cur > max) max = cur;
    std::string text = std::to_string(cur) + " " + std::to_string(max) + "\n";
    ftruncate(fd, 0);
    pwrite(fd, text.data(), text.size(), 0);
    flock(fd, LOCK_UN);
  };
  update(+1);
  usleep(static_cast<useconds_t>(ms) * 1000);
  update(-1);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return 99;
  std::string cmd = argv[1];
  std::string arg = argc > 2 ? argv[2] : "";
  if (cmd == "exit") return std::atoi(arg.c_str());
  if (cmd == "raise") {
    signal(std::atoi(arg.c_str()), SIG_DFL);
    raise(std::atoi(arg.c_str()));
    return 98;
  }
  if (cmd == "sleep") {
    usleep(static_cast<useconds_t>(std::atoi(arg.c_str())) * 1000);
    return 0;
  }
  if (cmd == "alloc") {
    size_t bytes = static_cast<size_t>(std::atoi(arg.c_str())) << 20;
    char* p = static_cast<char*>(std::malloc(bytes));
    std::memset(p, 1, bytes);
    std::printf("%d\n", p[bytes / 2]);
    return 0;
  }
  if (cmd == "env") {
    char cwd[4096];
    if (!getcwd(cwd, sizeof cwd)) return 97;
    std::string text = std::string(cwd) + '\n';
    for (char** e = environ; *e; ++e) text += std::string(*e) + '\0';
    write_all(1, text.data(), text.size());
    return 0;
  }
  if (cmd == "emit") return emit(std::strtoull(arg.c_str(), nullptr, 10));
  if (cmd == "forkgrand") {
    pid_t child = fork();
    if (child == 0) sleep_forever();
    publish(arg, std::to_string(getpid()) + " " + std::to_string(child));
    sleep_forever();
  }
  if (cmd == "orphan") {
    pid_t child = fork();
    if (child == 0) sleep_forever();
    publish(arg, std::to_string(child));
    return 0;
  }
  if (cmd == "ignoreterm") {
    signal(SIGTERM, SIG_IGN);
    publish(arg, "ready");
    sleep_forever();
  }
  if (cmd == "concurrency") return concurrency(arg, argc > 3 ? std::atoi(argv[3]) : 10);
  if (cmd == "fds") {
    DIR* dir = opendir("/proc/self/fd");
    if (!dir) return 96;
    std::vector<int> fds;
    while (dirent* e = readdir(dir)) {
      if (e->d_name[0] != '.' && std::atoi(e->d_name) != dirfd(dir))
        fds.push_back(std::atoi(e->d_name));
    }
    closedir(dir);
    std::sort(fds.begin(), fds.end());
    std::string text;
    for (int fd : fds) text += (text.empty() ? "" : " ") + std::to_string(fd);
    text += '\n';
    write_all(1, text.data(), text.size());
    return 0;
  }
  return 99;
}
