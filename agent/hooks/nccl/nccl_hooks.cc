// NCCL interposers: collectives, point-to-point, groups, communicator lifetime.
//
// Every exported function below has the exact prototype of /usr/local/cuda/include/nccl.h
// (the header is included, so the compiler checks it). The real function is found lazily at the
// first call: dlsym(RTLD_NEXT, "ncclX"), else dlsym(RTLD_DEFAULT, "pncclX") (NCCL's profiling
// alias; RTLD_DEFAULT on "ncclX" would find this library itself). There is no link-time
// dependency on libnccl: a process that never calls NCCL never resolves anything.
//
// Per call the hook records one kCollective (agent/core/event.h): API id (the op name),
// datatype and reduction indices into the tables registered with RegisterCollTables, count,
// bytes (convention below), root/peer, communicator handle, per-communicator sequence number,
// host enqueue times t0/t1, the correlation id of the NCCL kernel launch made inside the call
// (LastDriverLaunchCorrelation, written by the CUPTI hook), and a CollExtra continuation slot
// (stream, recv_bytes, device). Calls between ncclGroupStart and ncclGroupEnd carry the group
// number in CollExtra.group; they are held back (per-thread buffer) until the outermost
// ncclGroupEnd, which launches the fused kernel: the kGroup event and, when every member used one
// stream, each member then carry that launch's correlation id.
//
// Byte convention: Collective.bytes = count * element size, with count as passed to the call
// (NCCL's own convention, also the simulator's ground truth); recv_bytes = this rank's receive
// buffer: AllReduce, Reduce, Broadcast, Bcast, ReduceScatter, Scatter, Recv: count * esize;
// AllGather, AlltoAll, Gather (every rank, root or not): count * nranks * esize; Send: 0.
// Sequence numbers: collectives count on CommSlot.coll_seq (equal across members for the same
// call, since NCCL requires every member to issue collectives in the same order). Send/Recv
// count per ordered pair of ranks (NextPeerSeq): the n-th Send from A to B and B's n-th Recv
// from A carry the same number.
//
// Device time: with CUPTI, the NCCL kernel's activity record carries the correlation id recorded
// here. In GPU timing mode "events" (no CUPTI), an ungrouped call is bracketed by a CUDA event
// pair on its stream (agent/hooks/cuda_runtime/event_timer.h), which yields a kDeviceOp named
// after the API ("ncclAllReduce") with an agent correlation id, also put on the kCollective.
// A group is event-timed around ncclGroupEnd instead, one pair per stream (up to kMaxStreams;
// ncclCommInitAll style groups have a stream per device). Its device op is named after the
// members' one collective ("ncclAllReduce"), "ncclSendRecv" for point-to-point, else
// "ncclGroupEnd".
//
// Hot path (every collective): one comm-table probe, two Now(), one EmitWithBytes. No lock, no
// allocation. Slow path: first call of each function (dlsym, RegisterApi), communicator
// registration, first sight of a communicator created before the agent loaded.
#include <dlfcn.h>
#include <nccl.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <new>
#include <string>
#include <unordered_map>

#include "agent/core/agent.h"
#include "agent/core/capture.h"
#include "agent/core/event.h"
#include "agent/hooks/cuda_runtime/event_timer.h"
#include "agent/hooks/cuda_runtime/gpu_timing.h"
#include "agent/hooks/nccl/comm_table.h"
#include "agent/hooks/nccl/nccl_tables.h"

#define PROFAGENT_EXPORT extern "C" __attribute__((visibility("default")))

namespace profagent {
namespace {

constexpr int kLibNccl = 0;  // profagent.CollLibrary LIB_NCCL

CommTable g_comms;
std::atomic<uint32_t> g_next_group{1};

struct GroupState {
  int depth;
  uint32_t number;       // current group number, 0 outside a group
  uint32_t members;      // member calls seen in the current group
  uint64_t t0;
  uint64_t stream;       // stream of the first member
  int32_t device;        // device of the first member's communicator
  bool multi_stream;     // members on more than one stream (or device)
};
thread_local GroupState tls_group __attribute__((tls_model("initial-exec"))) = {};

// ncclCommSplit inside a group: its child exists only once the group completes (below).
bool DeferSplit(ncclComm_t parent, ncclComm_t* out, int color, uint16_t api, uint64_t t0);
void RegisterDeferredSplits(ncclResult_t rc);

// Member events of the current group, held back until ncclGroupEnd so that they can carry the
// fused kernel's correlation id. Allocated on a thread's first group and doubled when a group
// outgrows it (slow path; never freed: a thread-exit hook is not worth it); members beyond
// kMaxMembers, or when an allocation failed, are emitted at once without a correlation id.
struct PendingMember {
  RawEvent e;
  CollExtra x;
};
struct GroupBuffer {
  static constexpr uint32_t kMaxMembers = 1 << 16;
  uint32_t n = 0;
  uint32_t capacity = 0;
  PendingMember* m = nullptr;
  // Room for one more member (false: at kMaxMembers, or out of memory).
  bool Reserve() {
    if (n < capacity) return true;
    const uint32_t want = capacity == 0 ? 64 : capacity * 2;
    if (want > kMaxMembers) return false;
    auto* grown = new (std::nothrow) PendingMember[want];
    if (grown == nullptr) return false;
    if (n > 0) std::memcpy(static_cast<void*>(grown), m, size_t(n) * sizeof(PendingMember));
    delete[] m;
    m = grown;
    capacity = want;
    return true;
  }
};
thread_local GroupBuffer* tls_group_buf __attribute__((tls_model("initial-exec"))) = nullptr;

struct Real {
  void* fn;
  uint16_t api;
};

void RegisterTablesOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    RegisterCollTables(kLibNccl, nccl::kDtypeNames, nccl::kNumDtypes + 1, nccl::kRedopNames,
                       nccl::kNumRedops);
  });
}

// Slow path: once per exported function.
Real Resolve(const char* name, const char* pname) {
  void* fn = dlsym(RTLD_NEXT, name);
  if (fn == nullptr) fn = dlsym(RTLD_DEFAULT, pname);
  RegisterTablesOnce();
  return Real{fn, RegisterApi(name)};
}

// NCCL query functions the hooks call themselves (not interposed here).
template <typename Fn>
Fn Query(const char* name, const char* pname) {
  void* fn = dlsym(RTLD_NEXT, name);
  if (fn == nullptr) fn = dlsym(RTLD_DEFAULT, pname);
  return reinterpret_cast<Fn>(fn);
}

// The real library is not reachable (cannot happen when the application linked libnccl):
// nothing can be forwarded, so report it once and fail the call the way NCCL would.
ncclResult_t MissingReal(const char* name) {
  static std::atomic<bool> said{false};
  if (!said.exchange(true))
    Log(1, "cannot find the real %s (is libnccl loaded?); returning ncclInternalError", name);
  return ncclInternalError;
}

int CommDevice(ncclComm_t comm) {
  using Fn = ncclResult_t (*)(const ncclComm_t, int*);
  static const Fn fn = Query<Fn>("ncclCommCuDevice", "pncclCommCuDevice");
  int dev = -1;
  if (fn == nullptr || comm == nullptr || fn(comm, &dev) != ncclSuccess) return -1;
  return dev;
}

int CommUserRank(ncclComm_t comm) {
  using Fn = ncclResult_t (*)(const ncclComm_t, int*);
  static const Fn fn = Query<Fn>("ncclCommUserRank", "pncclCommUserRank");
  int r = -1;
  if (fn == nullptr || comm == nullptr || fn(comm, &r) != ncclSuccess) return -1;
  return r;
}

int CommCount(ncclComm_t comm) {
  using Fn = ncclResult_t (*)(const ncclComm_t, int*);
  static const Fn fn = Query<Fn>("ncclCommCount", "pncclCommCount");
  int n = 0;
  if (fn == nullptr || comm == nullptr || fn(comm, &n) != ncclSuccess) return 0;
  return n;
}

uint64_t H(const void* p) { return reinterpret_cast<uint64_t>(p); }

// Non-blocking communicators (ncclConfig_t.blocking = 0) whose creation returned
// ncclInProgress: NCCL refuses queries on them (and records an error the application may read
// with ncclGetLastError) until ncclCommGetAsyncError reports ncclSuccess. What is unknown
// until then is asked at that point (CommReady).
struct PendingComm {
  uint64_t uid_hash;
  const char* prefix;
  uint64_t parent;
  int rank;
  int size;
};
std::mutex g_pending_mu;
std::unordered_map<uint64_t, PendingComm>* g_pending = nullptr;  // leaked: used during exit
std::atomic<int> g_pending_n{0};

// Slow path: a communicator became known. Registers it with the core and (first real
// multi-rank communicator of the process) sets the rank from NCCL. `ready`: false for a
// non-blocking one still in progress (nothing is asked of NCCL then; CommReady completes it).
CommSlot* AddComm(ncclComm_t comm, int rank, int size, uint64_t uid_hash, const char* prefix,
                  ncclComm_t parent, bool rank_source, bool ready = true) {
  if (comm == nullptr) return nullptr;
  const int device = ready ? CommDevice(comm) : -1;
  CommSlot* slot = g_comms.Insert(H(comm), rank, size, uid_hash, device);
  RegisterComm(H(comm), kLibNccl, H(comm), rank, size, UidString(prefix, uid_hash), device,
               H(parent));
  if (!ready) {
    std::lock_guard<std::mutex> lock(g_pending_mu);
    if (g_pending == nullptr) g_pending = new std::unordered_map<uint64_t, PendingComm>();
    if (g_pending->emplace(H(comm), PendingComm{uid_hash, prefix, H(parent), rank, size}).second) {
      g_pending_n.fetch_add(1, std::memory_order_relaxed);
    }
  }
  if (rank_source && size > 1 && rank >= 0) {
    // The process's rank: its lowest NCCL rank (threads that each own a rank, ncclCommInitAll),
    // whichever initialization finishes first.
    static std::mutex mu;
    static int lowest = INT_MAX;
    std::lock_guard<std::mutex> lock(mu);
    if (rank < lowest) {
      lowest = rank;
      SetRankInfo(rank, -1, size, "NCCL", 2);
    }
  }
  return slot;
}

// A non-blocking communicator became ready (ncclCommGetAsyncError said ncclSuccess): its rank,
// size and device, asked now, replace the unknowns it was registered with (the analyzer keeps
// a communicator's last definition).
void CommReady(ncclComm_t comm) {
  PendingComm p;
  {
    std::lock_guard<std::mutex> lock(g_pending_mu);
    if (g_pending == nullptr) return;
    auto it = g_pending->find(H(comm));
    if (it == g_pending->end()) return;
    p = it->second;
    g_pending->erase(it);
    g_pending_n.fetch_sub(1, std::memory_order_relaxed);
  }
  const int rank = p.rank >= 0 ? p.rank : CommUserRank(comm);
  const int size = p.size > 0 ? p.size : CommCount(comm);
  const int device = CommDevice(comm);
  g_comms.Insert(H(comm), rank, size, p.uid_hash, device);
  RegisterComm(H(comm), kLibNccl, H(comm), rank, size, UidString(p.prefix, p.uid_hash), device,
               p.parent);
}

void ForgetPending(ncclComm_t comm) {
  if (g_pending_n.load(std::memory_order_relaxed) == 0) return;
  std::lock_guard<std::mutex> lock(g_pending_mu);
  if (g_pending != nullptr && g_pending->erase(H(comm)) != 0) {
    g_pending_n.fetch_sub(1, std::memory_order_relaxed);
  }
}

// Hot path lookup with a slow-path fallback for communicators created before the agent loaded
// (or by functions not interposed here).
CommSlot* SlotFor(ncclComm_t comm) {
  CommSlot* s = g_comms.Find(H(comm));
  if (__builtin_expect(s != nullptr || comm == nullptr, 1)) return s;
  const uint64_t h = H(comm);
  return AddComm(comm, CommUserRank(comm), CommCount(comm), Fnv1a64(&h, sizeof(h)),
                 "nccl-unknown", nullptr, false);
}

enum Kind : uint8_t { kColl, kSend, kRecv };

// What one call is about, computed before the real call.
struct CallInfo {
  uint64_t count;
  uint64_t bytes;
  uint64_t recv_bytes;
  int32_t peer;
  uint8_t dtype;
  uint8_t redop;
};

// The convention above: bytes = count * esize; recv_bytes = count * esize * recv_mul, where a
// multiplier of 0 means "times the communicator size".
CallInfo Info(size_t count, ncclDataType_t dt, int redop, int peer, int recv_mul,
              const CommSlot* slot) {
  const uint64_t esize = nccl::DtypeSize(dt);
  const uint64_t n = (slot && slot->size > 0) ? uint64_t(slot->size) : 1;
  CallInfo c;
  c.count = count;
  c.bytes = uint64_t(count) * esize;
  c.recv_bytes = recv_mul < 0 ? 0 : uint64_t(count) * esize * (recv_mul ? uint64_t(recv_mul) : n);
  c.peer = peer;
  c.dtype = nccl::DtypeIndex(dt);
  c.redop = redop < 0 ? nccl::kNoRedop : nccl::RedopIndex(redop);
  return c;
}

constexpr int kNoOp = -1;
constexpr int kNoPeer = -1;
constexpr int kN = 0;  // multiplier: communicator size

struct Pending {
  CommSlot* slot;
  uint32_t seq;
  uint32_t group;
  int32_t ticket;  // event-timer ticket (mode "events"), -1 = not event-timed
  uint64_t t0;
};

// Keys under which the device ops of event-timed calls are named (rt::NoteKernelName): one per
// collective (OpIndex), and for a group's fused launch (GroupNameKey) "ncclSendRecv" or
// "ncclGroupEnd".
char g_name_keys[32];
constexpr uint8_t kSendRecvNameKey = 30;
constexpr uint8_t kGroupNameKey = 31;

inline Pending Before(CommSlot* slot, Kind kind, int peer, cudaStream_t stream) {
  Pending p;
  p.slot = slot;
  p.seq = kind == kColl ? NextCollSeq(slot) : NextPeerSeq(slot, peer, kind == kRecv);
  p.group = tls_group.depth > 0 ? tls_group.number : 0;
  if (p.group != 0) {
    GroupState& g = tls_group;
    const int32_t dev = slot != nullptr ? slot->device : -1;
    if (g.members++ == 0) {
      g.stream = H(stream);
      g.device = dev;
      g.multi_stream = false;
    } else if (g.stream != H(stream) || g.device != dev) {
      g.multi_stream = true;
    }
  }
  p.ticket = -1;
  if (p.group == 0 && slot != nullptr && slot->device >= 0 && Recording() &&
      rt::Mode() == rt::kEvents)
    p.ticket = rt::EventTimerBeginOnDevice(slot->device, stream);
  SetLastDriverLaunchCorrelation(0);
  p.t0 = Now();
  return p;
}

inline void After(uint16_t api, uint8_t op_index, Kind kind, ncclComm_t comm, cudaStream_t stream,
                  const CallInfo& c, const Pending& p, ncclResult_t rc, bool captured) {
  const uint64_t t1 = Now();
  if (rc != ncclSuccess && rc != ncclInProgress) {
    // Nothing was enqueued: the number goes to the next call, as the other ranks' next call
    // (which did not fail) has it. The record keeps the error; the report leaves it out.
    if (kind == kColl) {
      ReturnCollSeq(p.slot, p.seq);
    } else {
      ReturnPeerSeq(p.slot, c.peer, kind == kRecv, p.seq);
    }
  }
  uint32_t corr = p.group != 0 ? 0 : LastDriverLaunchCorrelation();
  if (p.ticket >= 0) {
    if (corr == 0) corr = NextCorrelationId();
    rt::DeviceOpInfo d;
    std::memset(&d, 0, sizeof(d));
    d.func = &g_name_keys[op_index];
    d.bytes = c.bytes;
    d.corr = corr;
    d.stream = uint32_t(H(stream));
    d.kind = 0;  // DOP_KERNEL: NCCL's work is a kernel
    d.device = uint8_t(p.slot->device);
    d.call_t0 = p.t0;
    d.call_t1 = t1;
    rt::EventTimerEnd(p.ticket, stream, d, rc == ncclSuccess);
  }
  if (!Recording()) {
    NoteUnrecordedCall();
    return;
  }
  RawEvent e{};
  e.t0 = p.t0;
  e.t1 = t1;
  e.type = EvType::kCollective;
  if (captured) e.flags |= kFlagCaptured;  // runs at each launch of the graph
  e.api = api;
  e.ret = static_cast<int32_t>(rc);
  e.coll.comm = H(comm);
  e.coll.count = c.count;
  e.coll.bytes = c.bytes;
  e.coll.seq = p.seq;
  e.coll.peer = c.peer;
  e.coll.lib = kLibNccl;
  e.coll.op = op_index;
  e.coll.dtype = c.dtype;
  e.coll.redop = c.redop;
  CollExtra x{};
  x.group = p.group;
  x.corr = corr;
  x.stream = H(stream);
  x.recv_bytes = c.recv_bytes;
  x.device = p.slot != nullptr ? p.slot->device : -1;
  if (p.group != 0) {
    GroupBuffer* b = tls_group_buf;
    if (b == nullptr) b = tls_group_buf = new (std::nothrow) GroupBuffer();  // once per thread
    if (b != nullptr && b->Reserve()) {
      b->m[b->n].e = e;
      b->m[b->n].x = x;
      ++b->n;
      return;
    }
  }
  EmitWithBytes(e, &x, sizeof(x));
}

void EmitComm(uint16_t api, uint64_t t0, ncclResult_t rc, ncclComm_t comm, ncclComm_t parent,
              int rank, int size, uint64_t t1 = 0) {
  if (!Recording()) return;
  RawEvent e{};
  e.t0 = t0;
  e.t1 = t1 != 0 ? t1 : Now();
  e.type = EvType::kComm;
  e.api = api;
  e.ret = static_cast<int32_t>(rc);
  e.gen.a = H(comm);
  e.gen.b = H(parent);
  e.gen.c = (uint64_t(uint32_t(rank)) << 32) | uint32_t(size);
  Emit(e);
}

}  // namespace
}  // namespace profagent

using profagent::CommSlot;
using profagent::HookGuard;

// ---- Collectives and point-to-point, generated from one list ---------------------------------
// X(Name, Kind, (params), (args), comm, stream, CallInfo expression using `slot`)
#define PROFAGENT_NCCL_CALLS(X)                                                                   \
  X(AllReduce, kColl,                                                                             \
    (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,                 \
     ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream),                                       \
    (sendbuff, recvbuff, count, datatype, op, comm, stream),                                      \
    Info(count, datatype, op, kNoPeer, 1, slot))                                                  \
  X(Reduce, kColl,                                                                                \
    (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,                 \
     ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream),                             \
    (sendbuff, recvbuff, count, datatype, op, root, comm, stream),                                \
    Info(count, datatype, op, root, 1, slot))                                                     \
  X(Bcast, kColl,                                                                                 \
    (void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,                \
     cudaStream_t stream),                                                                        \
    (buff, count, datatype, root, comm, stream),                                                  \
    Info(count, datatype, kNoOp, root, 1, slot))                                                  \
  X(Broadcast, kColl,                                                                             \
    (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,       \
     ncclComm_t comm, cudaStream_t stream),                                                       \
    (sendbuff, recvbuff, count, datatype, root, comm, stream),                                    \
    Info(count, datatype, kNoOp, root, 1, slot))                                                  \
  X(ReduceScatter, kColl,                                                                         \
    (const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,             \
     ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream),                                       \
    (sendbuff, recvbuff, recvcount, datatype, op, comm, stream),                                  \
    Info(recvcount, datatype, op, kNoPeer, 1, slot))                                              \
  X(AllGather, kColl,                                                                             \
    (const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,             \
     ncclComm_t comm, cudaStream_t stream),                                                       \
    (sendbuff, recvbuff, sendcount, datatype, comm, stream),                                      \
    Info(sendcount, datatype, kNoOp, kNoPeer, kN, slot))                                          \
  X(AlltoAll, kColl,                                                                              \
    (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,                 \
     ncclComm_t comm, cudaStream_t stream),                                                       \
    (sendbuff, recvbuff, count, datatype, comm, stream),                                          \
    Info(count, datatype, kNoOp, kNoPeer, kN, slot))                                              \
  X(Gather, kColl,                                                                                \
    (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,       \
     ncclComm_t comm, cudaStream_t stream),                                                       \
    (sendbuff, recvbuff, count, datatype, root, comm, stream),                                    \
    Info(count, datatype, kNoOp, root, kN, slot))                                                 \
  X(Scatter, kColl,                                                                               \
    (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,       \
     ncclComm_t comm, cudaStream_t stream),                                                       \
    (sendbuff, recvbuff, count, datatype, root, comm, stream),                                    \
    Info(count, datatype, kNoOp, root, 1, slot))                                                  \
  X(Send, kSend,                                                                                  \
    (const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,      \
     cudaStream_t stream),                                                                        \
    (sendbuff, count, datatype, peer, comm, stream),                                              \
    Info(count, datatype, kNoOp, peer, -1, slot))                                                 \
  X(Recv, kRecv,                                                                                  \
    (void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,            \
     cudaStream_t stream),                                                                        \
    (recvbuff, count, datatype, peer, comm, stream),                                              \
    Info(count, datatype, kNoOp, peer, 1, slot))

namespace profagent {
namespace {
enum OpIndex : uint8_t {
#define PROFAGENT_NCCL_ENUM(NAME, ...) kOp##NAME,
  PROFAGENT_NCCL_CALLS(PROFAGENT_NCCL_ENUM)
#undef PROFAGENT_NCCL_ENUM
  kOpCount
};
static_assert(kOpCount <= kSendRecvNameKey, "name keys of the collectives overlap the groups'");
}  // namespace
}  // namespace profagent

namespace profagent {
namespace {
// Slow path, once per collective: also names its event-timed device ops.
Real ResolveCollective(const char* name, const char* pname, uint8_t op_index) {
  rt::NoteKernelName(&g_name_keys[op_index], name);
  return Resolve(name, pname);
}
}  // namespace
}  // namespace profagent

#define PROFAGENT_NCCL_WRAPPER(NAME, KIND, PARAMS, ARGS, INFO)                                    \
  PROFAGENT_EXPORT ncclResult_t nccl##NAME PARAMS {                                               \
    using namespace profagent;                                                                    \
    using Fn = ncclResult_t(*) PARAMS;                                                            \
    static const Real real = ResolveCollective("nccl" #NAME, "pnccl" #NAME, kOp##NAME);           \
    const Fn fn = reinterpret_cast<Fn>(real.fn);                                                  \
    if (__builtin_expect(fn == nullptr, 0)) return MissingReal("nccl" #NAME);                     \
    HookGuard guard;                                                                              \
    if (!guard.outermost()) return fn ARGS;                                                       \
    CommSlot* slot = SlotFor(comm);                                                               \
    const CallInfo info = INFO;                                                                   \
    const Pending pending = Before(slot, KIND, info.peer, stream);                                \
    const bool captured = Capturing(H(stream));                                                   \
    ncclResult_t rc;                                                                              \
    {                                                                                             \
      CapturedCall in_capture(captured); /* its kernel launches are captured too */               \
      rc = fn ARGS;                                                                               \
    }                                                                                             \
    After(real.api, kOp##NAME, KIND, comm, stream, info, pending, rc, captured);                  \
    return rc;                                                                                    \
  }

PROFAGENT_NCCL_CALLS(PROFAGENT_NCCL_WRAPPER)
#undef PROFAGENT_NCCL_WRAPPER

// ---- Groups ----------------------------------------------------------------------------------

PROFAGENT_EXPORT ncclResult_t ncclGroupStart() {
  using namespace profagent;
  using Fn = ncclResult_t (*)();
  static const Real real = Resolve("ncclGroupStart", "pncclGroupStart");
  const Fn fn = reinterpret_cast<Fn>(real.fn);
  if (fn == nullptr) return MissingReal("ncclGroupStart");
  GroupState& g = tls_group;
  if (g.depth++ != 0) return fn();
  g.number = g_next_group.fetch_add(1, std::memory_order_relaxed);
  g.members = 0;
  g.t0 = Now();
  const ncclResult_t rc = fn();
  if (Recording()) {  // the outermost call, as an API call of its own
    RawEvent e{};
    e.t0 = g.t0;
    e.t1 = Now();
    e.type = EvType::kApi;
    e.api = real.api;
    e.ret = static_cast<int32_t>(rc);
    Emit(e);
  }
  return rc;
}

namespace profagent {
namespace {
// An events-mode event pair on one stream of a group (see ncclGroupEnd).
struct StreamTicket {
  uint64_t stream;
  int32_t device;
  int32_t ticket;
  uint32_t corr;
};
constexpr int kMaxStreams = 16;

// One event pair per distinct (device, stream) of the group's held-back members.
int BeginStreamTickets(const GroupBuffer& b, StreamTicket* out) {
  int n = 0;
  for (uint32_t i = 0; i < b.n && n < kMaxStreams; ++i) {
    const CollExtra& x = b.m[i].x;
    if (x.device < 0) continue;
    bool seen = false;
    for (int k = 0; k < n && !seen; ++k) seen = out[k].stream == x.stream && out[k].device == x.device;
    if (seen) continue;
    const int32_t t =
        rt::EventTimerBeginOnDevice(x.device, reinterpret_cast<cudaStream_t>(x.stream));
    if (t >= 0) out[n++] = StreamTicket{x.stream, x.device, t, 0};
  }
  return n;
}

// The name of a group's fused device op on `stream` (any stream when `all`): the members'
// collective when they all make the same one ("ncclAllReduce"), "ncclSendRecv" when they are all
// sends and receives (NCCL's SendRecv kernel), else "ncclGroupEnd".
uint8_t GroupNameKey(const GroupBuffer* b, uint64_t stream, bool all) {
  int op = -1;
  bool same = true, p2p = true;
  for (uint32_t i = 0; b != nullptr && i < b->n; ++i) {
    if (!all && b->m[i].x.stream != stream) continue;
    const int o = b->m[i].e.coll.op;
    same = same && (op < 0 || o == op);
    p2p = p2p && (o == kOpSend || o == kOpRecv);
    op = o;
  }
  if (op < 0) return kGroupNameKey;
  if (same && !p2p) return uint8_t(op);
  return p2p ? kSendRecvNameKey : kGroupNameKey;
}

void EndTicket(int32_t ticket, uint64_t stream, int32_t device, uint32_t corr, uint64_t t0,
               uint64_t t1, bool ok, uint8_t name_key) {
  rt::DeviceOpInfo d;
  std::memset(&d, 0, sizeof(d));
  d.func = &g_name_keys[name_key];
  d.corr = corr;
  d.stream = uint32_t(stream);
  d.kind = 0;  // DOP_KERNEL
  d.device = uint8_t(device);
  d.call_t0 = t0;
  d.call_t1 = t1;
  rt::EventTimerEnd(ticket, reinterpret_cast<cudaStream_t>(stream), d, ok);
}

// A member's correlation id in a group over several streams: its stream's event pair (events
// mode), else the kernel the driver launched on its stream (CUPTI), else 0.
uint32_t StreamCorr(uint64_t stream, const StreamTicket* tickets, int n) {
  for (int k = 0; k < n; ++k) {
    if (tickets[k].stream == stream) return tickets[k].corr;
  }
  return DriverLaunchOnStream(stream);
}
}  // namespace
}  // namespace profagent

// The outermost ncclGroupEnd launches the group's fused kernel(s). Its correlation id (CUPTI's
// last driver launch, or, in events mode with every member on one stream, an event pair around
// the call) goes on the kGroup event and, when the members share one stream, on each member.
PROFAGENT_EXPORT ncclResult_t ncclGroupEnd() {
  using namespace profagent;
  using Fn = ncclResult_t (*)();
  static const Real real = [] {
    rt::NoteKernelName(&g_name_keys[kGroupNameKey], "ncclGroupEnd");
    rt::NoteKernelName(&g_name_keys[kSendRecvNameKey], "ncclSendRecv");
    return Resolve("ncclGroupEnd", "pncclGroupEnd");
  }();
  const Fn fn = reinterpret_cast<Fn>(real.fn);
  if (fn == nullptr) return MissingReal("ncclGroupEnd");
  GroupState& g = tls_group;
  const bool outermost_group = g.depth == 1;
  HookGuard guard;
  const bool single_stream = g.members > 0 && !g.multi_stream;
  const cudaStream_t stream = reinterpret_cast<cudaStream_t>(g.stream);
  int32_t ticket = -1;
  // Events mode, members on several streams: an event pair per stream (up to kMaxStreams).
  StreamTicket tickets[kMaxStreams];
  int ntickets = 0;
  if (outermost_group) {
    if (guard.outermost() && g.device >= 0 && Recording() && rt::Mode() == rt::kEvents) {
      if (single_stream) {
        ticket = rt::EventTimerBeginOnDevice(g.device, stream);
      } else if (GroupBuffer* b = tls_group_buf) {
        ntickets = BeginStreamTickets(*b, tickets);
      }
    }
    SetLastDriverLaunchCorrelation(0);
  }
  // A group whose members were captured launches its kernels into the graph.
  bool captured = false;
  if (GroupBuffer* b = tls_group_buf) {
    for (uint32_t i = 0; i < b->n && !captured; ++i) captured = b->m[i].e.flags & kFlagCaptured;
  }
  const uint64_t t0 = Now();
  ncclResult_t rc;
  {
    CapturedCall in_capture(outermost_group && captured);
    rc = fn();
  }
  if (g.depth > 0) --g.depth;
  if (outermost_group) {
    if (guard.outermost()) RegisterDeferredSplits(rc);
    const uint64_t t1 = Now();
    uint32_t corr = LastDriverLaunchCorrelation();
    if (ticket >= 0) {
      if (corr == 0) corr = NextCorrelationId();
      EndTicket(ticket, g.stream, g.device, corr, t0, t1, rc == ncclSuccess,
                GroupNameKey(tls_group_buf, g.stream, true));
    }
    for (int k = 0; k < ntickets; ++k) {
      StreamTicket& st = tickets[k];
      st.corr = DriverLaunchOnStream(st.stream);
      if (st.corr == 0) st.corr = NextCorrelationId();
      EndTicket(st.ticket, st.stream, st.device, st.corr, t0, t1, rc == ncclSuccess,
                GroupNameKey(tls_group_buf, st.stream, false));
    }
    if (guard.outermost() && Recording()) {
      RawEvent e{};
      e.t0 = t0;  // the ncclGroupEnd call (its members were called since the ncclGroupStart)
      e.t1 = t1;
      e.type = EvType::kGroup;
      e.api = real.api;
      e.ret = static_cast<int32_t>(rc);
      e.gen.a = g.number;
      e.gen.b = g.members;
      e.gen.corr = corr;
      Emit(e);
    }
    if (GroupBuffer* b = tls_group_buf) {
      for (uint32_t i = 0; i < b->n; ++i) {
        // Over several streams (several communicators of one process, e.g. ncclCommInitAll),
        // each member gets the kernel launched on its own stream (CUPTI), or its stream's
        // event pair (events mode).
        CollExtra& x = b->m[i].x;
        x.corr = single_stream ? corr : StreamCorr(x.stream, tickets, ntickets);
        EmitWithBytes(b->m[i].e, &x, sizeof(CollExtra));
      }
      b->n = 0;
    }
    g.number = 0;
    g.members = 0;
  }
  return rc;
}

// ---- Communicator lifetime -------------------------------------------------------------------

PROFAGENT_EXPORT ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId,
                                               int rank) {
  using namespace profagent;
  using Fn = ncclResult_t (*)(ncclComm_t*, int, ncclUniqueId, int);
  static const Real real = Resolve("ncclCommInitRank", "pncclCommInitRank");
  const Fn fn = reinterpret_cast<Fn>(real.fn);
  if (fn == nullptr) return MissingReal("ncclCommInitRank");
  HookGuard guard;
  if (!guard.outermost()) return fn(comm, nranks, commId, rank);
  const uint64_t uid = Fnv1a64(&commId, sizeof(commId));
  const uint64_t t0 = Now();
  const ncclResult_t rc = fn(comm, nranks, commId, rank);
  if ((rc == ncclSuccess || rc == ncclInProgress) && comm != nullptr) {
    AddComm(*comm, rank, nranks, uid, "nccl", nullptr, true);
    EmitComm(real.api, t0, rc, *comm, nullptr, rank, nranks);
  } else {
    EmitComm(real.api, t0, rc, nullptr, nullptr, rank, nranks);  // failed: made nothing
  }
  return rc;
}

PROFAGENT_EXPORT ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks,
                                                     ncclUniqueId commId, int rank,
                                                     ncclConfig_t* config) {
  using namespace profagent;
  using Fn = ncclResult_t (*)(ncclComm_t*, int, ncclUniqueId, int, ncclConfig_t*);
  static const Real real = Resolve("ncclCommInitRankConfig", "pncclCommInitRankConfig");
  const Fn fn = reinterpret_cast<Fn>(real.fn);
  if (fn == nullptr) return MissingReal("ncclCommInitRankConfig");
  HookGuard guard;
  if (!guard.outermost()) return fn(comm, nranks, commId, rank, config);
  const uint64_t uid = Fnv1a64(&commId, sizeof(commId));
  const uint64_t t0 = Now();
  const ncclResult_t rc = fn(comm, nranks, commId, rank, config);
  if ((rc == ncclSuccess || rc == ncclInProgress) && comm != nullptr) {
    AddComm(*comm, rank, nranks, uid, "nccl", nullptr, true, rc == ncclSuccess);
    EmitComm(real.api, t0, rc, *comm, nullptr, rank, nranks);
  } else {
    EmitComm(real.api, t0, rc, nullptr, nullptr, rank, nranks);
  }
  return rc;
}

PROFAGENT_EXPORT ncclResult_t ncclCommInitRankScalable(ncclComm_t* newcomm, int nranks,
                                                       int myrank, int nId,
                                                       ncclUniqueId* commIds,
                                                       ncclConfig_t* config) {
  using namespace profagent;
  using Fn = ncclResult_t (*)(ncclComm_t*, int, int, int, ncclUniqueId*, ncclConfig_t*);
  static const Real real = Resolve("ncclCommInitRankScalable", "pncclCommInitRankScalable");
  const Fn fn = reinterpret_cast<Fn>(real.fn);
  if (fn == nullptr) return MissingReal("ncclCommInitRankScalable");
  HookGuard guard;
  if (!guard.outermost()) return fn(newcomm, nranks, myrank, nId, commIds, config);
  uint64_t uid = Fnv1a64(nullptr, 0);
  for (int i = 0; commIds != nullptr && i < nId; ++i)
    uid = Fnv1a64(&commIds[i], sizeof(ncclUniqueId), uid);
  const uint64_t t0 = Now();
  const ncclResult_t rc = fn(newcomm, nranks, myrank, nId, commIds, config);
  if ((rc == ncclSuccess || rc == ncclInProgress) && newcomm != nullptr) {
    AddComm(*newcomm, myrank, nranks, uid, "nccl", nullptr, true, rc == ncclSuccess);
    EmitComm(real.api, t0, rc, *newcomm, nullptr, myrank, nranks);
  } else {
    EmitComm(real.api, t0, rc, nullptr, nullptr, myrank, nranks);
  }
  return rc;
}

PROFAGENT_EXPORT ncclResult_t ncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist) {
  using namespace profagent;
  using Fn = ncclResult_t (*)(ncclComm_t*, int, const int*);
  static const Real real = Resolve("ncclCommInitAll", "pncclCommInitAll");
  const Fn fn = reinterpret_cast<Fn>(real.fn);
  if (fn == nullptr) return MissingReal("ncclCommInitAll");
  HookGuard guard;
  if (!guard.outermost()) return fn(comm, ndev, devlist);
  const uint64_t t0 = Now();
  const ncclResult_t rc = fn(comm, ndev, devlist);
  const uint64_t t1 = Now();
  if (rc == ncclSuccess && comm != nullptr) {
    // One process owns every rank: the id only has to be unique in this process's file.
    static std::atomic<uint32_t> n_init_all{0};
    struct {
      uint64_t pid;
      uint32_t n;
    } key{uint64_t(getpid()), n_init_all.fetch_add(1)};
    const uint64_t uid = Fnv1a64(&key, sizeof(key));
    for (int i = 0; i < ndev; ++i) AddComm(comm[i], i, ndev, uid, "nccl-all", nullptr, false);
    // One call, one event (its communicators are in the CommDefs): not one per device, each but
    // the first stretched over the agent's own bookkeeping.
    if (ndev > 0) EmitComm(real.api, t0, rc, comm[0], nullptr, 0, ndev, t1);
  } else if (rc != ncclSuccess) {
    EmitComm(real.api, t0, rc, nullptr, nullptr, -1, ndev, t1);
  }
  return rc;
}

namespace profagent {
namespace {
// Shared by ncclCommSplit and ncclCommShrink: the child's hash derives from the parent's hash,
// the n-th derivation of this parent (equal on every member: both calls are collective over the
// parent) and the color (Shrink: one color).
void AddChild(ncclComm_t parent, ncclComm_t child, int64_t color, uint32_t salt, uint16_t api,
              uint64_t t0, ncclResult_t rc);

// ncclCommSplit calls made inside a group, in call order, until the outermost ncclGroupEnd.
struct PendingSplits {
  static constexpr int kMax = 64;
  struct Split {
    ncclComm_t parent;
    ncclComm_t* out;
    int color;
    uint16_t api;
    uint64_t t0;
  };
  int n = 0;
  Split s[kMax];
};
thread_local PendingSplits* tls_splits __attribute__((tls_model("initial-exec"))) = nullptr;

bool DeferSplit(ncclComm_t parent, ncclComm_t* out, int color, uint16_t api, uint64_t t0) {
  if (tls_splits == nullptr) tls_splits = new (std::nothrow) PendingSplits();  // once per thread
  PendingSplits* p = tls_splits;
  if (p == nullptr || p->n >= PendingSplits::kMax) return false;
  p->s[p->n++] = {parent, out, color, api, t0};
  return true;
}

// At the outermost ncclGroupEnd: the children of the group's splits exist now.
void RegisterDeferredSplits(ncclResult_t rc) {
  PendingSplits* p = tls_splits;
  if (p == nullptr) return;
  for (int i = 0; i < p->n; ++i) {
    const PendingSplits::Split& d = p->s[i];
    AddChild(d.parent, *d.out, d.color, /*salt=*/1, d.api, d.t0, rc);
  }
  p->n = 0;
}

void AddChild(ncclComm_t parent, ncclComm_t child, int64_t color, uint32_t salt, uint16_t api,
              uint64_t t0, ncclResult_t rc) {
  CommSlot* p = SlotFor(parent);
  uint32_t index = 0;
  uint64_t parent_hash = H(parent);
  if (p != nullptr) {
    index = g_comms.WithLock(p, [](CommSlot* s) { return s->splits++; });
    parent_hash = p->uid_hash;
  }
  if (child == nullptr) return;  // NCCL_SPLIT_NOCOLOR or excluded rank
  const int rank = rc == ncclSuccess ? CommUserRank(child) : -1;
  const int size = rc == ncclSuccess ? CommCount(child) : 0;
  AddComm(child, rank, size, SplitHash(parent_hash, color, index, salt), "nccl", parent, false,
          rc == ncclSuccess);
  EmitComm(api, t0, rc, child, parent, rank, size);
}
}  // namespace
}  // namespace profagent

PROFAGENT_EXPORT ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key,
                                            ncclComm_t* newcomm, ncclConfig_t* config) {
  using namespace profagent;
  using Fn = ncclResult_t (*)(ncclComm_t, int, int, ncclComm_t*, ncclConfig_t*);
  static const Real real = Resolve("ncclCommSplit", "pncclCommSplit");
  const Fn fn = reinterpret_cast<Fn>(real.fn);
  if (fn == nullptr) return MissingReal("ncclCommSplit");
  HookGuard guard;
  if (!guard.outermost()) return fn(comm, color, key, newcomm, config);
  const uint64_t t0 = Now();
  const ncclResult_t rc = fn(comm, color, key, newcomm, config);
  if ((rc == ncclSuccess || rc == ncclInProgress) && newcomm != nullptr) {
    // Inside ncclGroupStart..End the child is NULL until the group completes ("NULL until comm
    // split fully complete"): registered at the outermost ncclGroupEnd.
    if (tls_group.depth > 0 && *newcomm == nullptr &&
        DeferSplit(comm, newcomm, color, real.api, t0)) {
      return rc;
    }
    AddChild(comm, *newcomm, color, /*salt=*/1, real.api, t0, rc);
  } else if (rc != ncclSuccess && rc != ncclInProgress) {
    EmitComm(real.api, t0, rc, nullptr, comm, -1, 0);
  }
  return rc;
}

PROFAGENT_EXPORT ncclResult_t ncclCommShrink(ncclComm_t comm, int* excludeRanksList,
                                             int excludeRanksCount, ncclComm_t* newcomm,
                                             ncclConfig_t* config, int shrinkFlags) {
  using namespace profagent;
  using Fn = ncclResult_t (*)(ncclComm_t, int*, int, ncclComm_t*, ncclConfig_t*, int);
  static const Real real = Resolve("ncclCommShrink", "pncclCommShrink");
  const Fn fn = reinterpret_cast<Fn>(real.fn);
  if (fn == nullptr) return MissingReal("ncclCommShrink");
  HookGuard guard;
  if (!guard.outermost())
    return fn(comm, excludeRanksList, excludeRanksCount, newcomm, config, shrinkFlags);
  const uint64_t t0 = Now();
  const ncclResult_t rc = fn(comm, excludeRanksList, excludeRanksCount, newcomm, config,
                             shrinkFlags);
  if ((rc == ncclSuccess || rc == ncclInProgress) && newcomm != nullptr) {
    AddChild(comm, *newcomm, 0, /*salt=*/2, real.api, t0, rc);
  } else if (rc != ncclSuccess && rc != ncclInProgress) {
    EmitComm(real.api, t0, rc, nullptr, comm, -1, 0);
  }
  return rc;
}

namespace profagent {
namespace {
// Destroy / Abort / Finalize: record the call; Destroy and Abort forget the handle (the
// library may hand the same value to the next communicator).
ncclResult_t EndComm(const Real& real, const char* name, ncclComm_t comm, bool forget) {
  using Fn = ncclResult_t (*)(ncclComm_t);
  const Fn fn = reinterpret_cast<Fn>(real.fn);
  if (fn == nullptr) return MissingReal(name);
  HookGuard guard;
  if (!guard.outermost()) return fn(comm);
  CommSlot* s = g_comms.Find(H(comm));
  const int rank = s ? s->rank : -1;
  const int size = s ? s->size : 0;
  const uint64_t t0 = Now();
  const ncclResult_t rc = fn(comm);
  EmitComm(real.api, t0, rc, comm, nullptr, rank, size);
  if (forget) {
    ForgetPending(comm);
    g_comms.Remove(H(comm));
  }
  return rc;
}
}  // namespace
}  // namespace profagent

// Polled by the owner of a non-blocking communicator: a pass-through, which completes the
// communicator's registration once NCCL reports it ready.
PROFAGENT_EXPORT ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  using namespace profagent;
  using Fn = ncclResult_t (*)(ncclComm_t, ncclResult_t*);
  static const Real real = Resolve("ncclCommGetAsyncError", "pncclCommGetAsyncError");
  const Fn fn = reinterpret_cast<Fn>(real.fn);
  if (fn == nullptr) return MissingReal("ncclCommGetAsyncError");
  const ncclResult_t rc = fn(comm, asyncError);
  if (__builtin_expect(g_pending_n.load(std::memory_order_relaxed) != 0, 0) && rc == ncclSuccess &&
      asyncError != nullptr && *asyncError == ncclSuccess) {
    HookGuard guard;
    if (guard.outermost()) CommReady(comm);
  }
  return rc;
}

PROFAGENT_EXPORT ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  static const profagent::Real real = profagent::Resolve("ncclCommDestroy", "pncclCommDestroy");
  return profagent::EndComm(real, "ncclCommDestroy", comm, true);
}

PROFAGENT_EXPORT ncclResult_t ncclCommAbort(ncclComm_t comm) {
  static const profagent::Real real = profagent::Resolve("ncclCommAbort", "pncclCommAbort");
  return profagent::EndComm(real, "ncclCommAbort", comm, true);
}

PROFAGENT_EXPORT ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  static const profagent::Real real =
      profagent::Resolve("ncclCommFinalize", "pncclCommFinalize");
  return profagent::EndComm(real, "ncclCommFinalize", comm, false);
}
