// Cooperative cancellation of long core loops (Ctrl-C within a second).
//
// The core has no Python in it, so it cannot ask the interpreter whether a signal arrived. The
// binding layer installs a CancelToken on the thread that calls into the core (ScopedCancel) with
// a poll callback that briefly re-acquires the GIL and runs the interpreter's signal handlers.
// parallel_for (parallel.hpp) reads the thread's token when it starts: between tasks the calling
// thread polls (at most every kPollInterval), the worker threads read the token's flag, and once
// the poll reports a pending Python exception every thread stops claiming tasks and parallel_for
// throws tb::cancelled. The binding layer turns that back into the Python exception (the
// KeyboardInterrupt) the handler raised. Without a token (a direct C++ caller, a nested loop on a
// worker thread) nothing is polled and nothing changes.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <stdexcept>
#include <thread>
#include <utility>

namespace tb {

// Thrown by parallel_for when the token of its calling thread was cancelled. Only the binding
// layer that installed the token catches it.
class cancelled : public std::runtime_error {
 public:
  cancelled() : std::runtime_error("cancelled") {}
};

class CancelToken {
 public:
  // poll() runs on the owner thread only and returns true when the work must stop.
  explicit CancelToken(std::function<bool()> poll)
      : poll_(std::move(poll)), owner_(std::this_thread::get_id()) {}
  CancelToken(const CancelToken&) = delete;
  CancelToken& operator=(const CancelToken&) = delete;

  // How often the owner thread polls (a poll costs a GIL round trip, microseconds).
  static constexpr std::chrono::milliseconds kPollInterval{50};

  bool stop_requested() const { return stop_.load(std::memory_order_relaxed); }

  // On the owner thread: polls if kPollInterval has passed since the last poll. On any other
  // thread: reads the flag. Returns whether the work must stop.
  bool check() {
    if (stop_requested()) return true;
    if (std::this_thread::get_id() != owner_) return false;
    const auto now = std::chrono::steady_clock::now();
    if (now - last_poll_ < kPollInterval) return false;
    last_poll_ = now;
    if (poll_ && poll_()) stop_.store(true, std::memory_order_relaxed);
    return stop_requested();
  }

 private:
  std::function<bool()> poll_;
  std::thread::id owner_;
  std::atomic<bool> stop_{false};
  std::chrono::steady_clock::time_point last_poll_ = std::chrono::steady_clock::now();
};

// The token of the current thread (null when none is installed).
inline CancelToken*& current_cancel_token() {
  thread_local CancelToken* token = nullptr;
  return token;
}

// Installs a token on the current thread for the lifetime of the guard (restores the previous one).
class ScopedCancel {
 public:
  explicit ScopedCancel(CancelToken& token) : previous_(current_cancel_token()) {
    current_cancel_token() = &token;
  }
  ~ScopedCancel() { current_cancel_token() = previous_; }
  ScopedCancel(const ScopedCancel&) = delete;
  ScopedCancel& operator=(const ScopedCancel&) = delete;

 private:
  CancelToken* previous_;
};

// Throws tb::cancelled when the current thread's token says stop (for long sequential loops
// outside parallel_for). Cheap: one clock read per call on the owner thread.
inline void check_cancelled() {
  CancelToken* token = current_cancel_token();
  if (token != nullptr && token->check()) throw cancelled();
}

}  // namespace tb
