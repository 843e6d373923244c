// Real clients against a real resp_test_server process: redis-cli,
// Debian's /usr/bin/python3 with python3-redis, and the same clients run as
// another uid through setpriv. A missing tool exits 125 (CTest skip).
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

#include "base/fs.h"
#include "tests/support/scratch.h"

extern char** environ;

namespace ccpool::resp {
namespace {

struct Output {
  int status = -1;
  std::string text;
};

Output shell(const std::string& command) {
  Output out;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (!pipe) return out;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) out.text.append(buffer, n);
  int status = pclose(pipe);
  out.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

void require_tool(const std::string& check, const std::string& why) {
  if (shell(check).status != 0) {
    std::fprintf(stderr, "SKIP: %s (install it with scripts/setup-deps.sh)\n", why.c_str());
    std::exit(125);
  }
}

void require_redis_cli() {
  require_tool("command -v redis-cli", "redis-cli (redis-tools) is missing");
}
void require_redis_py() {
  require_tool("/usr/bin/python3 -c 'import redis'",
               "/usr/bin/python3 with python3-redis is missing");
}

// One resp_test_server child, stopped with SIGTERM at the end of the test.
class ServerProcess {
 public:
  ServerProcess(const std::string& dir, const std::string& extra_flags = "") {
    m_socket = dir + "/resp.sock";
    std::string ready = dir + "/ready";
    std::string command = ccpool::testing::build_binary("resp_test_server") + " --unix " +
                          m_socket + " --tcp-port -1 --ready-file " + ready + " " + extra_flags;
    const char* argv[] = {"/bin/sh", "-c", nullptr, nullptr};
    std::string exec_command = "exec " + command;
    argv[2] = exec_command.c_str();
    if (posix_spawn(&m_pid, "/bin/sh", nullptr, nullptr, const_cast<char**>(argv), environ) != 0)
      m_pid = -1;
    for (int i = 0; i < 1000 && m_pid > 0; ++i) {  // up to 10 s for the ready file
      auto port = read_file(ready);
      if (port && !port->empty()) {
        m_port = std::atoi(port->c_str());
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  ~ServerProcess() {
    if (m_pid > 0) {
      kill(m_pid, SIGTERM);
      int status = 0;
      waitpid(m_pid, &status, 0);
    }
  }
  bool ready() const { return m_port > 0; }
  const std::string& socket() const { return m_socket; }
  int port() const { return m_port; }
  std::string cli_unix() const { return "redis-cli -s " + m_socket + " "; }
  std::string cli_tcp() const {
    return "redis-cli -h 127.0.0.1 -p " + std::to_string(m_port) + " ";
  }

 private:
  pid_t m_pid = -1;
  std::string m_socket;
  int m_port = 0;
};

std::string script(const std::string& name) {
  return std::string(CCPOOL_SOURCE_DIR) + "/tests/resp/" + name;
}

TEST(RedisCli, SetGetMgetMsetDelExistsAndErrors) {
  require_redis_cli();
  ServerProcess server(ccpool::testing::scratch_dir());
  ASSERT_TRUE(server.ready());
  for (const std::string& cli : {server.cli_unix(), server.cli_tcp()}) {
    EXPECT_EQ(shell(cli + "SET greeting hello").text, "OK\n");
    EXPECT_EQ(shell(cli + "GET greeting").text, "hello\n");
    EXPECT_EQ(shell(cli + "MSET a 1 b 2").text, "OK\n");
    EXPECT_EQ(shell(cli + "MGET a missing b").text, "1\n\n2\n");
    EXPECT_EQ(shell(cli + "EXISTS a b missing").text, "2\n");
    EXPECT_EQ(shell(cli + "DEL a missing").text, "1\n");
    EXPECT_EQ(shell(cli + "EXISTS a").text, "0\n");
    EXPECT_EQ(shell(cli + "SET n v NX").text, "OK\n");
    EXPECT_EQ(shell(cli + "SET n w NX").text, "\n");  // nil
    EXPECT_EQ(shell(cli + "SET x v XX").text, "\n");
    EXPECT_EQ(shell(cli + "DEL n").text, "1\n");
    EXPECT_EQ(shell(cli + "FOO bar baz").text,
              "ERR unknown command 'FOO', with args beginning with: 'bar' 'baz' \n\n");
    EXPECT_EQ(shell(cli + "GET").text, "ERR wrong number of arguments for 'get' command\n\n");
    EXPECT_EQ(shell(cli + "SET k v EX 0").text, "ERR invalid expire time in 'set' command\n\n");
  }
}

TEST(RedisCli, ExpiryWithExAndPx) {
  require_redis_cli();
  ServerProcess server(ccpool::testing::scratch_dir());
  ASSERT_TRUE(server.ready());
  std::string cli = server.cli_unix();
  EXPECT_EQ(shell(cli + "SET long v EX 100").text, "OK\n");
  int ttl = std::atoi(shell(cli + "TTL long").text.c_str());
  EXPECT_GE(ttl, 1);
  EXPECT_LE(ttl, 100);
  EXPECT_EQ(shell(cli + "SET short v PX 50").text, "OK\n");
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // well past the 50 ms deadline
  EXPECT_EQ(shell(cli + "GET short").text, "\n");
  EXPECT_EQ(shell(cli + "TTL short").text, "-2\n");
  EXPECT_EQ(shell(cli + "TTL long").text.empty(), false);
}

TEST(RedisCli, PipeModeSendsTenThousandCommandsInOneStream) {
  require_redis_cli();
  ServerProcess server(ccpool::testing::scratch_dir());
  ASSERT_TRUE(server.ready());
  std::string input = ccpool::testing::scratch_dir() + "/commands.resp";
  {
    std::ofstream out(input, std::ios::binary);
    for (int i = 0; i < 10000; ++i) {
      std::string key = "pipe:" + std::to_string(i), value = std::to_string(i * 7);
      out << "*3\r\n$3\r\nSET\r\n$" << key.size() << "\r\n"
          << key << "\r\n$" << value.size() << "\r\n"
          << value << "\r\n";
    }
  }
  Output piped = shell(server.cli_tcp() + "--pipe < " + input);
  EXPECT_EQ(piped.status, 0) << piped.text;
  EXPECT_NE(piped.text.find("errors: 0, replies: 10000"), std::string::npos) << piped.text;
  EXPECT_EQ(shell(server.cli_unix() + "GET pipe:9999").text, "69993\n");
}

TEST(RedisPy, FullCheckOverUnixSocketUrlAndTcp) {
  require_redis_py();
  ServerProcess server(ccpool::testing::scratch_dir());
  ASSERT_TRUE(server.ready());
  Output out = shell("/usr/bin/python3 " + script("redis_py_check.py") + " --unix " +
                     server.socket() + " --port " + std::to_string(server.port()));
  EXPECT_EQ(out.status, 0) << out.text;
  EXPECT_NE(out.text.find("0 failure(s)"), std::string::npos) << out.text;
}

TEST(RedisPy, InductorAndTritonRemoteCacheCalls) {
  require_redis_py();
  ServerProcess server(ccpool::testing::scratch_dir());
  ASSERT_TRUE(server.ready());
  Output out = shell("/usr/bin/python3 " + script("framework_compat_check.py") + " --unix " +
                     server.socket() + " --port " + std::to_string(server.port()));
  EXPECT_EQ(out.status, 0) << out.text;
  EXPECT_NE(out.text.find("0 failure(s)"), std::string::npos) << out.text;
}

// Cross-protocol requests (issue 23): a web page in the user's own browser, or
// any same-uid SSRF, can make an HTTP client send its request to the front's
// TCP port. Its lines must never run as commands. Real curl, then a Redis
// client checks that nothing was written.
void require_curl() {
  require_tool("command -v curl", "curl is missing");
}

std::string write_body(const std::string& dir, const std::string& keys_prefix) {
  std::string path = dir + "/body.txt";
  std::ofstream out(path, std::ios::binary);
  out << "SET " << keys_prefix << "1 pwned\r\n"
      << "*3\r\n$3\r\nSET\r\n$" << keys_prefix.size() + 1 << "\r\n"
      << keys_prefix << "2\r\n$5\r\npwned\r\n";
  return path;
}

TEST(CrossProtocol, CurlPostToTheTcpPortRunsNothing) {
  require_curl();
  require_redis_cli();
  std::string dir = ccpool::testing::scratch_dir();
  ServerProcess server(dir);
  ASSERT_TRUE(server.ready());
  std::string body = write_body(dir, "post:");
  // What a browser's form POST sends; curl gives up on the non-HTTP answer (or the close).
  Output post = shell("curl -s -m 20 -o /dev/null --data-binary @" + body +
                      " http://127.0.0.1:" + std::to_string(server.port()) + "/");
  EXPECT_NE(post.status, 28) << "curl timed out: the front kept the connection open\n" << post.text;
  EXPECT_EQ(shell(server.cli_unix() + "EXISTS post:1 post:2").text, "0\n");
  // A Redis client still works on TCP.
  EXPECT_EQ(shell(server.cli_tcp() + "SET after ok").text, "OK\n");
  std::string stats = shell(server.cli_unix() + "INFO stats").text;
  EXPECT_NE(stats.find("ccpool_cross_protocol:1"), std::string::npos) << stats;
}

TEST(CrossProtocol, CurlRequestWithoutPostOrHostRunsNothingOnTcp) {
  // redis-server's guard looks for POST and Host: only. An HTTP/1.0 PUT with
  // no Host header passes it; on TCP the front also refuses any inline
  // command before the first RESP array, so the body still never runs.
  require_curl();
  require_redis_cli();
  std::string dir = ccpool::testing::scratch_dir();
  ServerProcess server(dir);
  ASSERT_TRUE(server.ready());
  std::string body = write_body(dir, "put:");
  Output put = shell("curl -s -m 20 -o /dev/null -0 -X PUT -H 'Host:' --data-binary @" + body +
                     " http://127.0.0.1:" + std::to_string(server.port()) + "/");
  EXPECT_NE(put.status, 28) << "curl timed out: the front kept the connection open\n" << put.text;
  EXPECT_EQ(shell(server.cli_unix() + "EXISTS put:1 put:2").text, "0\n");
  EXPECT_EQ(shell(server.cli_tcp() + "SET after ok").text, "OK\n");
}

void require_root_and_setpriv() {
  if (geteuid() != 0) {
    std::fprintf(stderr, "SKIP: cross-uid tests need root to run clients as uid 65534\n");
    std::exit(125);
  }
  require_tool("command -v setpriv", "setpriv (util-linux) is missing");
}

const char* kAsNobody = "setpriv --reuid=65534 --regid=65534 --clear-groups ";

TEST(CrossUid, RedisCliOfAnotherUidIsRefusedOnBothListeners) {
  require_redis_cli();
  require_root_and_setpriv();
  std::string dir = ccpool::testing::scratch_dir();
  ASSERT_EQ(chmod(dir.c_str(), 0755), 0);  // the socket dir must be reachable by uid 65534
  ServerProcess server(dir);
  ASSERT_TRUE(server.ready());
  Output tcp = shell(kAsNobody + server.cli_tcp() + "SET stolen 1");
  EXPECT_NE(tcp.text.find("refused peer uid 65534"), std::string::npos) << tcp.text;
  Output unix_closed = shell(kAsNobody + server.cli_unix() + "PING");
  EXPECT_NE(unix_closed.text.find("Permission denied"), std::string::npos)
      << unix_closed.text;                             // 0600 socket
  ASSERT_EQ(chmod(server.socket().c_str(), 0666), 0);  // let SO_PEERCRED do the refusing
  Output unix_open = shell(kAsNobody + server.cli_unix() + "SET stolen 1");
  EXPECT_EQ(unix_open.text.find("OK"), std::string::npos) << unix_open.text;
  EXPECT_EQ(shell(server.cli_unix() + "EXISTS stolen").text, "0\n");
  EXPECT_NE(shell(server.cli_unix() + "INFO stats").text.find("ccpool_refused_peers:2"),
            std::string::npos);
}

TEST(CrossUid, PythonOfAnotherUidNeedsThePasswordOnTcp) {
  require_redis_py();
  require_root_and_setpriv();
  std::string dir = ccpool::testing::scratch_dir();
  ASSERT_EQ(chmod(dir.c_str(), 0755), 0);
  ServerProcess server(dir, "--password pw");
  ASSERT_TRUE(server.ready());
  std::string port = std::to_string(server.port());
  Output without =
      shell(kAsNobody + std::string("/usr/bin/python3 -c \"import redis; redis.Redis(port=") +
            port + ").set('k', 'v')\"");
  EXPECT_NE(without.status, 0);
  EXPECT_NE(without.text.find("Authentication required"), std::string::npos) << without.text;
  Output with =
      shell(kAsNobody + std::string("/usr/bin/python3 -c \"import redis; r = redis.Redis(port=") +
            port + ", password='pw'); assert r.set('k', 'v'); assert r.get('k') == b'v'\"");
  EXPECT_EQ(with.status, 0) << with.text;
}

}  // namespace
}  // namespace ccpool::resp
