// MPI interposers through the PMPI profiling interface, with no link-time dependency on libmpi.
//
// The MPI_* functions below are exported by libprofagent.so (LD_PRELOAD, so they win over
// libmpi's); each finds its PMPI_* twin at its first call with dlsym (RTLD_NEXT, then
// RTLD_DEFAULT) and forwards every argument unchanged. A process that never calls MPI never
// resolves anything. Handle types are opaque words: see mpi_abi.h for why void* is exact for
// Open MPI and forwarding-safe for MPICH.
//
// Recorded per call (one kCollective + CollExtra slot, agent/core/event.h): API id (op name),
// datatype index (type_cache.h), reduction index (kMpiOpNames), count, bytes, recv_bytes,
// root/peer, communicator handle, sequence number, t0/t1 of the call. Non-blocking calls (MPI_I*)
// are kept in a RequestTable until MPI_Wait/Waitall/Waitany/Waitsome/Test/Testall/Testany/
// Testsome reports them complete, then emitted with kFlagNonBlocking and the completion time in
// CollExtra.complete_ticks (from the thread that saw the completion); requests never seen
// completing are emitted at MPI_Finalize with complete_ticks 0.
//
// Byte conventions: bytes = count * s, with count as defined here (s = size of the datatype,
// n = communicator size); recv_bytes = this rank's receive buffer.
//   Allreduce, Reduce, Bcast, Scan, Exscan: count / count*s
//   Allgather: sendcount / recvcount*s*n;  Allgatherv: sendcount / sum(recvcounts)*s
//   Gather(v): sendcount / (root only) recvcount*s*n or sum(recvcounts)*s, else 0
//   Scatter(v): recvcount (the block each rank receives) / recvcount*s
//   Reduce_scatter_block: recvcount / recvcount*s;  Reduce_scatter: sum(recvcounts) /
//     recvcounts[rank]*s
//   Alltoall: sendcount (per peer) / recvcount*s*n;  Alltoallv: sum(sendcounts) /
//     sum(recvcounts)*s;  Alltoallw: sum(sendcounts) / sum(recvcounts[i]*size(recvtypes[i]))
//   Neighbor_allgather / _alltoall: sendcount / recvcount*s*indegree, bytes = sendcount*s*
//     outdegree;  _allgatherv: sendcount / sum(recvcounts)*s;  _alltoallv, _alltoallw: sum of the
//     send counts / sum of the receive sizes (bytes: all a rank sends to its out-neighbors)
//   Put, Accumulate: origin count / 0;  Get, Fetch_and_op, Compare_and_swap: origin count (1) /
//     the same;  Get_accumulate: origin count / result count*s;  window synchronization: 0
//   Barrier: 0;  Send/Isend: count / 0;  Recv/Irecv: count (capacity) / count*s;
//   Sendrecv: sendcount / recvcount*s.  With MPI_IN_PLACE the receive side stands for the send.
// Arguments an MPI call ignores (e.g. the send type of a non-root Scatter) are never read.
// Sequence numbers: collectives (blocking and not) on CommSlot.coll_seq, which MPI's ordering
// rule makes equal across members for the same call; point-to-point per ordered pair of ranks
// (NextPeerSeq: A's n-th send to B == B's n-th receive from A, as MPI's non-overtaking rule
// matches them for one tag; an MPI_ANY_SOURCE receive is numbered when it completes, from the
// MPI_SOURCE of its status, which the agent supplies where the caller passed
// MPI_STATUS(ES)_IGNORE). Sendrecv carries its send's
// number and also counts as a receive from its source. They are counted even while Recording()
// is off so they stay aligned across ranks under a schedule.
//
// Communicators: MPI_COMM_WORLD is "world" (rank/size from PMPI at MPI_Init); any other
// communicator is registered when created (MPI_Comm_dup, _split, _split_type, _create,
// _create_group, MPI_Cart_create, _sub, MPI_Graph_create, MPI_Dist_graph_create(_adjacent),
// MPI_Intercomm_create, _merge; else at first sight) with a unique id hashed from its members'
// world ranks and, for a creation collective over a parent communicator (dup, split, create,
// topologies, merge), the parent's id and the number of creations on that parent before it: MPI
// orders collectives per communicator, so that number is equal on every member even when
// threads create communicators from different parents at once. Otherwise (create_group,
// intercomm_create, first sight) the ordinal of that member set among this process's
// communicators. An intercommunicator's
// members are both its groups (see AddComm). Calls and the
// CommDef carry that hash as the communicator's id: a freed communicator's handle is reused.
//
// MPI_Init/Init_thread: rank info (SetRankInfo(..., "MPI", 3); local rank from the launcher's
// environment, else from a shared-memory PMPI_Comm_split_type), then clock alignment with rank 0
// over a PMPI_Comm_dup of world (clock_offset.h), repeated in MPI_Finalize before PMPI_Finalize.
// Disabled by PROFAGENT_CLOCK_SYNC=0: all ranks agree with an allreduce(min) first, so ranks with
// different settings cannot deadlock.
#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "agent/core/agent.h"
#include "agent/core/clock.h"
#include "agent/core/config.h"
#include "agent/core/event.h"
#include "agent/hooks/mpi/clock_offset.h"
#include "agent/hooks/mpi/mpi_abi.h"
#include "agent/hooks/mpi/request_table.h"
#include "agent/hooks/mpi/type_cache.h"
#include "agent/hooks/nccl/comm_table.h"

#define PROFAGENT_EXPORT extern "C" __attribute__((visibility("default")))

namespace profagent {
namespace {

constexpr int kLibMpi = 1;  // profagent.CollLibrary LIB_MPI
constexpr uint8_t kNoRedop = 0xff;
constexpr uint8_t kNoDtype = 0xff;  // no datatype (Barrier, zero counts): no name in the file
constexpr int kNoPeer = -1;
constexpr int kClockRounds = 16;
constexpr int kClockTag = 0x7a11;

using H = MpiHandle;

CommTable g_comms;
TypeCache g_types;

struct PendingCall {
  RawEvent e;
  CollExtra x;
  CommSlot* slot;   // a receive from MPI_ANY_SOURCE (any_source): numbered at completion
  bool any_source;
  bool recv;  // a receive (see Cancelling)
};
RequestTable<PendingCall, 1024, 32> g_requests;

// ---- PMPI functions the agent calls itself --------------------------------------------------
struct Pmpi {
  int (*comm_rank)(H, int*);
  int (*comm_size)(H, int*);
  int (*comm_dup)(H, H*);
  int (*comm_free)(H*);
  int (*comm_split_type)(H, int, int, H, H*);
  int (*comm_group)(H, H*);
  int (*comm_test_inter)(H, int*);
  int (*comm_remote_size)(H, int*);
  int (*comm_remote_group)(H, H*);
  int (*group_translate_ranks)(H, int, const int*, H, int*);
  int (*group_free)(H*);
  int (*type_size)(H, int*);
  int (*type_size_x)(H, long long*);  // MPI-3 (MPI_Count): types of 2 GiB and more
  int (*test_cancelled)(const void*, int*);
  int (*type_get_name)(H, char*, int*);
  int (*send)(const void*, int, H, int, int, H);
  int (*recv)(void*, int, H, int, int, H, void*);
  int (*allreduce)(const void*, void*, int, H, H, H);
  int (*topo_test)(H, int*);
  int (*cartdim_get)(H, int*);
  int (*graph_neighbors_count)(H, int, int*);
  int (*dist_graph_neighbors_count)(H, int*, int*, int*);
};

void* FindPmpi(const char* name) {
  void* fn = dlsym(RTLD_NEXT, name);
  return fn != nullptr ? fn : dlsym(RTLD_DEFAULT, name);
}

const Pmpi& P() {
  static const Pmpi p = [] {
    Pmpi q;
#define PROFAGENT_PMPI(field, name) q.field = reinterpret_cast<decltype(q.field)>(FindPmpi(name))
    PROFAGENT_PMPI(comm_rank, "PMPI_Comm_rank");
    PROFAGENT_PMPI(comm_size, "PMPI_Comm_size");
    PROFAGENT_PMPI(comm_dup, "PMPI_Comm_dup");
    PROFAGENT_PMPI(comm_free, "PMPI_Comm_free");
    PROFAGENT_PMPI(comm_split_type, "PMPI_Comm_split_type");
    PROFAGENT_PMPI(comm_group, "PMPI_Comm_group");
    PROFAGENT_PMPI(comm_test_inter, "PMPI_Comm_test_inter");
    PROFAGENT_PMPI(comm_remote_size, "PMPI_Comm_remote_size");
    PROFAGENT_PMPI(comm_remote_group, "PMPI_Comm_remote_group");
    PROFAGENT_PMPI(group_translate_ranks, "PMPI_Group_translate_ranks");
    PROFAGENT_PMPI(group_free, "PMPI_Group_free");
    PROFAGENT_PMPI(type_size, "PMPI_Type_size");
    PROFAGENT_PMPI(type_size_x, "PMPI_Type_size_x");
    PROFAGENT_PMPI(test_cancelled, "PMPI_Test_cancelled");
    PROFAGENT_PMPI(type_get_name, "PMPI_Type_get_name");
    PROFAGENT_PMPI(send, "PMPI_Send");
    PROFAGENT_PMPI(recv, "PMPI_Recv");
    PROFAGENT_PMPI(allreduce, "PMPI_Allreduce");
    PROFAGENT_PMPI(topo_test, "PMPI_Topo_test");
    PROFAGENT_PMPI(cartdim_get, "PMPI_Cartdim_get");
    PROFAGENT_PMPI(graph_neighbors_count, "PMPI_Graph_neighbors_count");
    PROFAGENT_PMPI(dist_graph_neighbors_count, "PMPI_Dist_graph_neighbors_count");
#undef PROFAGENT_PMPI
    return q;
  }();
  return p;
}

// Handle out-parameters are written with the implementation's handle size (4 bytes under
// MPICH): read them from a zeroed word.
H HandleOut(const uint64_t& word) { return reinterpret_cast<H>(word & Abi().mask); }

void RegisterTables() {
  RegisterCollTables(kLibMpi, g_types.Names(), g_types.count(), kMpiOpNames,
                     MpiAbi::kNumOps + 1);
}

struct Real {
  void* fn;
  uint16_t api;
};

// Slow path: once per exported function.
Real Resolve(const char* pname, const char* name) {
  InitAbi();
  P();
  static std::once_flag once;
  std::call_once(once, RegisterTables);
  return Real{FindPmpi(pname), RegisterApi(name)};
}

int MissingReal(const char* name) {
  static std::atomic<bool> said{false};
  if (!said.exchange(true))
    Log(1, "cannot find %s (is libmpi loaded?); returning an MPI error", name);
  return 16;  // MPI_ERR_OTHER in Open MPI (MPICH: 15); any non-zero is an error
}

// ---- Communicators ---------------------------------------------------------------------------
std::mutex g_member_mu;
std::map<uint64_t, uint32_t>* g_member_sets = nullptr;  // member-set hash -> communicators seen

// World ranks of the members of `comm`'s group (remote: of an intercommunicator's remote group),
// in rank order; MPI_UNDEFINED for a process outside this MPI_COMM_WORLD (another job's, after
// MPI_Comm_spawn or _connect), -1 where the group cannot be read.
std::vector<int> WorldRanks(H comm, int size, bool remote) {
  const MpiAbi& abi = Abi();
  const Pmpi& p = P();
  std::vector<int> local(size > 0 ? size : 0), world(local.size(), -1);
  for (int i = 0; i < size; ++i) local[i] = i;
  int (*group_of)(H, H*) = remote ? p.comm_remote_group : p.comm_group;
  uint64_t g = 0, wg = 0;
  if (size > 0 && group_of && p.group_translate_ranks && p.group_free &&
      group_of(comm, reinterpret_cast<H*>(&g)) == 0 &&
      p.comm_group(abi.comm_world, reinterpret_cast<H*>(&wg)) == 0) {
    H hg = HandleOut(g), hwg = HandleOut(wg);
    p.group_translate_ranks(hg, size, local.data(), hwg, world.data());
    p.group_free(&hg);
    p.group_free(&hwg);
  }
  return world;
}

bool AllInWorld(const std::vector<int>& ranks) {
  for (int r : ranks)
    if (r < 0) return false;
  return !ranks.empty();
}

// Slow path: first sight of a communicator. Its rank, size and members are those of `like`
// (itself, or the communicator it duplicates before it can be queried: MPI_Comm_idup).
//
// An intercommunicator (MPI_Intercomm_create) is recorded as one communicator of both groups, so
// that its calls match across them: members are the group with the lower first world rank, then
// the other; ranks of the remote group (destinations, sources, roots) are recorded as their
// index in that union (InterGroups). One whose remote group is in another job (MPI_Comm_spawn,
// _connect, _join) cannot be matched: it gets an id of this process alone.
CommSlot* AddComm(H comm, H like, const CommSlot* parent = nullptr, uint32_t creation = 0) {
  const MpiAbi& abi = Abi();
  const Pmpi& p = P();
  int rank = -1, size = 0;
  if (p.comm_rank == nullptr || p.comm_rank(like, &rank) != 0) rank = -1;
  if (p.comm_size == nullptr || p.comm_size(like, &size) != 0) size = 0;
  std::string uid;
  uint64_t hash = 0;
  InterGroups inter;
  if (abi.Key(comm) == abi.Key(abi.comm_world)) {
    uid = "world";
    hash = Fnv1a64(uid.data(), uid.size());
  } else {
    // Members' ranks in MPI_COMM_WORLD, hashed, plus the ordinal of this member set.
    std::vector<int> world = WorldRanks(like, size, false);
    int is_inter = 0, remote_size = 0;
    if (p.comm_test_inter == nullptr || p.comm_test_inter(like, &is_inter) != 0) is_inter = 0;
    if (is_inter && p.comm_remote_size != nullptr && p.comm_remote_size(like, &remote_size) == 0 &&
        remote_size > 0) {
      const std::vector<int> remote = WorldRanks(like, remote_size, true);
      if (!AllInWorld(world) || !AllInWorld(remote)) {
        // Another job's processes: nothing in this job's files can meet these calls.
        const uint64_t pid = uint64_t(getpid());
        hash = SplitHash(Fnv1a64(&pid, sizeof(pid)), int64_t(abi.Key(comm)), 0, /*salt=*/6);
        CommSlot* s = g_comms.Insert(abi.Key(comm), rank, size, hash);
        RegisterComm(hash, kLibMpi, abi.Key(comm), rank, size, UidString("mpi-inter", hash), -1, 0);
        return s;
      }
      inter.remote_size = remote_size;
      if (world.front() < remote.front()) {
        inter.remote_base = size;
        world.insert(world.end(), remote.begin(), remote.end());
      } else {
        inter.local_base = remote_size;
        world.insert(world.begin(), remote.begin(), remote.end());
      }
      if (rank >= 0) rank += inter.local_base;
      size += remote_size;
    }
    const uint64_t members = Fnv1a64(world.data(), world.size() * sizeof(int));
    if (parent != nullptr && parent->uid_hash != 0) {
      hash = SplitHash(members ^ (parent->uid_hash * 0x9e3779b97f4a7c15ull), size, creation,
                       /*salt=*/7);
    } else {
      uint32_t ordinal;
      {
        std::lock_guard<std::mutex> l(g_member_mu);
        if (g_member_sets == nullptr) g_member_sets = new std::map<uint64_t, uint32_t>();
        ordinal = (*g_member_sets)[members]++;
      }
      hash = SplitHash(members, size, ordinal, /*salt=*/3);
    }
    uid = UidString(abi.Key(comm) == abi.Key(abi.comm_self) ? "mpi-self" : "mpi", hash);
  }
  CommSlot* s = g_comms.Insert(abi.Key(comm), rank, size, hash, -1, inter);
  RegisterComm(hash, kLibMpi, abi.Key(comm), rank, size, uid, -1, 0);
  return s;
}

inline CommSlot* SlotFor(H comm) {
  const MpiAbi& abi = Abi();
  const uint64_t k = abi.Key(comm);
  CommSlot* s = g_comms.Find(k);
  if (__builtin_expect(s != nullptr, 1)) return s;
  if (k == 0 || k == abi.Key(abi.comm_null)) return nullptr;
  return AddComm(comm, comm);
}

// ---- Datatypes ---------------------------------------------------------------------------------
struct TypeInfo {
  uint8_t index;
  uint64_t size;
};

// Slow path: first sight of a named datatype, or any use of an unnamed (derived) one.
TypeInfo LookupTypeSlow(H dt) {
  const Pmpi& p = P();
  long long size = 0;
  int size32 = 0;
  if (p.type_size_x != nullptr) {
    if (p.type_size_x(dt, &size) != 0 || size < 0) size = 0;  // MPI_UNDEFINED: -32766
  } else if (p.type_size != nullptr && p.type_size(dt, &size32) == 0 && size32 >= 0) {
    size = size32;
  }
  char name[256] = {};
  int len = 0;
  if (p.type_get_name == nullptr || p.type_get_name(dt, name, &len) != 0) len = 0;
  if (len <= 0 || name[0] == '\0' || size > UINT32_MAX)  // the cache holds 32-bit sizes
    return TypeInfo{TypeCache::kDerived, uint64_t(size)};
  const int before = g_types.count();
  const int idx = g_types.Add(Abi().Key(dt), name, uint32_t(size));
  if (g_types.count() != before) RegisterTables();  // a new name: re-register the table
  return TypeInfo{uint8_t(idx), uint64_t(size)};
}

inline TypeInfo LookupType(H dt) {
  const MpiAbi& abi = Abi();
  const uint64_t key = abi.Key(dt);
  const int i = g_types.Find(key);
  if (__builtin_expect(i >= 0, 1)) return TypeInfo{uint8_t(i), g_types.Size(i)};
  // An erroneous call with no datatype: let the real call report it; asking PMPI_Type_size
  // would raise the error in the agent instead (and abort under MPI_ERRORS_ARE_FATAL).
  if (key == 0 || key == abi.Key(abi.dt_null)) return TypeInfo{kNoDtype, 0};
  return LookupTypeSlow(dt);
}

// ---- Call descriptions -----------------------------------------------------------------------
// kRma: a one-sided call or a passive-target synchronization (no number: nothing on the
// target side matches it call for call).
enum Kind : uint8_t { kColl, kSend, kRecv, kRma };

struct Info {
  H comm;
  uint64_t count = 0;
  uint64_t bytes = 0;
  uint64_t recv_bytes = 0;
  int32_t peer = kNoPeer;
  int32_t recv_peer = kNoPeer;  // Sendrecv: its source
  uint8_t dtype = kNoDtype;
  uint8_t redop = kNoRedop;
  void* request = nullptr;  // MPI_Request* of a non-blocking call
  bool any_source = false;  // a receive from MPI_ANY_SOURCE: numbered once its sender is known
  bool recv = false;        // a point-to-point receive
  CommSlot* slot = nullptr;
};

// The processes a collective's per-process arguments (count arrays, n blocks) cover: the
// communicator, or an intercommunicator's remote group.
inline uint64_t CommSize(const Info& i) {
  if (i.slot != nullptr && i.slot->inter.remote_size > 0)
    return uint64_t(i.slot->inter.remote_size);
  return (i.slot != nullptr && i.slot->size > 0) ? uint64_t(i.slot->size) : 1;
}
// This rank in its own group (count arrays are indexed so), -1 unknown.
inline int LocalRank(const Info& i) {
  return i.slot != nullptr && i.slot->rank >= 0 ? i.slot->rank - i.slot->inter.local_base : -1;
}
inline bool IsRoot(const Info& i, int root) {
  if (i.slot != nullptr && i.slot->inter.remote_size > 0) return root == Abi().root;
  return i.slot != nullptr && i.slot->rank == root;
}
// A peer or root argument as recorded: on an intercommunicator, a rank of the remote group (or
// MPI_ROOT, this rank) becomes its index among both groups; special values stay.
inline int32_t PeerIndex(const CommSlot* s, int peer) {
  if (s == nullptr || s->inter.remote_size == 0) return peer;
  if (peer >= 0) return peer + s->inter.remote_base;
  return peer == Abi().root ? s->rank : peer;
}
inline bool InPlace(const void* buf) { return buf == Abi().in_place; }
inline uint64_t Sum(const int* counts, uint64_t n) {
  uint64_t s = 0;
  if (counts != nullptr)
    for (uint64_t i = 0; i < n; ++i) s += counts[i] > 0 ? uint64_t(counts[i]) : 0;
  return s;
}

inline Info Base(H comm, H op, int peer) {
  Info i;
  i.comm = comm;
  i.slot = SlotFor(comm);
  i.peer = PeerIndex(i.slot, peer);
  if (op != nullptr) i.redop = MpiOpIndex(Abi(), op);
  return i;
}

// count elements of dt on both sides (reductions, broadcast, p2p receive).
inline Info Same(int count, H dt, H op, int peer, H comm) {
  Info i = Base(comm, op, peer);
  if (count > 0) {
    const TypeInfo t = LookupType(dt);
    i.dtype = t.index;
    i.count = uint64_t(count);
    i.bytes = i.recv_bytes = uint64_t(count) * t.size;
  }
  return i;
}

// A receive of `count` x dt from `src` (MPI_ANY_SOURCE: see Renumber).
inline Info RecvFrom(int count, H dt, int src, H comm) {
  Info i = Same(count, dt, nullptr, src, comm);
  i.any_source = src == Abi().any_source;
  i.recv = true;
  return i;
}

inline Info SendOnly(int count, H dt, int peer, H comm) {
  Info i = Same(count, dt, nullptr, peer, comm);
  i.recv_bytes = 0;
  return i;
}

// Send side `sc` x st (times n if send_n), receive side rc x rt (times n if recv_n). With
// MPI_IN_PLACE the send side is ignored by MPI: the receive block stands for it.
inline Info Blocks(const void* sbuf, int sc, H st, bool send_n, int rc, H rt, bool recv_n,
                   bool recv_significant, int peer, H comm) {
  Info i = Base(comm, nullptr, peer);
  const uint64_t n = CommSize(i);
  uint64_t rsize = 0;
  if (recv_significant && rc > 0) {
    const TypeInfo r = LookupType(rt);
    rsize = r.size;
    i.dtype = r.index;
    i.recv_bytes = uint64_t(rc) * r.size * (recv_n ? n : 1);
  }
  if (InPlace(sbuf)) {
    i.count = rc > 0 ? uint64_t(rc) : 0;
    i.bytes = i.count * rsize * (send_n ? n : 1);
  } else if (sc > 0) {
    const TypeInfo s = LookupType(st);
    i.dtype = s.index;
    i.count = uint64_t(sc);
    i.bytes = uint64_t(sc) * s.size * (send_n ? n : 1);
  }
  return i;
}

inline Info Allgather(const void* sbuf, int sc, H st, int rc, H rt, H comm) {
  return Blocks(sbuf, sc, st, false, rc, rt, true, true, kNoPeer, comm);
}
inline Info Alltoall(const void* sbuf, int sc, H st, int rc, H rt, H comm) {
  return Blocks(sbuf, sc, st, false, rc, rt, true, true, kNoPeer, comm);
}
inline Info Gather(const void* sbuf, int sc, H st, int rc, H rt, int root, H comm) {
  Info probe = Base(comm, nullptr, root);
  return Blocks(sbuf, sc, st, false, rc, rt, true, IsRoot(probe, root), root, comm);
}
// The block this rank receives; an in-place root (MPI_IN_PLACE as its receive buffer, receive
// arguments ignored) keeps its own block of the send side: sc x st, or scs[root] x st.
inline Info Scatter(const void* rbuf, int sc, H st, int rc, H rt, int root, H comm) {
  if (InPlace(rbuf)) return Same(sc, st, nullptr, root, comm);
  return Same(rc, rt, nullptr, root, comm);
}
inline Info Scatterv(const void* rbuf, const int* scs, H st, int rc, H rt, int root, H comm) {
  if (InPlace(rbuf))
    return Same(scs != nullptr && root >= 0 ? scs[root] : 0, st, nullptr, root, comm);
  return Same(rc, rt, nullptr, root, comm);
}
// A receive from MPI_ANY_SOURCE (its source is not known yet: any_source, numbered from the
// call's status) or from `src`.
inline Info RecvSide(Info i, int src) {
  if (src == Abi().any_source) {
    i.any_source = true;
  } else {
    i.recv_peer = PeerIndex(i.slot, src);
  }
  return i;
}
inline Info Sendrecv(int sc, H st, int rc, H rt, int peer, int src, H comm) {
  return RecvSide(Blocks(nullptr, sc, st, false, rc, rt, false, true, peer, comm), src);
}

inline Info Allgatherv(const void* sbuf, int sc, H st, const int* rcs, H rt, H comm) {
  Info i = Base(comm, nullptr, kNoPeer);
  const uint64_t total = Sum(rcs, CommSize(i));
  const TypeInfo r = total > 0 ? LookupType(rt) : TypeInfo{kNoDtype, 0};
  i.dtype = r.index;
  i.recv_bytes = total * r.size;
  if (InPlace(sbuf)) {
    const int me = LocalRank(i);
    i.count = (rcs != nullptr && me >= 0) ? uint64_t(rcs[me] > 0 ? rcs[me] : 0) : 0;
    i.bytes = i.count * r.size;
  } else if (sc > 0) {
    const TypeInfo s = LookupType(st);
    i.dtype = s.index;
    i.count = uint64_t(sc);
    i.bytes = uint64_t(sc) * s.size;
  }
  return i;
}

inline Info Gatherv(const void* sbuf, int sc, H st, const int* rcs, H rt, int root, H comm) {
  Info i = Base(comm, nullptr, root);
  const bool root_here = IsRoot(i, root);
  uint64_t rsize = 0;
  if (root_here) {
    const uint64_t total = Sum(rcs, CommSize(i));
    if (total > 0) {
      const TypeInfo r = LookupType(rt);
      rsize = r.size;
      i.dtype = r.index;
      i.recv_bytes = total * r.size;
    }
  }
  if (InPlace(sbuf)) {
    const int me = LocalRank(i);
    i.count = (root_here && rcs != nullptr && me >= 0 && rcs[me] > 0) ? uint64_t(rcs[me]) : 0;
    i.bytes = i.count * rsize;
  } else if (sc > 0) {
    const TypeInfo s = LookupType(st);
    i.dtype = s.index;
    i.count = uint64_t(sc);
    i.bytes = uint64_t(sc) * s.size;
  }
  return i;
}

inline Info ReduceScatter(const int* rcs, H dt, H op, H comm) {
  Info i = Base(comm, op, kNoPeer);
  const uint64_t total = Sum(rcs, CommSize(i));
  if (total > 0) {
    const TypeInfo t = LookupType(dt);
    i.dtype = t.index;
    i.count = total;
    i.bytes = total * t.size;
    const int me = LocalRank(i);
    i.recv_bytes = (rcs != nullptr && me >= 0 && rcs[me] > 0) ? uint64_t(rcs[me]) * t.size : 0;
  }
  return i;
}

inline Info ReduceScatterBlock(int rc, H dt, H op, H comm) {
  return Same(rc, dt, op, kNoPeer, comm);
}

// Counts per peer of one datatype each way: `n_out` send counts, `n_in` receive counts.
inline Info PerPeerCounts(Info i, const int* scs, H st, uint64_t n_out, const int* rcs, H rt,
                          uint64_t n_in) {
  const uint64_t rtotal = Sum(rcs, n_in);
  if (rtotal > 0) {
    const TypeInfo r = LookupType(rt);
    i.dtype = r.index;
    i.recv_bytes = rtotal * r.size;
  }
  const uint64_t stotal = Sum(scs, n_out);
  if (stotal > 0) {
    const TypeInfo s = LookupType(st);
    i.dtype = s.index;
    i.count = stotal;
    i.bytes = stotal * s.size;
  }
  return i;
}

// With MPI_IN_PLACE the send counts and type are ignored: the receive side stands for them.
inline Info Alltoallv(const void* sbuf, const int* scs, H st, const int* rcs, H rt, H comm) {
  const Info i = Base(comm, nullptr, kNoPeer);
  const uint64_t n = CommSize(i);
  if (InPlace(sbuf)) return PerPeerCounts(i, rcs, rt, n, rcs, rt, n);
  return PerPeerCounts(i, scs, st, n, rcs, rt, n);
}

inline Info NoData(H comm) { return Base(comm, nullptr, kNoPeer); }

// Alltoallw: a datatype per peer on each side (arrays of handles, read at the handle size).
inline uint64_t TypedSum(const int* counts, const void* types, uint64_t n, uint8_t* dtype) {
  uint64_t bytes = 0;
  if (counts == nullptr || types == nullptr) return 0;
  for (uint64_t p = 0; p < n; ++p) {
    if (counts[p] <= 0) continue;
    const TypeInfo t = LookupType(HandleOut(Abi().RequestAt(types, p)));
    if (*dtype == kNoDtype) *dtype = t.index;
    bytes += uint64_t(counts[p]) * t.size;
  }
  return bytes;
}

// Counts and datatypes per peer: `n_out` on the send side, `n_in` on the receive side. With
// MPI_IN_PLACE the receive side stands for the send.
inline Info PerPeerTypedCounts(Info i, const void* sbuf, const int* scs, const void* sts,
                               uint64_t n_out, const int* rcs, const void* rts, uint64_t n_in) {
  uint8_t rtype = kNoDtype;  // datatype named in the record: the send side's first, as Alltoallv
  i.recv_bytes = TypedSum(rcs, rts, n_in, &rtype);
  if (InPlace(sbuf)) {
    i.count = Sum(rcs, n_in);
    i.bytes = i.recv_bytes;
  } else {
    i.count = Sum(scs, n_out);
    i.bytes = TypedSum(scs, sts, n_out, &i.dtype);
  }
  if (i.dtype == kNoDtype) i.dtype = rtype;
  return i;
}

inline Info Alltoallw(const void* sbuf, const int* scs, const void* sts, const int* rcs,
                      const void* rts, H comm) {
  const Info i = Base(comm, nullptr, kNoPeer);
  const uint64_t n = CommSize(i);
  return PerPeerTypedCounts(i, sbuf, scs, sts, n, rcs, rts, n);
}

// ---- Neighbor collectives --------------------------------------------------------------------
// On a topology communicator: each rank sends to its out-neighbors and receives from its
// in-neighbors (Cartesian: 2 per dimension each way; graph: its neighbors each way). bytes =
// all this rank sends, recv_bytes = all it receives; count = the send count argument (per
// neighbor) or the sum of the send counts.
struct Degrees {
  int in = 0, out = 0;
};

inline Degrees NeighborDegrees(const Info& i) {
  const Pmpi& p = P();
  const MpiAbi& abi = Abi();
  Degrees d;
  int topo = abi.undefined;
  if (p.topo_test == nullptr || p.topo_test(i.comm, &topo) != 0) return d;
  if (topo == abi.topo_cart) {
    int ndims = 0;
    if (p.cartdim_get != nullptr && p.cartdim_get(i.comm, &ndims) == 0) d.in = d.out = 2 * ndims;
  } else if (topo == abi.topo_graph) {
    int n = 0;
    if (p.graph_neighbors_count != nullptr && i.slot != nullptr &&
        p.graph_neighbors_count(i.comm, i.slot->rank, &n) == 0)
      d.in = d.out = n;
  } else if (topo != abi.undefined && p.dist_graph_neighbors_count != nullptr) {
    int in = 0, out = 0, weighted = 0;
    if (p.dist_graph_neighbors_count(i.comm, &in, &out, &weighted) == 0) d.in = in, d.out = out;
  }
  if (d.in < 0) d.in = 0;
  if (d.out < 0) d.out = 0;
  return d;
}

// Neighbor_allgather and _alltoall: sc x st to each out-neighbor, rc x rt from each in-neighbor.
inline Info NeighborBlocks(int sc, H st, int rc, H rt, H comm) {
  Info i = Base(comm, nullptr, kNoPeer);
  const Degrees d = NeighborDegrees(i);
  if (rc > 0) {
    const TypeInfo r = LookupType(rt);
    i.dtype = r.index;
    i.recv_bytes = uint64_t(rc) * r.size * uint64_t(d.in);
  }
  if (sc > 0) {
    const TypeInfo s = LookupType(st);
    i.dtype = s.index;
    i.count = uint64_t(sc);
    i.bytes = uint64_t(sc) * s.size * uint64_t(d.out);
  }
  return i;
}

inline Info NeighborAllgatherv(int sc, H st, const int* rcs, H rt, H comm) {
  Info i = Base(comm, nullptr, kNoPeer);
  const Degrees d = NeighborDegrees(i);
  const uint64_t total = Sum(rcs, uint64_t(d.in));
  if (total > 0) {
    const TypeInfo r = LookupType(rt);
    i.dtype = r.index;
    i.recv_bytes = total * r.size;
  }
  if (sc > 0) {
    const TypeInfo s = LookupType(st);
    i.dtype = s.index;
    i.count = uint64_t(sc);
    i.bytes = uint64_t(sc) * s.size * uint64_t(d.out);
  }
  return i;
}

inline Info NeighborAlltoallv(const int* scs, H st, const int* rcs, H rt, H comm) {
  const Info i = Base(comm, nullptr, kNoPeer);
  const Degrees d = NeighborDegrees(i);
  return PerPeerCounts(i, scs, st, uint64_t(d.out), rcs, rt, uint64_t(d.in));
}

// (MPI_IN_PLACE is not allowed in neighbor collectives.)
inline Info NeighborAlltoallw(const int* scs, const void* sts, const int* rcs, const void* rts,
                              H comm) {
  const Info i = Base(comm, nullptr, kNoPeer);
  const Degrees d = NeighborDegrees(i);
  return PerPeerTypedCounts(i, nullptr, scs, sts, uint64_t(d.out), rcs, rts, uint64_t(d.in));
}

// ---- One-sided communication ------------------------------------------------------------------
// A window is registered when created, like a communicator (CommSlot keyed by its handle: its
// members are the creating communicator's, its unique id that communicator's id and the
// window's ordinal on it), so its fences are numbered collectives and its calls name it.
inline Info Win(H win, int target) {
  Info i;
  i.comm = win;
  i.slot = g_comms.Find(Abi().Key(win));
  i.peer = target;
  return i;
}

// `count` x dt moved between this rank and `target` (`fetch`: into this rank).
inline Info Rma(int count, H dt, H op, int target, H win, bool fetch) {
  Info i = Win(win, target);
  if (op != nullptr) i.redop = MpiOpIndex(Abi(), op);
  if (count > 0) {
    const TypeInfo t = LookupType(dt);
    i.dtype = t.index;
    i.count = uint64_t(count);
    i.bytes = uint64_t(count) * t.size;
    i.recv_bytes = fetch ? i.bytes : 0;
  }
  return i;
}

// Get_accumulate: the origin buffer goes out (none with MPI_NO_OP), the result comes back.
inline Info GetAccumulate(int oc, H odt, int rc, H rdt, H op, int target, H win) {
  Info i = Rma(oc, odt, op, target, win, false);
  if (rc > 0) {
    const TypeInfo r = LookupType(rdt);
    if (i.dtype == kNoDtype) i.dtype = r.index;
    i.recv_bytes = uint64_t(rc) * r.size;
  }
  return i;
}

inline Info Nb(Info i, void* request) {
  i.request = request;
  return i;
}

// ---- Recording -----------------------------------------------------------------------------
void EmitPending(const PendingCall& pc) { EmitWithBytes(pc.e, &pc.x, sizeof(pc.x)); }

// The call's number; a Sendrecv's receive side's in *recv_seq.
inline uint32_t Seq(const Info& info, Kind kind, uint32_t* recv_seq = nullptr) {
  if (kind == kColl) return NextCollSeq(info.slot);
  if (kind == kRma) return kNoSeq;
  if (info.recv_peer != kNoPeer) {
    const uint32_t r = NextPeerSeq(info.slot, info.recv_peer, true);
    if (recv_seq != nullptr) *recv_seq = r;
  }
  return NextPeerSeq(info.slot, info.peer, kind == kRecv);
}

// Requests this thread already marked as waited on (Waited): a poll loop (MPI_Test on the same
// request a million times) looks its request up once. Direct-mapped by handle; an entry is
// cleared when its request completes or its value is handed out again.
struct WaitedCache {
  static constexpr size_t kSize = 64;
  uint64_t h[kSize];
  static size_t Index(uint64_t handle) { return size_t(handle * 0x9E3779B97F4A7C15ull >> 58); }
};
thread_local WaitedCache t_waited __attribute__((tls_model("initial-exec")));

inline void ForgetWaited(uint64_t handle) {
  uint64_t& slot = t_waited.h[WaitedCache::Index(handle)];
  if (slot == handle) slot = 0;
}

// A wait or test that began at `t_wait` covered the pending request `handle` without completing
// it: the rank has nothing left to do before it (its arrival, for the straggler view), unless
// an earlier one said so already.
inline void Waited(uint64_t handle, uint64_t t_wait) {
  if (handle == Abi().request_null) return;
  uint64_t& slot = t_waited.h[WaitedCache::Index(handle)];
  if (slot == handle) return;
  slot = handle;
  g_requests.Update(handle, [t_wait](PendingCall* pc) {
    if (pc->x.wait_ticks == 0) pc->x.wait_ticks = t_wait;
  });
}

inline void Finish(uint16_t api, uint32_t seq, const Info& info, uint64_t t0, uint64_t t1,
                   int rc, uint32_t recv_seq = 0) {
  PendingCall pc;
  std::memset(&pc, 0, sizeof(pc));
  RawEvent& e = pc.e;
  e.t0 = t0;
  e.t1 = t1;
  e.type = EvType::kCollective;
  e.api = api;
  e.ret = rc;
  // The communicator's id in the file: its unique id's hash (a freed communicator's handle is
  // given to the next one created; the hash is never reused within a process).
  e.coll.comm = info.slot != nullptr ? info.slot->uid_hash : Abi().Key(info.comm);
  e.coll.count = info.count;
  e.coll.bytes = info.bytes;
  e.coll.seq = seq;
  e.coll.peer = info.peer;
  e.coll.lib = kLibMpi;
  e.coll.op = 0;
  e.coll.dtype = info.dtype;
  e.coll.redop = info.redop;
  pc.x.recv_bytes = info.recv_bytes;
  pc.x.device = -1;
  pc.x.recv_from = info.recv_peer >= 0 ? uint32_t(info.recv_peer) + 1 : 0;  // a Sendrecv's
  pc.x.recv_seq = recv_seq;
  pc.slot = info.slot;
  pc.any_source = info.any_source;
  pc.recv = info.recv;
  if (info.request != nullptr) {
    e.flags |= kFlagNonBlocking;
    if (rc == 0) {
      PendingCall old;
      const uint64_t handle = Abi().RequestAt(info.request, 0);
      ForgetWaited(handle);
      switch (g_requests.Put(handle, pc, &old)) {
        case PutResult::kStored:
          return;
        case PutResult::kReplaced:
          // MPI handed the same request value out again while the earlier call was pending:
          // that call completed inside itself (Open MPI returns one shared, already complete
          // request for transfers that complete at once, e.g. a small MPI_Isend whose receive
          // was posted). Its completion is its own end.
          old.x.complete_ticks = old.e.t1;
          EmitPending(old);
          return;
        case PutResult::kFull:
          break;  // record now, completion unknown
      }
    }
  }
  EmitPending(pc);
}

// A pending request completed at `t_done`.
// A receive from MPI_ANY_SOURCE matched a message of `source` (from its status): it is that
// pair's next receive, numbered now (MPI matches a pair's messages in order, so this is the
// sender's send of the same number).
inline uint32_t NumberFrom(CommSlot* slot, int source, int32_t* peer) {
  if (source < 0) return kNoSeq;
  *peer = PeerIndex(slot, source);
  return NextPeerSeq(slot, *peer, true);
}

// A pending request completed at `t_done`, in a wait or test that began at `t_wait` (0: not
// known); `status`: its status (nullptr: unknown). A receive that was cancelled (MPI_Cancel)
// transferred nothing: it is not recorded.
inline void Complete(uint64_t handle, uint64_t t_done, const void* status = nullptr,
                     uint64_t t_wait = 0) {
  if (handle == Abi().request_null) return;
  ForgetWaited(handle);
  PendingCall pc;
  if (!g_requests.Take(handle, &pc)) return;
  int cancelled = 0;
  if (status != nullptr && P().test_cancelled != nullptr &&
      P().test_cancelled(status, &cancelled) == 0 && cancelled)
    return;
  pc.x.complete_ticks = t_done;
  if (pc.x.wait_ticks == 0 || (t_wait != 0 && t_wait < pc.x.wait_ticks)) {
    pc.x.wait_ticks = t_wait;
  }
  if (pc.any_source) {
    const int source = status != nullptr ? Abi().StatusSource(status, 0) : -1;
    pc.e.coll.seq = NumberFrom(pc.slot, source, &pc.e.coll.peer);
  }
  EmitPending(pc);
}

// Statuses of at most this size (Open MPI 24 bytes, MPICH 20) can be substituted for an ignored
// one (see Statuses).
constexpr size_t kMaxStatusSize = 32;

// The status a call fills in so that the agent can read it: the caller's, or `own`
// (kMaxStatusSize bytes) when the caller passed MPI_STATUS_IGNORE (or none).
inline void* ReadableStatus(void* status, char* own) {
  const bool ignored = status == nullptr || Abi().StatusIgnored(status);
  return ignored && Abi().status_size <= kMaxStatusSize ? own : status;
}

// Numbers, times and records one call described by `info` (see Seq), made by `call(status)`. A
// receive from MPI_ANY_SOURCE (info.any_source: an MPI_Recv, or a Sendrecv's receive side) is
// numbered from the status the call fills in: `status`, or the agent's own when the caller
// passed MPI_STATUS_IGNORE (or has none). A non-blocking one is numbered at its completion.
template <typename Call>
int Recorded(const Real& real, Kind kind, Info info, void* status, Call call) {
  uint32_t recv_seq = 0;
  uint32_t seq = Seq(info, kind, &recv_seq);
  const bool number_now = info.any_source && info.request == nullptr;
  alignas(16) char own[kMaxStatusSize];
  void* st = number_now ? ReadableStatus(status, own) : status;
  const bool recording = Recording();
  const uint64_t t0 = recording ? Now() : 0;
  const int rc = call(st);
  const uint64_t t1 = recording ? Now() : 0;
  if (!recording) NoteUnrecordedCall();
  if (number_now && rc == 0 && st != nullptr && !Abi().StatusIgnored(st)) {
    int32_t peer = kNoPeer;
    const uint32_t n = NumberFrom(info.slot, Abi().StatusSource(st, 0), &peer);
    if (kind == kRecv) {
      seq = n;
      info.peer = peer;
    } else {
      recv_seq = n;
      info.recv_peer = peer;
    }
  }
  if (recording) Finish(real.api, seq, info, t0, t1, rc, recv_seq);
  return rc;
}

void EmitApi(uint16_t api, uint64_t t0, uint64_t t1, int rc) {
  if (!Recording()) {
    NoteUnrecordedCall();
    return;
  }
  RawEvent e{};
  e.t0 = t0;
  e.t1 = t1;
  e.type = EvType::kApi;
  e.api = api;
  e.ret = rc;
  Emit(e);
}

}  // namespace
}  // namespace profagent

// ---- Collectives and point-to-point, generated from one list ---------------------------------
// X(Name, Kind, (params), (args), Info expression). MPI-3 C prototypes (const buffers and count
// arrays) with opaque handles; arrays of handles (Alltoallw's datatypes) as void*, read at the
// implementation's handle size.
using profagent::H;

#define PROFAGENT_MPI_CALLS(X)                                                                    \
  X(Allreduce, kColl, (const void* sbuf, void* rbuf, int count, H dt, H op, H comm),              \
    (sbuf, rbuf, count, dt, op, comm), Same(count, dt, op, kNoPeer, comm))                        \
  X(Iallreduce, kColl, (const void* sbuf, void* rbuf, int count, H dt, H op, H comm, void* req),  \
    (sbuf, rbuf, count, dt, op, comm, req), Nb(Same(count, dt, op, kNoPeer, comm), req))          \
  X(Reduce, kColl, (const void* sbuf, void* rbuf, int count, H dt, H op, int root, H comm),       \
    (sbuf, rbuf, count, dt, op, root, comm), Same(count, dt, op, root, comm))                     \
  X(Ireduce, kColl,                                                                               \
    (const void* sbuf, void* rbuf, int count, H dt, H op, int root, H comm, void* req),           \
    (sbuf, rbuf, count, dt, op, root, comm, req), Nb(Same(count, dt, op, root, comm), req))       \
  X(Bcast, kColl, (void* buf, int count, H dt, int root, H comm), (buf, count, dt, root, comm),   \
    Same(count, dt, nullptr, root, comm))                                                         \
  X(Ibcast, kColl, (void* buf, int count, H dt, int root, H comm, void* req),                     \
    (buf, count, dt, root, comm, req), Nb(Same(count, dt, nullptr, root, comm), req))             \
  X(Scan, kColl, (const void* sbuf, void* rbuf, int count, H dt, H op, H comm),                   \
    (sbuf, rbuf, count, dt, op, comm), Same(count, dt, op, kNoPeer, comm))                        \
  X(Iscan, kColl, (const void* sbuf, void* rbuf, int count, H dt, H op, H comm, void* req),       \
    (sbuf, rbuf, count, dt, op, comm, req), Nb(Same(count, dt, op, kNoPeer, comm), req))          \
  X(Exscan, kColl, (const void* sbuf, void* rbuf, int count, H dt, H op, H comm),                 \
    (sbuf, rbuf, count, dt, op, comm), Same(count, dt, op, kNoPeer, comm))                        \
  X(Iexscan, kColl, (const void* sbuf, void* rbuf, int count, H dt, H op, H comm, void* req),     \
    (sbuf, rbuf, count, dt, op, comm, req), Nb(Same(count, dt, op, kNoPeer, comm), req))          \
  X(Allgather, kColl, (const void* sbuf, int sc, H st, void* rbuf, int rc, H rt, H comm),         \
    (sbuf, sc, st, rbuf, rc, rt, comm), Allgather(sbuf, sc, st, rc, rt, comm))                    \
  X(Iallgather, kColl,                                                                            \
    (const void* sbuf, int sc, H st, void* rbuf, int rc, H rt, H comm, void* req),                \
    (sbuf, sc, st, rbuf, rc, rt, comm, req), Nb(Allgather(sbuf, sc, st, rc, rt, comm), req))      \
  X(Allgatherv, kColl,                                                                            \
    (const void* sbuf, int sc, H st, void* rbuf, const int* rcs, const int* displs, H rt,         \
     H comm),                                                                                     \
    (sbuf, sc, st, rbuf, rcs, displs, rt, comm), Allgatherv(sbuf, sc, st, rcs, rt, comm))         \
  X(Iallgatherv, kColl,                                                                           \
    (const void* sbuf, int sc, H st, void* rbuf, const int* rcs, const int* displs, H rt,         \
     H comm, void* req),                                                                          \
    (sbuf, sc, st, rbuf, rcs, displs, rt, comm, req),                                             \
    Nb(Allgatherv(sbuf, sc, st, rcs, rt, comm), req))                                             \
  X(Gather, kColl,                                                                                \
    (const void* sbuf, int sc, H st, void* rbuf, int rc, H rt, int root, H comm),                 \
    (sbuf, sc, st, rbuf, rc, rt, root, comm), Gather(sbuf, sc, st, rc, rt, root, comm))           \
  X(Igather, kColl,                                                                               \
    (const void* sbuf, int sc, H st, void* rbuf, int rc, H rt, int root, H comm, void* req),      \
    (sbuf, sc, st, rbuf, rc, rt, root, comm, req),                                                \
    Nb(Gather(sbuf, sc, st, rc, rt, root, comm), req))                                            \
  X(Gatherv, kColl,                                                                               \
    (const void* sbuf, int sc, H st, void* rbuf, const int* rcs, const int* displs, H rt,         \
     int root, H comm),                                                                           \
    (sbuf, sc, st, rbuf, rcs, displs, rt, root, comm),                                            \
    Gatherv(sbuf, sc, st, rcs, rt, root, comm))                                                   \
  X(Igatherv, kColl,                                                                              \
    (const void* sbuf, int sc, H st, void* rbuf, const int* rcs, const int* displs, H rt,         \
     int root, H comm, void* req),                                                                \
    (sbuf, sc, st, rbuf, rcs, displs, rt, root, comm, req),                                       \
    Nb(Gatherv(sbuf, sc, st, rcs, rt, root, comm), req))                                          \
  X(Scatter, kColl,                                                                               \
    (const void* sbuf, int sc, H st, void* rbuf, int rc, H rt, int root, H comm),                 \
    (sbuf, sc, st, rbuf, rc, rt, root, comm), Scatter(rbuf, sc, st, rc, rt, root, comm))          \
  X(Iscatter, kColl,                                                                              \
    (const void* sbuf, int sc, H st, void* rbuf, int rc, H rt, int root, H comm, void* req),      \
    (sbuf, sc, st, rbuf, rc, rt, root, comm, req),                                                \
    Nb(Scatter(rbuf, sc, st, rc, rt, root, comm), req))                                           \
  X(Scatterv, kColl,                                                                              \
    (const void* sbuf, const int* scs, const int* displs, H st, void* rbuf, int rc, H rt,         \
     int root, H comm),                                                                           \
    (sbuf, scs, displs, st, rbuf, rc, rt, root, comm),                                            \
    Scatterv(rbuf, scs, st, rc, rt, root, comm))                                                  \
  X(Iscatterv, kColl,                                                                             \
    (const void* sbuf, const int* scs, const int* displs, H st, void* rbuf, int rc, H rt,         \
     int root, H comm, void* req),                                                                \
    (sbuf, scs, displs, st, rbuf, rc, rt, root, comm, req),                                       \
    Nb(Scatterv(rbuf, scs, st, rc, rt, root, comm), req))                                         \
  X(Reduce_scatter, kColl,                                                                        \
    (const void* sbuf, void* rbuf, const int* rcs, H dt, H op, H comm),                           \
    (sbuf, rbuf, rcs, dt, op, comm), ReduceScatter(rcs, dt, op, comm))                            \
  X(Ireduce_scatter, kColl,                                                                       \
    (const void* sbuf, void* rbuf, const int* rcs, H dt, H op, H comm, void* req),                \
    (sbuf, rbuf, rcs, dt, op, comm, req), Nb(ReduceScatter(rcs, dt, op, comm), req))              \
  X(Reduce_scatter_block, kColl, (const void* sbuf, void* rbuf, int rc, H dt, H op, H comm),      \
    (sbuf, rbuf, rc, dt, op, comm), ReduceScatterBlock(rc, dt, op, comm))                         \
  X(Ireduce_scatter_block, kColl,                                                                 \
    (const void* sbuf, void* rbuf, int rc, H dt, H op, H comm, void* req),                        \
    (sbuf, rbuf, rc, dt, op, comm, req), Nb(ReduceScatterBlock(rc, dt, op, comm), req))           \
  X(Alltoall, kColl, (const void* sbuf, int sc, H st, void* rbuf, int rc, H rt, H comm),          \
    (sbuf, sc, st, rbuf, rc, rt, comm), Alltoall(sbuf, sc, st, rc, rt, comm))                     \
  X(Ialltoall, kColl,                                                                             \
    (const void* sbuf, int sc, H st, void* rbuf, int rc, H rt, H comm, void* req),                \
    (sbuf, sc, st, rbuf, rc, rt, comm, req), Nb(Alltoall(sbuf, sc, st, rc, rt, comm), req))       \
  X(Alltoallv, kColl,                                                                             \
    (const void* sbuf, const int* scs, const int* sd, H st, void* rbuf, const int* rcs,           \
     const int* rd, H rt, H comm),                                                                \
    (sbuf, scs, sd, st, rbuf, rcs, rd, rt, comm),                                                 \
    Alltoallv(sbuf, scs, st, rcs, rt, comm))                                                      \
  X(Ialltoallv, kColl,                                                                            \
    (const void* sbuf, const int* scs, const int* sd, H st, void* rbuf, const int* rcs,           \
     const int* rd, H rt, H comm, void* req),                                                     \
    (sbuf, scs, sd, st, rbuf, rcs, rd, rt, comm, req),                                            \
    Nb(Alltoallv(sbuf, scs, st, rcs, rt, comm), req))                                             \
  X(Barrier, kColl, (H comm), (comm), NoData(comm))                                               \
  X(Ibarrier, kColl, (H comm, void* req), (comm, req), Nb(NoData(comm), req))                     \
  X(Send, kSend, (const void* buf, int count, H dt, int dest, int tag, H comm),                   \
    (buf, count, dt, dest, tag, comm), SendOnly(count, dt, dest, comm))                           \
  X(Isend, kSend, (const void* buf, int count, H dt, int dest, int tag, H comm, void* req),       \
    (buf, count, dt, dest, tag, comm, req), Nb(SendOnly(count, dt, dest, comm), req))             \
  X(Ssend, kSend, (const void* buf, int count, H dt, int dest, int tag, H comm),                  \
    (buf, count, dt, dest, tag, comm), SendOnly(count, dt, dest, comm))                           \
  X(Bsend, kSend, (const void* buf, int count, H dt, int dest, int tag, H comm),                  \
    (buf, count, dt, dest, tag, comm), SendOnly(count, dt, dest, comm))                           \
  X(Rsend, kSend, (const void* buf, int count, H dt, int dest, int tag, H comm),                  \
    (buf, count, dt, dest, tag, comm), SendOnly(count, dt, dest, comm))                           \
  X(Issend, kSend, (const void* buf, int count, H dt, int dest, int tag, H comm, void* req),      \
    (buf, count, dt, dest, tag, comm, req), Nb(SendOnly(count, dt, dest, comm), req))             \
  X(Ibsend, kSend, (const void* buf, int count, H dt, int dest, int tag, H comm, void* req),      \
    (buf, count, dt, dest, tag, comm, req), Nb(SendOnly(count, dt, dest, comm), req))             \
  X(Irsend, kSend, (const void* buf, int count, H dt, int dest, int tag, H comm, void* req),      \
    (buf, count, dt, dest, tag, comm, req), Nb(SendOnly(count, dt, dest, comm), req))             \
  X(Irecv, kRecv, (void* buf, int count, H dt, int src, int tag, H comm, void* req),              \
    (buf, count, dt, src, tag, comm, req), Nb(RecvFrom(count, dt, src, comm), req))               \
  X(Alltoallw, kColl,                                                                             \
    (const void* sbuf, const int* scs, const int* sd, const void* sts, void* rbuf,                \
     const int* rcs, const int* rd, const void* rts, H comm),                                     \
    (sbuf, scs, sd, sts, rbuf, rcs, rd, rts, comm), Alltoallw(sbuf, scs, sts, rcs, rts, comm))    \
  X(Ialltoallw, kColl,                                                                            \
    (const void* sbuf, const int* scs, const int* sd, const void* sts, void* rbuf,                \
     const int* rcs, const int* rd, const void* rts, H comm, void* req),                          \
    (sbuf, scs, sd, sts, rbuf, rcs, rd, rts, comm, req),                                          \
    Nb(Alltoallw(sbuf, scs, sts, rcs, rts, comm), req))                                           \
  X(Neighbor_allgather, kColl,                                                                    \
    (const void* sbuf, int sc, H st, void* rbuf, int rc, H rt, H comm),                           \
    (sbuf, sc, st, rbuf, rc, rt, comm),                                                           \
    NeighborBlocks(sc, st, rc, rt, comm))                                                         \
  X(Ineighbor_allgather, kColl,                                                                   \
    (const void* sbuf, int sc, H st, void* rbuf, int rc, H rt, H comm, void* req),                \
    (sbuf, sc, st, rbuf, rc, rt, comm, req),                                                      \
    Nb(NeighborBlocks(sc, st, rc, rt, comm), req))                                                \
  X(Neighbor_allgatherv, kColl,                                                                   \
    (const void* sbuf, int sc, H st, void* rbuf, const int* rcs, const int* displs, H rt,         \
     H comm),                                                                                     \
    (sbuf, sc, st, rbuf, rcs, displs, rt, comm),                                                  \
    NeighborAllgatherv(sc, st, rcs, rt, comm))                                                    \
  X(Ineighbor_allgatherv, kColl,                                                                  \
    (const void* sbuf, int sc, H st, void* rbuf, const int* rcs, const int* displs, H rt, H comm, \
     void* req),                                                                                  \
    (sbuf, sc, st, rbuf, rcs, displs, rt, comm, req),                                             \
    Nb(NeighborAllgatherv(sc, st, rcs, rt, comm), req))                                           \
  X(Neighbor_alltoall, kColl,                                                                     \
    (const void* sbuf, int sc, H st, void* rbuf, int rc, H rt, H comm),                           \
    (sbuf, sc, st, rbuf, rc, rt, comm),                                                           \
    NeighborBlocks(sc, st, rc, rt, comm))                                                         \
  X(Ineighbor_alltoall, kColl,                                                                    \
    (const void* sbuf, int sc, H st, void* rbuf, int rc, H rt, H comm, void* req),                \
    (sbuf, sc, st, rbuf, rc, rt, comm, req),                                                      \
    Nb(NeighborBlocks(sc, st, rc, rt, comm), req))                                                \
  X(Neighbor_alltoallv, kColl,                                                                    \
    (const void* sbuf, const int* scs, const int* sd, H st, void* rbuf, const int* rcs,           \
     const int* rd, H rt, H comm),                                                                \
    (sbuf, scs, sd, st, rbuf, rcs, rd, rt, comm),                                                 \
    NeighborAlltoallv(scs, st, rcs, rt, comm))                                                    \
  X(Ineighbor_alltoallv, kColl,                                                                   \
    (const void* sbuf, const int* scs, const int* sd, H st, void* rbuf, const int* rcs,           \
     const int* rd, H rt, H comm, void* req),                                                     \
    (sbuf, scs, sd, st, rbuf, rcs, rd, rt, comm, req),                                            \
    Nb(NeighborAlltoallv(scs, st, rcs, rt, comm), req))                                           \
  X(Neighbor_alltoallw, kColl,                                                                    \
    (const void* sbuf, const int* scs, const void* sd, const void* sts, void* rbuf,               \
     const int* rcs, const void* rd, const void* rts, H comm),                                    \
    (sbuf, scs, sd, sts, rbuf, rcs, rd, rts, comm),                                               \
    NeighborAlltoallw(scs, sts, rcs, rts, comm))                                                  \
  X(Ineighbor_alltoallw, kColl,                                                                   \
    (const void* sbuf, const int* scs, const void* sd, const void* sts, void* rbuf,               \
     const int* rcs, const void* rd, const void* rts, H comm, void* req),                         \
    (sbuf, scs, sd, sts, rbuf, rcs, rd, rts, comm, req),                                          \
    Nb(NeighborAlltoallw(scs, sts, rcs, rts, comm), req))

// One-sided calls and window synchronization (MPI-3 C prototypes; A = MPI_Aint). Communication
// calls are numbered nowhere (kRma): a put has no matching call on its target. Fences are
// collectives over the window's members; the other synchronizations, like the communication
// calls, name their target rank (-1 for all).
using A = intptr_t;
#define PROFAGENT_MPI_RMA_CALLS(X)                                                                \
  X(Put, kRma, (const void* o, int oc, H odt, int t, A td, int tc, H tdt, H win),                 \
    (o, oc, odt, t, td, tc, tdt, win), Rma(oc, odt, nullptr, t, win, false))                      \
  X(Rput, kRma, (const void* o, int oc, H odt, int t, A td, int tc, H tdt, H win, void* req),     \
    (o, oc, odt, t, td, tc, tdt, win, req), Nb(Rma(oc, odt, nullptr, t, win, false), req))        \
  X(Get, kRma, (void* o, int oc, H odt, int t, A td, int tc, H tdt, H win),                       \
    (o, oc, odt, t, td, tc, tdt, win), Rma(oc, odt, nullptr, t, win, true))                       \
  X(Rget, kRma, (void* o, int oc, H odt, int t, A td, int tc, H tdt, H win, void* req),           \
    (o, oc, odt, t, td, tc, tdt, win, req), Nb(Rma(oc, odt, nullptr, t, win, true), req))         \
  X(Accumulate, kRma, (const void* o, int oc, H odt, int t, A td, int tc, H tdt, H op, H win),    \
    (o, oc, odt, t, td, tc, tdt, op, win), Rma(oc, odt, op, t, win, false))                       \
  X(Raccumulate, kRma,                                                                            \
    (const void* o, int oc, H odt, int t, A td, int tc, H tdt, H op, H win, void* req),           \
    (o, oc, odt, t, td, tc, tdt, op, win, req), Nb(Rma(oc, odt, op, t, win, false), req))         \
  X(Get_accumulate, kRma,                                                                         \
    (const void* o, int oc, H odt, void* r, int rc, H rdt, int t, A td, int tc, H tdt, H op,      \
     H win),                                                                                      \
    (o, oc, odt, r, rc, rdt, t, td, tc, tdt, op, win),                                            \
    GetAccumulate(oc, odt, rc, rdt, op, t, win))                                                  \
  X(Rget_accumulate, kRma,                                                                        \
    (const void* o, int oc, H odt, void* r, int rc, H rdt, int t, A td, int tc, H tdt, H op,      \
     H win, void* req),                                                                           \
    (o, oc, odt, r, rc, rdt, t, td, tc, tdt, op, win, req),                                       \
    Nb(GetAccumulate(oc, odt, rc, rdt, op, t, win), req))                                         \
  X(Fetch_and_op, kRma, (const void* o, void* r, H dt, int t, A td, H op, H win),                 \
    (o, r, dt, t, td, op, win), Rma(1, dt, op, t, win, true))                                     \
  X(Compare_and_swap, kRma, (const void* o, const void* c, void* r, H dt, int t, A td, H win),    \
    (o, c, r, dt, t, td, win), Rma(1, dt, nullptr, t, win, true))                                 \
  X(Win_fence, kColl, (int assert_, H win), (assert_, win), Win(win, kNoPeer))                    \
  X(Win_lock, kRma, (int type, int t, int assert_, H win), (type, t, assert_, win), Win(win, t))  \
  X(Win_unlock, kRma, (int t, H win), (t, win), Win(win, t))                                      \
  X(Win_lock_all, kRma, (int assert_, H win), (assert_, win), Win(win, kNoPeer))                  \
  X(Win_unlock_all, kRma, (H win), (win), Win(win, kNoPeer))                                      \
  X(Win_flush, kRma, (int t, H win), (t, win), Win(win, t))                                       \
  X(Win_flush_all, kRma, (H win), (win), Win(win, kNoPeer))                                       \
  X(Win_flush_local, kRma, (int t, H win), (t, win), Win(win, t))                                 \
  X(Win_flush_local_all, kRma, (H win), (win), Win(win, kNoPeer))                                 \
  X(Win_post, kRma, (H group, int assert_, H win), (group, assert_, win), Win(win, kNoPeer))      \
  X(Win_start, kRma, (H group, int assert_, H win), (group, assert_, win), Win(win, kNoPeer))     \
  X(Win_complete, kRma, (H win), (win), Win(win, kNoPeer))                                        \
  X(Win_wait, kRma, (H win), (win), Win(win, kNoPeer))

// Sequence numbers are taken even while Recording() is off (see the top of this file).
#define PROFAGENT_MPI_WRAPPER(NAME, KIND, PARAMS, ARGS, INFO)                                     \
  PROFAGENT_EXPORT int MPI_##NAME PARAMS {                                                        \
    using namespace profagent;                                                                    \
    using Fn = int(*) PARAMS;                                                                     \
    static const Real real = Resolve("PMPI_" #NAME, "MPI_" #NAME);                                \
    const Fn fn = reinterpret_cast<Fn>(real.fn);                                                  \
    if (__builtin_expect(fn == nullptr, 0)) return MissingReal("PMPI_" #NAME);                    \
    HookGuard guard;                                                                              \
    if (!guard.outermost()) return fn ARGS;                                                       \
    return Recorded(real, KIND, INFO, nullptr, [&](void*) { return fn ARGS; });                   \
  }

PROFAGENT_MPI_CALLS(PROFAGENT_MPI_WRAPPER)
PROFAGENT_MPI_RMA_CALLS(PROFAGENT_MPI_WRAPPER)
#undef PROFAGENT_MPI_WRAPPER

// ---- Completion of non-blocking calls -------------------------------------------------------
namespace profagent {
namespace {

// Request values read before a wait/test (which overwrites completed ones with
// MPI_REQUEST_NULL). Only the first kMax of a longer array are tracked; the others are emitted
// at MPI_Finalize without a completion time.
struct Snapshot {
  static constexpr int kMax = 256;
  uint64_t h[kMax];
  int n = 0;
  void Take(const void* reqs, int count) {
    n = (reqs == nullptr || count <= 0) ? 0 : (count < kMax ? count : kMax);
    const MpiAbi& abi = Abi();
    for (int i = 0; i < n; ++i) h[i] = abi.RequestAt(reqs, size_t(i));
  }
  void Complete(int i, uint64_t t, const void* status, uint64_t t_wait = 0) const {
    if (i >= 0 && i < n) profagent::Complete(h[i], t, status, t_wait);
  }
  // Every request of the call that is still pending was waited on from `t_wait`.
  void Waited(uint64_t t_wait) const {
    for (int i = 0; i < n; ++i) profagent::Waited(h[i], t_wait);
  }
};

inline bool AnyPending() { return g_requests.size() != 0; }

// The statuses a wait or test fills in: the caller's, or the agent's when the caller passed
// MPI_STATUS(ES)_IGNORE while calls are pending, so that a receive from MPI_ANY_SOURCE learns its
// sender (MPI_SOURCE). The caller, who reads no status, sees no difference.
struct Statuses {
  alignas(16) char own[Snapshot::kMax * kMaxStatusSize];
  void* p;
  Statuses(void* user, int n) : p(user) {
    const MpiAbi& abi = Abi();
    if (abi.StatusIgnored(user) && n > 0 && n <= Snapshot::kMax && AnyPending() &&
        abi.status_size <= kMaxStatusSize)
      p = own;
  }
  // The i-th status, nullptr when ignored.
  const void* At(int i) const {
    return Abi().StatusIgnored(p) ? nullptr
                                  : static_cast<const char*>(p) + size_t(i) * Abi().status_size;
  }
};

}  // namespace
}  // namespace profagent

#define PROFAGENT_COMPLETION_PROLOGUE(NAME, ...)                                                  \
  using namespace profagent;                                                                      \
  using Fn = decltype(&MPI_##NAME);                                                               \
  static const Real real = Resolve("PMPI_" #NAME, "MPI_" #NAME);                                  \
  const Fn fn = reinterpret_cast<Fn>(real.fn);                                                    \
  if (__builtin_expect(fn == nullptr, 0)) return MissingReal("PMPI_" #NAME);                      \
  HookGuard guard;                                                                                \
  if (!guard.outermost()) return fn(__VA_ARGS__);

// Receives with a status: one from MPI_ANY_SOURCE is numbered once its status names the sender.
PROFAGENT_EXPORT int MPI_Recv(void* buf, int count, H dt, int src, int tag, H comm,
                              void* status) {
  PROFAGENT_COMPLETION_PROLOGUE(Recv, buf, count, dt, src, tag, comm, status)
  return Recorded(real, kRecv, RecvFrom(count, dt, src, comm), status,
                  [&](void* st) { return fn(buf, count, dt, src, tag, comm, st); });
}

PROFAGENT_EXPORT int MPI_Sendrecv(const void* sbuf, int sc, H st, int dest, int stag, void* rbuf,
                                  int rc, H rt, int src, int rtag, H comm, void* status) {
  PROFAGENT_COMPLETION_PROLOGUE(Sendrecv, sbuf, sc, st, dest, stag, rbuf, rc, rt, src, rtag, comm,
                                status)
  return Recorded(real, kSend, Sendrecv(sc, st, rc, rt, dest, src, comm), status, [&](void* s) {
    return fn(sbuf, sc, st, dest, stag, rbuf, rc, rt, src, rtag, comm, s);
  });
}

PROFAGENT_EXPORT int MPI_Sendrecv_replace(void* buf, int count, H dt, int dest, int stag, int src,
                                          int rtag, H comm, void* status) {
  PROFAGENT_COMPLETION_PROLOGUE(Sendrecv_replace, buf, count, dt, dest, stag, src, rtag, comm,
                                status)
  return Recorded(real, kSend, Sendrecv(count, dt, count, dt, dest, src, comm), status,
                  [&](void* s) { return fn(buf, count, dt, dest, stag, src, rtag, comm, s); });
}

PROFAGENT_EXPORT int MPI_Wait(void* req, void* status) {
  PROFAGENT_COMPLETION_PROLOGUE(Wait, req, status)
  const bool pending = AnyPending() && req != nullptr;
  const uint64_t h = pending ? Abi().RequestAt(req, 0) : 0;
  Statuses st(status, 1);
  const uint64_t t0 = Now();
  const int rc = fn(req, st.p);
  const uint64_t t1 = Now();
  if (pending && rc == 0) Complete(h, t1, st.At(0), t0);
  EmitApi(real.api, t0, t1, rc);
  return rc;
}

PROFAGENT_EXPORT int MPI_Waitall(int count, void* reqs, void* statuses) {
  PROFAGENT_COMPLETION_PROLOGUE(Waitall, count, reqs, statuses)
  Snapshot s;
  if (AnyPending()) s.Take(reqs, count);
  Statuses st(statuses, count);
  const uint64_t t0 = Now();
  const int rc = fn(count, reqs, st.p);
  const uint64_t t1 = Now();
  if (rc == 0)
    for (int i = 0; i < s.n; ++i) s.Complete(i, t1, st.At(i), t0);
  EmitApi(real.api, t0, t1, rc);
  return rc;
}

PROFAGENT_EXPORT int MPI_Waitany(int count, void* reqs, int* index, void* status) {
  PROFAGENT_COMPLETION_PROLOGUE(Waitany, count, reqs, index, status)
  Snapshot s;
  if (AnyPending()) s.Take(reqs, count);
  Statuses st(status, 1);
  const uint64_t t0 = Now();
  const int rc = fn(count, reqs, index, st.p);
  const uint64_t t1 = Now();
  if (rc == 0 && index != nullptr) s.Complete(*index, t1, st.At(0), t0);
  if (rc == 0) s.Waited(t0);  // the others were waited on too
  EmitApi(real.api, t0, t1, rc);
  return rc;
}

PROFAGENT_EXPORT int MPI_Waitsome(int incount, void* reqs, int* outcount, int* indices,
                                  void* statuses) {
  PROFAGENT_COMPLETION_PROLOGUE(Waitsome, incount, reqs, outcount, indices, statuses)
  Snapshot s;
  if (AnyPending()) s.Take(reqs, incount);
  Statuses st(statuses, incount);
  const uint64_t t0 = Now();
  const int rc = fn(incount, reqs, outcount, indices, st.p);
  const uint64_t t1 = Now();
  if (rc == 0 && outcount != nullptr && indices != nullptr && *outcount != Abi().undefined)
    for (int i = 0; i < *outcount; ++i) s.Complete(indices[i], t1, st.At(i), t0);
  if (rc == 0) s.Waited(t0);
  EmitApi(real.api, t0, t1, rc);
  return rc;
}

// Test* are polled in loops: they are not recorded themselves, only the completions they report.
PROFAGENT_EXPORT int MPI_Test(void* req, int* flag, void* status) {
  PROFAGENT_COMPLETION_PROLOGUE(Test, req, flag, status)
  const bool pending = AnyPending() && req != nullptr;
  const uint64_t h = pending ? Abi().RequestAt(req, 0) : 0;
  Statuses st(status, 1);
  const uint64_t t0 = pending ? Now() : 0;
  const int rc = fn(req, flag, st.p);
  if (pending && rc == 0 && flag != nullptr) {
    if (*flag) {
      Complete(h, Now(), st.At(0), t0);
    } else {
      Waited(h, t0);
    }
  }
  return rc;
}

PROFAGENT_EXPORT int MPI_Testall(int count, void* reqs, int* flag, void* statuses) {
  PROFAGENT_COMPLETION_PROLOGUE(Testall, count, reqs, flag, statuses)
  Snapshot s;
  if (AnyPending()) s.Take(reqs, count);
  Statuses st(statuses, count);
  const uint64_t t0 = s.n > 0 ? Now() : 0;
  const int rc = fn(count, reqs, flag, st.p);
  if (rc == 0 && flag != nullptr && s.n > 0) {
    if (*flag) {
      const uint64_t t = Now();
      for (int i = 0; i < s.n; ++i) s.Complete(i, t, st.At(i), t0);
    } else {
      s.Waited(t0);
    }
  }
  return rc;
}

PROFAGENT_EXPORT int MPI_Testany(int count, void* reqs, int* index, int* flag, void* status) {
  PROFAGENT_COMPLETION_PROLOGUE(Testany, count, reqs, index, flag, status)
  Snapshot s;
  if (AnyPending()) s.Take(reqs, count);
  Statuses st(status, 1);
  const uint64_t t0 = s.n > 0 ? Now() : 0;
  const int rc = fn(count, reqs, index, flag, st.p);
  if (rc == 0 && flag != nullptr && s.n > 0) {
    if (*flag && index != nullptr) s.Complete(*index, Now(), st.At(0), t0);
    s.Waited(t0);
  }
  return rc;
}

PROFAGENT_EXPORT int MPI_Testsome(int incount, void* reqs, int* outcount, int* indices,
                                  void* statuses) {
  PROFAGENT_COMPLETION_PROLOGUE(Testsome, incount, reqs, outcount, indices, statuses)
  Snapshot s;
  if (AnyPending()) s.Take(reqs, incount);
  Statuses st(statuses, incount);
  const uint64_t t0 = s.n > 0 ? Now() : 0;
  const int rc = fn(incount, reqs, outcount, indices, st.p);
  if (rc == 0 && s.n > 0 && outcount != nullptr && indices != nullptr &&
      *outcount != Abi().undefined && *outcount > 0) {
    const uint64_t t = Now();
    for (int i = 0; i < *outcount; ++i) s.Complete(indices[i], t, st.At(i), t0);
  }
  if (rc == 0 && s.n > 0) s.Waited(t0);
  return rc;
}

// MPI_Cancel of a pending receive: a cancelled receive matches no send, so its number is given
// back when no later receive on the pair took one. Should the cancel fail (the receive completed
// after all), it is numbered anew at its completion, from its status (as from MPI_ANY_SOURCE).
// A completion whose status says cancelled is not recorded (Complete).
namespace profagent {
namespace {
void Cancelling(uint64_t handle) {
  PendingCall pc;
  if (!g_requests.Take(handle, &pc)) return;
  if (pc.recv && !pc.any_source && ReturnPeerSeq(pc.slot, pc.e.coll.peer, true, pc.e.coll.seq)) {
    pc.any_source = true;
    pc.e.coll.seq = kNoSeq;
  }
  PendingCall old;
  g_requests.Put(handle, pc, &old);
}
}  // namespace
}  // namespace profagent

PROFAGENT_EXPORT int MPI_Cancel(void* req) {
  PROFAGENT_COMPLETION_PROLOGUE(Cancel, req)
  const uint64_t h = AnyPending() && req != nullptr ? Abi().RequestAt(req, 0) : 0;
  const int rc = fn(req);
  if (rc == 0 && h != 0) Cancelling(h);
  return rc;
}

// A request seen complete by MPI_Request_get_status (which leaves it allocated) completed then.
PROFAGENT_EXPORT int MPI_Request_get_status(H req, int* flag, void* status) {
  PROFAGENT_COMPLETION_PROLOGUE(Request_get_status, req, flag, status)
  const bool pending = AnyPending();
  Statuses st(status, 1);
  const int rc = fn(req, flag, st.p);
  if (pending && rc == 0 && flag != nullptr && *flag) Complete(Abi().Key(req), Now(), st.At(0));
  return rc;
}

// ---- Matched probes --------------------------------------------------------------------------
// MPI_Mprobe / MPI_Improbe match a message and hand it out as an MPI_Message, received later by
// MPI_Mrecv / MPI_Imrecv. The match is the receive's place in its pair's order: it is numbered
// at the probe (from the status's source) and recorded at the receive.
namespace profagent {
namespace {
struct Matched {
  H comm;
  int32_t peer;
  uint32_t seq;
};
std::mutex g_matched_mu;
std::unordered_map<uint64_t, Matched>* g_matched = nullptr;  // message handle -> its match

// After a probe that matched (`message` written, `st` its status).
void Probed(H comm, const void* message, const void* st) {
  if (message == nullptr || st == nullptr || Abi().StatusIgnored(st)) return;
  Matched m{comm, kNoPeer, kNoSeq};
  m.seq = NumberFrom(SlotFor(comm), Abi().StatusSource(st, 0), &m.peer);  // none: MPI_PROC_NULL
  std::lock_guard<std::mutex> l(g_matched_mu);
  if (g_matched == nullptr) g_matched = new std::unordered_map<uint64_t, Matched>();
  (*g_matched)[Abi().RequestAt(message, 0)] = m;
}

// The match of `message` (read before the receive frees it); false when the probe was not seen.
bool TakeMatched(const void* message, Matched* out) {
  if (message == nullptr) return false;
  const uint64_t k = Abi().RequestAt(message, 0);
  std::lock_guard<std::mutex> l(g_matched_mu);
  if (g_matched == nullptr) return false;
  auto it = g_matched->find(k);
  if (it == g_matched->end()) return false;
  *out = it->second;
  g_matched->erase(it);
  return true;
}

// A matched receive of count x dt: recorded with the number its probe took.
template <typename Call>
int MatchedReceive(const Real& real, int count, H dt, void* message, void* request, Call call) {
  Matched m;
  const bool known = TakeMatched(message, &m);
  const bool recording = Recording();
  const uint64_t t0 = recording ? Now() : 0;
  const int rc = call();
  const uint64_t t1 = recording ? Now() : 0;
  if (known && recording) {
    Info info = Nb(Same(count, dt, nullptr, m.peer, m.comm), request);
    Finish(real.api, m.seq, info, t0, t1, rc);
  }
  return rc;
}
}  // namespace
}  // namespace profagent

PROFAGENT_EXPORT int MPI_Mprobe(int src, int tag, H comm, void* message, void* status) {
  PROFAGENT_COMPLETION_PROLOGUE(Mprobe, src, tag, comm, message, status)
  alignas(16) char own[kMaxStatusSize];
  void* st = ReadableStatus(status, own);
  const int rc = fn(src, tag, comm, message, st);
  if (rc == 0) Probed(comm, message, st);
  return rc;
}

PROFAGENT_EXPORT int MPI_Improbe(int src, int tag, H comm, int* flag, void* message,
                                 void* status) {
  PROFAGENT_COMPLETION_PROLOGUE(Improbe, src, tag, comm, flag, message, status)
  alignas(16) char own[kMaxStatusSize];
  void* st = ReadableStatus(status, own);
  const int rc = fn(src, tag, comm, flag, message, st);
  if (rc == 0 && flag != nullptr && *flag) Probed(comm, message, st);
  return rc;
}

PROFAGENT_EXPORT int MPI_Mrecv(void* buf, int count, H dt, void* message, void* status) {
  PROFAGENT_COMPLETION_PROLOGUE(Mrecv, buf, count, dt, message, status)
  return MatchedReceive(real, count, dt, message, nullptr,
                        [&] { return fn(buf, count, dt, message, status); });
}

PROFAGENT_EXPORT int MPI_Imrecv(void* buf, int count, H dt, void* message, void* req) {
  PROFAGENT_COMPLETION_PROLOGUE(Imrecv, buf, count, dt, message, req)
  return MatchedReceive(real, count, dt, message, req,
                        [&] { return fn(buf, count, dt, message, req); });
}

// ---- Communicator lifetime -------------------------------------------------------------------
// Communicators are registered when created, not at first use: a communicator's unique id counts
// the communicators over the same members this process made before it, and only creation is
// the same on every member (one rank may never use a communicator another one does).
namespace profagent {
namespace {
// A creation collective over `parent` (every member calls it, in the same order): its number
// on the parent, taken before the call, also where the result is MPI_COMM_NULL (a split's
// MPI_UNDEFINED color), so that the count stays equal on every member.
struct Creation {
  const CommSlot* parent = nullptr;
  uint32_t ordinal = 0;
};
Creation BeginCreation(H parent) {
  Creation c;
  CommSlot* s = SlotFor(parent);
  if (s != nullptr) {
    c.parent = s;
    c.ordinal = s->created.fetch_add(1, std::memory_order_relaxed);
  }
  return c;
}

void Created(int rc, void* newcomm, const Creation& c = Creation()) {
  if (rc != 0 || newcomm == nullptr) return;
  const uint64_t k = Abi().RequestAt(newcomm, 0);
  if (k == 0 || k == Abi().Key(Abi().comm_null)) return;
  if (c.parent == nullptr) {
    SlotFor(HandleOut(k));
  } else if (g_comms.Find(k) == nullptr) {
    AddComm(HandleOut(k), HandleOut(k), c.parent, c.ordinal);
  }
}
}  // namespace
}  // namespace profagent

extern "C" {
int MPI_Comm_dup(H, void*);
int MPI_Comm_dup_with_info(H, H, void*);
int MPI_Comm_split(H, int, int, void*);
int MPI_Comm_split_type(H, int, int, H, void*);
int MPI_Comm_create(H, H, void*);
int MPI_Comm_create_group(H, H, int, void*);
int MPI_Cart_create(H, int, const int*, const int*, int, void*);
int MPI_Cart_sub(H, const int*, void*);
int MPI_Graph_create(H, int, const int*, const int*, int, void*);
int MPI_Dist_graph_create(H, int, const int*, const int*, const int*, const int*, H, int, void*);
int MPI_Dist_graph_create_adjacent(H, int, const int*, const int*, int, const int*, const int*, H,
                                   int, void*);
int MPI_Intercomm_merge(H, int, void*);
int MPI_Intercomm_create(H, int, H, int, int, void*);
}

// PARENT: the communicator the creation is collective over (all of its members call it), or
// nullptr (MPI_Comm_create_group: a subgroup only; MPI_Intercomm_create: two groups).
#define PROFAGENT_COMM_CREATOR(NAME, PARAMS, ARGS, OUT, PARENT)                                 \
  PROFAGENT_EXPORT int MPI_##NAME PARAMS {                                                      \
    PROFAGENT_COMPLETION_PROLOGUE(NAME, PROFAGENT_ARGS ARGS)                                    \
    const H parent_comm = PARENT;                                                               \
    const Creation creation = parent_comm != nullptr ? BeginCreation(parent_comm) : Creation(); \
    const int rc = fn ARGS;                                                                     \
    Created(rc, OUT, creation);                                                                 \
    return rc;                                                                                  \
  }
#define PROFAGENT_ARGS(...) __VA_ARGS__
PROFAGENT_COMM_CREATOR(Comm_dup, (H comm, void* out), (comm, out), out, comm)
PROFAGENT_COMM_CREATOR(Comm_dup_with_info, (H comm, H info, void* out), (comm, info, out), out,
                       comm)
PROFAGENT_COMM_CREATOR(Comm_split, (H comm, int color, int key, void* out), (comm, color, key, out),
                       out, comm)
PROFAGENT_COMM_CREATOR(Comm_split_type, (H comm, int type, int key, H info, void* out),
                       (comm, type, key, info, out), out, comm)
PROFAGENT_COMM_CREATOR(Comm_create, (H comm, H group, void* out), (comm, group, out), out, comm)
PROFAGENT_COMM_CREATOR(Comm_create_group, (H comm, H group, int tag, void* out),
                       (comm, group, tag, out), out, nullptr)
PROFAGENT_COMM_CREATOR(Cart_create,
                       (H comm, int ndims, const int* dims, const int* periods, int reorder,
                        void* out),
                       (comm, ndims, dims, periods, reorder, out), out, comm)
PROFAGENT_COMM_CREATOR(Cart_sub, (H comm, const int* remain, void* out), (comm, remain, out), out,
                       comm)
PROFAGENT_COMM_CREATOR(Graph_create,
                       (H comm, int nnodes, const int* index, const int* edges, int reorder,
                        void* out),
                       (comm, nnodes, index, edges, reorder, out), out, comm)
PROFAGENT_COMM_CREATOR(Dist_graph_create,
                       (H comm, int n, const int* sources, const int* degrees, const int* dests,
                        const int* weights, H info, int reorder, void* out),
                       (comm, n, sources, degrees, dests, weights, info, reorder, out), out, comm)
PROFAGENT_COMM_CREATOR(
    Dist_graph_create_adjacent,
    (H comm, int indegree, const int* sources, const int* sweights, int outdegree, const int* dests,
     const int* dweights, H info, int reorder, void* out),
    (comm, indegree, sources, sweights, outdegree, dests, dweights, info, reorder, out), out, comm)
PROFAGENT_COMM_CREATOR(Intercomm_merge, (H comm, int high, void* out), (comm, high, out), out, comm)
PROFAGENT_COMM_CREATOR(Intercomm_create,
                       (H local, int local_leader, H peer, int remote_leader, int tag, void* out),
                       (local, local_leader, peer, remote_leader, tag, out), out, nullptr)
#undef PROFAGENT_COMM_CREATOR
#undef PROFAGENT_ARGS

// MPI_Comm_idup: the new communicator may not be queried before the request completes, but it
// is created now (in the same order on every member): registered now, as a copy of `comm`.
namespace profagent {
namespace {
void Duplicating(int rc, H comm, void* out) {
  if (rc != 0 || out == nullptr) return;
  const uint64_t k = Abi().RequestAt(out, 0);
  if (k == 0 || k == Abi().Key(Abi().comm_null) || g_comms.Find(k) != nullptr) return;
  const Creation c = BeginCreation(comm);
  AddComm(HandleOut(k), comm, c.parent, c.ordinal);
}
}  // namespace
}  // namespace profagent

PROFAGENT_EXPORT int MPI_Comm_idup(H comm, void* out, void* req) {
  PROFAGENT_COMPLETION_PROLOGUE(Comm_idup, comm, out, req)
  const int rc = fn(comm, out, req);
  Duplicating(rc, comm, out);
  return rc;
}

PROFAGENT_EXPORT int MPI_Comm_idup_with_info(H comm, H info, void* out, void* req) {
  PROFAGENT_COMPLETION_PROLOGUE(Comm_idup_with_info, comm, info, out, req)
  const int rc = fn(comm, info, out, req);
  Duplicating(rc, comm, out);
  return rc;
}

PROFAGENT_EXPORT int MPI_Comm_free(void* comm) {
  PROFAGENT_COMPLETION_PROLOGUE(Comm_free, comm)
  const uint64_t key = comm != nullptr ? Abi().RequestAt(comm, 0) : 0;  // handle-sized read
  const int rc = fn(comm);
  if (rc == 0 && key != 0) g_comms.Remove(key);
  return rc;
}

// ---- Window lifetime ---------------------------------------------------------------------------
// Window creation and MPI_Win_free are collectives: creation over the communicator (numbered on
// it), freeing over the window's members (numbered on the window).
namespace profagent {
namespace {
std::map<uint64_t, uint32_t>* g_windows_made = nullptr;  // communicator id -> windows made on it

void WinCreated(int rc, const Info& on, void* win) {
  if (rc != 0 || win == nullptr || on.slot == nullptr) return;
  const uint64_t k = Abi().RequestAt(win, 0);
  if (k == 0) return;
  uint32_t ordinal;
  {
    std::lock_guard<std::mutex> l(g_member_mu);
    if (g_windows_made == nullptr) g_windows_made = new std::map<uint64_t, uint32_t>();
    ordinal = (*g_windows_made)[on.slot->uid_hash]++;
  }
  const uint64_t hash = SplitHash(on.slot->uid_hash, 0, ordinal, /*salt=*/5);
  g_comms.Insert(k, on.slot->rank, on.slot->size, hash);
  RegisterComm(hash, kLibMpi, k, on.slot->rank, on.slot->size, UidString("mpi-win", hash), -1, 0);
}

// A collective call with no data on `info`'s communicator or window, then `after(rc)`.
template <typename Call, typename After>
int RecordedCollective(const Real& real, const Info& info, Call call, After after) {
  const uint32_t seq = Seq(info, kColl);
  const uint64_t t0 = Now();
  const int rc = call();
  const uint64_t t1 = Now();
  after(rc);
  if (Recording()) Finish(real.api, seq, info, t0, t1, rc);
  return rc;
}
}  // namespace
}  // namespace profagent

extern "C" {
int MPI_Win_create(void*, intptr_t, int, H, H, void*);
int MPI_Win_allocate(intptr_t, int, H, H, void*, void*);
int MPI_Win_allocate_shared(intptr_t, int, H, H, void*, void*);
int MPI_Win_create_dynamic(H, H, void*);
int MPI_Win_free(void*);
}

#define PROFAGENT_WIN_CREATOR(NAME, PARAMS, ARGS)                                     \
  PROFAGENT_EXPORT int MPI_##NAME PARAMS {                                            \
    PROFAGENT_COMPLETION_PROLOGUE(NAME, PROFAGENT_ARGS ARGS)                          \
    const Info on = NoData(comm);                                                     \
    return RecordedCollective(                                                        \
        real, on, [&] { return fn ARGS; }, [&](int rc) { WinCreated(rc, on, win); }); \
  }
#define PROFAGENT_ARGS(...) __VA_ARGS__
PROFAGENT_WIN_CREATOR(Win_create, (void* base, intptr_t size, int unit, H info, H comm, void* win),
                      (base, size, unit, info, comm, win))
PROFAGENT_WIN_CREATOR(Win_allocate,
                      (intptr_t size, int unit, H info, H comm, void* base, void* win),
                      (size, unit, info, comm, base, win))
PROFAGENT_WIN_CREATOR(Win_allocate_shared,
                      (intptr_t size, int unit, H info, H comm, void* base, void* win),
                      (size, unit, info, comm, base, win))
PROFAGENT_WIN_CREATOR(Win_create_dynamic, (H info, H comm, void* win), (info, comm, win))
#undef PROFAGENT_WIN_CREATOR
#undef PROFAGENT_ARGS

PROFAGENT_EXPORT int MPI_Win_free(void* win) {
  PROFAGENT_COMPLETION_PROLOGUE(Win_free, win)
  const uint64_t key = win != nullptr ? Abi().RequestAt(win, 0) : 0;  // handle-sized read
  return RecordedCollective(
      real, Win(HandleOut(key), kNoPeer), [&] { return fn(win); },
      [&](int rc) {
        if (rc == 0 && key != 0) g_comms.Remove(key);
      });
}

// ---- Datatype lifetime ----------------------------------------------------------------------
// A freed named datatype's handle can come back as another datatype: forget its cached size.
PROFAGENT_EXPORT int MPI_Type_free(void* type) {
  PROFAGENT_COMPLETION_PROLOGUE(Type_free, type)
  const uint64_t key = type != nullptr ? Abi().RequestAt(type, 0) : 0;  // handle-sized read
  const int rc = fn(type);
  if (rc == 0 && key != 0) g_types.Forget(key);
  return rc;
}

// ---- Persistent requests ---------------------------------------------------------------------
// MPI_Send_init / Bsend_init / Ssend_init / Rsend_init / Recv_init make an inactive request that
// each MPI_Start / MPI_Startall starts: every start is one transfer, recorded like the matching
// non-blocking call (numbered on its ordered pair of ranks, timed from the start to the
// MPI_Wait*/Test* that saw it complete), under the init function's name ("Send_init",
// "Recv_init"). The request keeps its handle across starts; MPI_Request_free forgets it.
namespace profagent {
namespace {

struct Persistent {
  Info info;
  Kind kind;
  uint16_t api;  // of the init function
};
std::mutex g_persist_mu;
std::map<uint64_t, Persistent>* g_persist = nullptr;  // handle -> template; leaked (exit order)

void NotePersistent(const void* req, const Info& info, Kind kind, uint16_t api) {
  const uint64_t h = Abi().RequestAt(req, 0);
  if (h == Abi().request_null) return;
  std::lock_guard<std::mutex> lock(g_persist_mu);
  if (g_persist == nullptr) g_persist = new std::map<uint64_t, Persistent>();
  (*g_persist)[h] = Persistent{info, kind, api};
}

bool FindPersistent(uint64_t h, Persistent* out) {
  std::lock_guard<std::mutex> lock(g_persist_mu);
  if (g_persist == nullptr) return false;
  auto it = g_persist->find(h);
  if (it == g_persist->end()) return false;
  *out = it->second;
  return true;
}

// `n` requests at `reqs` were started in [t0, t1] with result `rc`.
void Started(void* reqs, int n, uint64_t t0, uint64_t t1, int rc) {
  const MpiAbi& abi = Abi();
  for (int i = 0; i < n; ++i) {
    Persistent tpl;
    if (!FindPersistent(abi.RequestAt(reqs, size_t(i)), &tpl)) continue;
    const uint32_t seq = Seq(tpl.info, tpl.kind);  // numbered even while not recording
    if (!Recording()) continue;
    Info info = tpl.info;
    info.request = static_cast<char*>(reqs) + size_t(i) * abi.request_size;
    Finish(tpl.api, seq, info, t0, t1, rc);
  }
}

}  // namespace
}  // namespace profagent

#define PROFAGENT_PERSISTENT_INIT(NAME, KIND, INFO)                                               \
  PROFAGENT_EXPORT int MPI_##NAME(const void* buf, int count, H dt, int peer, int tag, H comm,  \
                                  void* req) {                                                    \
    PROFAGENT_COMPLETION_PROLOGUE(NAME, buf, count, dt, peer, tag, comm, req)                     \
    const int rc = fn(buf, count, dt, peer, tag, comm, req);                                      \
    if (rc == 0 && req != nullptr) NotePersistent(req, INFO, KIND, real.api);                     \
    return rc;                                                                                    \
  }
// Declared first: the prologue takes the address of the exported function.
extern "C" {
int MPI_Send_init(const void*, int, H, int, int, H, void*);
int MPI_Bsend_init(const void*, int, H, int, int, H, void*);
int MPI_Ssend_init(const void*, int, H, int, int, H, void*);
int MPI_Rsend_init(const void*, int, H, int, int, H, void*);
int MPI_Recv_init(const void*, int, H, int, int, H, void*);
int MPI_Start(void*);
int MPI_Startall(int, void*);
int MPI_Request_free(void*);
}
PROFAGENT_PERSISTENT_INIT(Send_init, kSend, SendOnly(count, dt, peer, comm))
PROFAGENT_PERSISTENT_INIT(Bsend_init, kSend, SendOnly(count, dt, peer, comm))
PROFAGENT_PERSISTENT_INIT(Ssend_init, kSend, SendOnly(count, dt, peer, comm))
PROFAGENT_PERSISTENT_INIT(Rsend_init, kSend, SendOnly(count, dt, peer, comm))
PROFAGENT_PERSISTENT_INIT(Recv_init, kRecv, RecvFrom(count, dt, peer, comm))
#undef PROFAGENT_PERSISTENT_INIT

PROFAGENT_EXPORT int MPI_Start(void* req) {
  PROFAGENT_COMPLETION_PROLOGUE(Start, req)
  const uint64_t t0 = Now();
  const int rc = fn(req);
  const uint64_t t1 = Now();
  if (req != nullptr) Started(req, 1, t0, t1, rc);
  return rc;
}

PROFAGENT_EXPORT int MPI_Startall(int count, void* reqs) {
  PROFAGENT_COMPLETION_PROLOGUE(Startall, count, reqs)
  const uint64_t t0 = Now();
  const int rc = fn(count, reqs);
  const uint64_t t1 = Now();
  if (reqs != nullptr && count > 0) Started(reqs, count, t0, t1, rc);
  return rc;
}

PROFAGENT_EXPORT int MPI_Request_free(void* req) {
  PROFAGENT_COMPLETION_PROLOGUE(Request_free, req)
  const uint64_t h = req != nullptr ? Abi().RequestAt(req, 0) : 0;
  const int rc = fn(req);
  if (rc == 0 && h != 0) {
    std::lock_guard<std::mutex> lock(g_persist_mu);
    if (g_persist != nullptr) g_persist->erase(h);
  }
  return rc;
}

// ---- Init, finalize, ranks and clock alignment ------------------------------------------------
namespace profagent {
namespace {

H g_sync_comm = nullptr;  // PMPI_Comm_dup of world for the ping-pong; touched at init/finalize

bool EnvOff(const char* name) {
  const char* v = getenv(name);
  if (v == nullptr) return false;
  return !strcmp(v, "0") || !strcasecmp(v, "false") || !strcasecmp(v, "off") ||
         !strcasecmp(v, "no");
}

int EnvInt(const char* name) {
  const char* v = getenv(name);
  if (v == nullptr || *v == '\0') return -1;
  char* end = nullptr;
  const long x = strtol(v, &end, 10);
  return (*end == '\0' && x >= 0 && x < (1 << 30)) ? int(x) : -1;
}

bool PingSend(void* ctx, int peer, uint64_t v) {
  return P().send(&v, int(sizeof(v)), Abi().dt_byte, peer, kClockTag, static_cast<H>(ctx)) == 0;
}
bool PingRecv(void* ctx, int peer, uint64_t* v) {
  alignas(16) char status[256];  // larger than MPI_Status of any implementation
  return P().recv(v, int(sizeof(*v)), Abi().dt_byte, peer, kClockTag, static_cast<H>(ctx),
                  status) == 0;
}
uint64_t PingNow(void*) { return MonotonicNs(); }

void MeasureClockOffset(H comm) {
  const Pmpi& p = P();
  int rank = -1, size = 0;
  if (p.comm_rank(comm, &rank) != 0 || p.comm_size(comm, &size) != 0 || size < 2) return;
  const PingTransport t{comm, PingSend, PingRecv, PingNow};
  if (rank == 0) {
    if (ServePings(t, size, kClockRounds))
      RecordClockOffset(0, 0, "mpi-pingpong", kClockRounds);  // rank 0 is the reference
    return;
  }
  const OffsetEstimate e = MeasureOffsetToRank0(t, kClockRounds);
  if (e.valid) RecordClockOffset(e.offset_ns, e.error_ns, "mpi-pingpong", e.rounds);
}

// Rank within the node from a shared-memory split of `comm` (collective over it), -1 on failure.
int NodeLocalRank(H comm) {
  const MpiAbi& abi = Abi();
  const Pmpi& p = P();
  if (p.comm_split_type == nullptr || p.comm_free == nullptr) return -1;
  uint64_t node = 0;
  if (p.comm_split_type(comm, abi.comm_type_shared, 0, abi.info_null,
                        reinterpret_cast<H*>(&node)) != 0)
    return -1;
  H node_comm = HandleOut(node);
  int local = -1;
  if (p.comm_rank(node_comm, &local) != 0) local = -1;
  p.comm_free(&node_comm);
  return local;
}

// Collective over world: every rank running this hook takes part, so ranks disagreeing on
// PROFAGENT_CLOCK_SYNC agree on "off" instead of deadlocking, and ranks agree on whether the
// launcher gave every one of them its local rank (else all derive it from a shared-memory split).
// *local_rank: in, from the environment (-1 = none); out, possibly from the split.
void InitCollectives(int* local_rank) {
  const MpiAbi& abi = Abi();
  const Pmpi& p = P();
  if (!p.comm_dup || !p.comm_free || !p.allreduce || !p.send || !p.recv || !abi.dt_byte ||
      !abi.dt_int || !abi.op_min)
    return;
  uint64_t dup = 0;
  if (p.comm_dup(abi.comm_world, reinterpret_cast<H*>(&dup)) != 0) return;
  H comm = HandleOut(dup);
  // Config().mpi_clock_sync is PROFAGENT_CLOCK_SYNC as parsed by the core (defaults when the
  // agent is disabled by a bad setting); the env check covers a core that never parsed it.
  const int want = (GetConfig().mpi_clock_sync && !EnvOff("PROFAGENT_CLOCK_SYNC")) ? 1 : 0;
  int mine[2] = {want, *local_rank >= 0 ? 1 : 0}, all[2] = {0, 0};
  if (p.allreduce(mine, all, 2, abi.dt_int, abi.op_min, comm) != 0) {
    p.comm_free(&comm);
    return;
  }
  if (all[1] == 0) *local_rank = NodeLocalRank(comm);
  if (all[0] == 0) {
    p.comm_free(&comm);
    return;
  }
  g_sync_comm = comm;
  MeasureClockOffset(comm);
}

void AfterInit() {
  static std::once_flag once;
  std::call_once(once, [] {
    const MpiAbi& abi = Abi();
    const Pmpi& p = P();
    int rank = -1, size = 0;
    if (p.comm_rank == nullptr || p.comm_rank(abi.comm_world, &rank) != 0) rank = -1;
    if (p.comm_size == nullptr || p.comm_size(abi.comm_world, &size) != 0) size = 0;
    int local = -1;
    for (const char* v : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "PMI_LOCAL_RANK",
                          "PMIX_LOCAL_RANK", "MV2_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"}) {
      local = EnvInt(v);
      if (local >= 0) break;
    }
    SlotFor(abi.comm_world);  // registers "world"
    // PROFAGENT_ENABLE=0: the agent stays out of the application's MPI entirely.
    if (!EnvOff("PROFAGENT_ENABLE")) InitCollectives(&local);
    if (rank >= 0 && size > 0) SetRankInfo(rank, local, size, "MPI", 3);
  });
}

void BeforeFinalize() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (g_sync_comm != nullptr) {
      MeasureClockOffset(g_sync_comm);
      P().comm_free(&g_sync_comm);
      g_sync_comm = nullptr;
    }
    const size_t n = g_requests.Drain([](uint64_t, const PendingCall& pc) { EmitPending(pc); });
    if (n != 0)
      AddNote("info", std::to_string(n) +
                          " non-blocking MPI calls without a completion seen in MPI_Wait*/Test*");
  });
}

}  // namespace
}  // namespace profagent

PROFAGENT_EXPORT int MPI_Init(int* argc, char*** argv) {
  PROFAGENT_COMPLETION_PROLOGUE(Init, argc, argv)
  const uint64_t t0 = Now();
  YieldSignalHandlers();  // Open MPI's crash handlers go where the default is
  const int rc = fn(argc, argv);
  RetakeSignalHandlers();
  const uint64_t t1 = Now();
  if (rc == 0) AfterInit();
  EmitApi(real.api, t0, t1, rc);
  return rc;
}

PROFAGENT_EXPORT int MPI_Init_thread(int* argc, char*** argv, int required, int* provided) {
  PROFAGENT_COMPLETION_PROLOGUE(Init_thread, argc, argv, required, provided)
  const uint64_t t0 = Now();
  YieldSignalHandlers();
  const int rc = fn(argc, argv, required, provided);
  RetakeSignalHandlers();
  const uint64_t t1 = Now();
  if (rc == 0) AfterInit();
  EmitApi(real.api, t0, t1, rc);
  return rc;
}

// MPI_Abort ends the job (Open MPI: this process with _exit, the others killed by mpirun): the
// file is finished first with a reason that says so (the report warns), instead of a plain
// "_exit" footer.
PROFAGENT_EXPORT int MPI_Abort(H comm, int errorcode) {
  using namespace profagent;  // NOLINT
  using Fn = decltype(&MPI_Abort);
  static const Real real = Resolve("PMPI_Abort", "MPI_Abort");
  const Fn fn = reinterpret_cast<Fn>(real.fn);
  if (__builtin_expect(fn == nullptr, 0)) return MissingReal("PMPI_Abort");
  static char reason[48];
  snprintf(reason, sizeof(reason), "MPI_Abort (errorcode %d)", errorcode);
  FinishProfileNow(reason);
  return fn(comm, errorcode);
}

PROFAGENT_EXPORT int MPI_Finalize(void) {
  PROFAGENT_COMPLETION_PROLOGUE(Finalize)
  BeforeFinalize();
  const uint64_t t0 = Now();
  const int rc = fn();
  const uint64_t t1 = Now();
  EmitApi(real.api, t0, t1, rc);
  return rc;
}

// ---- Fortran bindings ------------------------------------------------------------------------
// Open MPI's Fortran library (libmpi_mpifh: mpif.h and `use mpi`) implements mpi_send_ (and its
// aliases mpi_send, mpi_send__, MPI_SEND) on PMPI_Send directly, and the mpi_f08 module's
// mpi_send_f08_ calls ompi_send_f, the same function: the C interposers above never see these
// calls, nor MPI_Init. The agent interposes those names too. Handles are converted with
// PMPI_*_f2c and the call is described by the same Info as its C form; the real Fortran function
// (looked up under the name called) makes it. An MPI whose Fortran functions call the C MPI_*
// ones (MPICH) is recorded once: the C interposer then runs nested (HookGuard).
// Covered: MPI_Init, Init_thread, Finalize; blocking and non-blocking point-to-point and
// collectives; Wait/Test and their any/all/some forms; the communicator creators and
// MPI_Comm_free. Arguments are pointers (MPI_Fint*, buffers as addresses), ierr last.
namespace profagent {
namespace {

using F = int;  // MPI_Fint: a default Fortran INTEGER
constexpr int kMaxFStatusInts = 8;  // MPI_STATUS_SIZE: sizeof(MPI_Status) / sizeof(MPI_Fint)

struct Fortran {
  H (*comm_f2c)(F) = nullptr;
  H (*type_f2c)(F) = nullptr;
  H (*op_f2c)(F) = nullptr;
  H (*request_f2c)(F) = nullptr;
  int (*status_f2c)(const F*, void*) = nullptr;
  // Open MPI's Fortran sentinels: addresses of common blocks, under each name mangling.
  const void* in_place[4] = {};
  const void* status_ignore[4] = {};
  const void* statuses_ignore[4] = {};
  static bool Is(const void* p, const void* const (&set)[4]) {
    for (const void* s : set)
      if (s != nullptr && s == p) return true;
    return false;
  }
};

const Fortran& Fort() {
  static const Fortran f = [] {
    Fortran q;
    q.comm_f2c = reinterpret_cast<decltype(q.comm_f2c)>(FindPmpi("PMPI_Comm_f2c"));
    q.type_f2c = reinterpret_cast<decltype(q.type_f2c)>(FindPmpi("PMPI_Type_f2c"));
    q.op_f2c = reinterpret_cast<decltype(q.op_f2c)>(FindPmpi("PMPI_Op_f2c"));
    q.request_f2c = reinterpret_cast<decltype(q.request_f2c)>(FindPmpi("PMPI_Request_f2c"));
    q.status_f2c = reinterpret_cast<decltype(q.status_f2c)>(FindPmpi("PMPI_Status_f2c"));
    const char* kSuffix[4] = {"_", "", "__", ""};
    for (int i = 0; i < 4; ++i) {
      auto sym = [&](const char* base) {
        std::string s = i == 3 ? base : std::string(base) + kSuffix[i];
        if (i == 3)
          for (char& c : s) c = char(std::toupper(static_cast<unsigned char>(c)));
        return dlsym(RTLD_DEFAULT, s.c_str());
      };
      q.in_place[i] = sym("mpi_fortran_in_place");
      q.status_ignore[i] = sym("mpi_fortran_status_ignore");
      q.statuses_ignore[i] = sym("mpi_fortran_statuses_ignore");
    }
    return q;
  }();
  return f;
}

inline H Conv(H (*f2c)(F), const F* h) {
  if (f2c == nullptr || h == nullptr) return nullptr;
  const uint64_t v = reinterpret_cast<uint64_t>(f2c(*h));
  return HandleOut(v);  // MPICH's f2c returns an int: keep its handle bits
}
inline H FComm(const F* h) { return Conv(Fort().comm_f2c, h); }
inline H FType(const F* h) { return Conv(Fort().type_f2c, h); }
inline H FOp(const F* h) { return Conv(Fort().op_f2c, h); }
inline uint64_t FRequest(const F* h) { return Abi().Key(Conv(Fort().request_f2c, h)); }
inline int FInt(const F* v) { return v != nullptr ? *v : 0; }
// A buffer argument: the Fortran MPI_IN_PLACE is the C one.
inline const void* FBuf(const void* b) {
  return Fortran::Is(b, Fort().in_place) ? static_cast<const void*>(Abi().in_place) : b;
}
inline bool FStatusIgnored(const F* s) {
  return s == nullptr || Fortran::Is(s, Fort().status_ignore) ||
         Fortran::Is(s, Fort().statuses_ignore);
}
inline size_t FStatusInts() { return Abi().status_size / sizeof(F); }

// The Fortran function `sym` (its alias in the Fortran library), under the C call's API name.
Real ResolveFortran(const char* sym, const char* pname, const char* name) {
  Real r = Resolve(pname, name);
  r.fn = dlsym(RTLD_NEXT, sym);
  return r;
}

void FMissing(const char* sym, F* ierr) {
  const int rc = MissingReal(sym);
  if (ierr != nullptr) *ierr = rc;
}

// A Fortran call described by `info`: `call(fstatus)` makes it, given the Fortran status to
// fill (for a receive from MPI_ANY_SOURCE, the agent's own when the caller ignores it). `freq`:
// its Fortran request (non-blocking calls), converted once the call returns.
template <typename Call>
void FRecorded(const Real& real, Kind kind, Info info, F* ierr, F* freq, F* fstatus, Call call) {
  uint64_t creq = 0;
  if (freq != nullptr) info = Nb(info, &creq);
  Recorded(real, kind, info, nullptr, [&](void* cst) {
    F own[kMaxFStatusInts];
    F* fst = fstatus;
    if (cst != nullptr && FStatusIgnored(fstatus) && FStatusInts() <= kMaxFStatusInts) fst = own;
    call(fst);
    const int rc = ierr != nullptr ? *ierr : 0;
    if (rc == 0 && freq != nullptr) creq = FRequest(freq);
    if (rc == 0 && cst != nullptr && !FStatusIgnored(fst) && Fort().status_f2c != nullptr)
      Fort().status_f2c(fst, cst);
    return rc;
  });
}

// Fortran MPI_Wait*/Test*: the requests' C handles, read before the call frees them, and the
// completed ones' statuses (the agent's own when the caller ignores them) converted to C.
struct FCompletion {
  Snapshot s;
  F own[Snapshot::kMax * kMaxFStatusInts];
  F* fst;
  FCompletion(const F* reqs, int count, F* statuses) : fst(statuses) {
    s.n = 0;
    if (!AnyPending() || reqs == nullptr || count <= 0) return;
    s.n = count < Snapshot::kMax ? count : Snapshot::kMax;
    for (int i = 0; i < s.n; ++i) s.h[i] = FRequest(&reqs[i]);
    if (FStatusIgnored(statuses) && FStatusInts() <= kMaxFStatusInts) fst = own;
  }
  // Request i completed at t, its status the j-th.
  void Complete(int i, int j, uint64_t t) const {
    alignas(16) char c[kMaxStatusSize];
    const void* st = nullptr;
    if (!FStatusIgnored(fst) && Fort().status_f2c != nullptr &&
        Fort().status_f2c(fst + size_t(j) * FStatusInts(), c) == 0)
      st = c;
    s.Complete(i, t, st);
  }
};

// Fortran communicator creators: the new communicator, once the call returned.
void FCreated(const F* ierr, const F* newcomm) {
  if (ierr != nullptr && *ierr != 0) return;
  const H c = FComm(newcomm);
  uint64_t word = reinterpret_cast<uint64_t>(c);
  Created(0, &word);
}

}  // namespace
}  // namespace profagent

#define PROFAGENT_UNPAREN(...) __VA_ARGS__

// Five exported names per Fortran function; each calls the real function of the same name.
#define PROFAGENT_F_ENTRY(SYM, NAME, PARAMS, ARGS)                                               \
  PROFAGENT_EXPORT void SYM PARAMS {                                                             \
    static const profagent::Real real =                                                          \
        profagent::ResolveFortran(#SYM, "PMPI_" #NAME, "MPI_" #NAME);                            \
    profagent::F##NAME(real, #SYM, PROFAGENT_UNPAREN ARGS);                                      \
  }
#define PROFAGENT_F_ENTRIES(NAME, lname, UNAME, PARAMS, ARGS) \
  PROFAGENT_F_ENTRY(mpi_##lname##_, NAME, PARAMS, ARGS)       \
  PROFAGENT_F_ENTRY(mpi_##lname, NAME, PARAMS, ARGS)          \
  PROFAGENT_F_ENTRY(mpi_##lname##__, NAME, PARAMS, ARGS)      \
  PROFAGENT_F_ENTRY(MPI_##UNAME, NAME, PARAMS, ARGS)          \
  PROFAGENT_F_ENTRY(ompi_##lname##_f, NAME, PARAMS, ARGS)

// Point-to-point and collectives: X(Name, lname, UNAME, Kind, (Fortran params), (args),
// Info expression, request, status). Fortran params end with ierr.
using profagent::F;
#define PROFAGENT_F_CALLS(X)                                                                      \
  X(Send, send, SEND, kSend, (void* b, F* n, F* dt, F* dest, F* tag, F* comm, F* ierr),           \
    (b, n, dt, dest, tag, comm, ierr), SendOnly(FInt(n), FType(dt), FInt(dest), FComm(comm)),     \
    nullptr, nullptr)                                                                             \
  X(Ssend, ssend, SSEND, kSend, (void* b, F* n, F* dt, F* dest, F* tag, F* comm, F* ierr),        \
    (b, n, dt, dest, tag, comm, ierr), SendOnly(FInt(n), FType(dt), FInt(dest), FComm(comm)),     \
    nullptr, nullptr)                                                                             \
  X(Bsend, bsend, BSEND, kSend, (void* b, F* n, F* dt, F* dest, F* tag, F* comm, F* ierr),        \
    (b, n, dt, dest, tag, comm, ierr), SendOnly(FInt(n), FType(dt), FInt(dest), FComm(comm)),     \
    nullptr, nullptr)                                                                             \
  X(Rsend, rsend, RSEND, kSend, (void* b, F* n, F* dt, F* dest, F* tag, F* comm, F* ierr),        \
    (b, n, dt, dest, tag, comm, ierr), SendOnly(FInt(n), FType(dt), FInt(dest), FComm(comm)),     \
    nullptr, nullptr)                                                                             \
  X(Isend, isend, ISEND, kSend,                                                                   \
    (void* b, F* n, F* dt, F* dest, F* tag, F* comm, F* req, F* ierr),                            \
    (b, n, dt, dest, tag, comm, req, ierr),                                                       \
    SendOnly(FInt(n), FType(dt), FInt(dest), FComm(comm)), req, nullptr)                          \
  X(Issend, issend, ISSEND, kSend,                                                                \
    (void* b, F* n, F* dt, F* dest, F* tag, F* comm, F* req, F* ierr),                            \
    (b, n, dt, dest, tag, comm, req, ierr),                                                       \
    SendOnly(FInt(n), FType(dt), FInt(dest), FComm(comm)), req, nullptr)                          \
  X(Recv, recv, RECV, kRecv,                                                                      \
    (void* b, F* n, F* dt, F* src, F* tag, F* comm, F* status, F* ierr),                          \
    (b, n, dt, src, tag, comm, status, ierr),                                                     \
    RecvFrom(FInt(n), FType(dt), FInt(src), FComm(comm)), nullptr, status)                        \
  X(Irecv, irecv, IRECV, kRecv, (void* b, F* n, F* dt, F* src, F* tag, F* comm, F* req, F* ierr), \
    (b, n, dt, src, tag, comm, req, ierr),                                                        \
    RecvFrom(FInt(n), FType(dt), FInt(src), FComm(comm)), req, nullptr)                           \
  X(Sendrecv, sendrecv, SENDRECV, kSend,                                                          \
    (void* sb, F* sc, F* st, F* dest, F* stag, void* rb, F* rc, F* rt, F* src, F* rtag, F* comm,  \
     F* status, F* ierr),                                                                         \
    (sb, sc, st, dest, stag, rb, rc, rt, src, rtag, comm, status, ierr),                          \
    Sendrecv(FInt(sc), FType(st), FInt(rc), FType(rt), FInt(dest), FInt(src), FComm(comm)),       \
    nullptr, status)                                                                              \
  X(Sendrecv_replace, sendrecv_replace, SENDRECV_REPLACE, kSend,                                  \
    (void* b, F* n, F* dt, F* dest, F* stag, F* src, F* rtag, F* comm, F* status, F* ierr),       \
    (b, n, dt, dest, stag, src, rtag, comm, status, ierr),                                        \
    Sendrecv(FInt(n), FType(dt), FInt(n), FType(dt), FInt(dest), FInt(src), FComm(comm)),         \
    nullptr, status)                                                                              \
  X(Barrier, barrier, BARRIER, kColl, (F* comm, F* ierr), (comm, ierr), NoData(FComm(comm)),      \
    nullptr, nullptr)                                                                             \
  X(Ibarrier, ibarrier, IBARRIER, kColl, (F* comm, F* req, F* ierr), (comm, req, ierr),           \
    NoData(FComm(comm)), req, nullptr)                                                            \
  X(Bcast, bcast, BCAST, kColl, (void* b, F* n, F* dt, F* root, F* comm, F* ierr),                \
    (b, n, dt, root, comm, ierr), Same(FInt(n), FType(dt), nullptr, FInt(root), FComm(comm)),     \
    nullptr, nullptr)                                                                             \
  X(Ibcast, ibcast, IBCAST, kColl, (void* b, F* n, F* dt, F* root, F* comm, F* req, F* ierr),     \
    (b, n, dt, root, comm, req, ierr),                                                            \
    Same(FInt(n), FType(dt), nullptr, FInt(root), FComm(comm)), req, nullptr)                     \
  X(Reduce, reduce, REDUCE, kColl,                                                                \
    (void* sb, void* rb, F* n, F* dt, F* op, F* root, F* comm, F* ierr),                          \
    (sb, rb, n, dt, op, root, comm, ierr),                                                        \
    Same(FInt(n), FType(dt), FOp(op), FInt(root), FComm(comm)), nullptr, nullptr)                 \
  X(Allreduce, allreduce, ALLREDUCE, kColl,                                                       \
    (void* sb, void* rb, F* n, F* dt, F* op, F* comm, F* ierr), (sb, rb, n, dt, op, comm, ierr),  \
    Same(FInt(n), FType(dt), FOp(op), kNoPeer, FComm(comm)), nullptr, nullptr)                    \
  X(Iallreduce, iallreduce, IALLREDUCE, kColl,                                                    \
    (void* sb, void* rb, F* n, F* dt, F* op, F* comm, F* req, F* ierr),                           \
    (sb, rb, n, dt, op, comm, req, ierr),                                                         \
    Same(FInt(n), FType(dt), FOp(op), kNoPeer, FComm(comm)), req, nullptr)                        \
  X(Scan, scan, SCAN, kColl, (void* sb, void* rb, F* n, F* dt, F* op, F* comm, F* ierr),          \
    (sb, rb, n, dt, op, comm, ierr), Same(FInt(n), FType(dt), FOp(op), kNoPeer, FComm(comm)),     \
    nullptr, nullptr)                                                                             \
  X(Exscan, exscan, EXSCAN, kColl, (void* sb, void* rb, F* n, F* dt, F* op, F* comm, F* ierr),    \
    (sb, rb, n, dt, op, comm, ierr), Same(FInt(n), FType(dt), FOp(op), kNoPeer, FComm(comm)),     \
    nullptr, nullptr)                                                                             \
  X(Allgather, allgather, ALLGATHER, kColl,                                                       \
    (void* sb, F* sc, F* st, void* rb, F* rc, F* rt, F* comm, F* ierr),                           \
    (sb, sc, st, rb, rc, rt, comm, ierr),                                                         \
    Allgather(FBuf(sb), FInt(sc), FType(st), FInt(rc), FType(rt), FComm(comm)), nullptr, nullptr) \
  X(Allgatherv, allgatherv, ALLGATHERV, kColl,                                                    \
    (void* sb, F* sc, F* st, void* rb, F* rcs, F* displs, F* rt, F* comm, F* ierr),               \
    (sb, sc, st, rb, rcs, displs, rt, comm, ierr),                                                \
    Allgatherv(FBuf(sb), FInt(sc), FType(st), rcs, FType(rt), FComm(comm)), nullptr, nullptr)     \
  X(Gather, gather, GATHER, kColl,                                                                \
    (void* sb, F* sc, F* st, void* rb, F* rc, F* rt, F* root, F* comm, F* ierr),                  \
    (sb, sc, st, rb, rc, rt, root, comm, ierr),                                                   \
    Gather(FBuf(sb), FInt(sc), FType(st), FInt(rc), FType(rt), FInt(root), FComm(comm)),          \
    nullptr, nullptr)                                                                             \
  X(Gatherv, gatherv, GATHERV, kColl,                                                             \
    (void* sb, F* sc, F* st, void* rb, F* rcs, F* displs, F* rt, F* root, F* comm, F* ierr),      \
    (sb, sc, st, rb, rcs, displs, rt, root, comm, ierr),                                          \
    Gatherv(FBuf(sb), FInt(sc), FType(st), rcs, FType(rt), FInt(root), FComm(comm)), nullptr,     \
    nullptr)                                                                                      \
  X(Scatter, scatter, SCATTER, kColl,                                                             \
    (void* sb, F* sc, F* st, void* rb, F* rc, F* rt, F* root, F* comm, F* ierr),                  \
    (sb, sc, st, rb, rc, rt, root, comm, ierr),                                                   \
    Scatter(FBuf(rb), FInt(sc), FType(st), FInt(rc), FType(rt), FInt(root), FComm(comm)),         \
    nullptr, nullptr)                                                                             \
  X(Scatterv, scatterv, SCATTERV, kColl,                                                          \
    (void* sb, F* scs, F* displs, F* st, void* rb, F* rc, F* rt, F* root, F* comm, F* ierr),      \
    (sb, scs, displs, st, rb, rc, rt, root, comm, ierr),                                          \
    Scatterv(FBuf(rb), scs, FType(st), FInt(rc), FType(rt), FInt(root), FComm(comm)), nullptr,    \
    nullptr)                                                                                      \
  X(Alltoall, alltoall, ALLTOALL, kColl,                                                          \
    (void* sb, F* sc, F* st, void* rb, F* rc, F* rt, F* comm, F* ierr),                           \
    (sb, sc, st, rb, rc, rt, comm, ierr),                                                         \
    Alltoall(FBuf(sb), FInt(sc), FType(st), FInt(rc), FType(rt), FComm(comm)), nullptr, nullptr)  \
  X(Alltoallv, alltoallv, ALLTOALLV, kColl,                                                       \
    (void* sb, F* scs, F* sd, F* st, void* rb, F* rcs, F* rd, F* rt, F* comm, F* ierr),           \
    (sb, scs, sd, st, rb, rcs, rd, rt, comm, ierr),                                               \
    Alltoallv(FBuf(sb), scs, FType(st), rcs, FType(rt), FComm(comm)), nullptr, nullptr)           \
  X(Reduce_scatter, reduce_scatter, REDUCE_SCATTER, kColl,                                        \
    (void* sb, void* rb, F* rcs, F* dt, F* op, F* comm, F* ierr),                                 \
    (sb, rb, rcs, dt, op, comm, ierr), ReduceScatter(rcs, FType(dt), FOp(op), FComm(comm)),       \
    nullptr, nullptr)                                                                             \
  X(Reduce_scatter_block, reduce_scatter_block, REDUCE_SCATTER_BLOCK, kColl,                      \
    (void* sb, void* rb, F* rc, F* dt, F* op, F* comm, F* ierr),                                  \
    (sb, rb, rc, dt, op, comm, ierr),                                                             \
    ReduceScatterBlock(FInt(rc), FType(dt), FOp(op), FComm(comm)), nullptr, nullptr)

namespace profagent {
namespace {
#define PROFAGENT_F_IMPL(NAME, lname, UNAME, KIND, PARAMS, ARGS, INFO, REQ, STATUS)               \
  void F##NAME(const Real& real, const char* sym, PROFAGENT_UNPAREN PARAMS) {                     \
    using Fn = void(*) PARAMS;                                                                    \
    const Fn fn = reinterpret_cast<Fn>(real.fn);                                                  \
    if (__builtin_expect(fn == nullptr, 0)) return FMissing(sym, ierr);                           \
    HookGuard guard;                                                                              \
    if (!guard.outermost()) return fn ARGS;                                                       \
    /* The lambda's `status` stands for the call's own (see FRecorded). */                       \
    FRecorded(real, KIND, INFO, ierr, REQ, STATUS, [&]([[maybe_unused]] F* status) { fn ARGS; }); \
  }
PROFAGENT_F_CALLS(PROFAGENT_F_IMPL)
#undef PROFAGENT_F_IMPL
}  // namespace
}  // namespace profagent

#define PROFAGENT_F_EXPORT(NAME, lname, UNAME, KIND, PARAMS, ARGS, ...) \
  PROFAGENT_F_ENTRIES(NAME, lname, UNAME, PARAMS, ARGS)
PROFAGENT_F_CALLS(PROFAGENT_F_EXPORT)
#undef PROFAGENT_F_EXPORT

// Initialization, completion and communicator lifetime, as their C interposers do.
namespace profagent {
namespace {
using FnIerr = void (*)(F*);

#define PROFAGENT_F_PROLOGUE(PARAMS, ...)                          \
  using Fn = void(*) PARAMS;                                       \
  const Fn fn = reinterpret_cast<Fn>(real.fn);                     \
  if (__builtin_expect(fn == nullptr, 0)) return FMissing(sym, ierr); \
  HookGuard guard;                                                 \
  if (!guard.outermost()) return fn(__VA_ARGS__);

void FInit(const Real& real, const char* sym, F* ierr) {
  PROFAGENT_F_PROLOGUE((F*), ierr)
  const uint64_t t0 = Now();
  fn(ierr);
  const uint64_t t1 = Now();
  if (*ierr == 0) AfterInit();
  EmitApi(real.api, t0, t1, *ierr);
}

void FInit_thread(const Real& real, const char* sym, F* required, F* provided, F* ierr) {
  PROFAGENT_F_PROLOGUE((F*, F*, F*), required, provided, ierr)
  const uint64_t t0 = Now();
  fn(required, provided, ierr);
  const uint64_t t1 = Now();
  if (*ierr == 0) AfterInit();
  EmitApi(real.api, t0, t1, *ierr);
}

void FFinalize(const Real& real, const char* sym, F* ierr) {
  PROFAGENT_F_PROLOGUE((F*), ierr)
  BeforeFinalize();
  const uint64_t t0 = Now();
  fn(ierr);
  const uint64_t t1 = Now();
  EmitApi(real.api, t0, t1, *ierr);
}

void FWait(const Real& real, const char* sym, F* req, F* status, F* ierr) {
  PROFAGENT_F_PROLOGUE((F*, F*, F*), req, status, ierr)
  FCompletion c(req, 1, status);
  const uint64_t t0 = Now();
  fn(req, c.fst, ierr);
  const uint64_t t1 = Now();
  if (*ierr == 0 && c.s.n > 0) c.Complete(0, 0, t1);
  EmitApi(real.api, t0, t1, *ierr);
}

void FWaitall(const Real& real, const char* sym, F* count, F* reqs, F* statuses, F* ierr) {
  PROFAGENT_F_PROLOGUE((F*, F*, F*, F*), count, reqs, statuses, ierr)
  FCompletion c(reqs, FInt(count), statuses);
  const uint64_t t0 = Now();
  fn(count, reqs, c.fst, ierr);
  const uint64_t t1 = Now();
  if (*ierr == 0)
    for (int i = 0; i < c.s.n; ++i) c.Complete(i, i, t1);
  EmitApi(real.api, t0, t1, *ierr);
}

// Fortran indices count from 1.
void FWaitany(const Real& real, const char* sym, F* count, F* reqs, F* index, F* status,
              F* ierr) {
  PROFAGENT_F_PROLOGUE((F*, F*, F*, F*, F*), count, reqs, index, status, ierr)
  FCompletion c(reqs, FInt(count), status);
  const uint64_t t0 = Now();
  fn(count, reqs, index, c.fst, ierr);
  const uint64_t t1 = Now();
  if (*ierr == 0 && index != nullptr && *index != Abi().undefined) c.Complete(*index - 1, 0, t1);
  EmitApi(real.api, t0, t1, *ierr);
}

void FWaitsome(const Real& real, const char* sym, F* incount, F* reqs, F* outcount, F* indices,
               F* statuses, F* ierr) {
  PROFAGENT_F_PROLOGUE((F*, F*, F*, F*, F*, F*), incount, reqs, outcount, indices, statuses, ierr)
  FCompletion c(reqs, FInt(incount), statuses);
  const uint64_t t0 = Now();
  fn(incount, reqs, outcount, indices, c.fst, ierr);
  const uint64_t t1 = Now();
  if (*ierr == 0 && outcount != nullptr && *outcount != Abi().undefined && indices != nullptr)
    for (int i = 0; i < *outcount; ++i) c.Complete(indices[i] - 1, i, t1);
  EmitApi(real.api, t0, t1, *ierr);
}

// Test*: not recorded themselves (polled), only the completions they report. flag: a LOGICAL.
void FTest(const Real& real, const char* sym, F* req, F* flag, F* status, F* ierr) {
  PROFAGENT_F_PROLOGUE((F*, F*, F*, F*), req, flag, status, ierr)
  FCompletion c(req, 1, status);
  fn(req, flag, c.fst, ierr);
  if (*ierr == 0 && *flag && c.s.n > 0) c.Complete(0, 0, Now());
}

void FTestall(const Real& real, const char* sym, F* count, F* reqs, F* flag, F* statuses,
              F* ierr) {
  PROFAGENT_F_PROLOGUE((F*, F*, F*, F*, F*), count, reqs, flag, statuses, ierr)
  FCompletion c(reqs, FInt(count), statuses);
  fn(count, reqs, flag, c.fst, ierr);
  if (*ierr == 0 && *flag && c.s.n > 0) {
    const uint64_t t = Now();
    for (int i = 0; i < c.s.n; ++i) c.Complete(i, i, t);
  }
}

void FTestany(const Real& real, const char* sym, F* count, F* reqs, F* index, F* flag, F* status,
              F* ierr) {
  PROFAGENT_F_PROLOGUE((F*, F*, F*, F*, F*, F*), count, reqs, index, flag, status, ierr)
  FCompletion c(reqs, FInt(count), status);
  fn(count, reqs, index, flag, c.fst, ierr);
  if (*ierr == 0 && *flag && index != nullptr && *index != Abi().undefined && c.s.n > 0)
    c.Complete(*index - 1, 0, Now());
}

void FTestsome(const Real& real, const char* sym, F* incount, F* reqs, F* outcount, F* indices,
               F* statuses, F* ierr) {
  PROFAGENT_F_PROLOGUE((F*, F*, F*, F*, F*, F*), incount, reqs, outcount, indices, statuses, ierr)
  FCompletion c(reqs, FInt(incount), statuses);
  fn(incount, reqs, outcount, indices, c.fst, ierr);
  if (*ierr == 0 && c.s.n > 0 && outcount != nullptr && *outcount != Abi().undefined &&
      *outcount > 0 && indices != nullptr) {
    const uint64_t t = Now();
    for (int i = 0; i < *outcount; ++i) c.Complete(indices[i] - 1, i, t);
  }
}

void FComm_dup(const Real& real, const char* sym, F* comm, F* out, F* ierr) {
  PROFAGENT_F_PROLOGUE((F*, F*, F*), comm, out, ierr)
  fn(comm, out, ierr);
  FCreated(ierr, out);
}

void FComm_split(const Real& real, const char* sym, F* comm, F* color, F* key, F* out, F* ierr) {
  PROFAGENT_F_PROLOGUE((F*, F*, F*, F*, F*), comm, color, key, out, ierr)
  fn(comm, color, key, out, ierr);
  FCreated(ierr, out);
}

void FComm_split_type(const Real& real, const char* sym, F* comm, F* type, F* key, F* info,
                      F* out, F* ierr) {
  PROFAGENT_F_PROLOGUE((F*, F*, F*, F*, F*, F*), comm, type, key, info, out, ierr)
  fn(comm, type, key, info, out, ierr);
  FCreated(ierr, out);
}

void FComm_create(const Real& real, const char* sym, F* comm, F* group, F* out, F* ierr) {
  PROFAGENT_F_PROLOGUE((F*, F*, F*, F*), comm, group, out, ierr)
  fn(comm, group, out, ierr);
  FCreated(ierr, out);
}

void FCart_create(const Real& real, const char* sym, F* comm, F* ndims, F* dims, F* periods,
                  F* reorder, F* out, F* ierr) {
  PROFAGENT_F_PROLOGUE((F*, F*, F*, F*, F*, F*, F*), comm, ndims, dims, periods, reorder, out,
                       ierr)
  fn(comm, ndims, dims, periods, reorder, out, ierr);
  FCreated(ierr, out);
}

void FCart_sub(const Real& real, const char* sym, F* comm, F* remain, F* out, F* ierr) {
  PROFAGENT_F_PROLOGUE((F*, F*, F*, F*), comm, remain, out, ierr)
  fn(comm, remain, out, ierr);
  FCreated(ierr, out);
}

// A freed communicator's handle may come back as another one (see MPI_Comm_free).
void FComm_free(const Real& real, const char* sym, F* comm, F* ierr) {
  PROFAGENT_F_PROLOGUE((F*, F*), comm, ierr)
  const uint64_t key = Abi().Key(FComm(comm));
  fn(comm, ierr);
  if (*ierr == 0 && key != 0) g_comms.Remove(key);
}
#undef PROFAGENT_F_PROLOGUE
}  // namespace
}  // namespace profagent

PROFAGENT_F_ENTRIES(Init, init, INIT, (F * ierr), (ierr))
PROFAGENT_F_ENTRIES(Init_thread, init_thread, INIT_THREAD, (F * req, F * prov, F * ierr),
                    (req, prov, ierr))
PROFAGENT_F_ENTRIES(Finalize, finalize, FINALIZE, (F * ierr), (ierr))
PROFAGENT_F_ENTRIES(Wait, wait, WAIT, (F * req, F * st, F * ierr), (req, st, ierr))
PROFAGENT_F_ENTRIES(Waitall, waitall, WAITALL, (F * n, F * reqs, F * sts, F * ierr),
                    (n, reqs, sts, ierr))
PROFAGENT_F_ENTRIES(Waitany, waitany, WAITANY, (F * n, F * reqs, F * i, F * st, F * ierr),
                    (n, reqs, i, st, ierr))
PROFAGENT_F_ENTRIES(Waitsome, waitsome, WAITSOME,
                    (F * n, F * reqs, F * out, F * idx, F * sts, F * ierr),
                    (n, reqs, out, idx, sts, ierr))
PROFAGENT_F_ENTRIES(Test, test, TEST, (F * req, F * flag, F * st, F * ierr), (req, flag, st, ierr))
PROFAGENT_F_ENTRIES(Testall, testall, TESTALL, (F * n, F * reqs, F * flag, F * sts, F * ierr),
                    (n, reqs, flag, sts, ierr))
PROFAGENT_F_ENTRIES(Testany, testany, TESTANY,
                    (F * n, F * reqs, F * i, F * flag, F * st, F * ierr),
                    (n, reqs, i, flag, st, ierr))
PROFAGENT_F_ENTRIES(Testsome, testsome, TESTSOME,
                    (F * n, F * reqs, F * out, F * idx, F * sts, F * ierr),
                    (n, reqs, out, idx, sts, ierr))
PROFAGENT_F_ENTRIES(Comm_dup, comm_dup, COMM_DUP, (F * c, F * out, F * ierr), (c, out, ierr))
PROFAGENT_F_ENTRIES(Comm_split, comm_split, COMM_SPLIT,
                    (F * c, F * color, F * key, F * out, F * ierr), (c, color, key, out, ierr))
PROFAGENT_F_ENTRIES(Comm_split_type, comm_split_type, COMM_SPLIT_TYPE,
                    (F * c, F * type, F * key, F * info, F * out, F * ierr),
                    (c, type, key, info, out, ierr))
PROFAGENT_F_ENTRIES(Comm_create, comm_create, COMM_CREATE, (F * c, F * g, F * out, F * ierr),
                    (c, g, out, ierr))
PROFAGENT_F_ENTRIES(Cart_create, cart_create, CART_CREATE,
                    (F * c, F * nd, F * dims, F * per, F * reorder, F * out, F * ierr),
                    (c, nd, dims, per, reorder, out, ierr))
PROFAGENT_F_ENTRIES(Cart_sub, cart_sub, CART_SUB, (F * c, F * remain, F * out, F * ierr),
                    (c, remain, out, ierr))
PROFAGENT_F_ENTRIES(Comm_free, comm_free, COMM_FREE, (F * c, F * ierr), (c, ierr))
#undef PROFAGENT_F_ENTRIES
#undef PROFAGENT_F_ENTRY
#undef PROFAGENT_UNPAREN
