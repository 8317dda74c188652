// Batches of patches produced ahead of the consumer by C++ threads that never touch Python.
//
// The per-batch call of TileReader::load_patches already runs without the GIL, but a Python
// worker thread must take the GIL back after each call before it can start the next batch;
// beside a busy Python thread that costs up to one interpreter switch interval (5 ms) per
// hand-off. A Prefetcher's workers claim batch indices, fill their own buffers and queue them;
// the consumer takes finished batches in order. Production never waits for the GIL, and the only
// hand-off left per batch is the consumer's own. At most `depth` batches are produced ahead of
// the consumer. Each batch is one task written into its own buffer, so the output does not
// depend on the number of workers.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "common/cancel.hpp"
#include "slides/tile_reader.hpp"
#include "tiling/resample.hpp"

namespace tb::slides {

class Prefetcher {
 public:
  // Produces ceil(n / batch) batches of the n regions at xy (level pixels, read_w x read_h,
  // preprocessed by params) on `workers` threads, at most `depth` (>= 1) ahead of the consumer.
  // The reader must outlive the prefetcher; xy is copied.
  Prefetcher(const TileReader& reader, int level, const std::int64_t* xy, std::int64_t n,
             std::int64_t read_w, std::int64_t read_h, std::int64_t batch,
             const tiling::PreprocessParams& params, int workers, int depth);
  ~Prefetcher();
  Prefetcher(const Prefetcher&) = delete;
  Prefetcher& operator=(const Prefetcher&) = delete;

  std::int64_t batch_count() const { return n_batches_; }
  // Patches in batch b.
  std::int64_t batch_size(std::int64_t b) const;
  // Bytes of one patch in the output.
  std::size_t patch_bytes() const { return patch_bytes_; }

  // Waits for the next batch in order and moves its buffer into `out`; returns its index, or -1
  // when every batch was taken. Rethrows a worker's exception at the batch it failed on.
  // `interrupted` is polled about every 50 ms while waiting; when it returns true the wait ends
  // by throwing tb::cancelled.
  template <class Poll>
  std::int64_t next(std::vector<std::uint8_t>& out, Poll&& interrupted);

  // Stops the workers (after their current batch) and joins them. Idempotent.
  void close();

 private:
  void work();
  bool take(std::vector<std::uint8_t>& out, std::int64_t* index);  // under mutex_

  const TileReader& reader_;
  int level_;
  std::vector<std::int64_t> xy_;
  std::int64_t n_, read_w_, read_h_, batch_, n_batches_;
  tiling::PreprocessParams params_;
  std::size_t patch_bytes_;
  int depth_;

  std::mutex mutex_;
  std::condition_variable ready_cv_, room_cv_;
  std::int64_t next_claim_ = 0, next_take_ = 0;
  bool stop_ = false;
  std::map<std::int64_t, std::vector<std::uint8_t>> ready_;
  std::map<std::int64_t, std::exception_ptr> failed_;
  std::vector<std::thread> threads_;
};

template <class Poll>
std::int64_t Prefetcher::next(std::vector<std::uint8_t>& out, Poll&& interrupted) {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    std::int64_t index = -1;
    bool got = false;
    try {
      got = take(out, &index);
    } catch (...) {  // the batch a worker failed on: free its room first
      lock.unlock();
      room_cv_.notify_all();
      throw;
    }
    if (got) {
      lock.unlock();
      room_cv_.notify_all();
      return index;
    }
    if (next_take_ >= n_batches_) return -1;
    ready_cv_.wait_for(lock, std::chrono::milliseconds(50));
    if (ready_.count(next_take_) == 0 && failed_.count(next_take_) == 0) {
      lock.unlock();
      const bool stop = interrupted();
      lock.lock();
      if (stop) throw cancelled();
    }
  }
}

}  // namespace tb::slides
