// The module initializer of tumorboard._core: one submodule per core domain (common.hpp) and the
// one exception map (errors.hpp).
#include "bindings/common.hpp"
#include "bindings/errors.hpp"

PYBIND11_MODULE(_core, m) {
  namespace tbb = tb::bindings;
  m.doc() =
      "tumorboard compiled core (C++17): _core.stats, _core.text, _core.tiling, _core.slides, _core.seqmask, "
      "_core.traj and the test hooks in _core.testing. Errors arrive as tumorboard.errors classes.";
  tbb::register_exception_map();
  auto stats = m.def_submodule("stats", "Bootstrap engine, registered statistics, stable hashes.");
  tbb::bind_stats(stats);
  auto text = m.def_submodule("text", "Tokenizers, ROUGE, token/set F1, Porter stemmer, BLEU.");
  tbb::bind_text(text);
  auto tiling = m.def_submodule("tiling", "Tissue mask, patch grid, fused patch preprocessing.");
  tbb::bind_tiling(tiling);
  auto slides = m.def_submodule("slides", "libjpeg loading and the batch tiled-TIFF patch reader.");
  tbb::bind_slides(slides);
  auto seqmask = m.def_submodule("seqmask", "Segment ids of trajectory tokens.");
  tbb::bind_seqmask(seqmask);
  auto traj = m.def_submodule("traj", "The JSON-lines importer's chunk scan and item digests.");
  tbb::bind_traj(traj);
  auto testing = m.def_submodule("testing", "Hooks for the test suite (not part of the API).");
  tbb::bind_testing(testing);
}
