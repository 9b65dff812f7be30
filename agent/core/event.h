// The fixed-size record that hooks push into their thread's ring.
//
// A RawEvent is plain old data, 64 bytes (one cache line: a push writes one line), copied by
// value into a per-thread single-producer ring. Hooks fill it with what they saw (raw clock ticks, pointers, handles,
// counts); the writer thread turns it into protobuf (agent/core/writer.cc), resolving pointers
// to names and ticks to nanoseconds there, off the hot path.
//
// Variable-length data (an NVTX message, a stack's frames) follows its event in `extra`
// continuation slots of the same ring: the bytes are copied raw, sizeof(RawEvent) per slot.
#ifndef PROFAGENT_AGENT_CORE_EVENT_H_
#define PROFAGENT_AGENT_CORE_EVENT_H_

#include <cstddef>
#include <cstdint>

namespace profagent {

// Mirrors profagent.EventKind for host events, plus internal kinds the writer consumes.
enum class EvType : uint8_t {
  kLaunch = 0,
  kApi = 1,
  kMemcpy = 2,
  kMemset = 3,
  kAlloc = 4,
  kFree = 5,
  kSync = 6,
  kNvtxRange = 7,     // complete range: t0 = start, t1 = end
  kNvtxMark = 8,
  kCollective = 9,
  kGraphLaunch = 10,
  kStep = 11,
  kRun = 12,
  kNvtxPush = 13,     // a range still open at shutdown
  kStream = 14,
  kEvent = 15,
  kGroup = 16,
  kComm = 17,
  kMarker = 18,
  kGraphNode = 19,    // gen.a = node id, gen.b = id of the node it copies (0 = a new node);
                      // a new node's NVTX context (model::ThreadNvtxContext) in `extra` slots
  // Internal kinds (not EventKind values):
  kDeviceOp = 64,     // device activity (payload.dev), t0/t1 already host-monotonic ns
  kStack = 65,        // host stack: `extra` slots hold aux frames (uint64 ip each)
  kDeviceInfoReq = 66,
};

// Flags.
enum : uint8_t {
  kFlagTimeNs = 1,       // t0/t1 are host CLOCK_MONOTONIC ns, not raw ticks
  kFlagHasPayload = 2,   // NVTX payload present; kApi: gen.c is the call's source graph (below)
  kFlagPayloadDouble = 4,
  kFlagMessageWide = 8,  // NVTX message was wchar_t (converted to UTF-8 before copying)
  kFlagNonBlocking = 16,
  kFlagCaptured = 64,    // kLaunch/kCollective/kMemcpy/kMemset on a stream being captured into a graph
  kFlagNoEnd = 32,       // kLaunch/kGraphLaunch: the call's end was not read (t1 == t0), see
                         // PROFAGENT_LAUNCH_API_SAMPLE; the file then has no duration for it
  kFlagStreamHandle = 128,  // kDeviceOp: dev.stream is the cudaStream_t's low 32 bits (CUDA-event
                            // timing), written as the file's stream index; else CUPTI's streamId
};

// The payloads follow the 28-byte RawEvent header directly: 4-byte packing keeps them at 36
// bytes so that a RawEvent fills one 64-byte cache line (x86 stores 8-byte fields at 4-byte
// offsets at full speed; no field crosses the line since rings are 64-byte aligned).
#pragma pack(push, 4)

// Block dimensions packed in 32 bits: x and y up to 2047, z up to 1023 (CUDA allows 1024, 1024, 64).
inline uint32_t PackBlock(uint32_t x, uint32_t y, uint32_t z) {
  return (x & 0x7ffu) | ((y & 0x7ffu) << 11) | ((z & 0x3ffu) << 22);
}
inline uint32_t BlockX(uint32_t b) { return b & 0x7ffu; }
inline uint32_t BlockY(uint32_t b) { return (b >> 11) & 0x7ffu; }
inline uint32_t BlockZ(uint32_t b) { return b >> 22; }

// A launch's dimensions as the call gave them, when they do not fit LaunchPayload (block x or y
// above 2047, z above 1023, grid y or z above 65535: only a launch the runtime rejects): the
// kLaunch event has extra == 1 and the next slot starts with this, so the file keeps the shape a
// user is debugging. FitsLaunchPayload says whether it is needed.
struct LaunchShapeExtra {
  uint32_t grid[3];
  uint32_t block[3];
};
inline bool FitsLaunchPayload(const LaunchShapeExtra& s) {
  return s.grid[1] <= 0xffffu && s.grid[2] <= 0xffffu && s.block[0] <= 0x7ffu &&
         s.block[1] <= 0x7ffu && s.block[2] <= 0x3ffu;
}

struct LaunchPayload {   // kLaunch, kGraphLaunch (func = graph exec, grid/block unused)
  const void* func;      // host stub (from __cudaRegisterFunction) or CUfunction
  uint64_t stream;       // cudaStream_t as an integer
  uint32_t corr;         // correlation id (CUPTI's, or the agent's own), 0 = none
  uint32_t grid_x;
  uint16_t grid_y, grid_z;
  uint32_t block;        // PackBlock(x, y, z)
  uint32_t shmem : 24;   // bytes (a rejected launch's absurd request saturates at 2^24 - 1)
  uint32_t device : 8;   // the launch's device under host timing (the op is the launch), else 0
};

struct MemPayload {      // kMemcpy, kMemset, kAlloc, kFree
  uint64_t bytes;
  uint64_t stream;
  uint64_t ptr;
  uint32_t corr;
  uint32_t kind;         // cudaMemcpyKind, or profagent.MemKind for alloc/free
  uint32_t device;
};

struct NvtxPayload {     // kNvtxRange, kNvtxMark, kNvtxPush; message text in `extra` slots
  uint64_t domain;       // string id of the domain name (0 = default domain)
  union { int64_t i; double f; } payload;
  uint32_t name;         // string id of a registered string message, else 0
  uint32_t category;
  uint32_t color;
  uint32_t depth;  // push/pop nesting depth; kNvtxStartEnd for nvtxRangeStart/End ranges
  // kNvtxStartEnd: CurrentThreadIndex() of the starting thread, 0 = unknown; a push/pop range
  // flushed at shutdown by another thread: its owner's
  uint32_t start_thread;
};
// NvtxPayload.depth of a start/end range (Event.start_end): process-scoped, it may end on
// another thread and overlap other ranges without nesting.
constexpr uint32_t kNvtxStartEnd = 0xffffffffu;

// The stream key of a thread's per-thread default stream (cudaStreamPerThread, handle 0x2, a
// different stream on each thread): the writer's stream index of host events on handle 0x2 and
// the CUDA-event timer's DeviceOp.stream use it. Real (aligned) stream pointers never end in
// binary 0010, so keys do not collide with their low 32 bits.
constexpr uint64_t kPerThreadStreamHandle = 0x2;
inline uint32_t PerThreadStreamKey(uint32_t tid) { return (tid << 4) | 0x2; }
// cudaStreamLegacy (handle 0x1): the legacy default stream, written as handle 0.
constexpr uint64_t kLegacyStreamHandle = 0x1;

struct CollPayload {     // kCollective
  uint64_t comm;         // communicator handle (ncclComm_t / MPI_Comm) as an integer
  uint64_t count;
  uint64_t bytes;        // bytes per the op's convention (sender side)
  uint32_t seq;          // per-communicator sequence number
  int32_t peer;          // root or peer, -1 = none
  uint8_t lib;           // profagent.CollLibrary
  uint8_t op;            // index into the library's op-name table (agent/hooks)
  uint8_t dtype;         // index into the library's datatype-name table
  uint8_t redop;         // index into the reduction-name table, 0xff = none
};

// Continuation data of a kCollective event: the NCCL and MPI hooks emit every kCollective with
// EmitWithBytes(e, &extra, sizeof(CollExtra)), so `e.extra` == 1 and the next ring slot holds
// this struct (fields with no room in CollPayload). Writer: Event.stream <- stream,
// Collective.complete_ns <- TicksToNs(complete_ticks) when non-zero, Collective.recv_bytes,
// Collective.group <- group, Collective.corr <- corr, Collective.recv_peer/recv_seq <- recv_from - 1/
// recv_seq when recv_from != 0, Collective.nonblocking <- (flags &
// kFlagNonBlocking). A kCollective with extra == 0 has none of these (all 0).
struct CollExtra {
  uint64_t stream;          // cudaStream_t of an NCCL call as an integer, 0 = default / none
  uint64_t complete_ticks;  // kFlagNonBlocking (MPI_I*): raw ticks (clock.h) when MPI_Wait*/Test*
                            // reported completion; 0 = completion never seen
  uint64_t recv_bytes;      // bytes this rank receives, 0 = not computed
  int32_t device;           // CUDA device of the NCCL communicator, -1 = unknown / MPI
  uint32_t group;           // ncclGroupStart..End group number (kGroup gen.a), 0 = none
  uint32_t corr;            // correlation id of the collective's kernel, 0 = none
  uint32_t recv_from;       // MPI_Sendrecv(_replace): its source + 1, 0 = none (zeroed = none)
  uint32_t recv_seq;        // and that receive's number on its ordered pair of ranks
  uint64_t wait_ticks;      // kFlagNonBlocking: raw ticks when the first MPI_Wait*/Test* that
                            // covered the request began (the rank's arrival); 0 = none seen
};

// kGroup (the outermost ncclGroupEnd call, t0..t1: its members were called since the matching
// ncclGroupStart, which is a kApi of its own): gen.a = group number (== CollExtra.group of its member kCollectives),
// gen.b = number of member calls, gen.corr = correlation id of the last driver launch seen in
// ncclGroupEnd (the fused NCCL kernel), 0 = none.
// kComm (communicator create/destroy): gen.a = communicator handle, gen.b = parent handle (split)
// or 0, gen.c = (uint64(uint32(rank)) << 32) | uint32(size), gen.name = 0.
// kApi graph creation (runtime_hooks.cc): cudaStreamEndCapture: gen.a = stream, gen.b = the
// cudaGraph_t captured; cudaGraphInstantiate*: gen.b = the cudaGraphExec_t made, gen.c = the
// cudaGraph_t instantiated, flags |= kFlagHasPayload (Event.source_graph). 0 when the call failed.
// kApi polls (cudaEventQuery/cudaStreamQuery, runtime_hooks.cc): a run of not-ready polls of one
// handle, with only polls between them, is one event spanning them, gen.corr = number of calls
// (0 or 1: a single call), gen.c = ticks spent inside the calls.
struct GenericPayload {  // kApi, kSync, kStream, kEvent, kGroup, kComm, kMarker
  uint64_t a;            // e.g. stream or event handle
  uint64_t b;
  uint64_t c;
  uint32_t name;         // string id (e.g. a marker name), 0 = none
  uint32_t corr;
};

// kDeviceOp of a graph node (CUPTI graphNodeId non-zero): extra == 1 and the next slot starts
// with the node id (uint64_t); DeviceOp.graph_node.
struct DevicePayload {   // kDeviceOp: t0/t1 are host-monotonic ns (kFlagTimeNs)
  uint32_t name;         // kernel name string id
  uint32_t corr;
  uint32_t graph;
  uint32_t stream;
  union {
    struct {             // kind == kernel
      uint32_t grid_x;
      uint16_t grid_y, grid_z;
      uint32_t block;    // PackBlock
    };
    struct {             // kind == memcpy / memset
      uint64_t bytes;
      uint8_t copy_kind;
    };
  };
  uint32_t shmem;        // kernel: static + dynamic shared memory bytes
  uint8_t device;
  uint8_t kind;          // profagent.DeviceOpKind
  uint16_t pad;
};

struct StepPayload {     // kStep, kRun
  int64_t tokens;        // -1 = not given
  int32_t kv;            // -1 = not given (saturates at INT32_MAX)
  int32_t bsz;           // -1 = not given
  uint32_t phase;        // string id
  uint32_t label;        // string id
  uint32_t index;
  uint32_t run;
  uint8_t warmup;
  uint8_t source;        // 0 nvtx, 1 graph, 2 sync
  uint16_t pad;
};

#pragma pack(pop)

// Header (28 bytes) + one 36-byte payload (4-byte aligned: see the pragma above).
struct RawEvent {
  uint64_t t0;           // start: raw ticks (clock.h) unless kFlagTimeNs
  uint64_t t1;           // end (== t0 for instants)
  EvType type;
  uint8_t flags;
  uint16_t extra;        // continuation slots that follow this one
  uint16_t api;          // API id (RegisterApi) of the intercepted call, 0 = none
  uint16_t pad;
  int32_t ret;           // return code of the call
  union {
    LaunchPayload launch;
    MemPayload mem;
    NvtxPayload nvtx;
    CollPayload coll;
    GenericPayload gen;
    DevicePayload dev;
    StepPayload step;
  };
};

static_assert(sizeof(RawEvent) == 64, "RawEvent must stay one 64-byte cache line");
static_assert(alignof(RawEvent) == 8, "RawEvent alignment");
static_assert(sizeof(CollExtra) <= sizeof(RawEvent), "CollExtra must fit one continuation slot");

}  // namespace profagent

#endif  // PROFAGENT_AGENT_CORE_EVENT_H_
