// Shared fixture for the tier tests: one real redis-server per test, tiers
// ("nodes") created against it with generous timeouts unless a test shrinks them.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>

#include "remote/tier.h"
#include "tests/remote/redis_server.h"
#include "tests/support/scratch.h"

namespace ccpool::remote {

class RedisEnvironment : public ::testing::Environment {
 public:
  void SetUp() override { ccpool::testing::exit_125_without_redis(); }
};

class RemoteTest : public ::testing::Test {
 protected:
  void SetUp() override { start_server({}); }

  void start_server(std::vector<std::string> extra) {
    m_server.reset();
    auto server =
        ccpool::testing::RedisServer::start(ccpool::testing::scratch_dir(), std::move(extra));
    ASSERT_TRUE(server) << server.error().message;
    m_server = std::move(*server);
  }

  RemoteOptions options() const {
    RemoteOptions o;
    o.url = m_server->url();
    o.connect_timeout = std::chrono::milliseconds(2000);
    o.op_timeout = std::chrono::milliseconds(2000);
    return o;
  }

  std::unique_ptr<Tier> make_tier(const RemoteOptions& o) {
    auto tier = Tier::create(o);
    EXPECT_TRUE(tier) << tier.error().message;
    return tier ? std::move(*tier) : nullptr;
  }

  // Raw command on the server, bypassing the tier (planting, inspecting).
  Reply raw(const std::vector<std::string_view>& args) {
    auto reply = m_server->command(args);
    EXPECT_TRUE(reply) << reply.error().message;
    return reply ? *reply : Reply{};
  }

  static std::string pattern(size_t n, char seed) {
    std::string s(n, '\0');
    for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>(seed + i * 31 + (i >> 8));
    return s;
  }

  std::unique_ptr<ccpool::testing::RedisServer> m_server;
};

// Hang guard: a call that should be bounded by timeouts returned within this.
inline constexpr std::chrono::seconds kHangGuard{5};

}  // namespace ccpool::remote
