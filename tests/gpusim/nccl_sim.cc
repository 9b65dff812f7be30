// gpusim's libnccl.so.2: NCCL's host API (nccl.h of the installed toolkit) for ranks that are
// separate processes on one machine, on top of the simulated device.
//
// Model.
//   * Each rank is a process (or, with ncclCommInitAll, a communicator of this process). Ranks
//     rendezvous through POSIX shared memory named from the hash of the ncclUniqueId
//     (/dev/shm/gpusim_nccl_<hash>_...): one small segment per operation (a collective on a
//     communicator, or one Send/Recv pair), created by whichever rank comes first, unlinked by
//     the last one to arrive.
//   * A call enqueues an operation on the rank's stream (gpusim_stream_enqueue), announced as a
//     simulated driver-API launch: cuLaunchKernelEx with a kernel symbol named like NVIDIA's
//     (ncclDevKernel_AllReduce_Sum_f32_RING_LL, ncclDevKernel_SendRecv, ...), so a CUPTI tool
//     sees a kernel correlated to that driver call on the calling thread.
//   * When the stream worker reaches the operation it (GPUSIM_NCCL_DELAY_RANK/_US: sleeps first,
//     a deliberate straggler) copies its input into the segment, records its arrival time
//     ("arrive_ns"), waits (futex on the segment, bounded by GPUSIM_NCCL_TIMEOUT_S, default 60 s)
//     until every participant arrived, and then occupies the stream until
//       start + alpha + wire_bytes / bus_bandwidth,   start = the last participant's arrival,
//     alpha = GPUSIM_NCCL_ALPHA_US (default 5 us), bus bandwidth = GPUSIM_NCCL_GBPS (default
//     100 GB/s, the ring algorithm's bus bandwidth), and wire_bytes as for NCCL's bus bandwidth:
//       AllReduce 2(n-1)/n * S;  AllGather, ReduceScatter, AlltoAll, Gather, Scatter (n-1) * s;
//       Broadcast, Reduce, Send, Recv S;      (S = count * sizeof(dtype), s = per-rank chunk).
//     The results are really computed from the other ranks' data (sum/prod/max/min/avg over
//     every nccl datatype, f16/bf16/fp8 through float).
//     The reported end is always start + that duration: when moving the data or waking up took
//     longer on a loaded host, the stream is released late, but the operation (truth and CUPTI)
//     keeps its modeled duration, so tests can check it exactly.
//   * The kernel the CUPTI tool sees runs from the arrival to the end (as on a GPU, a NCCL
//     kernel that waits for a late peer is a long kernel).
//   * Groups: calls between ncclGroupStart and ncclGroupEnd are launched at the outermost
//     ncclGroupEnd, one fused kernel per stream whose parts progress concurrently (so grouped
//     Send/Recv exchanges cannot deadlock). ncclCommInitRank and ncclCommSplit inside a group
//     complete there too, so one thread can create or split the communicators of several ranks.
//
// Ground truth (GPUSIM_TRUTH, through gpusim_truth_write): one "collective" line per part per
// rank, written by this library because only it knows the communicator fields: "name"
// (AllReduce, Broadcast, Reduce, AllGather, ReduceScatter, AlltoAll, Gather, Scatter, Send, Recv),
// "comm" (16 hex digits: NCCL's commHash of the unique id, djb2-xor over its 128 bytes), "seq"
// (n-th collective on the communicator from 0; for Send/Recv the n-th transfer between that
// ordered pair of ranks, which is equal on both sides), "comm_rank", "nranks", "count" (as
// passed), "bytes" (count * sizeof(dtype)), "dtype", "peer" (root for rooted collectives, the
// peer for Send/Recv, else -1), "arrive_ns", "start_ns" (the last arrival), "end_ns"; plus
// "error":"timeout" when the rendezvous timed out.
//
// Threading: any thread may call; communicator objects are leaked at destroy (operations still
// queued on streams keep using them). Not supported: user-defined reduction ops
// (ncclRedOpCreatePreMulSum), window/device APIs, ncclCommShrink/Revoke, non-blocking splits
// inside a group (blocking there).
//
// Non-blocking communicators (ncclConfig_t.blocking = 0 for ncclCommInitRankConfig,
// ncclCommInitRankScalable, ncclCommSplit outside a group): the call completes the work but
// returns ncclInProgress; until ncclCommGetAsyncError has reported ncclInProgress once (the next
// call reports ncclSuccess), the communicator is not ready: ncclCommCount/UserRank/CuDevice and
// collectives on it fail with ncclInvalidArgument and set the last error, as NCCL 2.28's
// ncclCommEnsureReady does.
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

#include <cuda.h>
#include <cupti.h>  // cuLaunchKernelEx_params (generated_cuda_meta.h, in cupti.h's order)
#include <nccl.h>

#include "tests/gpusim/gpusim_internal.h"

struct ncclComm {
  uint64_t hash;
  char hash_hex[17];
  int nranks;
  int rank;
  int device;
  uint64_t coll_seq;                 // next collective's sequence number (host side)
  std::vector<uint64_t> send_seq;    // per peer
  std::vector<uint64_t> recv_seq;    // per peer
  uint64_t split_seq;
  std::atomic<int> async_error;
  std::atomic<bool> not_ready{false};  // non-blocking, ncclCommGetAsyncError not yet polled
  bool destroyed;
};

namespace gpusim_nccl {
namespace {

// ----------------------------------------------------------------------------------------------
// Simulator access.

struct SimApi {
  decltype(&gpusim_stream_enqueue) stream_enqueue = nullptr;
  decltype(&gpusim_stream_enqueue_graphable) stream_enqueue_graphable = nullptr;
  decltype(&gpusim_stream_capturing) stream_capturing = nullptr;
  decltype(&gpusim_driver_call_begin) driver_call_begin = nullptr;
  decltype(&gpusim_driver_call_end) driver_call_end = nullptr;
  decltype(&gpusim_truth_write) truth_write = nullptr;
  decltype(&gpusim_current_device) current_device = nullptr;
};

const SimApi* Sim() {
  static std::atomic<const SimApi*> cached{nullptr};
  const SimApi* s = cached.load(std::memory_order_acquire);
  if (s != nullptr) return s;
  void* enqueue = dlsym(RTLD_DEFAULT, "gpusim_stream_enqueue");
  if (enqueue == nullptr) return nullptr;
  SimApi* n = new SimApi;
  n->stream_enqueue = reinterpret_cast<decltype(n->stream_enqueue)>(enqueue);
  n->stream_enqueue_graphable = reinterpret_cast<decltype(n->stream_enqueue_graphable)>(
      dlsym(RTLD_DEFAULT, "gpusim_stream_enqueue_graphable"));
  n->stream_capturing = reinterpret_cast<decltype(n->stream_capturing)>(
      dlsym(RTLD_DEFAULT, "gpusim_stream_capturing"));
  n->driver_call_begin = reinterpret_cast<decltype(n->driver_call_begin)>(
      dlsym(RTLD_DEFAULT, "gpusim_driver_call_begin"));
  n->driver_call_end =
      reinterpret_cast<decltype(n->driver_call_end)>(dlsym(RTLD_DEFAULT, "gpusim_driver_call_end"));
  n->truth_write =
      reinterpret_cast<decltype(n->truth_write)>(dlsym(RTLD_DEFAULT, "gpusim_truth_write"));
  n->current_device = reinterpret_cast<decltype(n->current_device)>(
      dlsym(RTLD_DEFAULT, "gpusim_current_device"));
  const SimApi* expected = nullptr;
  if (!cached.compare_exchange_strong(expected, n)) {
    delete n;
    return expected;
  }
  return n;
}

uint64_t NowNs() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// Sleeps until CLOCK_MONOTONIC reaches `deadline_ns` (absolute sleep, then a short spin).
void SleepUntil(uint64_t deadline_ns) {
  constexpr uint64_t kSpinNs = 50000;
  if (deadline_ns > kSpinNs) {
    uint64_t wake = deadline_ns - kSpinNs;
    struct timespec ts;
    ts.tv_sec = static_cast<time_t>(wake / 1000000000ull);
    ts.tv_nsec = static_cast<long>(wake % 1000000000ull);
    while (NowNs() < wake &&
           clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
    }
  }
  while (NowNs() < deadline_ns) {
  }
}

double EnvDouble(const char* name, double def) {
  const char* v = getenv(name);
  if (v == nullptr || *v == '\0') return def;
  char* end = nullptr;
  double d = strtod(v, &end);
  return (end != v && d >= 0) ? d : def;
}

struct Params {
  double alpha_ns;
  double gbps;
  uint64_t timeout_ns;
  int delay_rank;
  uint64_t delay_ns;
  int world_rank;
};

const Params& P() {
  static const Params p = [] {
    Params q;
    q.alpha_ns = EnvDouble("GPUSIM_NCCL_ALPHA_US", 5.0) * 1000.0;
    q.gbps = EnvDouble("GPUSIM_NCCL_GBPS", 100.0);
    if (q.gbps <= 0) q.gbps = 100.0;
    q.timeout_ns = static_cast<uint64_t>(EnvDouble("GPUSIM_NCCL_TIMEOUT_S", 60.0) * 1e9);
    const char* dr = getenv("GPUSIM_NCCL_DELAY_RANK");
    q.delay_rank = dr != nullptr && *dr != '\0' ? atoi(dr) : -1;
    q.delay_ns = static_cast<uint64_t>(EnvDouble("GPUSIM_NCCL_DELAY_US", 0.0) * 1000.0);
    q.world_rank = -1;
    for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "RANK"}) {
      const char* v = getenv(name);
      if (v != nullptr && *v != '\0') {
        q.world_rank = atoi(v);
        break;
      }
    }
    return q;
  }();
  return p;
}

// ----------------------------------------------------------------------------------------------
// Errors.

std::mutex g_err_mu;
std::string* g_last_error = new std::string;

// NCCL's message for a non-blocking communicator used before it is ready.
constexpr const char* kNotReady =
    "Attempt to use communicator before the previous operation returned ncclSuccess";

ncclResult_t Fail(ncclResult_t r, const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  std::lock_guard<std::mutex> lock(g_err_mu);
  *g_last_error = buf;
  return r;
}

ncclResult_t Unsupported(const char* fn) {
  static std::mutex mu;
  static std::unordered_set<std::string>* seen = new std::unordered_set<std::string>;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (seen->insert(fn).second) fprintf(stderr, "gpusim-nccl: %s is not supported\n", fn);
  }
  return Fail(ncclInvalidUsage, "%s is not supported by gpusim", fn);
}

// ----------------------------------------------------------------------------------------------
// Shared-memory rendezvous.

long Futex(std::atomic<uint32_t>* addr, int op, uint32_t val, const struct timespec* timeout) {
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(addr), op, val, timeout, nullptr, 0);
}

// Layout: [0] arrived (futex word), [8] payload bytes, [64] arrive_ns[n], then n data slots.
class Rendezvous {
 public:
  ~Rendezvous() { Close(); }

  // Creates or opens the segment `name` for `n` participants with `slot_bytes` each.
  bool Open(const std::string& name, int n, size_t slot_bytes) {
    name_ = name;
    n_ = n;
    slot_bytes_ = (slot_bytes + 63) & ~size_t{63};
    data_offset_ = (64 + 8 * static_cast<size_t>(n) + 63) & ~size_t{63};
    size_ = data_offset_ + slot_bytes_ * static_cast<size_t>(n);
    int fd = shm_open(name.c_str(), O_CREAT | O_RDWR, 0600);
    if (fd < 0) return false;
    struct stat st;
    if (fstat(fd, &st) != 0 ||
        (static_cast<size_t>(st.st_size) < size_ &&
         posix_fallocate(fd, 0, static_cast<off_t>(size_)) != 0)) {
      close(fd);
      return false;
    }
    void* p = mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) return false;
    base_ = static_cast<uint8_t*>(p);
    return true;
  }

  uint8_t* Slot(int i) { return base_ + data_offset_ + slot_bytes_ * static_cast<size_t>(i); }
  std::atomic<uint64_t>* Payload() { return reinterpret_cast<std::atomic<uint64_t>*>(base_ + 8); }

  // Records participant `idx`'s arrival. The last one to arrive unlinks the name (everyone has
  // mapped it by then).
  void Arrive(int idx, uint64_t t) {
    ArriveNs()[idx] = t;
    uint32_t before = Arrived()->fetch_add(1, std::memory_order_acq_rel);
    Futex(Arrived(), FUTEX_WAKE, INT32_MAX, nullptr);
    if (static_cast<int>(before) + 1 == n_) shm_unlink(name_.c_str());
  }

  // Waits until all participants arrived or `deadline_ns` passes (then unlinks: late ranks get
  // a fresh segment and time out too, rather than hang).
  bool Wait(uint64_t deadline_ns) {
    for (;;) {
      uint32_t a = Arrived()->load(std::memory_order_acquire);
      if (static_cast<int>(a) >= n_) return true;
      uint64_t now = NowNs();
      if (now >= deadline_ns) {
        shm_unlink(name_.c_str());
        return false;
      }
      uint64_t wait = std::min<uint64_t>(deadline_ns - now, 20000000ull);
      struct timespec ts = {static_cast<time_t>(wait / 1000000000ull),
                            static_cast<long>(wait % 1000000000ull)};
      Futex(Arrived(), FUTEX_WAIT, a, &ts);
    }
  }

  int ArrivedCount() { return static_cast<int>(Arrived()->load(std::memory_order_acquire)); }

  uint64_t LastArrival() {
    uint64_t t = 0;
    for (int i = 0; i < n_; ++i) t = std::max(t, static_cast<uint64_t>(ArriveNs()[i]));
    return t;
  }

  void Close() {
    if (base_ != nullptr) munmap(base_, size_);
    base_ = nullptr;
  }

 private:
  std::atomic<uint32_t>* Arrived() { return reinterpret_cast<std::atomic<uint32_t>*>(base_); }
  volatile uint64_t* ArriveNs() { return reinterpret_cast<volatile uint64_t*>(base_ + 64); }

  std::string name_;
  int n_ = 0;
  size_t slot_bytes_ = 0;
  size_t data_offset_ = 0;
  size_t size_ = 0;
  uint8_t* base_ = nullptr;
};

std::string SegName(const ncclComm* comm, const char* what) {
  return std::string("/gpusim_nccl_") + comm->hash_hex + "_" + what;
}

// ----------------------------------------------------------------------------------------------
// Datatypes and reductions.

size_t TypeSize(ncclDataType_t t) {
  switch (t) {
    case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: return 0;
  }
}

const char* TypeName(ncclDataType_t t) {
  static const char* const kNames[] = {"int8",    "uint8",   "int32",   "uint32",
                                       "int64",   "uint64",  "float16", "float32",
                                       "float64", "bfloat16", "float8e4m3", "float8e5m2"};
  return (t >= 0 && t < ncclNumTypes) ? kNames[t] : "unknown";
}

const char* TypeShort(ncclDataType_t t) {
  static const char* const kNames[] = {"i8",  "u8",  "i32", "u32",  "i64",    "u64",
                                       "f16", "f32", "f64", "bf16", "f8e4m3", "f8e5m2"};
  return (t >= 0 && t < ncclNumTypes) ? kNames[t] : "unknown";
}

bool IsFloat(ncclDataType_t t) {
  return t == ncclFloat16 || t == ncclFloat32 || t == ncclFloat64 || t == ncclBfloat16 ||
         t == ncclFloat8e4m3 || t == ncclFloat8e5m2;
}

const char* OpShort(ncclRedOp_t op, ncclDataType_t t) {
  switch (op) {
    case ncclSum: return "Sum";
    case ncclProd: return "Prod";
    case ncclMax: case ncclMin: return "MinMax";
    case ncclAvg: return IsFloat(t) ? "PreMulSum" : "SumPostDiv";
    default: return "Unknown";
  }
}

// Loads/stores element i of a typed buffer as T (the accumulation type).
template <typename T>
struct Native {
  using Acc = T;
  static Acc Load(const void* p, size_t i) { return static_cast<const T*>(p)[i]; }
  static void Store(void* p, size_t i, Acc v) { static_cast<T*>(p)[i] = v; }
};
struct Half {
  using Acc = float;
  static Acc Load(const void* p, size_t i) { return __half2float(static_cast<const __half*>(p)[i]); }
  static void Store(void* p, size_t i, Acc v) { static_cast<__half*>(p)[i] = __float2half_rn(v); }
};
struct Bf16 {
  using Acc = float;
  static Acc Load(const void* p, size_t i) {
    return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
  }
  static void Store(void* p, size_t i, Acc v) {
    static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v);
  }
};
template <typename F8>
struct Fp8 {
  using Acc = float;
  static Acc Load(const void* p, size_t i) { return static_cast<float>(static_cast<const F8*>(p)[i]); }
  static void Store(void* p, size_t i, Acc v) { static_cast<F8*>(p)[i] = F8(v); }
};

template <typename E, typename F>
void ReduceWith(const std::vector<const void*>& in, void* out, size_t count, F f, bool avg) {
  using Acc = typename E::Acc;
  const size_t n = in.size();
  for (size_t i = 0; i < count; ++i) {
    Acc acc = E::Load(in[0], i);
    for (size_t r = 1; r < n; ++r) acc = f(acc, E::Load(in[r], i));
    if (avg) acc = static_cast<Acc>(acc / static_cast<Acc>(n));
    E::Store(out, i, acc);
  }
}

template <typename E>
void ReduceTyped(const std::vector<const void*>& in, void* out, size_t count, ncclRedOp_t op) {
  using Acc = typename E::Acc;
  switch (op) {
    case ncclSum:
    case ncclAvg:
      ReduceWith<E>(in, out, count, [](Acc a, Acc b) { return static_cast<Acc>(a + b); },
                    op == ncclAvg);
      break;
    case ncclProd:
      ReduceWith<E>(in, out, count, [](Acc a, Acc b) { return static_cast<Acc>(a * b); }, false);
      break;
    case ncclMax:
      ReduceWith<E>(in, out, count, [](Acc a, Acc b) { return std::max(a, b); }, false);
      break;
    case ncclMin:
      ReduceWith<E>(in, out, count, [](Acc a, Acc b) { return std::min(a, b); }, false);
      break;
    default:
      break;
  }
}

// out[i] = op over in[r][i]; `out` may alias nothing in `in` (inputs live in shared memory).
void Reduce(const std::vector<const void*>& in, void* out, size_t count, ncclDataType_t t,
            ncclRedOp_t op) {
  switch (t) {
    case ncclInt8: ReduceTyped<Native<int8_t>>(in, out, count, op); break;
    case ncclUint8: ReduceTyped<Native<uint8_t>>(in, out, count, op); break;
    case ncclInt32: ReduceTyped<Native<int32_t>>(in, out, count, op); break;
    case ncclUint32: ReduceTyped<Native<uint32_t>>(in, out, count, op); break;
    case ncclInt64: ReduceTyped<Native<int64_t>>(in, out, count, op); break;
    case ncclUint64: ReduceTyped<Native<uint64_t>>(in, out, count, op); break;
    case ncclFloat16: ReduceTyped<Half>(in, out, count, op); break;
    case ncclFloat32: ReduceTyped<Native<float>>(in, out, count, op); break;
    case ncclFloat64: ReduceTyped<Native<double>>(in, out, count, op); break;
    case ncclBfloat16: ReduceTyped<Bf16>(in, out, count, op); break;
    case ncclFloat8e4m3: ReduceTyped<Fp8<__nv_fp8_e4m3>>(in, out, count, op); break;
    case ncclFloat8e5m2: ReduceTyped<Fp8<__nv_fp8_e5m2>>(in, out, count, op); break;
    default: break;
  }
}

// ----------------------------------------------------------------------------------------------
// Operations.

enum class Coll {
  kAllReduce, kBroadcast, kReduce, kAllGather, kReduceScatter, kAlltoAll, kGather, kScatter,
  kSend, kRecv
};

const char* CollName(Coll c) {
  switch (c) {
    case Coll::kAllReduce: return "AllReduce";
    case Coll::kBroadcast: return "Broadcast";
    case Coll::kReduce: return "Reduce";
    case Coll::kAllGather: return "AllGather";
    case Coll::kReduceScatter: return "ReduceScatter";
    case Coll::kAlltoAll: return "AlltoAll";
    case Coll::kGather: return "Gather";
    case Coll::kScatter: return "Scatter";
    case Coll::kSend: return "Send";
    case Coll::kRecv: return "Recv";
  }
  return "?";
}

bool IsP2p(Coll c) { return c == Coll::kSend || c == Coll::kRecv; }

// Interned strings live for the process (the simulator keeps name pointers until reported).
const char* Intern(const std::string& s) {
  static std::mutex mu;
  static auto* set = new std::unordered_set<std::string>;
  std::lock_guard<std::mutex> lock(mu);
  return set->insert(s).first->c_str();
}

const char* KernelName(Coll c, ncclDataType_t t, ncclRedOp_t op) {
  switch (c) {
    case Coll::kAllReduce:
    case Coll::kReduce:
    case Coll::kReduceScatter:
      return Intern(std::string("ncclDevKernel_") + CollName(c) + "_" + OpShort(op, t) + "_" +
                    TypeShort(t) + "_RING_LL");
    case Coll::kBroadcast:
    case Coll::kAllGather:
      return Intern(std::string("ncclDevKernel_") + CollName(c) + "_RING_LL");
    default:
      return "ncclDevKernel_SendRecv";
  }
}

// One collective or one side of a Send/Recv, as called on this rank.
struct Part {
  ncclComm* comm;
  Coll coll;
  const void* sendbuff;
  void* recvbuff;
  size_t count;
  ncclDataType_t dtype;
  ncclRedOp_t op;
  int root;  // rooted collectives
  int peer;  // Send/Recv
  uint64_t seq;
  cudaStream_t stream;
  // Filled while the stream runs it.
  Rendezvous rv;
  uint64_t arrive_ns = 0;
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
  bool ok = false;
};

size_t Bytes(const Part& p) { return p.count * TypeSize(p.dtype); }

// What this rank deposits in its slot.
size_t SlotBytes(const Part& p) {
  size_t n = static_cast<size_t>(p.comm->nranks);
  switch (p.coll) {
    case Coll::kReduceScatter: case Coll::kAlltoAll: case Coll::kScatter: return Bytes(p) * n;
    default: return Bytes(p);
  }
}

double WireBytes(const Part& p) {
  double s = static_cast<double>(Bytes(p));
  double n = p.comm->nranks;
  switch (p.coll) {
    case Coll::kAllReduce: return n > 1 ? 2.0 * (n - 1) / n * s : 0.0;
    case Coll::kAllGather: case Coll::kReduceScatter: case Coll::kAlltoAll:
    case Coll::kGather: case Coll::kScatter: return (n - 1) * s;
    default: return s;
  }
}

uint64_t DurationNs(const Part& p) {
  return static_cast<uint64_t>(P().alpha_ns + WireBytes(p) / P().gbps);
}

// Opens the segment and deposits this rank's input. Never blocks (beyond shm calls).
bool ArrivePart(Part& p) {
  const ncclComm* c = p.comm;
  bool contributes;
  int n, idx;
  std::string name;
  if (IsP2p(p.coll)) {
    int src = p.coll == Coll::kSend ? c->rank : p.peer;
    int dst = p.coll == Coll::kSend ? p.peer : c->rank;
    name = SegName(c, ("p" + std::to_string(src) + "_" + std::to_string(dst) + "_" +
                       std::to_string(p.seq)).c_str());
    n = 2;
    idx = p.coll == Coll::kSend ? 0 : 1;
    contributes = p.coll == Coll::kSend;
  } else {
    name = SegName(c, ("c" + std::to_string(p.seq)).c_str());
    n = c->nranks;
    idx = c->rank;
    contributes = !((p.coll == Coll::kBroadcast || p.coll == Coll::kScatter) && c->rank != p.root);
  }
  if (!p.rv.Open(name, n, IsP2p(p.coll) && idx == 1 ? Bytes(p) : SlotBytes(p))) {
    fprintf(stderr, "gpusim-nccl: cannot map %s: %s\n", name.c_str(), strerror(errno));
    return false;
  }
  if (contributes && SlotBytes(p) > 0) memcpy(p.rv.Slot(idx), p.sendbuff, SlotBytes(p));
  if (p.coll == Coll::kSend) p.rv.Payload()->store(Bytes(p), std::memory_order_relaxed);
  p.arrive_ns = NowNs();
  p.rv.Arrive(idx, p.arrive_ns);
  return true;
}

// Computes this rank's output once everyone arrived.
void CompletePart(Part& p) {
  const ncclComm* c = p.comm;
  const int n = c->nranks;
  const size_t bytes = Bytes(p);
  auto* out = static_cast<uint8_t*>(p.recvbuff);
  std::vector<const void*> in;
  switch (p.coll) {
    case Coll::kAllReduce:
    case Coll::kReduce:
      if (p.coll == Coll::kReduce && c->rank != p.root) break;
      for (int r = 0; r < n; ++r) in.push_back(p.rv.Slot(r));
      Reduce(in, out, p.count, p.dtype, p.op);
      break;
    case Coll::kReduceScatter:
      for (int r = 0; r < n; ++r) in.push_back(p.rv.Slot(r) + bytes * c->rank);
      Reduce(in, out, p.count, p.dtype, p.op);
      break;
    case Coll::kBroadcast:
      memcpy(out, p.rv.Slot(p.root), bytes);
      break;
    case Coll::kAllGather:
      for (int r = 0; r < n; ++r) memcpy(out + bytes * r, p.rv.Slot(r), bytes);
      break;
    case Coll::kGather:
      if (c->rank != p.root) break;
      for (int r = 0; r < n; ++r) memcpy(out + bytes * r, p.rv.Slot(r), bytes);
      break;
    case Coll::kAlltoAll:
      for (int r = 0; r < n; ++r) memcpy(out + bytes * r, p.rv.Slot(r) + bytes * c->rank, bytes);
      break;
    case Coll::kScatter:
      memcpy(out, p.rv.Slot(p.root) + bytes * c->rank, bytes);
      break;
    case Coll::kRecv: {
      size_t sent = p.rv.Payload()->load(std::memory_order_relaxed);
      memcpy(out, p.rv.Slot(0), std::min(sent, bytes));
      break;
    }
    case Coll::kSend:
      break;
  }
}

void WriteTruth(const Part& p, const GpusimOpRecord* rec) {
  const SimApi* sim = Sim();
  if (sim == nullptr || sim->truth_write == nullptr) return;
  int peer = IsP2p(p.coll) ? p.peer
             : (p.coll == Coll::kBroadcast || p.coll == Coll::kReduce ||
                p.coll == Coll::kGather || p.coll == Coll::kScatter)
                 ? p.root
                 : -1;
  char buf[1024];
  snprintf(buf, sizeof(buf),
           "{\"op\":\"collective\",\"pid\":%d,\"rank\":%d,\"device\":%d,\"stream\":%u,"
           "\"corr\":%u,\"queued_ns\":%llu,\"start_ns\":%llu,\"end_ns\":%llu,\"name\":\"%s\","
           "\"comm\":\"%s\",\"seq\":%llu,\"comm_rank\":%d,\"nranks\":%d,\"count\":%zu,"
           "\"bytes\":%zu,\"dtype\":\"%s\",\"peer\":%d,\"arrive_ns\":%llu%s}",
           static_cast<int>(getpid()), P().world_rank, static_cast<int>(rec->device), rec->stream_id,
           rec->correlation_id, static_cast<unsigned long long>(rec->queued_ns),
           static_cast<unsigned long long>(p.start_ns), static_cast<unsigned long long>(p.end_ns),
           CollName(p.coll), p.comm->hash_hex, static_cast<unsigned long long>(p.seq),
           p.comm->rank, p.comm->nranks, p.count, Bytes(p), TypeName(p.dtype), peer,
           static_cast<unsigned long long>(p.arrive_ns), p.ok ? "" : ",\"error\":\"timeout\"");
  sim->truth_write(buf);
}

// A fused launch: the parts one ncclGroupEnd (or one ungrouped call) put on one stream.
struct Launch {
  std::vector<Part*> parts;
  ~Launch() {
    for (Part* p : parts) delete p;
  }
};

void RunLaunch(void* arg, GpusimOpRecord* rec) {
  auto* l = static_cast<Launch*>(arg);
  const Params& prm = P();
  if (prm.delay_ns > 0 && !l->parts.empty() && l->parts[0]->comm->rank == prm.delay_rank) {
    SleepUntil(NowNs() + prm.delay_ns);
  }
  for (Part* p : l->parts) p->ok = ArrivePart(*p);
  uint64_t first_arrival = ~0ull, end = 0;
  for (Part* p : l->parts) {
    first_arrival = std::min(first_arrival, p->arrive_ns != 0 ? p->arrive_ns : NowNs());
    if (p->ok && !p->rv.Wait(p->arrive_ns + prm.timeout_ns)) {
      fprintf(stderr,
              "gpusim-nccl: rank %d: %s seq %llu on comm %s timed out after %.0f s "
              "(%d of %d arrived); aborting the operation\n",
              p->comm->rank, CollName(p->coll), static_cast<unsigned long long>(p->seq),
              p->comm->hash_hex, prm.timeout_ns / 1e9, p->rv.ArrivedCount(),
              IsP2p(p->coll) ? 2 : p->comm->nranks);
      p->ok = false;
      p->comm->async_error.store(ncclRemoteError);
    }
    if (p->ok) {
      CompletePart(*p);
      p->start_ns = p->rv.LastArrival();
      p->end_ns = p->start_ns + DurationNs(*p);  // modeled, even if the host was slower
    } else {
      p->start_ns = p->end_ns = NowNs();
    }
    p->rv.Close();
    end = std::max(end, p->end_ns);
  }
  SleepUntil(end);
  rec->start_ns = first_arrival;
  rec->end_ns = std::max(end, first_arrival);
  for (Part* p : l->parts) WriteTruth(*p, rec);
}

void FreeLaunch(void* arg) { delete static_cast<Launch*>(arg); }

// Numbers `p` in its communicator's order (the n-th collective, or the n-th Send/Recv between
// a pair of ranks): every rank issues them in the same order, which is how they meet.
void AssignSeq(Part* p) {
  if (p->coll == Coll::kSend) {
    p->seq = p->comm->send_seq[p->peer]++;
  } else if (p->coll == Coll::kRecv) {
    p->seq = p->comm->recv_seq[p->peer]++;
  } else {
    p->seq = p->comm->coll_seq++;
  }
}

// A launch of a CUDA graph that captured a launch: the same calls, numbered anew (each replay
// is a new collective on every rank, met in graph-launch order).
void* CloneLaunch(void* arg) {
  const auto* l = static_cast<const Launch*>(arg);
  auto* c = new Launch;
  for (const Part* p : l->parts) {
    Part* q = new Part;
    q->comm = p->comm;
    q->coll = p->coll;
    q->sendbuff = p->sendbuff;
    q->recvbuff = p->recvbuff;
    q->count = p->count;
    q->dtype = p->dtype;
    q->op = p->op;
    q->root = p->root;
    q->peer = p->peer;
    q->stream = p->stream;
    AssignSeq(q);
    c->parts.push_back(q);
  }
  return c;
}

// Enqueues `parts` (all on `stream`) as one simulated kernel launch.
ncclResult_t LaunchOnStream(cudaStream_t stream, std::vector<Part*> parts) {
  const SimApi* sim = Sim();
  if (sim == nullptr || sim->stream_enqueue == nullptr) {
    for (Part* p : parts) delete p;
    return Fail(ncclUnhandledCudaError, "gpusim libcudart not loaded");
  }
  // Numbered when they will run: a call captured into a graph is numbered at each graph launch
  // (CloneLaunch), never at capture.
  const bool capturing = sim->stream_capturing != nullptr &&
                         sim->stream_capturing(reinterpret_cast<gpusim_stream_t>(stream)) != 0;
  if (!capturing) {
    for (Part* p : parts) AssignSeq(p);
  }
  const Part& first = *parts[0];
  bool all_p2p = true;
  uint64_t bytes = 0;
  for (Part* p : parts) {
    all_p2p = all_p2p && (IsP2p(p->coll) || p->coll == Coll::kAlltoAll ||
                          p->coll == Coll::kGather || p->coll == Coll::kScatter);
    bytes += Bytes(*p);
  }
  const char* kernel =
      all_p2p ? "ncclDevKernel_SendRecv" : KernelName(first.coll, first.dtype, first.op);
  GpusimOpRecord tmpl;
  memset(&tmpl, 0, sizeof(tmpl));
  tmpl.kind = GPUSIM_OP_COLLECTIVE;
  tmpl.name = CollName(first.coll);
  tmpl.mangled_name = kernel;
  tmpl.bytes = bytes;
  tmpl.device = static_cast<uint32_t>(first.comm->device);
  tmpl.grid[0] = 2;  // channels
  tmpl.grid[1] = tmpl.grid[2] = 1;
  tmpl.block[0] = 512;
  tmpl.block[1] = tmpl.block[2] = 1;
  // What NVIDIA's NCCL passes to cuLaunchKernelEx, as CUPTI shows it: the launch shape and
  // stream, and a CUfunction (here: the kernel name's address, stable for the process).
  CUlaunchConfig cfg;
  memset(&cfg, 0, sizeof(cfg));
  cfg.gridDimX = tmpl.grid[0];
  cfg.gridDimY = cfg.gridDimZ = 1;
  cfg.blockDimX = tmpl.block[0];
  cfg.blockDimY = cfg.blockDimZ = 1;
  cfg.hStream = reinterpret_cast<CUstream>(stream);
  cuLaunchKernelEx_params launch_params;
  memset(&launch_params, 0, sizeof(launch_params));
  launch_params.config = &cfg;
  launch_params.f = reinterpret_cast<CUfunction>(const_cast<char*>(kernel));
  uint32_t corr = 0;
  if (sim->driver_call_begin != nullptr) {
    corr = sim->driver_call_begin(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, "cuLaunchKernelEx",
                                  kernel, &launch_params);
  }
  tmpl.correlation_id = corr;
  auto* l = new Launch;
  l->parts = std::move(parts);
  // During stream capture the launch becomes a graph node that replays at each graph launch.
  int err = sim->stream_enqueue_graphable != nullptr
                ? sim->stream_enqueue_graphable(reinterpret_cast<gpusim_stream_t>(stream), &tmpl,
                                                &RunLaunch, l, &FreeLaunch, &CloneLaunch)
                : sim->stream_enqueue(reinterpret_cast<gpusim_stream_t>(stream), &tmpl,
                                      &RunLaunch, l, &FreeLaunch);
  if (sim->driver_call_end != nullptr) {
    sim->driver_call_end(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, "cuLaunchKernelEx", kernel,
                         corr, &launch_params);
  }
  if (err != 0) return Fail(ncclUnhandledCudaError, "stream enqueue failed: cuda error %d", err);
  return ncclSuccess;
}

// ----------------------------------------------------------------------------------------------
// Groups.

// An ncclCommSplit whose (color, key) is published, waiting for the parent's other ranks.
struct PendingSplit {
  ncclComm* parent = nullptr;
  int color = 0;
  ncclComm_t* out = nullptr;
  uint64_t seq = 0;
  std::unique_ptr<Rendezvous> rv;
};

struct GroupState {
  int depth = 0;
  std::vector<Part*> parts;
  std::vector<ncclComm*> pending_inits;  // joined, rendezvous deferred to GroupEnd
  std::vector<PendingSplit> pending_splits;
  ncclResult_t error = ncclSuccess;
};
thread_local GroupState t_group;

ncclResult_t InitWait(ncclComm* comm);
ncclResult_t FinishSplit(PendingSplit* ps, bool defer_init);

ncclResult_t FlushGroup() {
  ncclResult_t result = t_group.error;
  t_group.error = ncclSuccess;
  // Splits first: every parent rank of this thread has published its (color, key); the new
  // communicators join their init rendezvous, completed with the other pending inits.
  std::vector<PendingSplit> splits;
  splits.swap(t_group.pending_splits);
  for (PendingSplit& ps : splits) {
    ncclResult_t r = FinishSplit(&ps, /*defer_init=*/true);
    if (r != ncclSuccess) result = r;
  }
  for (ncclComm* c : t_group.pending_inits) {
    ncclResult_t r = InitWait(c);
    if (r != ncclSuccess) result = r;
  }
  t_group.pending_inits.clear();
  std::vector<Part*> parts;
  parts.swap(t_group.parts);
  // One launch per stream, in first-use order.
  while (!parts.empty()) {
    cudaStream_t s = parts[0]->stream;
    std::vector<Part*> mine, rest;
    for (Part* p : parts) (p->stream == s ? mine : rest).push_back(p);
    ncclResult_t r = LaunchOnStream(s, std::move(mine));
    if (r != ncclSuccess) result = r;
    parts.swap(rest);
  }
  return result;
}

ncclResult_t Submit(Part* p) {
  t_group.parts.push_back(p);
  if (t_group.depth > 0) return ncclSuccess;
  return FlushGroup();
}

ncclResult_t CheckArgs(ncclComm_t comm, const void* sendbuff, const void* recvbuff, size_t count,
                       ncclDataType_t dtype, ncclRedOp_t op, int root, bool needs_send,
                       bool needs_recv) {
  if (comm == nullptr || comm->destroyed) return Fail(ncclInvalidArgument, "invalid communicator");
  if (comm->not_ready) return Fail(ncclInvalidArgument, "%s", kNotReady);
  if (TypeSize(dtype) == 0) return Fail(ncclInvalidArgument, "invalid datatype %d", dtype);
  if (op < 0 || op >= ncclNumOps) return Fail(ncclInvalidArgument, "invalid reduction op %d", op);
  if (root < -1 || root >= comm->nranks) return Fail(ncclInvalidArgument, "invalid root %d", root);
  if (count > 0 && ((needs_send && sendbuff == nullptr) || (needs_recv && recvbuff == nullptr))) {
    return Fail(ncclInvalidArgument, "NULL buffer");
  }
  return ncclSuccess;
}

ncclResult_t Collective(Coll coll, const void* sendbuff, void* recvbuff, size_t count,
                        ncclDataType_t dtype, ncclRedOp_t op, int root, ncclComm_t comm,
                        cudaStream_t stream) {
  bool rooted = coll == Coll::kBroadcast || coll == Coll::kReduce || coll == Coll::kGather ||
                coll == Coll::kScatter;
  bool is_root = rooted && comm != nullptr && comm->rank == root;
  bool needs_send = !((coll == Coll::kBroadcast || coll == Coll::kScatter) && !is_root);
  bool needs_recv = !((coll == Coll::kReduce || coll == Coll::kGather) && !is_root);
  if (rooted && root < 0) return Fail(ncclInvalidArgument, "invalid root %d", root);
  ncclResult_t r = CheckArgs(comm, sendbuff, recvbuff, count, dtype, op, rooted ? root : -1,
                             needs_send, needs_recv);
  if (r != ncclSuccess) return r;
  Part* p = new Part;
  p->comm = comm;
  p->coll = coll;
  p->sendbuff = sendbuff;
  p->recvbuff = recvbuff;
  p->count = count;
  p->dtype = dtype;
  p->op = op;
  p->root = root;
  p->peer = -1;
  p->stream = stream;
  return Submit(p);
}

ncclResult_t PointToPoint(Coll coll, const void* sendbuff, void* recvbuff, size_t count,
                          ncclDataType_t dtype, int peer, ncclComm_t comm, cudaStream_t stream) {
  ncclResult_t r = CheckArgs(comm, sendbuff, recvbuff, count, dtype, ncclSum, -1,
                             coll == Coll::kSend, coll == Coll::kRecv);
  if (r != ncclSuccess) return r;
  if (peer < 0 || peer >= comm->nranks) return Fail(ncclInvalidArgument, "invalid peer %d", peer);
  Part* p = new Part;
  p->comm = comm;
  p->coll = coll;
  p->sendbuff = sendbuff;
  p->recvbuff = recvbuff;
  p->count = count;
  p->dtype = dtype;
  p->op = ncclSum;
  p->root = -1;
  p->peer = peer;
  p->stream = stream;
  return Submit(p);
}

// ----------------------------------------------------------------------------------------------
// Communicators.

uint64_t CommHash(const ncclUniqueId& id) {
  uint64_t h = 5381;
  for (int i = 0; i < NCCL_UNIQUE_ID_BYTES; ++i) h = ((h << 5) + h) ^ static_cast<uint64_t>(id.internal[i]);
  return h;
}

int CurrentDevice() {
  const SimApi* sim = Sim();
  return (sim != nullptr && sim->current_device != nullptr) ? sim->current_device() : 0;
}

ncclComm* NewComm(const ncclUniqueId& id, int nranks, int rank, int device) {
  auto* c = new ncclComm;
  c->hash = CommHash(id);
  snprintf(c->hash_hex, sizeof(c->hash_hex), "%016llx", static_cast<unsigned long long>(c->hash));
  c->nranks = nranks;
  c->rank = rank;
  c->device = device;
  c->coll_seq = 0;
  c->send_seq.assign(static_cast<size_t>(nranks), 0);
  c->recv_seq.assign(static_cast<size_t>(nranks), 0);
  c->split_seq = 0;
  c->async_error.store(ncclSuccess);
  c->destroyed = false;
  return c;
}

// Init rendezvous state between join and wait (kept per comm while in a group).
struct InitJoin {
  Rendezvous rv;
  uint64_t t;
};
std::mutex g_join_mu;
std::vector<std::pair<ncclComm*, InitJoin*>>* g_joins = new std::vector<std::pair<ncclComm*, InitJoin*>>;

ncclResult_t InitJoinRv(ncclComm* c) {
  auto* j = new InitJoin;
  if (!j->rv.Open(SegName(c, "init"), c->nranks, sizeof(int32_t))) {
    delete j;
    return Fail(ncclSystemError, "cannot create the rendezvous segment: %s", strerror(errno));
  }
  memcpy(j->rv.Slot(c->rank), &c->nranks, sizeof(int32_t));
  j->t = NowNs();
  j->rv.Arrive(c->rank, j->t);
  std::lock_guard<std::mutex> lock(g_join_mu);
  g_joins->push_back({c, j});
  return ncclSuccess;
}

ncclResult_t InitWait(ncclComm* c) {
  InitJoin* j = nullptr;
  {
    std::lock_guard<std::mutex> lock(g_join_mu);
    for (auto it = g_joins->begin(); it != g_joins->end(); ++it) {
      if (it->first == c) {
        j = it->second;
        g_joins->erase(it);
        break;
      }
    }
  }
  if (j == nullptr) return ncclSuccess;
  bool ok = j->rv.Wait(j->t + P().timeout_ns);
  ncclResult_t r = ncclSuccess;
  if (!ok) {
    fprintf(stderr, "gpusim-nccl: rank %d: ncclCommInitRank on comm %s timed out (%d of %d)\n",
            c->rank, c->hash_hex, j->rv.ArrivedCount(), c->nranks);
    r = Fail(ncclSystemError, "init timed out");
  } else {
    for (int i = 0; i < c->nranks; ++i) {
      int32_t n;
      memcpy(&n, j->rv.Slot(i), sizeof(n));
      if (n != c->nranks) r = Fail(ncclInvalidUsage, "ranks disagree on nranks (%d vs %d)", n, c->nranks);
    }
  }
  delete j;
  return r;
}

ncclResult_t FinishSplit(PendingSplit* ps, bool defer_init) {
  ncclComm* comm = ps->parent;
  Rendezvous& rv = *ps->rv;
  if (!rv.Wait(NowNs() + P().timeout_ns)) return Fail(ncclSystemError, "split timed out");
  if (ps->color == NCCL_SPLIT_NOCOLOR) {
    *ps->out = nullptr;
    return ncclSuccess;
  }
  std::vector<std::pair<int32_t, int>> members;  // (key, parent rank)
  for (int r = 0; r < comm->nranks; ++r) {
    int32_t ck[2];
    memcpy(ck, rv.Slot(r), sizeof(ck));
    if (ck[0] == ps->color) members.push_back({ck[1], r});
  }
  std::sort(members.begin(), members.end());
  int new_rank = 0;
  for (size_t i = 0; i < members.size(); ++i) {
    if (members[i].second == comm->rank) new_rank = static_cast<int>(i);
  }
  ncclUniqueId id;
  memset(&id, 0, sizeof(id));
  snprintf(id.internal, sizeof(id.internal), "gpusim-split %s %llu %d", comm->hash_hex,
           static_cast<unsigned long long>(ps->seq), ps->color);
  ncclComm* c = NewComm(id, static_cast<int>(members.size()), new_rank, comm->device);
  ncclResult_t r = InitJoinRv(c);
  if (r != ncclSuccess) return r;
  if (defer_init) {
    t_group.pending_inits.push_back(c);
  } else {
    r = InitWait(c);
    if (r != ncclSuccess) return r;
  }
  *ps->out = c;
  return ncclSuccess;
}

bool NonBlocking(const ncclConfig_t* config) { return config != nullptr && config->blocking == 0; }

// A non-blocking call's end: the communicator is not ready until polled.
ncclResult_t InProgress(ncclComm_t c) {
  c->not_ready = true;
  c->async_error = ncclInProgress;
  return ncclInProgress;
}

ncclResult_t InitRank(ncclComm_t* out, int nranks, const ncclUniqueId& id, int rank) {
  if (out == nullptr) return Fail(ncclInvalidArgument, "comm is NULL");
  if (nranks < 1 || rank < 0 || rank >= nranks) {
    return Fail(ncclInvalidArgument, "invalid rank %d / nranks %d", rank, nranks);
  }
  ncclComm* c = NewComm(id, nranks, rank, CurrentDevice());
  ncclResult_t r = InitJoinRv(c);
  if (r != ncclSuccess) return r;
  if (t_group.depth > 0) {
    t_group.pending_inits.push_back(c);
  } else {
    r = InitWait(c);
    if (r != ncclSuccess) return r;
  }
  *out = c;
  return ncclSuccess;
}

}  // namespace
}  // namespace gpusim_nccl

using namespace gpusim_nccl;  // NOLINT: the C API below is this library's only surface

extern "C" {

ncclResult_t ncclGetVersion(int* version) {
  if (version == nullptr) return ncclInvalidArgument;
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  if (id == nullptr) return Fail(ncclInvalidArgument, "uniqueId is NULL");
  memset(id, 0, sizeof(*id));
  static std::atomic<uint32_t> counter{0};
  snprintf(id->internal, 16, "gpusim");
  uint32_t pid = static_cast<uint32_t>(getpid());
  uint32_t n = counter.fetch_add(1);
  uint64_t t = NowNs();
  memcpy(id->internal + 16, &pid, 4);
  memcpy(id->internal + 20, &n, 4);
  memcpy(id->internal + 24, &t, 8);
  if (getrandom(id->internal + 32, 32, 0) != 32) {
    uint64_t x = t ^ (static_cast<uint64_t>(pid) << 32);
    memcpy(id->internal + 32, &x, 8);
  }
  return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
  return InitRank(comm, nranks, id, rank);
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank,
                                    ncclConfig_t* config) {
  const ncclResult_t r = InitRank(comm, nranks, id, rank);
  return r == ncclSuccess && NonBlocking(config) && t_group.depth == 0 ? InProgress(*comm) : r;
}

ncclResult_t ncclCommInitRankScalable(ncclComm_t* comm, int nranks, int rank, int nids,
                                      ncclUniqueId* ids, ncclConfig_t* config) {
  if (nids < 1 || ids == nullptr) return Fail(ncclInvalidArgument, "no unique ids");
  const ncclResult_t r = InitRank(comm, nranks, ids[0], rank);
  return r == ncclSuccess && NonBlocking(config) && t_group.depth == 0 ? InProgress(*comm) : r;
}

ncclResult_t ncclCommInitAll(ncclComm_t* comms, int ndev, const int* devlist) {
  if (comms == nullptr || ndev < 1) return Fail(ncclInvalidArgument, "invalid arguments");
  ncclUniqueId id;
  ncclGetUniqueId(&id);
  // All ranks live in this process: no init rendezvous needed.
  for (int i = 0; i < ndev; ++i) comms[i] = NewComm(id, ndev, i, devlist ? devlist[i] : i);
  return ncclSuccess;
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                           ncclConfig_t* config) {
  if (comm == nullptr || newcomm == nullptr) return Fail(ncclInvalidArgument, "NULL argument");
  // Exchange (color, key) among the parent's ranks: publish ours now; the rest waits for the
  // others, at once or, inside a group (one thread splitting several ranks' communicators, as
  // NCCL allows), at the outermost ncclGroupEnd.
  PendingSplit ps;
  ps.parent = comm;
  ps.color = color;
  ps.out = newcomm;
  ps.seq = comm->split_seq++;
  ps.rv.reset(new Rendezvous());
  if (!ps.rv->Open(SegName(comm, ("split" + std::to_string(ps.seq)).c_str()), comm->nranks,
                   2 * sizeof(int32_t))) {
    return Fail(ncclSystemError, "cannot create the split segment");
  }
  int32_t mine[2] = {color, key};
  memcpy(ps.rv->Slot(comm->rank), mine, sizeof(mine));
  ps.rv->Arrive(comm->rank, NowNs());
  if (t_group.depth > 0) {
    *newcomm = nullptr;  // set at ncclGroupEnd
    t_group.pending_splits.push_back(std::move(ps));
    return ncclSuccess;
  }
  const ncclResult_t r = FinishSplit(&ps, /*defer_init=*/false);
  return r == ncclSuccess && NonBlocking(config) && *newcomm != nullptr ? InProgress(*newcomm) : r;
}

ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  return comm == nullptr ? Fail(ncclInvalidArgument, "comm is NULL") : ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;
  comm->destroyed = true;  // leaked: queued operations may still reference it
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) { return ncclCommDestroy(comm); }

ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  if (comm == nullptr || count == nullptr) return Fail(ncclInvalidArgument, "NULL argument");
  if (comm->not_ready) return Fail(ncclInvalidArgument, "%s", kNotReady);
  *count = comm->nranks;
  return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  if (comm == nullptr || rank == nullptr) return Fail(ncclInvalidArgument, "NULL argument");
  if (comm->not_ready) return Fail(ncclInvalidArgument, "%s", kNotReady);
  *rank = comm->rank;
  return ncclSuccess;
}

ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
  if (comm == nullptr || device == nullptr) return Fail(ncclInvalidArgument, "NULL argument");
  if (comm->not_ready) return Fail(ncclInvalidArgument, "%s", kNotReady);
  *device = comm->device;
  return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* async_error) {
  if (comm == nullptr || async_error == nullptr) return Fail(ncclInvalidArgument, "NULL argument");
  *async_error = static_cast<ncclResult_t>(comm->async_error.load());
  // A non-blocking call in progress: reported once, then done.
  if (comm->not_ready.exchange(false)) comm->async_error = ncclSuccess;
  return ncclSuccess;
}

const char* ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
  }
}

const char* ncclGetLastError(ncclComm_t /*comm*/) {
  static thread_local std::string copy;
  std::lock_guard<std::mutex> lock(g_err_mu);
  copy = *g_last_error;
  return copy.c_str();
}

ncclResult_t ncclGroupStart() {
  ++t_group.depth;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd() {
  if (t_group.depth <= 0) return Fail(ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart");
  if (--t_group.depth > 0) return ncclSuccess;
  return FlushGroup();
}

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream) {
  return Collective(Coll::kAllReduce, sendbuff, recvbuff, count, datatype, op, -1, comm, stream);
}

ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm,
                           cudaStream_t stream) {
  return Collective(Coll::kBroadcast, sendbuff, recvbuff, count, datatype, ncclSum, root, comm,
                    stream);
}

ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root,
                       ncclComm_t comm, cudaStream_t stream) {
  return ncclBroadcast(buff, buff, count, datatype, root, comm, stream);
}

ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count,
                        ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
                        cudaStream_t stream) {
  return Collective(Coll::kReduce, sendbuff, recvbuff, count, datatype, op, root, comm, stream);
}

ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  return Collective(Coll::kAllGather, sendbuff, recvbuff, sendcount, datatype, ncclSum, -1, comm,
                    stream);
}

ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream) {
  return Collective(Coll::kReduceScatter, sendbuff, recvbuff, recvcount, datatype, op, -1, comm,
                    stream);
}

ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                          ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  return Collective(Coll::kAlltoAll, sendbuff, recvbuff, count, datatype, ncclSum, -1, comm,
                    stream);
}

ncclResult_t ncclGather(const void* sendbuff, void* recvbuff, size_t count,
                        ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
  return Collective(Coll::kGather, sendbuff, recvbuff, count, datatype, ncclSum, root, comm,
                    stream);
}

ncclResult_t ncclScatter(const void* sendbuff, void* recvbuff, size_t count,
                         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
  return Collective(Coll::kScatter, sendbuff, recvbuff, count, datatype, ncclSum, root, comm,
                    stream);
}

ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  return PointToPoint(Coll::kSend, sendbuff, nullptr, count, datatype, peer, comm, stream);
}

ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  return PointToPoint(Coll::kRecv, nullptr, recvbuff, count, datatype, peer, comm, stream);
}

// Simple stand-ins: device memory is host memory in the simulator.
ncclResult_t ncclMemAlloc(void** ptr, size_t size) {
  if (ptr == nullptr) return Fail(ncclInvalidArgument, "ptr is NULL");
  *ptr = malloc(size == 0 ? 1 : size);
  return *ptr != nullptr ? ncclSuccess : Fail(ncclSystemError, "out of memory");
}

ncclResult_t ncclMemFree(void* ptr) {
  free(ptr);
  return ncclSuccess;
}

ncclResult_t ncclCommRegister(const ncclComm_t comm, void* buff, size_t /*size*/, void** handle) {
  if (comm == nullptr || handle == nullptr) return Fail(ncclInvalidArgument, "NULL argument");
  *handle = buff;
  return ncclSuccess;
}

ncclResult_t ncclCommDeregister(const ncclComm_t comm, void* /*handle*/) {
  return comm == nullptr ? Fail(ncclInvalidArgument, "comm is NULL") : ncclSuccess;
}

ncclResult_t ncclCommWindowRegister(ncclComm_t, void*, size_t, ncclWindow_t*, int) {
  return Unsupported("ncclCommWindowRegister");
}
ncclResult_t ncclCommWindowDeregister(ncclComm_t, ncclWindow_t) {
  return Unsupported("ncclCommWindowDeregister");
}
ncclResult_t ncclCommRevoke(ncclComm_t, int) { return Unsupported("ncclCommRevoke"); }
ncclResult_t ncclCommShrink(ncclComm_t, int*, int, ncclComm_t*, ncclConfig_t*, int) {
  return Unsupported("ncclCommShrink");
}
ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t*, void*, ncclDataType_t, ncclScalarResidence_t,
                                      ncclComm_t) {
  return Unsupported("ncclRedOpCreatePreMulSum");
}
ncclResult_t ncclRedOpDestroy(ncclRedOp_t, ncclComm_t) { return Unsupported("ncclRedOpDestroy"); }
ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t*) { return Unsupported("ncclGroupSimulateEnd"); }

// NVIDIA's library exports every entry point twice: nccl* and the profiling alias pnccl*.
#define GPUSIM_PNCCL(name) __typeof__(name) p##name __attribute__((alias(#name)));
GPUSIM_PNCCL(ncclGetVersion)
GPUSIM_PNCCL(ncclGetUniqueId)
GPUSIM_PNCCL(ncclCommInitRank)
GPUSIM_PNCCL(ncclCommInitRankConfig)
GPUSIM_PNCCL(ncclCommInitRankScalable)
GPUSIM_PNCCL(ncclCommInitAll)
GPUSIM_PNCCL(ncclCommSplit)
GPUSIM_PNCCL(ncclCommFinalize)
GPUSIM_PNCCL(ncclCommDestroy)
GPUSIM_PNCCL(ncclCommAbort)
GPUSIM_PNCCL(ncclCommCount)
GPUSIM_PNCCL(ncclCommUserRank)
GPUSIM_PNCCL(ncclCommCuDevice)
GPUSIM_PNCCL(ncclCommGetAsyncError)
GPUSIM_PNCCL(ncclGetErrorString)
GPUSIM_PNCCL(ncclGetLastError)
GPUSIM_PNCCL(ncclGroupStart)
GPUSIM_PNCCL(ncclGroupEnd)
GPUSIM_PNCCL(ncclAllReduce)
GPUSIM_PNCCL(ncclBroadcast)
GPUSIM_PNCCL(ncclBcast)
GPUSIM_PNCCL(ncclReduce)
GPUSIM_PNCCL(ncclAllGather)
GPUSIM_PNCCL(ncclReduceScatter)
GPUSIM_PNCCL(ncclAlltoAll)
GPUSIM_PNCCL(ncclGather)
GPUSIM_PNCCL(ncclScatter)
GPUSIM_PNCCL(ncclSend)
GPUSIM_PNCCL(ncclRecv)
GPUSIM_PNCCL(ncclMemAlloc)
GPUSIM_PNCCL(ncclMemFree)
GPUSIM_PNCCL(ncclCommRegister)
GPUSIM_PNCCL(ncclCommDeregister)
GPUSIM_PNCCL(ncclCommWindowRegister)
GPUSIM_PNCCL(ncclCommWindowDeregister)
GPUSIM_PNCCL(ncclCommRevoke)
GPUSIM_PNCCL(ncclCommShrink)
GPUSIM_PNCCL(ncclRedOpCreatePreMulSum)
GPUSIM_PNCCL(ncclRedOpDestroy)
GPUSIM_PNCCL(ncclGroupSimulateEnd)
#undef GPUSIM_PNCCL

}  // extern "C"
