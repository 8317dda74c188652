// BLAKE2b-128 of four messages at once: one message per 64-bit lane of AVX2 registers (the
// rounds of RFC 7693 §3.2 on four states side by side), for the many short item digests of the
// JSON-lines importer. Same bytes as Blake2b(16) of each message; callers check
// avx2_available() (common/philox_avx2.hpp) and keep the scalar class otherwise.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace tb::traj {

// Writes the 16-byte BLAKE2b digest of msgs[j] to out + 16 * j, for j < 4. Needs AVX2.
void blake2b_128_x4(const std::string_view* msgs, std::uint8_t* out);

}  // namespace tb::traj
