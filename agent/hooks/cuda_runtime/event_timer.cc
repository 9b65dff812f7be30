#include "agent/hooks/cuda_runtime/event_timer.h"

#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "agent/core/agent.h"
#include "agent/core/clock.h"
#include "agent/core/event.h"
#include "agent/hooks/cuda_runtime/alloc_table.h"
#include "agent/hooks/cuda_runtime/gpu_timing.h"
#include "agent/hooks/cuda_runtime/mpmc_queue.h"
#include "agent/hooks/cuda_runtime/own_calls.h"
#include "agent/hooks/cuda_runtime/real.h"

namespace profagent {
namespace rt {
namespace {

constexpr int kMaxDevices = 8;
// Event pairs per device: a first chunk made at the device's first use, more made by the poller
// in the background (up to kMaxChunks) when the host runs far ahead of the device.
constexpr int kChunk = 1024;
constexpr int kMaxChunks = 8;
constexpr int kPairs = kChunk * kMaxChunks;  // the most per device; tickets: device * kPairs + slot

Real<decltype(&cudaEventCreateWithFlags)> r_create("cudaEventCreateWithFlags");
Real<decltype(&cudaEventRecord)> r_record("cudaEventRecord");
Real<decltype(&cudaEventQuery)> r_query("cudaEventQuery");
Real<decltype(&cudaEventElapsedTime)> r_elapsed("cudaEventElapsedTime");
Real<decltype(&cudaEventSynchronize)> r_evsync("cudaEventSynchronize");
Real<decltype(&cudaStreamCreateWithFlags)> r_stream_create("cudaStreamCreateWithFlags");
Real<decltype(&cudaFuncGetName)> r_func_get_name("cudaFuncGetName");
Real<decltype(&cudaStreamIsCapturing)> r_is_capturing("cudaStreamIsCapturing");
Real<decltype(&cudaThreadExchangeStreamCaptureMode)> r_exchange_mode(
    "cudaThreadExchangeStreamCaptureMode");
Real<decltype(&cudaGetDevice)> r_get_device("cudaGetDevice");
Real<decltype(&cudaSetDevice)> r_set_device("cudaSetDevice");
Real<decltype(&cudaDeviceSynchronize)> r_dev_sync("cudaDeviceSynchronize");

constexpr int kResetting = 4;  // DevicePool::state during a cudaDeviceReset of its device

// Device times are read as cudaEventElapsedTime (float milliseconds) from a reference event of
// known host time. A float's resolution falls with its size (15 us at 140 s, 8 ms after a day),
// so the poller records a fresh reference every kReanchorNs; an operation is measured from the
// newest reference recorded before its start event, kept in a ring of kRefs. An operation older
// than the ring (in flight for kRefs seconds) is measured from the pool's first reference.
constexpr int kRefs = 16;
constexpr uint64_t kReanchorNs = 1'000'000'000ull;

struct DevicePool {
  std::atomic<int> state{0};  // 0 none, 1 creating, 2 ready, 3 broken, kResetting
  cudaEvent_t start[kPairs];
  cudaEvent_t stop[kPairs];
  uint32_t start_epoch[kPairs];  // the reference epoch when the slot's start was recorded
  uint64_t start_pre[kPairs];    // raw ticks (clock.h) just before the start was recorded
  MpmcQueue<int32_t, kPairs> free_slots;
  std::atomic<int> pairs{0};  // pairs made: slots [0, pairs) of start/stop
  std::mutex grow_mu;         // held while pairs are made (GrowBatch)
  std::atomic<bool> grow_failed{false};
  cudaStream_t ref_stream = nullptr;  // private, idle: where references are recorded
  cudaEvent_t ref = nullptr;          // epoch 0, recorded when the pool was made
  uint64_t ref_host_ns = 0;
  // Epoch e >= 1: ring[(e - 1) % kRefs]. Written by the poller (under PollMu) before it
  // publishes the epoch.
  cudaEvent_t ring[kRefs] = {};
  uint64_t ring_host_ns[kRefs] = {};
  std::atomic<uint32_t> epoch{0};
  uint64_t anchored_ns = 0;  // host time of the newest reference (poller only)
};

struct Pending {
  int32_t ticket;
  DeviceOpInfo info;
};

DevicePool g_pools[kMaxDevices];
AllocTable g_stream_devices;  // created stream -> its device (size and kind unused)
// A created stream's handle; the special handles (legacy, per-thread: on the current device)
// are never stored (AllocTable rejects 0 and 1; 2 is mapped to 0).
inline uint64_t StreamHandle(cudaStream_t s) {
  const uint64_t h = reinterpret_cast<uint64_t>(s);
  return h == reinterpret_cast<uint64_t>(cudaStreamPerThread) ? 0 : h;
}
MpmcQueue<Pending, 8192> g_pending;
std::atomic<bool> g_started{false};
std::atomic<bool> g_need_poller{false};  // a forked child: its poller starts on first use
// Operations not timed, by cause (the shutdown note lists them).
std::atomic<uint64_t> g_untimed_pool{0};   // every pair in flight (more than kPairs ops queued)
std::atomic<uint64_t> g_untimed_error{0};  // an event call of the agent failed
std::atomic<uint64_t> g_untimed_queue{0};  // the hand-off queue to the poller was full
std::atomic<uint64_t> g_untimed_setup{0};  // the device's pool could not be made in time
std::atomic<uint64_t> g_untimed_reset{0};  // launched while a cudaDeviceReset remade the pool

// Whether the application had an error pending (unread) when this thread's current operation
// began. The agent's calls still go ahead (a successful runtime call leaves a pending error as
// it is); only a failure of theirs is left in place then, instead of being cleared, because
// clearing would clear the application's error too. Such a failure is on the application's own
// handle (its stream), on which its call fails in the same way right after.
thread_local bool t_app_error __attribute__((tls_model("initial-exec"))) = false;

inline void OwnFailure() {
  if (!t_app_error) ClearOwnError();
  g_untimed_error.fetch_add(1, std::memory_order_relaxed);
}
std::atomic<bool> g_stop{false};
std::atomic<int> g_inflight{0};

// Leaked on purpose: used by the poller thread and the shutdown drain, which may run after
// static destructors.
std::mutex& NamesMu() {
  static auto* mu = new std::mutex();
  return *mu;
}
std::unordered_map<const void*, std::string>& KernelNames() {  // func -> mangled
  static auto* m = new std::unordered_map<const void*, std::string>();
  return *m;
}
std::mutex& PollMu() {  // serializes PollOnce between the poller and the shutdown drain
  static auto* mu = new std::mutex();
  return *mu;
}

// Records `ev` on the idle stream `s` and sets *host_ns to its host time. On an idle stream the
// event completes when it is enqueued, inside the record call: its host time is known to within
// the call's duration. Re-record until that window is small (the first calls on a fresh stream
// can be slow).
cudaError_t RecordReference(cudaEvent_t ev, cudaStream_t s, uint64_t* host_ns, const char** what) {
  cudaError_t r = cudaSuccess;
  for (int attempt = 0; attempt < 20; ++attempt) {
    *what = "cudaEventRecord";
    const uint64_t t0 = MonotonicNs();
    if ((r = r_record.get()(ev, s)) != cudaSuccess) return r;
    const uint64_t t1 = MonotonicNs();
    *what = "cudaEventSynchronize";
    if ((r = r_evsync.get()(ev)) != cudaSuccess) return r;
    *host_ns = t0 + (t1 - t0) / 2;
    if (t1 - t0 < 4000) break;
  }
  return r;
}

// Creates the event pool of `device` (the current device). On failure returns the error and
// the call that failed (`what`); the caller clears the thread's error.
cudaError_t CreatePool(int device, DevicePool* p, const char** what) {
  auto create = r_create.get();
  auto stream_create = r_stream_create.get();
  *what = "the CUDA runtime";
  if (!create || !r_record.get() || !r_evsync.get() || !stream_create || !r_query.get() ||
      !r_elapsed.get())
    return cudaErrorSharedObjectSymbolNotFound;
  cudaError_t r;
  *what = "cudaEventCreateWithFlags";
  for (int i = 0; i < kChunk; ++i) {
    if ((r = create(&p->start[i], cudaEventDefault)) != cudaSuccess) return r;
    if ((r = create(&p->stop[i], cudaEventDefault)) != cudaSuccess) return r;
  }
  *what = "cudaStreamCreateWithFlags";
  if ((r = stream_create(&p->ref_stream, cudaStreamNonBlocking)) != cudaSuccess) return r;
  *what = "cudaEventCreateWithFlags";
  if ((r = create(&p->ref, cudaEventDefault)) != cudaSuccess) return r;
  for (int i = 0; i < kRefs; ++i) {
    if ((r = create(&p->ring[i], cudaEventDefault)) != cudaSuccess) return r;
  }
  if ((r = RecordReference(p->ref, p->ref_stream, &p->ref_host_ns, what)) != cudaSuccess)
    return r;
  p->anchored_ns = p->ref_host_ns;
  p->epoch.store(0, std::memory_order_release);
  p->free_slots.Init();
  for (int i = 0; i < kChunk; ++i) p->free_slots.Push(device * kPairs + i);
  p->pairs.store(kChunk, std::memory_order_release);
  p->grow_failed.store(false);
  return cudaSuccess;
}

// A pool running low: fewer than 3/4 of a chunk of pairs free, and room to make more.
bool PoolLow(const DevicePool& p) {
  return p.free_slots.ApproxSize() < size_t(kChunk * 3 / 4) &&
         p.pairs.load(std::memory_order_relaxed) < kPairs;
}

constexpr int kBatch = 64;

// Makes kBatch more pairs of pool `d` (the calling thread's current device), under p.grow_mu,
// and hands them out. False when the pool is full or an event could not be made (the error is
// left to the caller; the pool grows no more: a partial batch stays unused).
bool GrowBatch(DevicePool& p, int d) {
  auto create = r_create.get();
  if (create == nullptr || p.grow_failed.load()) return false;
  const int first = p.pairs.load(std::memory_order_relaxed);
  if (first + kBatch > kPairs) return false;
  int made = 0;
  for (; made < kBatch; ++made) {
    if (create(&p.start[first + made], cudaEventDefault) != cudaSuccess) break;
    if (create(&p.stop[first + made], cudaEventDefault) != cudaSuccess) break;
  }
  if (made < kBatch) {
    p.grow_failed.store(true);
    return false;
  }
  p.pairs.store(first + kBatch, std::memory_order_release);
  for (int i = 0; i < kBatch; ++i) p.free_slots.Push(d * kPairs + first + i);
  return true;
}

// Poller thread: adds up to a chunk of pairs to a ready pool running low, so that a host far
// ahead of its device (thousands of operations in flight) is still timed. Pairs are handed out
// in batches as they are made (a burst of launches need not wait for the whole chunk). The
// poller's own CUDA calls: its thread's device and errors are the agent's.
void GrowPools() {
  auto set_device = r_set_device.get();
  if (set_device == nullptr) return;
  for (int d = 0; d < kMaxDevices; ++d) {
    DevicePool& p = g_pools[d];
    if (p.state.load(std::memory_order_acquire) != 2 || p.grow_failed.load() || !PoolLow(p)) {
      continue;
    }
    if (set_device(d) != cudaSuccess) {
      ClearOwnError();
      p.grow_failed.store(true);
      continue;
    }
    std::lock_guard<std::mutex> lock(p.grow_mu);
    for (int batch = 0; batch < kChunk / kBatch && PoolLow(p); ++batch) {
      if (!GrowBatch(p, d)) {
        ClearOwnError();
        break;
      }
    }
  }
}

// The poller sleeps on g_wake (a futex word) between passes; a launching thread that finds its
// pool low wakes it at once to grow the pool, rather than leave a burst of launches to run the
// pool dry in the poller's sleep.
std::atomic<int> g_wake{0};
void WakePoller() {
  if (g_wake.load(std::memory_order_relaxed) != 0 || g_wake.exchange(1) != 0) return;
  syscall(SYS_futex, reinterpret_cast<int*>(&g_wake), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
}
void SleepUnlessWoken(unsigned us) {
  struct timespec ts = {0, long(us) * 1000};
  syscall(SYS_futex, reinterpret_cast<int*>(&g_wake), FUTEX_WAIT_PRIVATE, 0, &ts, nullptr, 0);
}

// Poller thread, under PollMu: a fresh reference on every ready pool whose newest is older than
// kReanchorNs (see kRefs).
void Reanchor() {
  auto set_device = r_set_device.get();
  if (set_device == nullptr) return;
  const uint64_t now = MonotonicNs();
  for (int d = 0; d < kMaxDevices; ++d) {
    DevicePool& p = g_pools[d];
    if (p.state.load(std::memory_order_acquire) != 2 || now - p.anchored_ns < kReanchorNs) {
      continue;
    }
    p.anchored_ns = now;  // also when it fails: retried a period later, not at every pass
    if (set_device(d) != cudaSuccess) {
      ClearOwnError();
      continue;
    }
    const uint32_t next = p.epoch.load(std::memory_order_relaxed) + 1;
    const int i = int((next - 1) % kRefs);
    const char* what;
    if (RecordReference(p.ring[i], p.ref_stream, &p.ring_host_ns[i], &what) != cudaSuccess) {
      ClearOwnError();
      continue;
    }
    p.epoch.store(next, std::memory_order_release);
  }
}

// The reference an operation started at `epoch` is measured from, and its host time.
inline cudaEvent_t ReferenceFor(const DevicePool& p, uint32_t epoch, uint64_t* host_ns) {
  const uint32_t now = p.epoch.load(std::memory_order_acquire);
  if (epoch == 0 || now - epoch >= uint32_t(kRefs) - 1) {  // its ring slot may be reused
    *host_ns = p.ref_host_ns;
    return p.ref;
  }
  const int i = int((epoch - 1) % kRefs);
  *host_ns = p.ring_host_ns[i];
  return p.ring[i];
}

// Errors that mean "no usable GPU in this process" rather than "this device or stream".
bool NoGpu(cudaError_t e) {
  return e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver ||
         e == cudaErrorInitializationError || e == cudaErrorSystemDriverMismatch ||
         e == cudaErrorCompatNotSupportedOnDevice || e == cudaErrorDevicesUnavailable ||
         e == cudaErrorSharedObjectSymbolNotFound;
}

// Slow path of EventTimerBegin: the first use of a device's pool. Events belong to the device
// current when they are created: switch to `device` for that, then back.
__attribute__((noinline)) bool EnsurePool(int device, DevicePool* p) {
  int st = 0;
  if (!p->state.compare_exchange_strong(st, 1)) return false;  // another thread is creating it
  const char* what = "cudaGetDevice";
  int current = -1;
  auto get_device = r_get_device.get();
  auto set_device = r_set_device.get();
  cudaError_t r = get_device ? get_device(&current) : cudaErrorSharedObjectSymbolNotFound;
  if (r == cudaSuccess && current != device) {
    what = "cudaSetDevice";
    r = set_device ? set_device(device) : cudaErrorSharedObjectSymbolNotFound;
  }
  // The pool's calls (a synchronization among them) must not invalidate a global-mode stream
  // capture that another thread has open: relaxed mode on this thread meanwhile.
  auto exchange = r_exchange_mode.get();
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  const bool exchanged = exchange != nullptr && exchange(&mode) == cudaSuccess;
  if (r == cudaSuccess) r = CreatePool(device, p, &what);
  if (exchanged) exchange(&mode);
  if (current >= 0 && current != device && set_device) set_device(current);
  p->state.store(r == cudaSuccess ? 2 : 3, std::memory_order_release);
  if (r == cudaSuccess) return true;
  if (!t_app_error) ClearOwnError();  // see t_app_error
  const std::string why = std::string("CUDA events: ") + what + " returned " + ErrorName(r);
  if (NoGpu(r)) {
    FallBackToHostTiming(why + " (no GPU or no driver?); host times only");
  } else {
    AddNote("warning", why + "; CUDA-event timing unavailable on device " +
                           std::to_string(device));
  }
  return false;
}

// The pool of `device` is not ready: create it, or wait while another thread does (once per
// device; the operations of threads that start together must not go untimed for it). False
// when the device cannot be timed.
__attribute__((noinline)) bool WaitForPool(int device, DevicePool* p) {
  int st = p->state.load(std::memory_order_acquire);
  if (st == 0 && EnsurePool(device, p)) return true;
  // Creating 2 x kPairs events takes milliseconds; give up after ~10 s (a wedged driver).
  const uint64_t deadline = MonotonicNs() + 10'000'000'000ull;
  while ((st = p->state.load(std::memory_order_acquire)) == 1 && MonotonicNs() < deadline) {
    std::this_thread::yield();
  }
  if (st == 2) return true;
  if (st == 1) g_untimed_setup.fetch_add(1, std::memory_order_relaxed);
  if (st == kResetting) g_untimed_reset.fetch_add(1, std::memory_order_relaxed);
  return false;
}

uint32_t NameFor(const void* func, std::unordered_map<const void*, uint32_t>* cache) {
  if (!func) return 0;
  auto it = cache->find(func);
  if (it != cache->end()) return it->second;
  std::string name;
  {
    std::lock_guard<std::mutex> lock(NamesMu());
    auto n = KernelNames().find(func);
    if (n != KernelNames().end()) name = n->second;
  }
  if (name.empty()) {
    const char* s = nullptr;
    if (auto f = r_func_get_name.get(); f && f(&s, func) == cudaSuccess && s) name = s;
  }
  uint32_t id = InternKernelName(name);  // registered names are mangled
  cache->emplace(func, id);
  return id;
}

void Release(int32_t ticket) { g_pools[ticket / kPairs].free_slots.Push(ticket); }

// The last op resolved on each stream (device << 32 | DeviceOpInfo.stream): its start and end,
// under PollMu. A stream runs its ops one after another, but each op's interval is estimated on
// its own (EstimateInterval): one that would start before its predecessor's end starts there.
// An op resolved ahead of one that ran before it (pairs of two threads' launches on one stream
// queued in the other order) starts before the last start and is left as it is.
struct StreamLast {
  uint64_t start = 0, end = 0;
};
std::unordered_map<uint64_t, StreamLast>* g_stream_last = nullptr;

void KeepStreamOrder(uint32_t device, uint32_t stream, uint64_t* t0, uint64_t* t1) {
  if (g_stream_last == nullptr) g_stream_last = new std::unordered_map<uint64_t, StreamLast>();
  StreamLast& last = (*g_stream_last)[(uint64_t{device} << 32) | stream];
  if (*t0 < last.start) return;
  if (*t0 < last.end) {
    *t0 = last.end;
    if (*t1 < *t0) *t1 = *t0;
  }
  last.start = *t0;
  last.end = *t1;
}

// An operation whose event pair was read (and released): its device interval on the host clock
// (ev0, ev1 ns) and the raw ticks of its launch (Pending.info) and of its start event's record.
struct Resolved {
  Pending q;
  uint64_t start_pre;
  uint64_t ev0, ev1;
};
// Under PollMu: operations resolved before the clock was calibrated (the first 20 ms of the
// process; TicksToNs would sleep until then), emitted once it is. Their pairs were released at
// once: before, the first conversion calibrated under PollMu and held every pair meanwhile (a
// single thread syncing every 50 kernels lost launches 1024-1030).
std::vector<Resolved>* g_unconverted = nullptr;

void EmitResolved(const Resolved& r, std::unordered_map<const void*, uint32_t>* names) {
  const Pending& q = r.q;
  RawEvent e;
  std::memset(&e, 0, sizeof(e));
  e.type = EvType::kDeviceOp;
  e.flags = kFlagTimeNs | kFlagStreamHandle;
  EstimateInterval(r.ev0, r.ev1, TicksToNs(r.start_pre), TicksToNs(q.info.call_t0),
                   TicksToNs(q.info.call_t1), q.info.sync_call, &e.t0, &e.t1);
  KeepStreamOrder(q.info.device, q.info.stream, &e.t0, &e.t1);
  DevicePayload& d = e.dev;
  d.name = q.info.kind == 0 ? NameFor(q.info.func, names) : 0;
  d.corr = q.info.corr;
  d.graph = uint32_t(q.info.graph);
  d.stream = q.info.stream;
  if (q.info.kind == 0) {  // kernel
    d.grid_x = q.info.grid_x;
    d.grid_y = q.info.grid_y;
    d.grid_z = q.info.grid_z;
    d.block = q.info.block;
  } else {
    d.bytes = q.info.bytes;
    d.copy_kind = q.info.copy_kind;
  }
  d.device = q.info.device;
  d.kind = q.info.kind;
  Emit(e);
}

// Streams found not ready in one PollOnce pass. A stream runs its work in order, so once one
// of its stop events is not ready, its later ones (further back in the in-flight list: pushed
// after it) are not either and are not queried. A few streams held behind a long kernel or a
// blocking host function then cost a query each per pass, not one per queued op, and do not hide
// the completed ops of other streams queued after theirs. (Launches onto one stream from two
// threads may reach the list out of order: the later one, if not ready, holds the earlier for a
// pass or until it completes; never longer.)
class BlockedStreams {
 public:
  static uint64_t Key(const DeviceOpInfo& info) {  // per-thread streams have per-thread keys
    return (uint64_t(info.device) << 32) | info.stream;
  }
  bool Has(uint64_t key) {
    if (n_ > 0 && keys_[last_] == key) return true;
    for (int i = 0; i < n_; ++i) {
      if (keys_[i] == key) {
        last_ = i;
        return true;
      }
    }
    return false;
  }
  void Add(uint64_t key) {  // past kMax streams, the others' ops are queried one by one
    if (n_ < kMax) keys_[n_++] = key;
  }

 private:
  static constexpr int kMax = 32;
  uint64_t keys_[kMax];
  int n_ = 0, last_ = 0;
};

// Resolves what is complete; returns how many pairs are still in flight. At most `max_queries`
// pairs are queried (the oldest first), and none after `max_not_ready` of them were not ready;
// the others are kept as they are. Never calibrates the clock (it may run on an application
// thread).
size_t PollOnce(std::vector<Pending>* inflight, std::unordered_map<const void*, uint32_t>* names,
                size_t max_queries = SIZE_MAX, size_t max_not_ready = SIZE_MAX) {
  if (g_unconverted == nullptr) g_unconverted = new std::vector<Resolved>();
  const bool convert = TicksToNsReady();
  if (convert && !g_unconverted->empty()) {
    for (const Resolved& r : *g_unconverted) EmitResolved(r, names);
    g_unconverted->clear();
  }
  Pending p;
  while (g_pending.Pop(&p)) inflight->push_back(p);
  auto query = r_query.get();
  auto elapsed = r_elapsed.get();
  size_t kept = 0, queries = 0, not_ready = 0;
  BlockedStreams blocked;
  for (size_t i = 0; i < inflight->size(); ++i) {
    Pending& q = (*inflight)[i];
    const uint64_t key = BlockedStreams::Key(q.info);
    if (queries >= max_queries || not_ready >= max_not_ready || blocked.Has(key)) {
      (*inflight)[kept++] = q;
      continue;
    }
    DevicePool& pool = g_pools[q.ticket / kPairs];
    int slot = q.ticket % kPairs;
    ++queries;
    cudaError_t st = query(pool.stop[slot]);
    if (st == cudaErrorNotReady) {
      ++not_ready;
      blocked.Add(key);
      (*inflight)[kept++] = q;
      continue;
    }
    float from_ref = 0, dur = 0;
    uint64_t ref_host_ns = 0;
    const cudaEvent_t ref = ReferenceFor(pool, pool.start_epoch[slot], &ref_host_ns);
    if (st == cudaSuccess && elapsed(&from_ref, ref, pool.start[slot]) == cudaSuccess &&
        elapsed(&dur, pool.start[slot], pool.stop[slot]) == cudaSuccess) {
      Resolved r{q, pool.start_pre[slot], 0, 0};
      r.ev0 = uint64_t(int64_t(ref_host_ns) + int64_t(double(from_ref) * 1e6));
      r.ev1 = r.ev0 + uint64_t(dur > 0 ? double(dur) * 1e6 : 0.0);
      // The pair is free now; the op waits for the clock if it is not calibrated yet.
      if (convert) {
        EmitResolved(r, names);
      } else {
        g_unconverted->push_back(r);
      }
    } else {
      g_untimed_error.fetch_add(1, std::memory_order_relaxed);
    }
    Release(q.ticket);
  }
  inflight->resize(kept);
  return kept;
}

std::vector<Pending>* g_inflight_list = nullptr;  // owned by the poller thread

// At exit or a fatal signal: the operations still in flight get up to 100 ms (of wall time) to
// finish, polled every `pause_us`. Returns how many are left.
size_t DrainInFlight(std::unordered_map<const void*, uint32_t>* names, unsigned pause_us) {
  const uint64_t until = MonotonicNs() + 100000000ull;
  for (;;) {
    size_t left;
    bool unconverted;
    {
      std::lock_guard<std::mutex> lock(PollMu());
      left = PollOnce(g_inflight_list, names);
      unconverted = g_unconverted != nullptr && !g_unconverted->empty();
    }
    if (unconverted && (left == 0 || MonotonicNs() >= until)) {
      // Operations read before the clock was calibrated: calibrate (in a process younger than
      // 20 ms this waits for the rest of them, as the writer's conversions would) and emit.
      (void)TicksToNs(Now());
      std::lock_guard<std::mutex> lock(PollMu());
      left = PollOnce(g_inflight_list, names);
    }
    if (left == 0 || MonotonicNs() >= until) return left;
    usleep(pause_us);
  }
}

// A fatal signal's flush (SetSignalFlush): the poller gives the operations still in flight up to
// 100 ms to finish and resolves them, as DrainAtShutdown does at exit (no shutdown hook runs at
// a signal). Asked for by number, done when the poller has drained since.
std::atomic<uint64_t> g_signal_asked{0}, g_signal_done{0};
void AskSignalDrain() { g_signal_asked.fetch_add(1, std::memory_order_acq_rel); }
bool SignalDrainDone() {
  return g_signal_done.load(std::memory_order_acquire) >=
         g_signal_asked.load(std::memory_order_acquire);
}

void PollerLoop() {
  HookGuard guard;  // the poller's CUDA calls are the agent's own
  pthread_setname_np(pthread_self(), "profagent-ev");  // (ps -L tells the agent's CPU apart)
  // Event queries are legal during another thread's global-mode stream capture only in relaxed
  // mode (the documented escape for tools).
  if (auto exchange = r_exchange_mode.get()) {
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    exchange(&mode);
  }
  auto& names = *new std::unordered_map<const void*, uint32_t>();  // outlives exit
  while (!g_stop.load(std::memory_order_relaxed)) {
    size_t left;
    {
      std::lock_guard<std::mutex> lock(PollMu());
      left = PollOnce(g_inflight_list, &names);
      Reanchor();
    }
    g_inflight.store(int(left), std::memory_order_relaxed);
    if (const uint64_t asked = g_signal_asked.load(std::memory_order_acquire);
        asked > g_signal_done.load(std::memory_order_relaxed)) {
      DrainInFlight(&names, 200);
      g_signal_done.store(asked, std::memory_order_release);
      continue;
    }
    g_wake.store(0, std::memory_order_relaxed);
    GrowPools();
    SleepUnlessWoken(left ? 200 : 1000);
  }
}

// fork(): the child has only the forking thread. The parent's in-flight pairs are the parent's
// (it writes them); its events belong to the parent's CUDA context. The child starts over: empty
// queues, pools created again on first use, a poller of its own started by the first operation
// it times. The locks are held across fork so that the child's copies are consistent.
void ForkPrepare() {
  PollMu().lock();
  NamesMu().lock();
}
void ForkParent() {
  NamesMu().unlock();
  PollMu().unlock();
}
void ForkChild() {
  new (&NamesMu()) std::mutex();
  new (&PollMu()) std::mutex();
  if (g_inflight_list != nullptr) g_inflight_list->clear();
  if (g_stream_last != nullptr) g_stream_last->clear();
  if (g_unconverted != nullptr) g_unconverted->clear();
  g_pending.Init();
  for (DevicePool& p : g_pools) {
    p.state.store(0, std::memory_order_relaxed);
    new (&p.grow_mu) std::mutex();
  }
  g_untimed_pool.store(0);
  g_untimed_error.store(0);
  g_untimed_queue.store(0);
  g_untimed_setup.store(0);
  g_untimed_reset.store(0);
  g_inflight.store(0);
  g_wake.store(0);
  g_stop.store(false);
  g_need_poller.store(true);
}

__attribute__((noinline)) void StartPollerInChild() {
  if (g_need_poller.exchange(false) && !StartDetachedThread(PollerLoop)) {
    Log(1,
        "CUDA events: cannot start the poller thread in the child (thread limit?): its "
        "operations stay untimed");
  }
}

// At exit: the operations still in flight get up to 100 ms to finish (a program that exits
// right after its last launch is held that long at most); the rest are reported untimed.
void DrainAtShutdown() {
  HookGuard guard;
  static auto& names = *new std::unordered_map<const void*, uint32_t>();
  size_t left = DrainInFlight(&names, 1000);
  g_stop.store(true);
  if (left > 0) {  // the poller may have resolved some meanwhile: count what is really left
    std::lock_guard<std::mutex> lock(PollMu());
    left = PollOnce(g_inflight_list, &names);
  }
  if (left > 0) {
    AddNote("warning", "CUDA-event timing: " + std::to_string(left) +
                           " operations still running at exit were not timed");
  }
  const uint64_t pool = g_untimed_pool.load(), error = g_untimed_error.load(),
                 queue = g_untimed_queue.load(), setup = g_untimed_setup.load(),
                 reset = g_untimed_reset.load();
  if (pool + error + queue + setup + reset > 0) {
    std::string why;
    auto add = [&why](uint64_t n, const std::string& what) {
      if (n == 0) return;
      why += (why.empty() ? "" : ", ") + std::to_string(n) + " " + what;
    };
    add(pool,
        "with every event pair of their device out (in flight, or completed but not yet "
        "resolved: a device has up to " +
            std::to_string(kPairs) + ")");
    add(error, "whose event calls failed");
    add(queue, "lost in a full hand-off queue");
    add(setup, "before the device's event pool could be made");
    add(reset, "while their device was being reset (cudaDeviceReset on another thread)");
    AddNote("warning",
            "CUDA-event timing: " + std::to_string(pool + error + queue + setup + reset) +
                " operations were not timed (" + why + ")");
  }
}

}  // namespace

bool StartEventTimer(bool probe, std::string* reason) {
  if (!r_record.get() || !r_create.get() || !r_query.get() || !r_elapsed.get()) {
    *reason = "CUDA events: runtime lacks cudaEventRecord/Query/ElapsedTime";
    return false;
  }
  if (probe) {
    // An error already pending is the application's: only judge it, never clear it.
    cudaError_t r = PendingError();
    const char* what = "the runtime reports";
    if (r == cudaSuccess && r_get_device.get()) {
      int device = 0;
      what = "cudaGetDevice returned";
      r = r_get_device.get()(&device);
      if (r != cudaSuccess) ClearOwnError();
    }
    if (NoGpu(r)) {
      *reason = std::string("CUDA events: ") + what + " " + ErrorName(r) +
                " (no GPU or no driver?)";
      return false;
    }
  }
  bool expected = false;
  if (g_started.compare_exchange_strong(expected, true)) {
    g_pending.Init();
    g_inflight_list = new std::vector<Pending>();
    g_inflight_list->reserve(8192);
    if (!StartDetachedThread(PollerLoop)) {
      // No poller, no timing: host timing instead (this mode is never tried again).
      *reason = "CUDA events: cannot start the poller thread (thread limit?)";
      return false;
    }
    AtShutdown(DrainAtShutdown);
    SetSignalFlush(AskSignalDrain, SignalDrainDone);
    pthread_atfork(ForkPrepare, ForkParent, ForkChild);
  }
  *reason = "CUDA events around each operation";
  return true;
}


namespace {
int32_t BeginOn(int device, cudaStream_t stream);  // after the pool checks: see below
}  // namespace

int32_t EventTimerBegin(cudaStream_t stream) {
  t_app_error = !NoPendingError();
  const int created = CreatedStreamDevice(stream);
  if (created >= 0) return BeginOn(created, stream);
  int device = 0;
  auto get_device = r_get_device.get();
  const cudaError_t r = get_device ? get_device(&device) : cudaErrorSharedObjectSymbolNotFound;
  if (__builtin_expect(r != cudaSuccess, 0)) {
    if (!t_app_error) ClearOwnError();
    if (NoGpu(r)) {
      FallBackToHostTiming("CUDA events: cudaGetDevice returned " + ErrorName(r) +
                           " (no GPU or no driver?); host times only");
    }
    return -1;
  }
  return BeginOn(device, stream);
}

int32_t EventTimerBeginOnDevice(int device, cudaStream_t stream) {
  t_app_error = !NoPendingError();
  return BeginOn(device, stream);
}

namespace {
// Every pair of device pool `p` is out: resolve, on the launching thread, what has completed,
// and take a freed pair into *ticket. The poller does this every 200 us, but on a loaded
// machine (application threads launching on every core) it can be starved for milliseconds
// while thousands of completed pairs wait for it: without this, launches went untimed with a
// few hundred operations really in flight. When another thread holds the lock (it is resolving
// pairs already), waits up to 2 ms for a pair to come back, never for the lock: a holder
// preempted on a busy core would hold the launch. Rate-limited (after one that freed nothing,
// none for 20 us on the thread) and bounded (2048 queries, none after 64 streams found not
// ready: PollOnce skips the rest of a stream once one of its ops is not ready), so a host truly
// far ahead of its device pays little; the thread's error state and capture mode are left as
// they were.
bool HarvestOnLaunchThread(DevicePool& p, int32_t* ticket) {
  static thread_local uint64_t last_ns __attribute__((tls_model("initial-exec"))) = 0;
  const uint64_t now = MonotonicNs();
  if (now - last_ns < 20000 || g_inflight_list == nullptr) return false;
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  auto exchange = r_exchange_mode.get();
  // Event queries are legal during another thread's global-mode capture only in relaxed mode.
  const bool exchanged = exchange != nullptr && exchange(&mode) == cudaSuccess;
  static auto& names = *new std::unordered_map<const void*, uint32_t>();  // under PollMu
  bool got = false, polled = false;
  for (;;) {
    if (!polled) {
      std::unique_lock<std::mutex> lock(PollMu(), std::try_to_lock);
      if (lock.owns_lock()) {
        PollOnce(g_inflight_list, &names, 2048, 64);
        polled = true;
        lock.unlock();
        if ((got = p.free_slots.Pop(ticket))) break;
      }
    }
    // Nothing had completed, and the poller (woken when the pool ran low) has not grown it yet:
    // on a machine whose cores the application keeps busy it can wait a scheduling slice or
    // more, while a burst of launches drains the pool. Grow a batch here, on the pool's own
    // device, rather than leave the next launches untimed; if the poller is growing it now,
    // wait for its pairs.
    if (!PoolLow(p) || p.grow_failed.load()) {
      if (polled) break;  // full grown (or cannot grow): what is out stays out
    } else {
      std::unique_lock<std::mutex> grow(p.grow_mu, std::try_to_lock);
      if (grow.owns_lock()) {
        int current = -1;
        auto get_device = r_get_device.get();
        if (get_device != nullptr && get_device(&current) == cudaSuccess &&
            unsigned(current) < unsigned(kMaxDevices) && &g_pools[current] == &p) {
          GrowBatch(p, current);
        }
        got = p.free_slots.Pop(ticket);
        if (got || polled) break;
      }
    }
    sched_yield();
    if ((got = p.free_slots.Pop(ticket)) || MonotonicNs() - now > 2000000) break;
  }
  if (exchanged) exchange(&mode);
  if (!t_app_error) ClearOwnError();
  if (!got) last_ns = now;  // nothing had completed: not again for 20 us
  return got;
}

int32_t BeginOn(int device, cudaStream_t stream) {
  if (__builtin_expect(unsigned(device) >= unsigned(kMaxDevices), 0)) return -1;
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  auto is_capturing = r_is_capturing.get();
  if (!is_capturing) return -1;
  if (is_capturing(stream, &capture) != cudaSuccess) {
    if (!t_app_error) ClearOwnError();  // e.g. an invalid handle: the application's call says so
    return -1;
  }
  if (capture != cudaStreamCaptureStatusNone) return -1;
  DevicePool& p = g_pools[device];
  if (__builtin_expect(p.state.load(std::memory_order_acquire) != 2, 0) &&
      !WaitForPool(device, &p)) {
    return -1;
  }
  int32_t ticket;
  const bool popped = p.free_slots.Pop(&ticket);
  if (PoolLow(p)) WakePoller();
  if (!popped && !HarvestOnLaunchThread(p, &ticket)) {
    g_untimed_pool.fetch_add(1, std::memory_order_relaxed);
    return -1;
  }
  // The newest reference, recorded before this start event (published after it completed).
  p.start_epoch[ticket % kPairs] = p.epoch.load(std::memory_order_acquire);
  p.start_pre[ticket % kPairs] = Now();
  if (r_record.get()(p.start[ticket % kPairs], stream) != cudaSuccess) {
    OwnFailure();
    p.free_slots.Push(ticket);
    return -1;
  }
  return ticket;
}
}  // namespace

int EventTimerDevice(int32_t ticket) { return ticket < 0 ? 0 : ticket / kPairs; }

void NoteStreamDevice(cudaStream_t stream, int device) {
  if (device >= 0) g_stream_devices.Insert(StreamHandle(stream), 0, 0, uint32_t(device));
}

int CreatedStreamDevice(cudaStream_t stream) {
  AllocTable::Entry created;
  if (g_stream_devices.Live() == 0 || !g_stream_devices.Find(StreamHandle(stream), &created)) {
    return -1;
  }
  return int(created.device);
}

void ForgetStream(cudaStream_t stream) {
  AllocTable::Entry gone;
  g_stream_devices.Take(StreamHandle(stream), &gone);
}

uint32_t StreamKey(cudaStream_t stream) {
  if (stream != cudaStreamPerThread) return uint32_t(reinterpret_cast<uintptr_t>(stream));
  static thread_local pid_t tid __attribute__((tls_model("initial-exec"))) = 0;
  if (tid == 0) tid = pid_t(syscall(SYS_gettid));
  return PerThreadStreamKey(uint32_t(tid));
}

void EventTimerBeforeReset(int device) {
  if (unsigned(device) >= unsigned(kMaxDevices) || !g_started.load()) return;
  DevicePool& p = g_pools[device];
  int st = 2;
  if (!p.state.compare_exchange_strong(st, kResetting)) return;  // no pool, or a broken one
  { std::lock_guard<std::mutex> lock(PollMu()); }  // a reference being recorded now is done
  t_app_error = !NoPendingError();
  // Every pair handed out comes back (resolved by the poller, or released by a failed call);
  // the device's work completes, since the reset synchronizes it anyway. Bounded: a pair lost
  // to a full hand-off queue never comes back.
  auto sync = r_dev_sync.get();
  if (sync != nullptr && sync() != cudaSuccess && !t_app_error) ClearOwnError();
  static auto& names = *new std::unordered_map<const void*, uint32_t>();
  const size_t pairs = size_t(p.pairs.load());
  for (int i = 0; i < 2000 && p.free_slots.ApproxSize() < pairs; ++i) {
    {
      std::lock_guard<std::mutex> lock(PollMu());
      PollOnce(g_inflight_list, &names);
    }
    if (p.free_slots.ApproxSize() < pairs) usleep(500);
  }
}

void EventTimerAfterReset(int device) {
  if (unsigned(device) >= unsigned(kMaxDevices)) return;
  DevicePool& p = g_pools[device];
  if (p.state.load() != kResetting) return;
  p.pairs.store(0);
  p.free_slots.Init();
  p.state.store(0, std::memory_order_release);  // made again on next use
  g_stream_devices.TakeEach(  // the reset destroyed the device's streams
      [device](const AllocTable::Entry& e) { return e.device == uint32_t(device); },
      [](uint64_t, const AllocTable::Entry&) {});
}

void EventTimerPrepare() {
  if (!g_started.load(std::memory_order_relaxed)) return;
  auto get_device = r_get_device.get();
  int device = 0;
  if (get_device == nullptr) return;
  t_app_error = !NoPendingError();
  if (get_device(&device) != cudaSuccess) {
    if (!t_app_error) ClearOwnError();
    return;
  }
  if (unsigned(device) >= unsigned(kMaxDevices)) return;
  DevicePool& p = g_pools[device];
  if (__builtin_expect(p.state.load(std::memory_order_acquire) == 0, 0)) EnsurePool(device, &p);
}

void EventTimerEnd(int32_t ticket, cudaStream_t stream, const DeviceOpInfo& info, bool ok) {
  if (ticket < 0) return;
  DevicePool& p = g_pools[ticket / kPairs];
  // `ok`: the application's call succeeded, so the error pending now is the one pending at
  // EventTimerBegin, if any (t_app_error, same thread).
  if (!ok) {
    p.free_slots.Push(ticket);
    return;
  }
  if (r_record.get()(p.stop[ticket % kPairs], stream) != cudaSuccess) {
    OwnFailure();
    p.free_slots.Push(ticket);
    return;
  }
  Pending q{ticket, info};
  if (__builtin_expect(g_need_poller.load(std::memory_order_relaxed), 0)) StartPollerInChild();
  if (!g_pending.Push(q)) {
    // Cannot hand it over; the pair is recorded but will never be read: recycle it (a later
    // record overwrites it, which is harmless).
    p.free_slots.Push(ticket);
    g_untimed_queue.fetch_add(1, std::memory_order_relaxed);
  }
}

void NoteKernelName(const void* func, const char* mangled) {
  if (!func || !mangled) return;
  std::lock_guard<std::mutex> lock(NamesMu());
  KernelNames().emplace(func, mangled);
}

const char* LookupKernelName(const void* func) {
  std::lock_guard<std::mutex> lock(NamesMu());
  auto it = KernelNames().find(func);
  return it == KernelNames().end() ? nullptr : it->second.c_str();
}

}  // namespace rt
}  // namespace profagent
