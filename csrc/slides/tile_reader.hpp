// Batch patch reading from a tiled TIFF pyramid, with no Python anywhere in the loop.
//
// A TileReader holds what a TIFF parser found once per slide (tifffile on the Python side): per
// level its size, tile size, codec, the byte offsets and counts of every tile and the JPEGTables
// stream. load_patches then reads a whole batch of regions: the needed tiles' bytes with pread,
// JPEG decode (jpeg.hpp), assembly of each region (white outside the level and for sparse tiles,
// as OpenSlide reads them), and the fused resize/normalise of tiling/resample.hpp straight into
// the batch buffer, on worker threads. The caller (the binding) releases the GIL once for the
// whole batch. Results do not depend on the thread count: each patch is one task writing only
// its own slot.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "slides/jpeg.hpp"
#include "tiling/resample.hpp"

namespace tb::slides {

enum class TileCodec { kNone = 1, kJpeg = 7 };  // their TIFF Compression codes

// One pyramid level as stored in the file.
struct TileLevel {
  std::int64_t width = 0, height = 0;  // level pixels
  std::int64_t tile_width = 0, tile_height = 0;
  TileCodec codec = TileCodec::kJpeg;
  JpegColor color = JpegColor::kDetect;  // JPEG only
  int samples = 3;                       // samples per pixel (3, or 4 with alpha: dropped)
  std::vector<std::uint64_t> offsets;    // per tile, row-major over the tile grid
  std::vector<std::uint64_t> counts;     // 0 marks a sparse tile (background)
  std::vector<std::uint8_t> tables;      // JPEGTables; empty when the tiles are full streams
};

class TileReader {
 public:
  // Opens `path` read-only and keeps the descriptor. Throws std::invalid_argument for a level
  // whose tile table does not cover its tile grid, std::runtime_error when the file cannot be
  // opened.
  TileReader(std::string path, std::vector<TileLevel> levels);
  ~TileReader();
  TileReader(const TileReader&) = delete;
  TileReader& operator=(const TileReader&) = delete;

  const std::string& path() const { return path_; }
  std::size_t level_count() const { return levels_.size(); }

  // Reads the w x h region of `level` whose top-left corner is (x, y) in level pixels into
  // `out` (h * w * 3 RGB bytes). Throws std::runtime_error naming the tile for a truncated or
  // corrupt tile.
  void read_region(int level, std::int64_t x, std::int64_t y, std::int64_t w, std::int64_t h,
                   std::uint8_t* out) const;

  // n patches: region i is the read_w x read_h region at (xy[2i], xy[2i + 1]) of `level`,
  // preprocessed by `params` (resize, normalise, output type) into slot i of `out`
  // (n x 3 x out_h x out_w of params.type). Parallel over patches on `threads` threads.
  void load_patches(int level, const std::int64_t* xy, std::int64_t n, std::int64_t read_w,
                    std::int64_t read_h, const tiling::PreprocessParams& params, void* out,
                    int threads) const;

 private:
  void read_tile(int level, std::int64_t index, std::vector<std::uint8_t>& bytes,
                 std::vector<std::uint8_t>& pixels, int* width, int* height) const;

  std::string path_;
  std::vector<TileLevel> levels_;
  int fd_ = -1;
};

}  // namespace tb::slides
