#include "traj/quoted.hpp"

#include <array>
#include <cstring>

namespace tb::traj {

std::vector<bool> quoted_present(const std::uint8_t* data, std::size_t n,
                                 const std::vector<std::string_view>& names) {
  std::vector<bool> found(names.size(), false);
  // the names by the byte after the opening quote (an empty name: the closing quote itself)
  std::array<std::vector<std::size_t>, 256> by_first;
  for (std::size_t k = 0; k < names.size(); ++k) {
    const std::uint8_t first = names[k].empty() ? '"' : static_cast<std::uint8_t>(names[k][0]);
    by_first[first].push_back(k);
  }
  std::size_t left = names.size();
  const std::uint8_t* p = data;
  const std::uint8_t* const end = data + n;
  while (left > 0 && p < end) {
    const void* q = std::memchr(p, '"', static_cast<std::size_t>(end - p));
    if (q == nullptr) break;
    const std::uint8_t* quote = static_cast<const std::uint8_t*>(q);
    const std::uint8_t* start = quote + 1;  // every quote may open a match (overlaps included)
    if (start < end) {
      for (const std::size_t k : by_first[*start]) {
        if (found[k]) continue;
        const std::size_t len = names[k].size();
        if (static_cast<std::size_t>(end - start) > len && start[len] == '"' &&
            std::memcmp(start, names[k].data(), len) == 0) {
          found[k] = true;
          --left;
        }
      }
    }
    p = start;
  }
  return found;
}

}  // namespace tb::traj
