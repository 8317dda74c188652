// Batch patch reading from a tiled TIFF pyramid: see tile_reader.hpp.
#include "slides/tile_reader.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <utility>

#include "common/parallel.hpp"

namespace tb::slides {

namespace {

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

std::string tile_name(std::int64_t index, int level) {
  return "tile " + std::to_string(index) + " of level " + std::to_string(level);
}

}  // namespace

TileReader::TileReader(std::string path, std::vector<TileLevel> levels)
    : path_(std::move(path)), levels_(std::move(levels)) {
  for (std::size_t i = 0; i < levels_.size(); ++i) {
    const TileLevel& lv = levels_[i];
    const std::string name = "level " + std::to_string(i);
    if (lv.width <= 0 || lv.height <= 0 || lv.tile_width <= 0 || lv.tile_height <= 0) {
      throw std::invalid_argument(name + ": sizes must be positive");
    }
    if (lv.samples != 3 && lv.samples != 4) {
      throw std::invalid_argument(name + ": samples per pixel must be 3 or 4");
    }
    if (lv.codec == TileCodec::kJpeg && lv.samples != 3) {
      throw std::invalid_argument(name + ": JPEG tiles must have 3 samples per pixel");
    }
    const std::int64_t n_tiles =
        ceil_div(lv.width, lv.tile_width) * ceil_div(lv.height, lv.tile_height);
    if (lv.offsets.size() != lv.counts.size() ||
        static_cast<std::int64_t>(lv.offsets.size()) < n_tiles) {
      throw std::invalid_argument(name + ": the tile table has " +
                                  std::to_string(lv.offsets.size()) + " offsets and " +
                                  std::to_string(lv.counts.size()) + " byte counts for " +
                                  std::to_string(n_tiles) + " tiles");
    }
  }
  fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) {
    throw std::runtime_error("cannot open " + path_ + ": " + std::strerror(errno));
  }
}

TileReader::~TileReader() {
  if (fd_ >= 0) ::close(fd_);
}

void TileReader::read_tile(int level, std::int64_t index, std::vector<std::uint8_t>& bytes,
                           std::vector<std::uint8_t>& pixels, int* width, int* height) const {
  const TileLevel& lv = levels_[static_cast<std::size_t>(level)];
  const std::uint64_t offset = lv.offsets[static_cast<std::size_t>(index)];
  const std::uint64_t count = lv.counts[static_cast<std::size_t>(index)];
  bytes.resize(count);
  std::uint64_t done = 0;
  while (done < count) {
    const ssize_t got = ::pread(fd_, bytes.data() + done, count - done,
                                static_cast<off_t>(offset + done));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      throw std::runtime_error("cannot read " + tile_name(index, level) + ": " +
                               std::strerror(errno));
    }
    if (got == 0) {
      throw std::runtime_error("truncated: " + tile_name(index, level) + " is cut short");
    }
    done += static_cast<std::uint64_t>(got);
  }
  if (lv.codec == TileCodec::kJpeg) {
    try {
      // a tile's stream decodes to the tile's size; allow generous slack, not gigabytes
      const auto max_pixels = static_cast<std::size_t>(lv.tile_width * lv.tile_height) * 64;
      jpeg_decode_rgb(lv.tables.empty() ? nullptr : lv.tables.data(), lv.tables.size(),
                      bytes.data(), bytes.size(), lv.color, max_pixels, pixels, width, height);
    } catch (const jpeg_error& e) {
      throw std::runtime_error(tile_name(index, level) + " is corrupt (" + e.what() + ")");
    }
    return;
  }
  // Uncompressed: tile_width x tile_height pixels of `samples` bytes; keep RGB.
  const std::size_t n_px = static_cast<std::size_t>(lv.tile_width * lv.tile_height);
  const auto spp = static_cast<std::size_t>(lv.samples);
  if (bytes.size() < n_px * spp) {
    throw std::runtime_error(tile_name(index, level) + " is corrupt (" +
                             std::to_string(bytes.size()) + " bytes, expected " +
                             std::to_string(n_px * spp) + ")");
  }
  pixels.resize(n_px * 3);
  if (spp == 3) {
    std::memcpy(pixels.data(), bytes.data(), n_px * 3);
  } else {
    for (std::size_t p = 0; p < n_px; ++p) std::memcpy(&pixels[3 * p], &bytes[spp * p], 3);
  }
  *width = static_cast<int>(lv.tile_width);
  *height = static_cast<int>(lv.tile_height);
}

void TileReader::read_region(int level, std::int64_t x, std::int64_t y, std::int64_t w,
                             std::int64_t h, std::uint8_t* out) const {
  if (level < 0 || static_cast<std::size_t>(level) >= levels_.size()) {
    throw std::invalid_argument("level " + std::to_string(level) + " is out of range");
  }
  if (w <= 0 || h <= 0) throw std::invalid_argument("region sizes must be positive");
  const TileLevel& lv = levels_[static_cast<std::size_t>(level)];
  const std::int64_t tw = lv.tile_width, th = lv.tile_height;
  const std::int64_t x0 = std::max<std::int64_t>(x, 0), y0 = std::max<std::int64_t>(y, 0);
  const std::int64_t x1 = std::min(x + w, lv.width), y1 = std::min(y + h, lv.height);
  const std::size_t row_bytes = static_cast<std::size_t>(w) * 3;
  if (x0 > x || y0 > y || x1 < x + w || y1 < y + h) {
    std::memset(out, 255, row_bytes * static_cast<std::size_t>(h));  // outside the level
  }
  if (x1 <= x0 || y1 <= y0) return;
  thread_local std::vector<std::uint8_t> bytes, pixels;
  const std::int64_t ntx = ceil_div(lv.width, tw);
  for (std::int64_t ty = y0 / th; ty <= (y1 - 1) / th; ++ty) {
    for (std::int64_t tx = x0 / tw; tx <= (x1 - 1) / tw; ++tx) {
      const std::int64_t index = ty * ntx + tx;
      const std::int64_t ax0 = std::max(x0, tx * tw), ay0 = std::max(y0, ty * th);
      const std::int64_t ax1 = std::min(x1, (tx + 1) * tw), ay1 = std::min(y1, (ty + 1) * th);
      const std::size_t span = static_cast<std::size_t>(ax1 - ax0) * 3;
      if (lv.counts[static_cast<std::size_t>(index)] == 0) {  // sparse: background
        for (std::int64_t r = ay0; r < ay1; ++r) {
          std::memset(out + (r - y) * row_bytes + (ax0 - x) * 3, 255, span);
        }
        continue;
      }
      int dw = 0, dh = 0;
      read_tile(level, index, bytes, pixels, &dw, &dh);
      if (ax1 - tx * tw > dw || ay1 - ty * th > dh) {
        throw std::runtime_error(tile_name(index, level) + " is corrupt (it decodes to " +
                                 std::to_string(dw) + "x" + std::to_string(dh) +
                                 " pixels; the tile is " + std::to_string(tw) + "x" +
                                 std::to_string(th) + ")");
      }
      const std::size_t src_stride = static_cast<std::size_t>(dw) * 3;
      for (std::int64_t r = ay0; r < ay1; ++r) {
        std::memcpy(out + (r - y) * row_bytes + (ax0 - x) * 3,
                    pixels.data() + (r - ty * th) * src_stride + (ax0 - tx * tw) * 3, span);
      }
    }
  }
}

void TileReader::load_patches(int level, const std::int64_t* xy, std::int64_t n,
                              std::int64_t read_w, std::int64_t read_h,
                              const tiling::PreprocessParams& params, void* out,
                              int threads) const {
  if (n <= 0) return;
  if (read_w <= 0 || read_h <= 0) throw std::invalid_argument("read sizes must be positive");
  const std::size_t slot =
      static_cast<std::size_t>(3 * params.out_h * params.out_w) * tiling::value_bytes(params.type);
  parallel_for(static_cast<std::size_t>(n), threads, [&](std::size_t i) {
    thread_local std::vector<std::uint8_t> region;
    region.resize(static_cast<std::size_t>(read_w * read_h) * 3);
    read_region(level, xy[2 * i], xy[2 * i + 1], read_w, read_h, region.data());
    tiling::preprocess_batch(region.data(), 1, read_h, read_w, nullptr, params,
                             static_cast<std::uint8_t*>(out) + i * slot, 1);
  });
}

}  // namespace tb::slides
