#include "ipc/protocol.h"

#include <gtest/gtest.h>

#include <cstring>

namespace ccpool::ipc {
namespace {

ExecRequest sample_request() {
  ExecRequest r;
  r.program = "/usr/bin/g++";
  r.argv = {"g++", "-O2", "-c", "k.cpp", "-o", "k.o", ""};
  r.cwd = "/tmp/build";
  r.env = {"PATH=/usr/bin", "LANG=C", "EMPTY="};
  r.client_pid = 4242;
  r.rank = 3;
  r.umask = 027;
  r.inputs = {"k.cpp"};
  r.outputs = {"k.o", "/abs/k.d"};
  return r;
}

Message round_trip(const Message& m) {
  std::string frame = encode(m);
  EXPECT_GE(frame.size(), kFrameHeaderSize);
  FrameReader reader;
  reader.feed(frame.data(), frame.size());
  auto decoded = reader.next();
  EXPECT_TRUE(decoded.has_value()) << (decoded ? "" : decoded.error().message);
  EXPECT_TRUE(decoded && decoded->has_value());
  EXPECT_EQ(reader.buffered(), 0u);
  return decoded && *decoded ? **decoded : Message(Ping{});
}

TEST(Protocol, HeaderLayout) {
  std::string frame = encode(StatusReply{"{}"});
  ASSERT_EQ(frame.size(), kFrameHeaderSize + 4 + 2);
  EXPECT_EQ(frame.substr(0, 4), "CCPL");
  EXPECT_EQ(static_cast<uint8_t>(frame[4]), kFrameVersion);
  EXPECT_EQ(static_cast<uint8_t>(frame[5]), static_cast<uint8_t>(MessageType::kStatusReply));
  EXPECT_EQ(frame[6], 0);
  EXPECT_EQ(frame[7], 0);
  EXPECT_EQ(std::string(frame.data() + 8, 4), std::string("\x06\0\0\0", 4));   // payload length LE
  EXPECT_EQ(std::string(frame.data() + 12, 4), std::string("\x02\0\0\0", 4));  // str length LE
  EXPECT_EQ(frame.substr(16), "{}");
}

TEST(Protocol, EmptyMessagesHaveEmptyPayloads) {
  for (const Message& m : {Message(StatusRequest{}), Message(StopRequest{}), Message(StopReply{}),
                           Message(Ping{}), Message(Pong{})}) {
    std::string frame = encode(m);
    EXPECT_EQ(frame.size(), kFrameHeaderSize) << message_type_name(m);
    EXPECT_EQ(round_trip(m).index(), m.index());
  }
}

TEST(Protocol, HelloRoundTrip) {
  auto m = round_trip(Hello{7, 0xfedcba9876543210ull, -12});
  const auto& h = std::get<Hello>(m);
  EXPECT_EQ(h.version, 7u);
  EXPECT_EQ(h.capabilities, 0xfedcba9876543210ull);
  EXPECT_EQ(h.pid, -12);
  auto ok_message = round_trip(HelloOk{1, 3, 999});
  const auto& o = std::get<HelloOk>(ok_message);
  EXPECT_EQ(o.version, 1u);
  EXPECT_EQ(o.capabilities, 3u);
  EXPECT_EQ(o.service_pid, 999);
}

TEST(Protocol, PoolSessionMessagesRoundTrip) {
  PoolOpen open{"/venv/bin/python",
                "/work",
                {"PYTHONPATH=/a:/b", "X="},
                {"--pickler=m.P", "--torch-key=AAA="},
                3};
  Message m_open = round_trip(open);
  const auto& o = std::get<PoolOpen>(m_open);
  EXPECT_EQ(o.python, open.python);
  EXPECT_EQ(o.cwd, open.cwd);
  EXPECT_EQ(o.env, open.env);
  EXPECT_EQ(o.args, open.args);
  EXPECT_EQ(o.rank, 3);
  EXPECT_EQ(std::get<PoolOpened>(round_trip(PoolOpened{8})).max_workers, 8u);
  std::string pickled("\x80\x05\0job", 7);
  Message m_sub = round_trip(PoolSubmit{1ull << 40, "key", pickled});
  const auto& sub = std::get<PoolSubmit>(m_sub);
  EXPECT_EQ(sub.job_id, 1ull << 40);
  EXPECT_EQ(sub.flight_key, "key");
  EXPECT_EQ(sub.payload, pickled);
  Message m_res = round_trip(PoolResult{9, PoolJobStatus::kFailed, true, pickled, "why"});
  const auto& res = std::get<PoolResult>(m_res);
  EXPECT_EQ(res.job_id, 9u);
  EXPECT_EQ(res.status, PoolJobStatus::kFailed);
  EXPECT_TRUE(res.followed);
  EXPECT_EQ(res.payload, pickled);
  EXPECT_EQ(res.message, "why");
  EXPECT_EQ(std::get<PoolCancel>(round_trip(PoolCancel{77})).job_id, 77u);
}

// Frames from outside: a pool-open names what the service will exec, so it
// is refused unless every field is within its bound and of its form.
TEST(Protocol, PoolOpenOutsideItsBoundsIsRefused) {
  auto refused = [](PoolOpen open) {
    FrameReader reader;
    std::string frame = encode(open);
    reader.feed(frame.data(), frame.size());
    auto decoded = reader.next();
    return !decoded && decoded.error().code == ErrorCode::kProtocol;
  };
  PoolOpen good{"/usr/bin/python3", "/w", {"A=1"}, {"--pickler=m.P"}, -1};
  EXPECT_FALSE(refused(good));
  PoolOpen relative = good;
  relative.python = "python3";
  EXPECT_TRUE(refused(relative));
  PoolOpen relative_cwd = good;
  relative_cwd.cwd = "w";
  EXPECT_TRUE(refused(relative_cwd));
  PoolOpen bad_arg = good;
  bad_arg.args = {"-c", "import os"};
  EXPECT_TRUE(refused(bad_arg));
  PoolOpen too_many = good;
  too_many.args.assign(kMaxPoolArgs + 1, "--a=b");
  EXPECT_TRUE(refused(too_many));
  PoolOpen nul = good;
  nul.env = {std::string("A=\0b", 4)};
  EXPECT_TRUE(refused(nul));
  PoolOpen no_equals = good;
  no_equals.env = {"JUSTANAME"};
  EXPECT_TRUE(refused(no_equals));
  FrameReader reader;
  std::string long_key = encode(PoolSubmit{1, std::string(kMaxFlightKey + 1, 'k'), "x"});
  reader.feed(long_key.data(), long_key.size());
  EXPECT_FALSE(reader.next().has_value());
}

TEST(Protocol, ExecRequestRoundTrip) {
  ExecRequest in = sample_request();
  auto m = round_trip(in);
  const auto& out = std::get<ExecRequest>(m);
  EXPECT_EQ(out.program, in.program);
  EXPECT_EQ(out.argv, in.argv);
  EXPECT_EQ(out.cwd, in.cwd);
  EXPECT_EQ(out.env, in.env);
  EXPECT_EQ(out.client_pid, 4242);
  EXPECT_EQ(out.rank, 3);
  EXPECT_EQ(out.umask, 027u);
  EXPECT_EQ(out.inputs, in.inputs);
  EXPECT_EQ(out.outputs, in.outputs);
}

TEST(Protocol, ExecReplyRoundTripIsByteExact) {
  ExecReply in;
  in.status = ExecStatus::kStopping;
  in.exit_code = -7;
  for (int i = 0; i < 256; ++i) in.stdout_data.push_back(static_cast<char>(i));
  in.stderr_data = std::string("err\0with nul", 12);
  in.outcome = CacheOutcome::kRemoteHit;
  in.message = "stopping";
  auto m = round_trip(in);
  const auto& out = std::get<ExecReply>(m);
  EXPECT_EQ(out.status, ExecStatus::kStopping);
  EXPECT_EQ(out.exit_code, -7);
  EXPECT_EQ(out.stdout_data, in.stdout_data);
  EXPECT_EQ(out.stderr_data, in.stderr_data);
  EXPECT_EQ(out.outcome, CacheOutcome::kRemoteHit);
  EXPECT_EQ(out.message, "stopping");
}

TEST(Protocol, StatusAndErrorRoundTrip) {
  EXPECT_EQ(std::get<StatusReply>(round_trip(StatusReply{"{\"jobs\":2}"})).json, "{\"jobs\":2}");
  auto e = std::get<ErrorFrame>(
      round_trip(ErrorFrame{static_cast<uint16_t>(ErrorCode::kPermission), "uid 0"}));
  EXPECT_EQ(e.code, static_cast<uint16_t>(ErrorCode::kPermission));
  EXPECT_EQ(e.message, "uid 0");
  Error back = from_error_frame(e);
  EXPECT_EQ(back.code, ErrorCode::kPermission);
  EXPECT_EQ(from_error_frame(ErrorFrame{999, "x"}).code, ErrorCode::kProtocol);
  EXPECT_EQ(to_error_frame(Error(ErrorCode::kStopping, "bye")).code,
            static_cast<uint16_t>(ErrorCode::kStopping));
}

TEST(Protocol, HelloVersionMismatchNamesBothVersions) {
  EXPECT_TRUE(check_hello(Hello{}).has_value());
  auto bad = check_hello(Hello{2, 0, 1});
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, ErrorCode::kUnsupported);
  EXPECT_NE(bad.error().message.find("version 2"), std::string::npos) << bad.error().message;
  EXPECT_NE(bad.error().message.find("version 1"), std::string::npos) << bad.error().message;
}

TEST(Protocol, ExecBoundsArgc) {
  ExecRequest r = sample_request();
  r.argv.assign(kMaxArgs, "a");
  EXPECT_TRUE(check_exec_request(r).has_value());
  r.argv.push_back("a");
  auto bad = check_exec_request(r);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("argv"), std::string::npos);
  // The receiving side refuses the same frame.
  FrameReader reader;
  std::string frame = encode(r);
  reader.feed(frame.data(), frame.size());
  auto decoded = reader.next();
  ASSERT_FALSE(decoded);
  EXPECT_EQ(decoded.error().code, ErrorCode::kProtocol);
  // And the sending side refuses to send it.
  auto sent = encode_checked(r);
  ASSERT_FALSE(sent);
  EXPECT_EQ(sent.error().code, ErrorCode::kInvalidArgument);
}

TEST(Protocol, ExecBoundsEnvAndPaths) {
  ExecRequest r = sample_request();
  r.env.assign(kMaxEnvEntries + 1, "A=1");
  EXPECT_FALSE(check_exec_request(r));
  r = sample_request();
  r.env = {std::string(kMaxEnvBytes, 'x')};
  EXPECT_TRUE(check_exec_request(r).has_value());
  r.env.push_back("Y=1");
  EXPECT_FALSE(check_exec_request(r));
  r = sample_request();
  r.cwd = std::string(kMaxPathLength + 1, 'd');
  EXPECT_FALSE(check_exec_request(r));
  r = sample_request();
  r.program = std::string(kMaxPathLength + 1, 'p');
  EXPECT_FALSE(check_exec_request(r));
  r = sample_request();
  r.outputs.assign(kMaxFiles + 1, "o");
  EXPECT_FALSE(check_exec_request(r));
  r = sample_request();
  r.argv[1] = std::string("a\0b", 3);
  EXPECT_FALSE(check_exec_request(r));
  r = sample_request();
  r.program.clear();
  EXPECT_FALSE(check_exec_request(r));
}

TEST(Protocol, OversizedReplyIsRefusedBySender) {
  ExecReply big;
  big.stdout_data.assign(kMaxFrameSize, 'x');
  auto frame = encode_checked(big);
  ASSERT_FALSE(frame);
  EXPECT_EQ(frame.error().code, ErrorCode::kFull);
}

}  // namespace
}  // namespace ccpool::ipc
