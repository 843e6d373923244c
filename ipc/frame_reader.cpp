// FrameReader: reassembles frames from arbitrary byte chunks. The header is
// validated as soon as its bytes arrive (the magic even byte by byte), so
// garbage and oversized declarations are refused before the payload is
// buffered, and nothing is ever allocated from the declared length.
#include <cstring>

#include "ipc/protocol.h"
#include "ipc/wire.h"

namespace ccpool::ipc {
namespace {

constexpr char kMagicBytes[4] = {'C', 'C', 'P', 'L'};
// Buffered bytes already decoded are dropped once they exceed this, so a
// long-lived connection's buffer does not grow with its history.
constexpr size_t kCompactThreshold = 64 * 1024;

Error header_error(std::string what) {
  return Error(ErrorCode::kProtocol, "bad frame header: " + std::move(what));
}

// Checks whatever part of the header is present; nullopt = fine so far.
std::optional<Error> check_header(const char* h, size_t n) {
  size_t magic_bytes = n < 4 ? n : 4;
  if (std::memcmp(h, kMagicBytes, magic_bytes) != 0) {
    return header_error("magic is not \"CCPL\" (not a ccpool client or service?)");
  }
  if (n > 4 && static_cast<uint8_t>(h[4]) != kFrameVersion) {
    return header_error("frame version " + std::to_string(static_cast<uint8_t>(h[4])) +
                        ", this side speaks " + std::to_string(kFrameVersion));
  }
  if (n > 5) {
    uint8_t type = static_cast<uint8_t>(h[5]);
    if (type == 0 || type > static_cast<uint8_t>(MessageType::kPoolCancel)) {
      return header_error("unknown message type " + std::to_string(type));
    }
  }
  if (n > 7 && (h[6] != 0 || h[7] != 0)) return header_error("reserved bytes are not zero");
  if (n >= kFrameHeaderSize) {
    uint32_t length = wire::load_u32(h + 8);
    if (length > kMaxFrameSize) {
      return header_error("declared payload of " + std::to_string(length) +
                          " bytes exceeds the bound of " + std::to_string(kMaxFrameSize));
    }
  }
  return std::nullopt;
}

}  // namespace

void FrameReader::feed(const char* data, size_t n) {
  if (m_error) return;
  if (m_consumed > 0 && (m_consumed == m_buffer.size() || m_consumed >= kCompactThreshold)) {
    m_buffer.erase(0, m_consumed);
    m_consumed = 0;
  }
  m_buffer.append(data, n);
}

size_t FrameReader::buffered() const {
  return m_buffer.size() - m_consumed;
}

Result<std::optional<Message>> FrameReader::next() {
  if (m_error) return tl::unexpected<Error>(*m_error);
  const char* head = m_buffer.data() + m_consumed;
  size_t avail = buffered();
  if (avail == 0) return std::optional<Message>();
  size_t header_bytes = avail < kFrameHeaderSize ? avail : kFrameHeaderSize;
  if (auto bad = check_header(head, header_bytes)) {
    m_error = std::move(*bad);
    return tl::unexpected<Error>(*m_error);
  }
  if (avail < kFrameHeaderSize) return std::optional<Message>();
  uint32_t length = wire::load_u32(head + 8);
  if (avail - kFrameHeaderSize < length) return std::optional<Message>();
  auto message = decode_payload(static_cast<uint8_t>(head[5]), head + kFrameHeaderSize, length);
  if (!message) {
    m_error = message.error();
    return tl::unexpected<Error>(*m_error);
  }
  m_consumed += kFrameHeaderSize + length;
  if (m_consumed == m_buffer.size()) {
    m_buffer.clear();
    m_consumed = 0;
  }
  return std::optional<Message>(std::move(*message));
}

}  // namespace ccpool::ipc
