// A minimal parallel-for: tasks are claimed from an atomic counter by worker threads. Results must be
// written to task-indexed slots, so the output never depends on which thread ran which task.
// parallel_blocks runs the same loop over contiguous index ranges (rows of an image, items of a
// batch). Both stop between tasks when the calling thread's CancelToken (cancel.hpp) says so, and
// then throw tb::cancelled.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "cancel.hpp"

namespace tb {

inline int resolve_threads(int requested) {
  if (requested > 0) return requested;
  const unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : static_cast<int>(hw);
}

// Runs fn(task) for task in [0, n_tasks) on up to `threads` threads. The first exception thrown
// by any task is rethrown on the calling thread after all workers stop. With a CancelToken on the
// calling thread, tasks stop being claimed once it is cancelled and tb::cancelled is thrown.
template <class Fn>
void parallel_for(std::size_t n_tasks, int threads, Fn&& fn) {
  if (n_tasks == 0) return;
  CancelToken* const token = current_cancel_token();
  const std::size_t workers =
      std::min<std::size_t>(static_cast<std::size_t>(resolve_threads(threads)), n_tasks);
  if (workers <= 1) {
    for (std::size_t t = 0; t < n_tasks; ++t) {
      if (token != nullptr && token->check()) throw cancelled();
      fn(t);
    }
    return;
  }
  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr error;
  std::mutex error_mutex;
  auto work = [&]() {
    for (;;) {
      if (failed.load(std::memory_order_relaxed)) return;
      if (token != nullptr && token->check()) return;
      const std::size_t t = next.fetch_add(1, std::memory_order_relaxed);
      if (t >= n_tasks) return;
      try {
        fn(t);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = std::current_exception();
        failed.store(true);
        return;
      }
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(workers - 1);
  for (std::size_t w = 0; w + 1 < workers; ++w) pool.emplace_back(work);
  work();
  for (auto& th : pool) th.join();
  if (error) std::rethrow_exception(error);
  if (token != nullptr && token->stop_requested()) throw cancelled();
}

// Splits [0, n) into about 4 * threads contiguous blocks and runs fn(begin, end) on each with
// parallel_for. Blocks never overlap, so fn may write rows [begin, end) of an output freely; the
// block boundaries depend on the thread count, so fn must not depend on them for its result.
template <class Fn>
void parallel_blocks(std::int64_t n, int threads, Fn&& fn) {
  if (n <= 0) return;
  const auto parts = static_cast<std::int64_t>(std::max(1, resolve_threads(threads))) * 4;
  const std::int64_t block = std::max<std::int64_t>(1, (n + parts - 1) / parts);
  const auto n_blocks = static_cast<std::size_t>((n + block - 1) / block);
  parallel_for(n_blocks, threads, [&](std::size_t b) {
    const std::int64_t begin = static_cast<std::int64_t>(b) * block;
    fn(begin, std::min(n, begin + block));
  });
}

}  // namespace tb
