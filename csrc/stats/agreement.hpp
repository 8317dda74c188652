// Inter-rater agreement statistics as functions of summed per-item sufficient statistics, so that
// the bootstrap engine resamples them like any other statistic (see statistic.hpp).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "statistic.hpp"

namespace tb::stats {

// Returns the agreement statistic `name` reading k columns with parameters `params`, or nullptr
// when `name` is not an agreement statistic. Throws std::invalid_argument for a known name with
// inconsistent k or params.
std::unique_ptr<Statistic> make_agreement_statistic(const std::string& name, std::size_t k,
                                                    const std::vector<double>& params);

std::vector<std::string> agreement_statistic_names();

}  // namespace tb::stats
