#include <gtest/gtest.h>
#include <malloc.h>

#include <string>
#include <vector>

#include "resp/front.h"

namespace ccpool::resp {
namespace {

using Args = std::vector<std::string>;

// Feeds everything, then drains complete commands until the parser needs more.
std::vector<Args> drain(RespParser& parser) {
  std::vector<Args> commands;
  while (true) {
    auto next = parser.next();
    EXPECT_TRUE(next.has_value()) << next.error().message;
    if (!next || !*next) return commands;
    commands.push_back(std::move(**next));
  }
}

TEST(RespParser, ParsesPipelinedArrays) {
  RespParser parser(1 << 20, 1024);
  parser.feed(
      "*1\r\n$4\r\nPING\r\n*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nhello\r\n*2\r\n$3\r\nGET\r\n$"
      "1\r\nk\r\n");
  auto commands = drain(parser);
  ASSERT_EQ(commands.size(), 3u);
  EXPECT_EQ(commands[0], (Args{"PING"}));
  EXPECT_EQ(commands[1], (Args{"SET", "k", "hello"}));
  EXPECT_EQ(commands[2], (Args{"GET", "k"}));
  EXPECT_EQ(parser.buffered(), 0u);
}

TEST(RespParser, SplitReadsByteByByteGiveTheSameCommands) {
  std::string value;
  for (int i = 0; i < 256; ++i) value.push_back(static_cast<char>(i));  // CR, LF and NUL inside
  std::string wire = "*3\r\n$3\r\nSET\r\n$3\r\nbin\r\n$256\r\n" + value +
                     "\r\nPING inline\r\n*1\r\n$4\r\nQUIT\r\n";
  RespParser parser(1 << 20, 1024);
  std::vector<Args> commands;
  for (char c : wire) {
    parser.feed(std::string_view(&c, 1));
    for (auto& command : drain(parser)) commands.push_back(std::move(command));
  }
  ASSERT_EQ(commands.size(), 3u);
  EXPECT_EQ(commands[0], (Args{"SET", "bin", value}));
  EXPECT_EQ(commands[1], (Args{"PING", "inline"}));
  EXPECT_EQ(commands[2], (Args{"QUIT"}));
}

TEST(RespParser, InlineCommandsSplitOnBlanksAndQuotes) {
  RespParser parser(1 << 20, 1024);
  parser.feed("PING\r\n\r\nset  k \"a b\\x41\\n\" 'it\\'s'\nGET k\n");
  auto commands = drain(parser);
  ASSERT_EQ(commands.size(), 3u);  // the blank line is a keep-alive
  EXPECT_EQ(commands[0], (Args{"PING"}));
  EXPECT_EQ(commands[1], (Args{"set", "k", "a bA\n", "it's"}));
  EXPECT_EQ(commands[2], (Args{"GET", "k"}));
}

TEST(RespParser, UnbalancedQuotesAreAProtocolError) {
  RespParser parser(1 << 20, 1024);
  parser.feed("SET k \"open\r\n");
  auto next = parser.next();
  ASSERT_FALSE(next.has_value());
  EXPECT_EQ(next.error().code, ErrorCode::kProtocol);
  EXPECT_EQ(next.error().message, "Protocol error: unbalanced quotes in request");
}

TEST(RespParser, TruncatedBulkWaitsForMoreBytes) {
  RespParser parser(1 << 20, 1024);
  parser.feed("*2\r\n$3\r\nGET\r\n$10\r\nabc");
  auto next = parser.next();
  ASSERT_TRUE(next.has_value());
  EXPECT_FALSE(next->has_value());
  parser.feed("defghij\r\n");
  auto done = parser.next();
  ASSERT_TRUE(done && *done);
  EXPECT_EQ(**done, (Args{"GET", "abcdefghij"}));
}

TEST(RespParser, BulkWithoutCrlfIsAProtocolError) {
  RespParser parser(1 << 20, 1024);
  parser.feed("*1\r\n$3\r\nGETXX");
  auto next = parser.next();
  ASSERT_FALSE(next.has_value());
  EXPECT_EQ(next.error().message, "Protocol error: expected CRLF after bulk data");
}

struct BadInput {
  const char* wire;
  const char* message;
};

class RespParserRejects : public ::testing::TestWithParam<BadInput> {};

TEST_P(RespParserRejects, WithRedisText) {
  RespParser parser(1 << 20, 1024);
  parser.feed(GetParam().wire);
  auto next = parser.next();
  ASSERT_FALSE(next.has_value());
  EXPECT_EQ(next.error().code, ErrorCode::kProtocol);
  EXPECT_EQ(next.error().message, GetParam().message);
  // The parser stays failed: the connection is to be closed.
  parser.feed("*1\r\n$4\r\nPING\r\n");
  EXPECT_FALSE(parser.next().has_value());
  EXPECT_EQ(parser.buffered(), 0u);
}

INSTANTIATE_TEST_SUITE_P(
    Malformed, RespParserRejects,
    ::testing::Values(
        BadInput{"*1\r\n$-5\r\n", "Protocol error: invalid bulk length"},
        BadInput{"*1\r\n$-1\r\n", "Protocol error: invalid bulk length"},
        BadInput{"*-2\r\n", "Protocol error: invalid multibulk length"},
        BadInput{"*x\r\n", "Protocol error: invalid multibulk length"},
        BadInput{"*2000\r\n", "Protocol error: invalid multibulk length"},  // over max_args
        BadInput{"*1\r\n$+3\r\n", "Protocol error: invalid bulk length"},
        BadInput{"*1\r\n:3\r\n", "Protocol error: expected '$', got ':'"},
        BadInput{"*1\r\n$99999999999999999999\r\n", "Protocol error: invalid bulk length"},
        BadInput{"*1\r\n$1099511627776\r\n", "Protocol error: invalid bulk length"}));

TEST(RespParser, EmptyAndNullArraysAreSkipped) {
  RespParser parser(1 << 20, 1024);
  parser.feed("*0\r\n*-1\r\n*1\r\n$4\r\nPING\r\n");
  auto commands = drain(parser);
  ASSERT_EQ(commands.size(), 1u);
  EXPECT_EQ(commands[0], (Args{"PING"}));
}

TEST(RespParser, OverlongLinesAreRejectedWithoutNewline) {
  RespParser parser(1 << 20, 1024);
  parser.feed(std::string(70 * 1024, 'a'));  // no newline in sight, over the 64 KiB inline cap
  auto next = parser.next();
  ASSERT_FALSE(next.has_value());
  EXPECT_EQ(next.error().message, "Protocol error: too big inline request");

  RespParser header(1 << 20, 1024);
  header.feed("*1\r\n$" + std::string(300, '1'));
  auto bad = header.next();
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().message, "Protocol error: too big bulk count string");
}

// A declared length is never allocated: a 200 MiB bulk header followed by a few
// bytes leaves the parser holding only those bytes.
TEST(RespParser, HugeDeclaredLengthAllocatesNothing) {
  size_t before = mallinfo2().uordblks;
  RespParser parser(256u << 20, 1024 * 1024);
  parser.feed("*1048576\r\n$209715200\r\nabc");
  auto next = parser.next();
  ASSERT_TRUE(next.has_value());
  EXPECT_FALSE(next->has_value());
  size_t after = mallinfo2().uordblks;
  EXPECT_LT(after - std::min(after, before), 1u << 20)
      << "bytes allocated for a 200 MiB declaration";
  EXPECT_EQ(parser.buffered(), 3u);
}

TEST(RespParser, OversizedBulkIsAnsweredAndSkippedAsItArrives) {
  RespParser parser(16, 1024);
  parser.feed("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$40\r\n");
  auto too_large = parser.next();
  ASSERT_FALSE(too_large.has_value());
  EXPECT_EQ(too_large.error().code, ErrorCode::kFull);
  // The 40 bytes arrive in pieces and are dropped, never buffered.
  parser.feed(std::string(25, 'x'));
  EXPECT_EQ(parser.buffered(), 0u);
  auto waiting = parser.next();
  ASSERT_TRUE(waiting && !*waiting);
  parser.feed(std::string(15, 'x') + "\r\n*1\r\n$4\r\nPING\r\n");
  auto commands = drain(parser);
  ASSERT_EQ(commands.size(), 1u);
  EXPECT_EQ(commands[0], (Args{"PING"}));
}

TEST(RespParser, LaterArgumentsOfAnOversizedCommandAreDroppedToo) {
  RespParser parser(16, 1024);
  parser.feed("*4\r\n$4\r\nMSET\r\n$40\r\n" + std::string(40, 'v') +
              "\r\n$1\r\nk\r\n$2\r\nok\r\nPING\r\n");
  auto too_large = parser.next();
  ASSERT_FALSE(too_large.has_value());
  EXPECT_EQ(too_large.error().code, ErrorCode::kFull);
  auto commands = drain(parser);
  ASSERT_EQ(commands.size(), 1u);
  EXPECT_EQ(commands[0], (Args{"PING"}));
}

TEST(RespParser, AbsurdLengthIsAProtocolErrorEvenWithASmallLimit) {
  RespParser parser(16, 1024);
  parser.feed("*1\r\n$600000000\r\n");  // over max(2 * 16, 512 MiB)
  auto next = parser.next();
  ASSERT_FALSE(next.has_value());
  EXPECT_EQ(next.error().code, ErrorCode::kProtocol);
}

TEST(RespParser, GarbageBytesNeverCrashAndEndInErrorOrWait) {
  // A deterministic byte soup: each prefix must give commands, a wait or an error.
  uint32_t state = 12345;
  for (int round = 0; round < 200; ++round) {
    RespParser parser(1024, 64);
    std::string soup;
    for (int i = 0; i < 512; ++i) {
      state = state * 1103515245 + 12345;
      const char alphabet[] = "*$\r\n0123456789-+:abc \"'\\x";
      soup.push_back(round % 2 ? static_cast<char>(state >> 24)
                               : alphabet[(state >> 24) % (sizeof(alphabet) - 1)]);
    }
    parser.feed(soup);
    for (int guard = 0; guard < 1000; ++guard) {
      auto next = parser.next();
      if (!next && next.error().code == ErrorCode::kProtocol) break;
      if (next && !*next) break;
    }
    EXPECT_LE(parser.buffered(), soup.size());
  }
}

}  // namespace
}  // namespace ccpool::resp
