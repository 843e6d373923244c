#include "remote/tier.h"

#include <unistd.h>

#include "base/fs.h"
#include "remote/envelope.h"
#include "remote/hmac.h"
#include "remote/tier_impl.h"

namespace ccpool::remote {
namespace {

constexpr size_t kMaxIdleConnections = 8;
constexpr size_t kMinHmacKeyBytes = 16;

std::string trim_trailing_newlines(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  return text;
}

Result<std::string> read_secret(const std::string& path, const char* what, const char* env_hint) {
  auto text = read_secret_file(path);
  if (!text) {
    return make_error(
        text.error().code == ErrorCode::kPermission ? ErrorCode::kPermission : ErrorCode::kIo,
        std::string("cannot use the remote ") + what + " file '" + path + "' (" + env_hint +
            "): " + text.error().message);
  }
  return trim_trailing_newlines(std::move(*text));
}

Result<Secrets> load_secrets(const RemoteOptions& options) {
  Secrets secrets;
  if (!options.password_file.empty()) {
    CCPOOL_TRY_ASSIGN(secrets.password, read_secret(options.password_file, "password",
                                                    "CCPOOL_REMOTE_PASSWORD_FILE"));
    if (secrets.password.empty()) {
      return make_error(ErrorCode::kInvalidArgument,
                        "the remote password file '" + options.password_file +
                            "' is empty; write the Redis password into it or unset it");
    }
  }
  if (!options.hmac_key_file.empty()) {
    CCPOOL_TRY_ASSIGN(secrets.hmac_key,
                      read_secret(options.hmac_key_file, "HMAC key", "--remote-key-file"));
    if (secrets.hmac_key.size() < kMinHmacKeyBytes) {
      return make_error(ErrorCode::kInvalidArgument,
                        "the remote HMAC key file '" + options.hmac_key_file + "' holds " +
                            std::to_string(secrets.hmac_key.size()) + " bytes; use at least " +
                            std::to_string(kMinHmacKeyBytes) +
                            ", e.g. head -c 32 /dev/urandom | base64 > FILE");
    }
  }
  return secrets;
}

Result<void> check_options(const RemoteOptions& o) {
  using std::chrono::milliseconds;
  if (o.connect_timeout <= milliseconds(0) || o.op_timeout <= milliseconds(0) ||
      o.poll_interval <= milliseconds(0) || o.lease_ttl < milliseconds(30) ||
      o.breaker_cooldown < milliseconds(0) || o.ttl.count() < 0) {
    return make_error(ErrorCode::kInvalidArgument,
                      "remote options: timeouts and poll interval must be positive, lease_ttl at "
                      "least 30 ms, ttl and breaker cooldown not negative");
  }
  return ok();
}

std::string make_token() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) host[0] = '?';
  return std::string(host) + ":" + std::to_string(getpid()) + ":" + random_hex(8);
}

}  // namespace

Result<std::unique_ptr<Tier>> Tier::create(const RemoteOptions& options) {
  CCPOOL_TRY(check_options(options));
  CCPOOL_TRY_ASSIGN(Endpoint endpoint, parse_endpoint(options.url));
  CCPOOL_TRY_ASSIGN(Secrets secrets, load_secrets(options));
  auto impl =
      std::make_unique<TierImpl>(options, std::move(endpoint), std::move(secrets), make_token());
  return std::unique_ptr<Tier>(new Tier(std::move(impl)));
}

Tier::Tier(std::unique_ptr<TierImpl> impl) : m_impl(std::move(impl)) {}
Tier::~Tier() = default;
std::optional<std::string> Tier::get(const Digest& key) {
  return m_impl->get(key);
}
void Tier::put_async(const Digest& key, std::string value) {
  m_impl->put_async(key, std::move(value));
}
LeaseState Tier::acquire_lease(const Digest& key) {
  return m_impl->acquire_lease(key);
}

std::chrono::milliseconds Tier::lease_wait_max() const {
  return m_impl->lease_wait_max();
}
void Tier::release_lease(const Digest& key) {
  m_impl->release_lease(key);
}
std::optional<std::string> Tier::wait_for_result(const Digest& key,
                                                 std::chrono::milliseconds max_wait) {
  return m_impl->wait_for_result(key, max_wait);
}
RemoteCounters Tier::counters() const {
  return m_impl->counters();
}
void Tier::flush_for_testing() {
  m_impl->flush_for_testing();
}
std::string Tier::value_key(const Digest& key) const {
  return m_impl->value_key(key);
}
std::string Tier::lease_key(const Digest& key) const {
  return m_impl->lease_key(key);
}
const std::string& Tier::node_token() const {
  return m_impl->token();
}

TierImpl::TierImpl(RemoteOptions options, Endpoint endpoint, Secrets secrets, std::string token)
    : m_options(std::move(options)),
      m_endpoint(std::move(endpoint)),
      m_secrets(std::move(secrets)),
      m_token(std::move(token)),
      m_breaker(m_options.breaker_failures, m_options.breaker_cooldown) {
  m_writer = std::thread([this] { writer_loop(); });
  m_renewer = std::thread([this] { renewal_loop(); });
}

TierImpl::~TierImpl() {
  {
    MutexLock lock(&m_queue_mutex);
    m_stopping = true;
    m_drain_deadline = std::chrono::steady_clock::now() + m_options.shutdown_drain;
  }
  m_queue_cv.signal_all();
  {
    MutexLock lock(&m_lease_mutex);
    m_lease_stopping = true;
  }
  m_lease_cv.signal_all();
  m_writer.join();
  m_renewer.join();
}

Result<std::unique_ptr<Connection>> TierImpl::take_pooled() {
  {
    MutexLock lock(&m_pool_mutex);
    if (!m_idle.empty()) {
      std::unique_ptr<Connection> conn = std::move(m_idle.back());
      m_idle.pop_back();
      return conn;
    }
  }
  return Connection::open(m_endpoint, m_secrets.password, m_options.connect_timeout,
                          m_options.op_timeout);
}

void TierImpl::give_back(std::unique_ptr<Connection> conn) {
  MutexLock lock(&m_pool_mutex);
  if (m_idle.size() < kMaxIdleConnections) m_idle.push_back(std::move(conn));
}

Result<Reply> TierImpl::call(const std::vector<std::string_view>& args,
                             std::unique_ptr<Connection>* own, const ReplyLimits& limits) {
  if (!m_breaker.allow()) {
    ++m_counters.breaker_rejected;
    return make_error(ErrorCode::kUnreachable,
                      "remote tier " + m_endpoint.describe() + " skipped: circuit breaker open");
  }
  std::unique_ptr<Connection> conn = own ? std::move(*own) : nullptr;
  if (!conn) {
    auto opened = own ? Connection::open(m_endpoint, m_secrets.password, m_options.connect_timeout,
                                         m_options.op_timeout)
                      : take_pooled();
    if (!opened) {
      ++m_counters.errors;
      m_breaker.record_failure();
      return tl::unexpected<Error>(std::move(opened).error());
    }
    conn = std::move(*opened);
  }
  auto reply = conn->command(args, limits);
  if (!reply) {
    ++m_counters.errors;
    m_breaker.record_failure();
    return reply;
  }
  // The server answered: the link is healthy even if the command was refused.
  m_breaker.record_success();
  if (own) {
    *own = std::move(conn);
  } else {
    give_back(std::move(conn));
  }
  if (reply->is_error()) {
    ++m_counters.errors;  // includes MOVED/ASK: Redis Cluster is not followed
    return make_error(ErrorCode::kProtocol,
                      "Redis refused " + std::string(args[0]) + ": " + reply->str);
  }
  return reply;
}

std::optional<std::string> TierImpl::accept_value(const Digest& key, std::string sealed) {
  if (sealed.size() > max_sealed()) {
    ++m_counters.invalid;
    return std::nullopt;
  }
  OpenStatus status = open_envelope(key, sealed, m_secrets.hmac_key);
  if (status == OpenStatus::kBadSignature) {
    ++m_counters.bad_signature;
    return std::nullopt;
  }
  if (status != OpenStatus::kOk || (m_options.validate && !m_options.validate(sealed))) {
    ++m_counters.invalid;
    return std::nullopt;
  }
  ++m_counters.hits;
  return sealed;
}

uint64_t TierImpl::max_sealed() const {
  return m_options.max_value + kEnvelopeHeader + kEnvelopeMac;
}

std::optional<std::string> TierImpl::get(const Digest& key) {
  std::string name = value_key(key);
  // GETRANGE asks an honest server for one byte more than any acceptable
  // value, so a larger one is seen (and refused) without being transferred;
  // the reply's bounds refuse a dishonest server's larger reply unread.
  std::string last = std::to_string(max_sealed());
  auto reply = call({"GETRANGE", name, "0", last}, nullptr, value_limits(0));
  if (!reply) return std::nullopt;
  if (reply->type != Reply::Type::kString ||
      reply->str.empty()) {  // GETRANGE of a missing key is ""
    ++m_counters.misses;
    return std::nullopt;
  }
  return accept_value(key, std::move(reply->str));
}

RemoteCounters TierImpl::counters() const {
  RemoteCounters c;
  c.hits = m_counters.hits;
  c.misses = m_counters.misses;
  c.errors = m_counters.errors;
  c.writes = m_counters.writes;
  c.skipped = m_counters.skipped;
  c.invalid = m_counters.invalid;
  c.bad_signature = m_counters.bad_signature;
  c.breaker_opened = m_breaker.times_opened();
  c.breaker_open = m_breaker.is_open();
  c.lease_acquired = m_counters.lease_acquired;
  c.lease_waits = m_counters.lease_waits;
  c.lease_expired = m_counters.lease_expired;
  c.breaker_rejected = m_counters.breaker_rejected;
  c.dropped = m_counters.dropped;
  c.lease_lost = m_counters.lease_lost;
  c.lease_untimed = m_counters.lease_untimed;
  return c;
}

}  // namespace ccpool::remote
