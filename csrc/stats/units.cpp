#include "units.hpp"

#include <stdexcept>
#include <string>

namespace tb::stats {
namespace {

// Stable counting sort of `idx` by key[idx[i]] in [0, range).
void counting_sort(std::vector<std::int64_t>& idx, const std::int64_t* key, std::size_t range) {
  std::vector<std::size_t> count(range + 1, 0);
  for (auto i : idx) ++count[static_cast<std::size_t>(key[i]) + 1];
  for (std::size_t r = 0; r < range; ++r) count[r + 1] += count[r];
  std::vector<std::int64_t> out(idx.size());
  for (auto i : idx) out[count[static_cast<std::size_t>(key[i])]++] = i;
  idx.swap(out);
}

}  // namespace

Units build_units(const RecordInput& in) {
  Units u;
  u.k = in.k;
  const std::size_t n = in.n, k = in.k;
  u.order.resize(n);
  for (std::size_t i = 0; i < n; ++i) u.order[i] = static_cast<std::int64_t>(i);
  // LSD: least significant key first; each pass is stable.
  if (in.cluster) counting_sort(u.order, in.cluster, in.n_clusters);
  if (in.stratum) counting_sort(u.order, in.stratum, in.n_strata);
  if (in.n_groups > 1) counting_sort(u.order, in.group, in.n_groups);

  auto group_of = [&](std::int64_t i) { return in.n_groups > 1 ? in.group[i] : 0; };
  auto stratum_of = [&](std::int64_t i) { return in.stratum ? in.stratum[i] : 0; };

  u.group_items.assign(in.n_groups, 0);
  u.group_strata.assign(in.n_groups + 1, 0);
  std::int64_t filled = -1;  // groups 0..filled have their first stratum recorded
  std::vector<std::int64_t> seen_group, seen_stratum;
  if (in.cluster && in.stratum) {
    seen_group.assign(in.n_clusters, -1);
    seen_stratum.assign(in.n_clusters, -1);
  }
  std::int64_t cur_g = -1, cur_h = -1, cur_c = -1;
  for (std::size_t pos = 0; pos < n; ++pos) {
    const std::int64_t i = u.order[pos];
    const std::int64_t g = group_of(i), h = stratum_of(i);
    const std::int64_t c = in.cluster ? in.cluster[i] : -1;
    const bool new_group = g != cur_g;
    const bool new_stratum = new_group || h != cur_h;
    const bool new_unit = new_stratum || !in.cluster || c != cur_c;
    if (new_group) {
      for (std::int64_t gg = filled + 1; gg <= g; ++gg) u.group_strata[gg] = u.stratum_start.size();
      filled = g;
      cur_g = g;
    }
    if (new_stratum) {
      u.stratum_start.push_back(u.weight.size());
      cur_h = h;
    }
    if (new_unit) {
      if (!seen_group.empty()) {
        if (seen_group[c] == g && seen_stratum[c] != h) {
          throw std::invalid_argument(
              "clusters: cluster code " + std::to_string(c) +
              " appears in more than one stratum of the same group; a cluster must lie within "
              "one stratum");
        }
        seen_group[c] = g;
        seen_stratum[c] = h;
      }
      u.unit_start.push_back(pos);
      u.rows.insert(u.rows.end(), k, 0.0);
      u.weight.push_back(0.0);
      u.cluster.push_back(c);
      u.record.push_back(i);
      cur_c = c;
    }
    double* row = u.rows.data() + (u.weight.size() - 1) * k;
    const double* v = in.values + static_cast<std::size_t>(i) * k;
    for (std::size_t j = 0; j < k; ++j) row[j] += v[j];
    u.weight.back() += 1.0;
    ++u.group_items[static_cast<std::size_t>(g)];
  }
  u.unit_start.push_back(n);
  for (std::int64_t gg = filled + 1; gg <= static_cast<std::int64_t>(in.n_groups); ++gg) {
    u.group_strata[gg] = u.stratum_start.size();
  }
  u.stratum_start.push_back(u.weight.size());
  return u;
}

}  // namespace tb::stats
