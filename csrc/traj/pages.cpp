#include "traj/pages.hpp"

#include <array>
#include <map>
#include <stdexcept>

namespace tb::traj {

namespace {

// Thrift compact protocol type ids (TCompactProtocol).
enum : int {
  kStop = 0, kTrue, kFalse, kByte, kI16, kI32, kI64, kDouble, kBinary, kList, kSet, kMap,
  kStruct
};
constexpr int kCompressedSize = 3, kCrc = 4, kMaxDepth = 64;

struct HeaderError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Reader {
 public:
  Reader(const std::uint8_t* p, std::size_t n, std::size_t pos) : p_(p), n_(n), pos_(pos) {}
  std::size_t pos() const { return pos_; }

  int byte() {
    if (pos_ >= n_) throw HeaderError("page header runs past the column chunk");
    return p_[pos_++];
  }
  std::uint64_t varint() {
    std::uint64_t result = 0;
    int shift = 0;
    while (true) {
      const int b = byte();
      if (shift < 64) result |= static_cast<std::uint64_t>(b & 0x7F) << shift;
      if (!(b & 0x80)) return result;
      shift += 7;
      if (shift > 70) throw HeaderError("page header holds a malformed varint");
    }
  }
  std::int64_t zigzag() {
    const std::uint64_t n = varint();
    return static_cast<std::int64_t>(n >> 1) ^ -static_cast<std::int64_t>(n & 1);
  }
  void advance(std::uint64_t k) {
    if (k > n_ - pos_) throw HeaderError("page header runs past the column chunk");
    pos_ += static_cast<std::size_t>(k);
  }
  void skip(int kind, int depth) {
    if (depth > kMaxDepth) throw HeaderError("page header nests too deeply");
    switch (kind) {
      case kTrue:
      case kFalse:
        return;
      case kByte:
        byte();
        return;
      case kI16:
      case kI32:
      case kI64:
        varint();
        return;
      case kDouble:
        advance(8);
        return;
      case kBinary:
        advance(varint());
        return;
      case kList:
      case kSet: {
        const int head = byte();
        const std::uint64_t size = (head >> 4) != 15 ? static_cast<std::uint64_t>(head >> 4)
                                                     : varint();
        for (std::uint64_t i = 0; i < size; ++i) skip_element(head & 0x0F, depth + 1);
        return;
      }
      case kMap: {
        const std::uint64_t size = varint();
        if (size) {
          const int types = byte();
          for (std::uint64_t i = 0; i < size; ++i) {
            skip_element(types >> 4, depth + 1);
            skip_element(types & 0x0F, depth + 1);
          }
        }
        return;
      }
      case kStruct:
        struct_(depth + 1, nullptr);
        return;
      default:
        throw HeaderError("page header holds an unknown Thrift type " + std::to_string(kind));
    }
  }
  void skip_element(int kind, int depth) {
    if (kind == kTrue || kind == kFalse) {
      byte();
    } else {
      skip(kind, depth);
    }
  }
  // Reads a struct; the integer fields compressed_page_size and crc go to `found` (top level).
  void struct_(int depth, std::map<int, std::int64_t>* found) {
    int last = 0;
    while (true) {
      const int head = byte();
      const int kind = head & 0x0F;
      if (kind == kStop) return;
      const int delta = head >> 4;
      const int fid = delta ? last + delta : static_cast<int>(zigzag());
      last = fid;
      if (found != nullptr && (fid == kCompressedSize || fid == kCrc) &&
          (kind == kI16 || kind == kI32 || kind == kI64)) {
        (*found)[fid] = zigzag();
      } else {
        skip(kind, depth);
      }
    }
  }

 private:
  const std::uint8_t* p_;
  std::size_t n_, pos_;
};

const std::array<std::array<std::uint32_t, 256>, 4>& crc_tables() {
  static const auto tables = [] {
    std::array<std::array<std::uint32_t, 256>, 4> t{};
    for (std::uint32_t i = 0; i < 256; ++i) {
      std::uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[0][i] = c;
    }
    for (std::uint32_t i = 0; i < 256; ++i) {
      for (int s = 1; s < 4; ++s) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xFF];
    }
    return t;
  }();
  return tables;
}

}  // namespace

std::uint32_t crc32(const std::uint8_t* p, std::size_t n) {
  const auto& t = crc_tables();
  std::uint32_t c = 0xFFFFFFFFu;
  std::size_t i = 0;
  for (; i + 4 <= n; i += 4) {  // slicing by 4
    c ^= static_cast<std::uint32_t>(p[i]) | static_cast<std::uint32_t>(p[i + 1]) << 8 |
         static_cast<std::uint32_t>(p[i + 2]) << 16 | static_cast<std::uint32_t>(p[i + 3]) << 24;
    c = t[3][c & 0xFF] ^ t[2][(c >> 8) & 0xFF] ^ t[1][(c >> 16) & 0xFF] ^ t[0][c >> 24];
  }
  for (; i < n; ++i) c = t[0][(c ^ p[i]) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

PageScan verify_pages(const std::uint8_t* data, std::size_t n) {
  PageScan out;
  std::size_t pos = 0;
  while (pos < n) {
    Reader reader(data, n, pos);
    std::map<int, std::int64_t> fields;
    try {
      reader.struct_(0, &fields);
    } catch (const HeaderError& e) {
      out.error_at = static_cast<std::int64_t>(pos);
      out.error = e.what();
      return out;
    }
    const auto size_it = fields.find(kCompressedSize);
    const std::size_t body = reader.pos();
    if (size_it == fields.end() || size_it->second < 0 ||
        static_cast<std::uint64_t>(size_it->second) > n - body) {
      out.error_at = static_cast<std::int64_t>(pos);
      out.error = "page header with an impossible size";
      return out;
    }
    const std::size_t end = body + static_cast<std::size_t>(size_it->second);
    const auto crc_it = fields.find(kCrc);
    if (crc_it == fields.end()) {
      ++out.unchecked;
    } else if (crc32(data + body, end - body) !=
               (static_cast<std::uint64_t>(crc_it->second) & 0xFFFFFFFFu)) {
      out.error_at = static_cast<std::int64_t>(pos);
      out.crc_mismatch = true;
      out.error = "CRC-32 mismatch";
      return out;
    } else {
      ++out.checked;
    }
    pos = end;
  }
  return out;
}

}  // namespace tb::traj
