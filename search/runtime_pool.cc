// The thread pool tessera's exported libraries run their parallel loops on (see search/runtime.py).
//
// TVM's own pool hands each thread one fixed share of a parallel loop, binds its threads to cores and waits for the
// last share with sched_yield: beside another busy thread the loop waits for the slowest share, and the yield hands
// the core to the other process. Here a loop is cut into more chunks than threads and every thread, the caller's
// included, takes the next chunk until none is left, so a thread the system has descheduled delays one chunk, not
// the loop; threads are not bound; a waiting worker spins with the CPU's pause instruction for a bounded time, then
// sleeps until woken, and sleeps at once while its core is shared with another runnable thread (see CoreShare). When
// the workers' cores are wanted by other processes (see Judge), the caller runs the loops alone for a while: one
// thread on a free core beats two threads fighting a busy one.
//
// Compiled into the exported library beside TVM's code; the loader points the library's __TVMBackendParallelLaunch
// at tessera_parallel_launch after tessera_pool_configure.

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

extern "C" {
typedef struct {
  void* sync_handle;
  int32_t num_task;
} TesseraParallelGroupEnv;  // TVM's TVMParallelGroupEnv
typedef int (*TesseraParallelLambda)(int task_id, TesseraParallelGroupEnv* penv, void* cdata);
}

namespace {

inline void Pause() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

using Clock = std::chrono::steady_clock;

thread_local bool inside_pool = false;  // a worker, or a caller inside its launch

constexpr Clock::duration kWindow = std::chrono::milliseconds(50);  // longer than the system's scheduling slices

// Whether another runnable thread shares the calling thread's core: over each of the last two windows, the thread
// waited to run for more than a quarter of the time it was runnable (Linux's per-thread scheduler statistics; where
// they cannot be read, never). One window is not enough: a daemon's burst on a quiet machine fills one now and then.
// A spinning thread on a shared core burns the share of the core the system grants it, so it is descheduled when
// work arrives; a thread that sleeps keeps its claim and is run soon after it is woken. Beside one busy core or a
// process streaming through memory a worker waits over a quarter of its runnable time in nearly every window; on a
// quiet machine or beside processes at the lowest priority, in almost none.
class CoreShare {
 public:
  // Re-reads the statistics once a window has passed since the last reading.
  bool Shared(Clock::time_point now) {
    if (now - read_at_ < kWindow) return shared_;
    read_at_ = now;
    long long running = 0, waiting = 0;
    if (!Read(&running, &waiting)) return shared_ = false;
    if (running_ >= 0) {
      const long long ran = running - running_, waited = waiting - waiting_;
      const bool crowded = 4 * waited > ran + waited;
      shared_ = crowded && crowded_before_;
      crowded_before_ = crowded;
    }
    running_ = running;
    waiting_ = waiting;
    return shared_;
  }

 private:
  // Nanoseconds this thread has run and has waited to run, since it started.
  static bool Read(long long* running, long long* waiting) {
    const int file = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
    if (file < 0) return false;
    char text[96] = {0};
    const ssize_t length = read(file, text, sizeof text - 1);
    close(file);
    return length > 0 && std::sscanf(text, "%lld %lld", running, waiting) == 2;
  }

  Clock::time_point read_at_{};
  long long running_ = -1, waiting_ = 0;
  bool crowded_before_ = false, shared_ = false;
};

// What tessera_pool_statistics reports, in this order.
enum Counter { kLaunches, kAlone, kBenches, kSharedCoreWaits, kCounts };

class Pool {
 public:
  Pool(int threads, int chunks_per_thread, int spin_us, bool spin_on_shared_cores)
      : threads_(threads),
        chunks_(threads * chunks_per_thread),
        spin_(std::chrono::microseconds(spin_us)),
        spin_on_shared_cores_(spin_on_shared_cores) {
    for (int i = 1; i < threads; ++i) std::thread([this] { Worker(); }).detach();
  }

  long long Counted(int which) const { return counts_[which].load(std::memory_order_relaxed); }

  // Run lambda's chunks on the pool; false if another thread's launch holds it.
  bool TryLaunch(TesseraParallelLambda lambda, void* cdata, int* result) {
    std::unique_lock<std::mutex> held(launching_, std::try_to_lock);
    if (!held.owns_lock()) return false;
    inside_pool = true;
    *result = Launch(lambda, cdata);
    inside_pool = false;
    return true;
  }

 private:
  int Launch(TesseraParallelLambda lambda, void* cdata) {
    Count(kLaunches);
    if (Clock::now() < benched_until_) {  // the workers are benched: the caller alone, the loop in one piece
      Count(kAlone);
      TesseraParallelGroupEnv whole{nullptr, 1};
      return lambda(0, &whole, cdata);
    }
    lambda_ = lambda;
    cdata_ = cdata;
    env_.sync_handle = nullptr;
    env_.num_task = chunks_;
    failed_.store(false);
    done_.store(0);
    const uint64_t generation = (ticket_.load() >> 32) + 1;
    ticket_.store(generation << 32);  // publishes the job: chunk 0 of a new generation
    if (sleepers_.load() > 0) {
      std::lock_guard<std::mutex> lock(mutex_);
      job_posted_.notify_all();
    }
    const auto start = Clock::now();
    const int own = Work(generation);
    const auto worked = Clock::now() - start;
    // A worker still running a chunk finishes within about one chunk's time: the caller spins that long (twice its
    // own mean chunk) before it sleeps, because a sleeping caller's core goes to whatever else wants it, and getting
    // it back can take one of the system's scheduling slices. A worker descheduled mid-chunk takes longer; the
    // sleeping caller then frees its core for it.
    const auto patience = std::max<Clock::duration>(spin_, own > 0 ? 2 * worked / own : spin_);
    if (!SpinUntil([&] { return done_.load() == chunks_; }, patience)) {
      std::unique_lock<std::mutex> lock(mutex_);
      caller_sleeping_.store(true);
      all_done_.wait(lock, [&] { return done_.load() == chunks_; });
      caller_sleeping_.store(false);
    }
    Judge(own, worked, Clock::now() - start - worked);
    return failed_.load() ? -1 : 0;
  }

  // Whether the workers pull their weight, judged over windows of kWindow spent inside launches (so that one
  // scheduling slice given to another process is a small part of a window). A window
  // fails when the caller spent over a quarter of it stalled (its chunks done, waiting for a worker's last chunk
  // longer than it worked itself and longer than a worker spins: the worker was descheduled mid-chunk), or when the
  // workers took under half their fair share of its chunks (their cores are busy with other processes). A failing
  // window benches the workers: the next launches run on the caller alone, which the system can move to a free core,
  // and the workers sleep. The bench (a time, kWindow to 1 s) doubles each time a window fails again and halves with
  // each window that does not. A low-priority process that gets a slice now and then, or a daemon waking on a quiet
  // machine, stalls a few percent of a window and benches nobody.
  void Judge(int own, Clock::duration worked, Clock::duration waited) {
    window_chunks_ += chunks_;
    window_others_ += chunks_ - own;
    window_busy_ += worked + waited;
    if (waited > worked && waited > spin_) window_stalled_ += waited;
    if (window_busy_ < kWindow) return;
    const bool failing = 4 * window_stalled_ > window_busy_ ||
                         2 * window_others_ * threads_ < window_chunks_ * (threads_ - 1);
    window_chunks_ = window_others_ = 0;
    window_busy_ = window_stalled_ = Clock::duration::zero();
    if (!failing) {
      bench_ = std::max<Clock::duration>(bench_ / 2, kWindow);
    } else {
      benched_until_ = Clock::now() + bench_;
      Count(kBenches);
      bench_ = std::min<Clock::duration>(2 * bench_, kMaxBench);
    }
  }

  // Run chunks of the given generation until none is left; how many this thread ran.
  int Work(uint64_t generation) {
    for (int ran = 0;; ++ran) {
      uint64_t ticket = ticket_.load();
      if (ticket >> 32 != generation || static_cast<int>(ticket & 0xffffffffu) >= chunks_) return ran;
      if (!ticket_.compare_exchange_weak(ticket, ticket + 1)) {
        --ran;
        continue;
      }
      if (lambda_(static_cast<int>(ticket & 0xffffffffu), &env_, cdata_) != 0) failed_.store(true);
      if (done_.fetch_add(1) + 1 == chunks_ && caller_sleeping_.load()) {
        std::lock_guard<std::mutex> lock(mutex_);
        all_done_.notify_all();
      }
    }
  }

  void Worker() {
    inside_pool = true;
    uint64_t seen = 0;
    CoreShare core;
    for (;;) {
      auto posted = [&] { return (ticket_.load() >> 32) != seen; };
      const bool spin = spin_on_shared_cores_ || !core.Shared(Clock::now());
      if (!spin) Count(kSharedCoreWaits);
      if (!SpinUntil(posted, spin ? Clock::duration(spin_) : Clock::duration::zero())) {
        std::unique_lock<std::mutex> lock(mutex_);
        sleepers_.fetch_add(1);
        job_posted_.wait(lock, posted);
        sleepers_.fetch_sub(1);
      }
      seen = ticket_.load() >> 32;
      Work(seen);
    }
  }

  void Count(int which) { counts_[which].fetch_add(1, std::memory_order_relaxed); }

  // Spin until condition holds, for at most the given time; whether it holds.
  template <typename Condition>
  static bool SpinUntil(Condition condition, Clock::duration most) {
    const auto until = Clock::now() + most;
    for (int i = 1;; ++i) {
      if (condition()) return true;
      Pause();
      if (i % 64 == 0 && Clock::now() >= until) return condition();
    }
  }

  static constexpr Clock::duration kMaxBench = std::chrono::seconds(1);  // the longest a load that ended still counts

  std::atomic<long long> counts_[kCounts] = {};
  const int threads_;
  const int chunks_;
  const std::chrono::microseconds spin_;
  const bool spin_on_shared_cores_;
  Clock::time_point benched_until_{};  // the caller runs alone until then
  Clock::duration bench_ = kWindow;
  int window_chunks_ = 0, window_others_ = 0;
  Clock::duration window_busy_{}, window_stalled_{};
  std::atomic<uint64_t> ticket_{0};  // generation << 32 | next chunk
  std::atomic<int> done_{0};
  std::atomic<bool> failed_{false};
  std::atomic<int> sleepers_{0};
  std::atomic<bool> caller_sleeping_{false};
  TesseraParallelLambda lambda_ = nullptr;
  void* cdata_ = nullptr;
  TesseraParallelGroupEnv env_{};
  std::mutex launching_;
  std::mutex mutex_;
  std::condition_variable job_posted_;
  std::condition_variable all_done_;
};

Pool* pool = nullptr;  // never freed: its detached threads live as long as the process

}  // namespace

extern "C" {

// Start the pool (once per library; later calls are ignored). Returns the number of threads it runs.
int tessera_pool_configure(int threads, int chunks_per_thread, int spin_us, int spin_on_shared_cores) {
  static std::once_flag once;
  std::call_once(once, [&] { pool = new Pool(threads, chunks_per_thread, spin_us, spin_on_shared_cores != 0); });
  return threads;
}

// Since the pool started: launches, launches the caller ran alone (the workers benched), benches, and waits in which
// a worker slept at once because its core was shared. Writes at most count of them; returns how many it wrote.
int tessera_pool_statistics(long long* out, int count) {
  if (pool == nullptr) return 0;
  const int written = std::min<int>(count, kCounts);
  for (int i = 0; i < written; ++i) out[i] = pool->Counted(i);
  return written;
}

// TVM's TVMBackendParallelLaunch, on the pool. A launch from inside a chunk, or while another thread's launch runs,
// runs in one piece on its own thread.
int tessera_parallel_launch(TesseraParallelLambda lambda, void* cdata, int num_task) {
  (void)num_task;  // TVM's generated code asks for 0: every thread
  int result = 0;
  if (pool != nullptr && !inside_pool && pool->TryLaunch(lambda, cdata, &result)) return result;
  TesseraParallelGroupEnv env{nullptr, 1};
  return lambda(0, &env, cdata);
}
}
