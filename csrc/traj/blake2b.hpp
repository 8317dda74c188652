// BLAKE2b (RFC 7693), unkeyed, with a digest of 1 to 64 bytes: the hash the JSON-lines importer
// keys items by (Python's hashlib.blake2b(data, digest_size=16) gives the same bytes).
#pragma once

#include <cstddef>
#include <cstdint>

namespace tb::traj {

class Blake2b {
 public:
  // A fresh state for digests of out_len bytes (1 to 64).
  explicit Blake2b(std::size_t out_len);
  // Absorbs n more bytes.
  void update(const void* data, std::size_t n);
  // Writes the out_len-byte digest to out; the state must not be updated afterwards.
  void final(std::uint8_t* out);

 private:
  void compress(bool last);
  std::uint64_t h_[8];
  std::uint64_t t_[2];
  std::uint8_t buf_[128];
  std::size_t fill_;
  std::size_t out_len_;
};

}  // namespace tb::traj
