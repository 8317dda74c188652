// Batches produced ahead of the consumer by C++ threads: see prefetcher.hpp.
#include "slides/prefetcher.hpp"

#include <algorithm>
#include <stdexcept>

namespace tb::slides {

Prefetcher::Prefetcher(const TileReader& reader, int level, const std::int64_t* xy,
                       std::int64_t n, std::int64_t read_w, std::int64_t read_h,
                       std::int64_t batch, const tiling::PreprocessParams& params, int workers,
                       int depth)
    : reader_(reader),
      level_(level),
      xy_(xy, xy + 2 * std::max<std::int64_t>(n, 0)),
      n_(std::max<std::int64_t>(n, 0)),
      read_w_(read_w),
      read_h_(read_h),
      batch_(batch),
      n_batches_(0),
      params_(params),
      patch_bytes_(static_cast<std::size_t>(3 * params.out_h * params.out_w) *
                   tiling::value_bytes(params.type)),
      depth_(depth) {
  if (batch <= 0 || depth <= 0 || workers <= 0) {
    throw std::invalid_argument("batch, depth and workers must be positive");
  }
  if (read_w <= 0 || read_h <= 0) throw std::invalid_argument("read sizes must be positive");
  n_batches_ = (n_ + batch_ - 1) / batch_;
  const int count = static_cast<int>(std::min<std::int64_t>(workers, n_batches_));
  threads_.reserve(static_cast<std::size_t>(count));
  for (int w = 0; w < count; ++w) threads_.emplace_back([this] { work(); });
}

Prefetcher::~Prefetcher() { close(); }

std::int64_t Prefetcher::batch_size(std::int64_t b) const {
  return std::min(batch_, n_ - b * batch_);
}

void Prefetcher::close() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  room_cv_.notify_all();
  ready_cv_.notify_all();
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
}

void Prefetcher::work() {
  for (;;) {
    std::int64_t b;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      room_cv_.wait(lock, [&] {
        return stop_ || next_claim_ >= n_batches_ || next_claim_ < next_take_ + depth_;
      });
      if (stop_ || next_claim_ >= n_batches_) return;
      b = next_claim_++;
    }
    std::vector<std::uint8_t> buffer;
    std::exception_ptr error;
    try {
      const std::int64_t count = batch_size(b);
      buffer.resize(static_cast<std::size_t>(count) * patch_bytes_);
      reader_.load_patches(level_, xy_.data() + 2 * b * batch_, count, read_w_, read_h_,
                           params_, buffer.data(), 1);
    } catch (...) {
      error = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (error) {
        failed_[b] = error;
      } else {
        ready_[b] = std::move(buffer);
      }
    }
    ready_cv_.notify_all();
  }
}

bool Prefetcher::take(std::vector<std::uint8_t>& out, std::int64_t* index) {
  auto f = failed_.find(next_take_);
  if (f != failed_.end()) {
    std::exception_ptr e = f->second;
    failed_.erase(f);
    ++next_take_;
    std::rethrow_exception(e);
  }
  auto r = ready_.find(next_take_);
  if (r == ready_.end()) return false;
  out = std::move(r->second);
  ready_.erase(r);
  *index = next_take_++;
  return true;
}

}  // namespace tb::slides
