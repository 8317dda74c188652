// _core.seqmask: segment ids of agent-trajectory tokens from marker token sequences
// (csrc/seqmask/). Sequences arrive concatenated, delimited by offsets.
#include <cstdint>
#include <stdexcept>
#include <string>

#include "bindings/common.hpp"
#include "seqmask/seqmask.hpp"

namespace tb::bindings {

namespace {

py::array_t<std::int8_t> segment_ids(py::array ids, Array<std::int64_t> offsets,
                                     Array<std::int64_t> patterns,
                                     Array<std::int64_t> pattern_offsets,
                                     Array<std::int8_t> labels, bool mark_markers, int threads) {
  if (ids.ndim() != 1 || offsets.ndim() != 1) {
    throw std::invalid_argument("ids, offsets: expected 1-D arrays, got " +
                                std::to_string(ids.ndim()) + " and " +
                                std::to_string(offsets.ndim()) + " dimensions");
  }
  const auto n_pat = static_cast<std::size_t>(labels.size());
  if (static_cast<std::size_t>(pattern_offsets.size()) != n_pat + 1) {
    throw std::invalid_argument("pattern_offsets: expected len(labels) + 1 = " +
                                std::to_string(n_pat + 1) + " entries, got " +
                                std::to_string(pattern_offsets.size()));
  }
  const std::int64_t* po = pattern_offsets.data();
  check_offsets(po, n_pat + 1, static_cast<std::int64_t>(patterns.size()), "pattern_offsets",
                OffsetSpan::kWhole);
  const auto n_tok = static_cast<std::int64_t>(ids.size());
  const std::int64_t* off = offsets.data();
  check_offsets(off, static_cast<std::size_t>(offsets.size()), n_tok, "offsets",
                OffsetSpan::kWhole);
  const auto n_seq = static_cast<std::size_t>(offsets.size() - 1);
  const tb::seqmask::MarkerMatcher matcher(patterns.data(), po, n_pat, labels.data());
  py::array_t<std::int8_t> seg(n_tok);
  std::int8_t* out = seg.mutable_data();
  if (py::isinstance<py::array_t<std::int32_t>>(ids)) {
    auto a = Array<std::int32_t>::ensure(ids);
    const std::int32_t* p = a.data();
    py::gil_scoped_release release;
    matcher.segment_ids(p, off, n_seq, mark_markers, out, threads);
  } else {
    auto a = Array<std::int64_t>::ensure(ids);
    if (!a) {
      PyErr_Clear();
      throw std::invalid_argument(std::string("ids: expected an integer array, got dtype ") +
                                  py::str(ids.dtype()).cast<std::string>());
    }
    const std::int64_t* p = a.data();
    py::gil_scoped_release release;
    matcher.segment_ids(p, off, n_seq, mark_markers, out, threads);
  }
  return seg;
}

}  // namespace

void bind_seqmask(py::module_& m) {
  m.def("segment_ids", &segment_ids, py::arg("ids"), py::arg("offsets"), py::arg("patterns"),
        py::arg("pattern_offsets"), py::arg("labels"), py::arg("mark_markers"),
        py::arg("threads"),
        "Segment id (int8) of every token: Aho-Corasick marker matching, leftmost-longest, spans "
        "to the next marker (GIL released).");
}

}  // namespace tb::bindings
