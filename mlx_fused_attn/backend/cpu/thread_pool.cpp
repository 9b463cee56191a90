#include "mlx_fused_attn/backend/cpu/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

namespace mlx_fused_attn::cpu {

namespace {

class ThreadPool {
 public:
  explicit ThreadPool(int workers) {
    for (int i = 0; i < workers; ++i) {
      threads_.emplace_back([this] { work(); });
    }
  }

  ~ThreadPool() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    for (auto& t : threads_) {
      t.join();
    }
  }

  void run(int n, const std::function<void(int)>& body) {
    // One job at a time: MLX may evaluate CPU streams on several threads.
    std::lock_guard<std::mutex> job_lock(job_mutex_);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      body_ = &body;
      n_ = n;
      next_.store(0);
      busy_ = static_cast<int>(threads_.size());
      ++generation_;
    }
    wake_.notify_all();
    drain();
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [this] { return busy_ == 0; });
    body_ = nullptr;
  }

 private:
  void drain() {
    for (int i = next_.fetch_add(1); i < n_; i = next_.fetch_add(1)) {
      (*body_)(i);
    }
  }

  void work() {
    long seen = 0;
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
        if (stop_) {
          return;
        }
        seen = generation_;
      }
      drain();
      std::lock_guard<std::mutex> lock(mutex_);
      if (--busy_ == 0) {
        done_.notify_one();
      }
    }
  }

  std::vector<std::thread> threads_;
  std::mutex job_mutex_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  const std::function<void(int)>* body_ = nullptr;
  int n_ = 0;
  std::atomic<int> next_{0};
  int busy_ = 0;
  long generation_ = 0;
  bool stop_ = false;
};

ThreadPool& pool() {
  static ThreadPool instance(num_threads() - 1);
  return instance;
}

} // namespace

int num_threads() {
  static const int n = [] {
    if (const char* env = std::getenv("MLX_FUSED_ATTN_NUM_THREADS")) {
      int v = std::atoi(env);
      if (v > 0) {
        return v;
      }
    }
    return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  }();
  return n;
}

void parallel_for(int n, const std::function<void(int)>& body) {
  if (n <= 1 || num_threads() == 1) {
    for (int i = 0; i < n; ++i) {
      body(i);
    }
    return;
  }
  pool().run(n, body);
}

} // namespace mlx_fused_attn::cpu
