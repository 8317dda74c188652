// Resampling units: records grouped by (group, stratum, cluster). Without clusters each record is
// its own unit; with clusters a unit is one (group, cluster) pair holding the column sums of its
// records and their count. Every engine resamples units, never raw records.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tb::stats {

struct RecordInput {
  const double* values = nullptr;       // n x k, row-major, finite
  std::size_t n = 0;
  std::size_t k = 0;
  const std::int64_t* group = nullptr;  // n codes in [0, n_groups)
  std::size_t n_groups = 1;
  const std::int64_t* stratum = nullptr;  // optional, codes in [0, n_strata)
  std::size_t n_strata = 1;
  const std::int64_t* cluster = nullptr;  // optional, codes in [0, n_clusters)
  std::size_t n_clusters = 1;
};

struct Units {
  std::size_t k = 0;
  std::vector<double> rows;                 // m x k column sums per unit
  std::vector<double> weight;               // m items per unit
  std::vector<std::int64_t> cluster;        // m cluster code per unit (-1 without clusters)
  std::vector<std::int64_t> record;         // m first record index per unit
  std::vector<std::size_t> stratum_start;   // boundaries of strata in units (size S + 1)
  std::vector<std::size_t> group_strata;    // boundaries of groups in strata (size G + 1)
  std::vector<std::int64_t> group_items;    // items per group
  std::vector<std::int64_t> order;          // record indices sorted by (group, stratum, cluster)
  std::vector<std::size_t> unit_start;      // boundaries of units in `order` (size m + 1)

  std::size_t n_units() const { return weight.size(); }
  std::size_t n_groups() const { return group_items.size(); }
  std::size_t group_begin(std::size_t g) const { return stratum_start[group_strata[g]]; }
  std::size_t group_end(std::size_t g) const { return stratum_start[group_strata[g + 1]]; }
};

// Sorts records stably by (group, stratum, cluster) with counting sorts and aggregates clusters.
// Throws std::invalid_argument when a cluster appears in two strata of the same group.
Units build_units(const RecordInput& in);

}  // namespace tb::stats
