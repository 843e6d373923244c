#include <gtest/gtest.h>

#include "ipc/protocol.h"
#include "tests/support/peak_rss.h"

namespace ccpool::ipc {
namespace {

std::string header(uint8_t version, uint8_t type, uint32_t length) {
  std::string h = "CCPL";
  h.push_back(static_cast<char>(version));
  h.push_back(static_cast<char>(type));
  h.append(2, '\0');
  for (int i = 0; i < 4; ++i) h.push_back(static_cast<char>(length >> (8 * i)));
  return h;
}

Error expect_error(FrameReader& reader) {
  auto r = reader.next();
  EXPECT_FALSE(r.has_value());
  if (r) return Error(ErrorCode::kInternal, "no error");
  EXPECT_EQ(r.error().code, ErrorCode::kProtocol);
  return r.error();
}

TEST(FrameReader, ByteByByteYieldsEachMessageOnce) {
  ExecRequest r;
  r.program = "/bin/cc";
  r.argv = {"cc", "-c", "x.c"};
  r.cwd = "/w";
  r.env = {"A=1"};
  std::string stream = encode(Hello{}) + encode(r) + encode(Ping{}) + encode(StatusReply{"{}"});
  FrameReader reader;
  std::vector<size_t> kinds;
  for (char c : stream) {
    reader.feed(&c, 1);
    for (;;) {
      auto m = reader.next();
      ASSERT_TRUE(m.has_value()) << m.error().message;
      if (!*m) break;
      kinds.push_back((*m)->index());
    }
  }
  EXPECT_EQ(kinds, (std::vector<size_t>{0, 2, 8, 5}));
  EXPECT_EQ(reader.buffered(), 0u);
}

TEST(FrameReader, TruncatedFrameWaitsForMore) {
  std::string frame = encode(StatusReply{"abcdef"});
  FrameReader reader;
  reader.feed(frame.data(), frame.size() - 1);
  auto m = reader.next();
  ASSERT_TRUE(m.has_value());
  EXPECT_FALSE(m->has_value());
  EXPECT_EQ(reader.buffered(), frame.size() - 1);
  reader.feed(frame.data() + frame.size() - 1, 1);
  m = reader.next();
  ASSERT_TRUE(m && *m);
  EXPECT_EQ(std::get<StatusReply>(**m).json, "abcdef");
}

TEST(FrameReader, OversizedDeclaredLengthFailsOnHeaderAlone) {
  FrameReader reader;
  std::string h =
      header(kFrameVersion, static_cast<uint8_t>(MessageType::kExecReply), kMaxFrameSize + 1);
  reader.feed(h.data(), h.size());
  Error e = expect_error(reader);
  EXPECT_NE(e.message.find(std::to_string(kMaxFrameSize + 1)), std::string::npos) << e.message;
  EXPECT_EQ(reader.buffered(), kFrameHeaderSize);  // nothing reserved from the wire length
  // Poisoned: more bytes do not revive it.
  std::string ping = encode(Ping{});
  reader.feed(ping.data(), ping.size());
  expect_error(reader);
}

TEST(FrameReader, GarbageFailsAtFirstByte) {
  FrameReader reader;
  reader.feed("G", 1);
  Error e = expect_error(reader);
  EXPECT_NE(e.message.find("magic"), std::string::npos);
  FrameReader http;
  std::string get = "GET / HTTP/1.1\r\n\r\n";
  http.feed(get.data(), get.size());
  expect_error(http);
}

TEST(FrameReader, UnknownTypeAndZeroType) {
  for (uint8_t type : {uint8_t{0}, uint8_t{17}, uint8_t{255}}) {
    FrameReader reader;
    std::string h = header(kFrameVersion, type, 0);
    reader.feed(h.data(), 6);  // refused before the length even arrives
    Error e = expect_error(reader);
    EXPECT_NE(e.message.find("unknown message type " + std::to_string(type)), std::string::npos)
        << e.message;
  }
}

TEST(FrameReader, WrongFrameVersion) {
  FrameReader reader;
  std::string h = header(kFrameVersion + 1, static_cast<uint8_t>(MessageType::kPing), 0);
  reader.feed(h.data(), h.size());
  Error e = expect_error(reader);
  EXPECT_NE(e.message.find("frame version 2"), std::string::npos) << e.message;
}

TEST(FrameReader, NonzeroReservedBytes) {
  FrameReader reader;
  std::string h = header(kFrameVersion, static_cast<uint8_t>(MessageType::kPing), 0);
  h[7] = 1;
  reader.feed(h.data(), h.size());
  expect_error(reader);
}

TEST(FrameReader, TrailingBytesInsidePayload) {
  std::string frame = header(kFrameVersion, static_cast<uint8_t>(MessageType::kPing), 1) + "x";
  FrameReader reader;
  reader.feed(frame.data(), frame.size());
  Error e = expect_error(reader);
  EXPECT_NE(e.message.find("trailing"), std::string::npos) << e.message;
}

TEST(FrameReader, StringLengthBeyondPayload) {
  // A StatusReply whose str claims 1000 bytes inside a 6-byte payload.
  std::string payload = std::string("\xe8\x03\0\0", 4) + "ab";
  std::string frame =
      header(kFrameVersion, static_cast<uint8_t>(MessageType::kStatusReply), 6) + payload;
  FrameReader reader;
  reader.feed(frame.data(), frame.size());
  Error e = expect_error(reader);
  EXPECT_NE(e.message.find("truncated"), std::string::npos) << e.message;
}

// Each string field has its own bound, below the frame's, checked before the
// string is copied out of the frame: a 48 MiB program path in a frame within
// kMaxFrameSize is refused without allocating its length again.
TEST(FrameReader, StringOverItsBoundIsRefusedBeforeItIsCopied) {
  ExecRequest r;
  r.program = "/" + std::string(48u << 20, 'p');
  r.argv = {"cc"};
  r.cwd = "/w";
  std::string frame = encode(r);  // encode() checks nothing (encode_checked() would refuse)
  r.program.clear();
  r.program.shrink_to_fit();
  FrameReader reader;
  reader.feed(frame.data(), frame.size());
  frame.clear();
  frame.shrink_to_fit();
  Result<std::optional<Message>> m;
  uint64_t growth = ccpool::testing::peak_rss_growth([&] { m = reader.next(); });
  ASSERT_NE(growth, UINT64_MAX) << "cannot reset the peak RSS (/proc/self/clear_refs)";
  ASSERT_FALSE(m);
  EXPECT_EQ(m.error().code, ErrorCode::kProtocol);
  EXPECT_NE(m.error().message.find("program"), std::string::npos) << m.error().message;
  EXPECT_LT(growth, 16u << 20);
  r.program = "/" + std::string(kMaxPathLength - 1, 'p');  // exactly at the bound: decoded
  std::string at_bound = encode(r);
  FrameReader ok_reader;
  ok_reader.feed(at_bound.data(), at_bound.size());
  auto decoded = ok_reader.next();
  ASSERT_TRUE(decoded && *decoded) << (decoded ? "" : decoded.error().message);
  EXPECT_EQ(std::get<ExecRequest>(**decoded).program.size(), kMaxPathLength);
}

TEST(FrameReader, HugeListCountRefusedBeforeReserve) {
  // An exec frame: program "/x", then argv count 0xffffffff with no entries.
  std::string payload = std::string("\x02\0\0\0/x", 6) + std::string("\xff\xff\xff\xff", 4);
  std::string frame = header(kFrameVersion, static_cast<uint8_t>(MessageType::kExecRequest),
                             static_cast<uint32_t>(payload.size())) +
                      payload;
  FrameReader reader;
  reader.feed(frame.data(), frame.size());
  Error e = expect_error(reader);
  EXPECT_NE(e.message.find("argv"), std::string::npos) << e.message;
  // Within the bound but more than the bytes present: also refused.
  std::string payload2 = std::string("\x02\0\0\0/x", 6) + std::string("\x00\x01\0\0", 4);
  std::string frame2 = header(kFrameVersion, static_cast<uint8_t>(MessageType::kExecRequest),
                              static_cast<uint32_t>(payload2.size())) +
                       payload2;
  FrameReader reader2;
  reader2.feed(frame2.data(), frame2.size());
  Error e2 = expect_error(reader2);
  EXPECT_NE(e2.message.find("exceeds the frame"), std::string::npos) << e2.message;
}

TEST(FrameReader, BadEnumValues) {
  ExecReply reply;
  std::string frame = encode(reply);
  frame[kFrameHeaderSize] = 9;  // status
  FrameReader reader;
  reader.feed(frame.data(), frame.size());
  Error e = expect_error(reader);
  EXPECT_NE(e.message.find("status"), std::string::npos) << e.message;
}

TEST(FrameReader, ManyFramesKeepBufferBounded) {
  FrameReader reader;
  std::string frame = encode(StatusReply{std::string(1000, 'j')});
  for (int i = 0; i < 1000; ++i) {
    reader.feed(frame.data(), frame.size() / 2);
    auto none = reader.next();
    ASSERT_TRUE(none && !*none);
    reader.feed(frame.data() + frame.size() / 2, frame.size() - frame.size() / 2);
    auto m = reader.next();
    ASSERT_TRUE(m && *m);
    EXPECT_EQ(reader.buffered(), 0u);
  }
}

}  // namespace
}  // namespace ccpool::ipc
