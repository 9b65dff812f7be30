// The engine of gpusim's libcudart.so.13: simulated devices, streams with FIFO worker threads,
// events, graphs (captured or built node by node), the allocation table, the observer hooks and
// the ground-truth log.
//
// The CUDA entry points (cudart_*.cc) translate API calls into Ops and enqueue them here. A
// stream's worker thread executes its Ops in order, in real time: an op starts when the device
// could start it (enqueued, previous op of the stream ended, awaited ops ended) and the worker
// does not complete it before start + cost (clock_nanosleep to an absolute deadline, then a
// short spin), so host/device overlap and synchronization are real. A copy moves its bytes at
// its start. After each reported Op the worker calls the observer's op callback and writes one
// ground-truth line. On a CPU-starved host a worker may wake late; the recorded start/end keep
// the modelled durations and the stream catches up (see Execute in sim_device.cc).
//
// Ordering rules (CUDA's): an Op may carry waits (stream, sequence number) that must be
// complete before it starts. The legacy default stream of a device waits for all work already
// enqueued on the device's blocking streams, and an Op on a blocking stream waits for the work
// already enqueued on the legacy default stream. cudaStreamWaitEvent enqueues a wait-only Op.
//
// Thread safety: every function here may be called from any number of host threads. Handles
// (Stream, Event, Graph, GraphNode) are never freed, so a stale pointer is detected through the
// live-handle sets instead of crashing. Nothing here is hot-path safe in the profiler's sense
// (locks, allocation): the launch path costs a few hundred ns, measured by gpusim_bench.
#ifndef PROFAGENT_TESTS_GPUSIM_SIM_DEVICE_H_
#define PROFAGENT_TESTS_GPUSIM_SIM_DEVICE_H_

#include <cuda_runtime_api.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "tests/gpusim/cost_model.h"
#include "tests/gpusim/gpusim_internal.h"

namespace gpusim {

constexpr int kMaxDevices = 16;
constexpr size_t kDeviceMemoryBytes = 80ull << 30;  // each simulated device has 80 GB

uint64_t NowNs();
// Blocks until CLOCK_MONOTONIC >= deadline_ns: sleeps to ~60 us before it, then spins.
void SleepUntilNs(uint64_t deadline_ns);

struct Stream;
struct Event;
struct Graph;
struct GraphNode;

// A registered kernel (from __cudaRegisterFunction). Its address is the cudaKernel_t handle
// returned by __cudaGetKernel. Lives forever.
struct Kernel {
  const void* host_fn;
  std::string mangled;
  std::string demangled;
  KernelCost cost;
  // cudaFuncSetAttribute values, returned by cudaFuncGetAttributes.
  std::atomic<int> max_dynamic_shared_bytes{48 << 10};
  std::atomic<int> preferred_carveout{-1};
  std::atomic<bool> non_portable_cluster{false};  // cudaFuncAttributeNonPortableClusterSizeAllowed
  // The architecture of the code image the device runs (cudaFuncAttributes.ptxVersion and
  // binaryVersion: major * 10 + minor), from its module.
  int ptx_version = 90;
  int binary_version = 90;
};

// A registered fat binary (__cudaRegisterFatBinary): `handle` is what nvcc's code holds.
struct Module {
  void* handle = nullptr;  // first: &handle is the module
  int ptx_version = 90;
  int binary_version = 90;
};

// One unit of work of a stream (also the work of a graph node, copied into a stream at launch).
struct Op {
  enum Action {
    kKernel, kCopy, kSet, kHostFn, kStreamCallback, kEventRecord, kWaitOnly, kFreeMemory,
    kCustom, kStop
  };
  Action action = kWaitOnly;
  bool report = false;          // observer + ground truth when done
  GpusimOpRecord rec = {};      // identity of the op; times filled by the worker
  uint64_t duration_ns = 0;     // modelled duration (kernels, copies, sets)
  const Kernel* kernel = nullptr;  // kKernel
  // kCopy / kSet: depth slices of height rows of width bytes (2D: depth 1; 1D: height 1 too).
  // Rows lie dpitch (spitch) bytes apart, slices dysize (sysize) rows apart. A kSet writes
  // `value` into every element of `element_size` bytes (1, 2 or 4; width is a multiple of it).
  void* dst = nullptr;
  const void* src = nullptr;
  size_t dpitch = 0, spitch = 0, width = 0, height = 1, depth = 1, dysize = 0, sysize = 0;
  int value = 0;
  unsigned element_size = 1;
  std::vector<char> staging;  // if not empty: the source rows (packed), taken at enqueue time
  // kCopy with a CUDA array on a side (rec.copy_arrays != 0): the copy in cudaMemcpy3DParms
  // terms (array handles, positions and extent in elements), what the memcpy node of a captured
  // copy reads back. All zero when the copy has no such form (a cudaMemcpyToArray span that
  // starts inside a row and runs past its end): the node then reads back the bytes it copies.
  cudaMemcpy3DParms array_copy = {};
  // kFreeMemory of a pool allocation: the pool's token for this free (see sim_pool.h); 0 frees
  // `dst` with free().
  uint64_t pool_free_token = 0;
  // kHostFn / kStreamCallback.
  cudaHostFn_t host_fn = nullptr;
  cudaStreamCallback_t stream_callback = nullptr;
  void* user_data = nullptr;
  cudaStream_t callback_stream = nullptr;  // the handle the app passed, given back to it
  // kEventRecord.
  Event* event = nullptr;
  uint64_t event_generation = 0;
  // kCustom (gpusim_stream_enqueue).
  void (*run)(void*, GpusimOpRecord*) = nullptr;
  void* arg = nullptr;
  void (*free_arg)(void*) = nullptr;
  // Captured custom ops (gpusim_stream_enqueue_graphable): the graph node keeps `arg` as a
  // template, never run; each launch of the graph runs clone_arg(template).
  void* (*clone_arg)(void*) = nullptr;
  // Must be complete before this op starts: (stream, sequence number).
  std::vector<std::pair<Stream*, uint64_t>> waits;
  uint64_t seq = 0;  // set by Enqueue
};

struct Stream {
  uint32_t id = 0;
  int device = 0;
  unsigned flags = 0;  // cudaStreamNonBlocking or 0
  std::atomic<int> priority{0};  // cudaStreamCreateWithPriority, cudaStreamSetAttribute
  bool legacy = false;
  bool per_thread = false;

  std::mutex mu;
  std::condition_variable work_cv;  // worker waits for ops
  std::condition_variable done_cv;  // host threads wait for completion
  std::deque<Op*> queue;
  bool worker_waiting = false;        // the worker is parked on work_cv (guarded by mu)
  std::atomic<int> sync_waiters{0};   // host threads blocked on done_cv
  std::atomic<uint64_t> enqueued_seq{0};
  std::atomic<uint64_t> completed_seq{0};
  std::atomic<uint64_t> last_end_ns{0};  // device end time of the last executed op
  // Device end times of the last kEndRing ops by sequence number, so that an op waiting for
  // another stream starts after exactly the awaited op, even if that stream has moved on.
  static constexpr uint64_t kEndRing = 256;
  std::atomic<uint64_t> end_ring[kEndRing] = {};
  // Capture state (guarded by mu).
  Graph* capture_graph = nullptr;
  cudaStreamCaptureMode capture_mode = cudaStreamCaptureModeGlobal;
  bool capture_origin = false;
  // The nodes the next op captured on this stream depends on: the stream's last captured node,
  // or the nodes joined through cudaStreamWaitEvent on an event recorded in the capture.
  std::vector<GraphNode*> capture_deps;
  // Stream attributes (cudaStreamSetAttribute; guarded by mu), stored and returned as set; they
  // do not change the timing model. The priority attribute is `priority` above.
  cudaAccessPolicyWindow access_policy = {};
  cudaSynchronizationPolicy sync_policy = cudaSyncPolicyAuto;
  cudaLaunchMemSyncDomainMap mem_sync_domain_map = {0, 1};
  cudaLaunchMemSyncDomain mem_sync_domain = cudaLaunchMemSyncDomainDefault;
  unsigned nvlink_util_centric_scheduling = 0;

  bool blocking() const { return legacy || !(flags & cudaStreamNonBlocking); }
};

struct Event {
  unsigned flags = 0;
  int device = 0;  // current when created: cudaDeviceReset of that device destroys it
  std::mutex mu;
  Stream* stream = nullptr;  // of the last record, nullptr if never recorded
  uint64_t seq = 0;          // sequence number of that record op
  uint64_t generation = 0;
  uint64_t time_ns = 0;      // set by the worker when the record op executes
  bool timed = false;        // time_ns belongs to `generation`
  Graph* capture_graph = nullptr;  // recorded during a capture into this graph
  std::vector<GraphNode*> capture_nodes;  // the recording stream's capture_deps at that record
};

// ---- Graphs ---------------------------------------------------------------------------------
//
// A cudaGraph_t is a Graph with nodes (GraphNode, the cudaGraphNode_t handles) and dependency
// edges; stream capture and the cudaGraphAdd*Node functions build the same structure. A
// cudaGraphExec_t is a Graph with `exec` set that holds a snapshot taken at instantiation: its
// nodes' work flattened (child graphs inlined) in a topological order, which cudaGraphLaunch
// enqueues serially on the launch stream. Everything in Graph, GraphNode and ExecNode is guarded
// by GraphMutex(); while it is held only the node id registry's lock (a leaf) is acquired.
//
// Graph node events (gpusim_set_graph_observer): AddNodeLocked and AddExecNodeLocked queue them
// on the calling thread; FlushGraphNodeEvents, called with no lock held (ApiCall::Return before
// the exit callback, and the gpusim_stream_enqueue* exports), delivers them.

// What a node does: its type, the Op it enqueues (kernel, memcpy, memset, host) and its
// parameters as the application gave them (returned by the cudaGraph*NodeGetParams functions).
struct NodeWork {
  cudaGraphNodeType type = cudaGraphNodeTypeEmpty;
  Op op;  // action kWaitOnly for node types that enqueue no work of their own
  cudaKernelNodeParams kernel = {};
  cudaMemcpy3DParms copy = {};
  cudaMemsetParams set = {};
  cudaHostNodeParams host = {};
  Event* event = nullptr;  // event record / event wait nodes
  Graph* child = nullptr;  // child graph nodes: the graph the node owns (a clone, or moved in)
};

// A node of a graph: a cudaGraphNode_t. Never freed; a destroyed node (or a node of a destroyed
// graph) leaves the live set, so later calls with its handle fail with cudaErrorInvalidValue.
struct GraphNode {
  Graph* graph = nullptr;  // the graph it belongs to (fixed)
  // The node's unique id (gpusim_graph_node_id). An exec node's id is the graph_node_id of the
  // ops it enqueues (CUPTI's graphNodeId).
  uint32_t id = 0;
  NodeWork work;
  std::vector<GraphNode*> deps;             // incoming edges, in the order they were added
  std::vector<cudaGraphEdgeData> edge_data;  // parallel to deps
  // The node copied: cudaGraphClone, child graphs cloned in, exec nodes (compared only).
  const GraphNode* cloned_from = nullptr;
};

// One unit of an executable graph, in launch order.
struct ExecNode {
  const GraphNode* origin = nullptr;  // top-level node instantiated from (nullptr inside a child)
  const GraphNode* source = nullptr;  // node instantiated from (also inside a child graph)
  GraphNode* node = nullptr;  // the exec node (AddExecNodeLocked): not a live node of any graph
  NodeWork work;                      // work.child is unused: child graphs are inlined
  bool enabled = true;                // cudaGraphNodeSetEnabled
};

// The shape of one node of an instantiated graph, for cudaGraphExecUpdate's topology check.
struct NodeShape {
  cudaGraphNodeType type;
  std::vector<size_t> deps;  // indices of the dependencies in creation order, sorted
  int copy_kind;             // memcpy nodes: the resolved cudaMemcpyKind | copy_arrays << 8
  std::string child;         // child graph nodes: an encoding of the child's shape
};

struct Graph {
  uint32_t id = 0;
  bool exec = false;  // a cudaGraphExec_t
  // cudaGraph_t:
  std::vector<GraphNode*> nodes;  // live nodes, in creation order
  GraphNode* owner = nullptr;     // the child graph node that owns this graph, if any
  std::vector<Stream*> capturing_streams;
  // cudaGraphExec_t:
  std::vector<ExecNode> launch;  // flattened, topologically ordered
  std::vector<NodeShape> shape;  // of the instantiated graph's top-level nodes
  unsigned long long flags = 0;  // instantiation flags
  Stream* last_stream = nullptr;  // where the previous launch's last op went, and its seq
  uint64_t last_seq = 0;
};

// What an allocation is, for cudaMemcpyDefault, cudaPointerGetAttributes and cudaFree checks.
// kMapped: a range mapped with the driver's cuMemMap (cudart_driver.cc), device memory of the
// physical allocation's device; its memory belongs to that allocation (the runtime never frees
// it: cudaFree and cudaFreeHost refuse it, cudaDeviceReset keeps it) and its bytes are counted
// by cuMemCreate (AddDeviceBytes), not by TrackAllocation.
enum class MemKind { kDevice, kHost, kManaged, kRegistered, kMapped };
// Memory the device accesses as its own (cudaMemcpyDefault resolves it as device memory).
inline bool OnDevice(MemKind kind) {
  return kind == MemKind::kDevice || kind == MemKind::kManaged || kind == MemKind::kMapped;
}

struct Allocation {
  size_t size;
  MemKind kind;
  int device;
  bool pooled;  // belongs to a memory pool (sim_pool.h), which owns its memory
  unsigned host_flags = 0;  // cudaHostAlloc / cudaHostRegister flags (cudaHostGetFlags)
};

// ---- Process state --------------------------------------------------------------------------

const CostModel& Costs();
int DeviceCount();
int& CurrentDevice();  // thread-local

// The calling thread's last error (cudaGetLastError semantics).
cudaError_t& LastError();
inline cudaError_t SetError(cudaError_t e) {
  if (e != cudaSuccess && e != cudaErrorNotReady) LastError() = e;
  return e;
}

// ---- Kernels ------------------------------------------------------------------------------

// The module of a fat binary, with the image the simulated device would load from it
// (ChooseImage); never freed, as kernels keep its architecture.
Module* RegisterModule(const void* fat_cubin);
const Module* ModuleOf(void** handle);  // nullptr: not a module handle
// Which image of a fat binary a device of compute capability `device_arch` (major * 10 + minor)
// runs, as the driver picks it: the newest cubin of the same major version at most the device's,
// else the newest PTX at most the device's (compiled for the device: binary = device_arch); a
// fat binary with neither (built only for newer GPUs: a real device could not run it) runs on
// its newest image. Unknown layouts keep the defaults (device_arch).
void ChooseImage(const void* fat_cubin, int device_arch, int* ptx_version, int* binary_version);
Kernel* RegisterKernel(const void* host_fn, const char* mangled_name,
                       const Module* module = nullptr);
// Finds a kernel by host stub address or by its Kernel* handle; nullptr if unknown.
Kernel* FindKernel(const void* func);

// ---- Streams ------------------------------------------------------------------------------

// Resolves an API stream handle (0, cudaStreamLegacy, cudaStreamPerThread or a created stream).
// `per_thread_default`: the _ptsz/_ptds entry points map 0 to the per-thread stream.
// Returns nullptr for a handle that is not a live stream.
Stream* ResolveStream(cudaStream_t handle, bool per_thread_default);
Stream* CreateStream(int device, unsigned flags, int priority);
// Invalidates the handle; the stream finishes its queued work, then its worker exits.
bool DestroyStream(Stream* s);
Stream* LegacyStream(int device);

// Enqueues `op` (takes ownership) unless the stream is capturing, in which case the op becomes a
// node of the capture graph, depending on the stream's capture_deps (copies then read their
// source when a launch executes them, not at capture). Adds the legacy-stream ordering waits.
// Returns the op's sequence number, or 0 when it was captured.
uint64_t Enqueue(Stream* s, Op* op);
// Blocks until every op with sequence number <= seq of `s` has completed.
void WaitForSeq(Stream* s, uint64_t seq);
void SynchronizeStream(Stream* s);
bool StreamIdle(Stream* s);
void SynchronizeDevice(int device);
// Streams of `device` (created and default), for DeviceReset.
void ResetDevice(int device);

// ---- Ops ------------------------------------------------------------------------------------

// Fill the work of an op (action, report, rec identity, duration from the cost model); the
// caller sets the correlation id. `kind` may be cudaMemcpyDefault (resolved from the pointers).
void InitKernelOp(Op* op, const Kernel* k, dim3 grid, dim3 block, size_t shared_mem);
void InitCopyOp(Op* op, void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                size_t height, int kind);
void InitSetOp(Op* op, void* dst, size_t pitch, int value, unsigned element_size,
               size_t width_bytes, size_t height);
// 3D forms: `depth` slices, `dysize` (`sysize`) rows apart on the destination (source) side.
// The ground truth counts width * height * depth bytes.
void InitCopyOp3D(Op* op, void* dst, size_t dpitch, size_t dysize, const void* src,
                  size_t spitch, size_t sysize, size_t width, size_t height, size_t depth,
                  int kind);
void InitSetOp3D(Op* op, void* dst, size_t pitch, size_t ysize, int value, size_t width_bytes,
                 size_t height, size_t depth);
// The copy described by a cudaMemcpy3DParms (cudaMemcpy3D(Async), the 2D array copies, batch
// copies, graph memcpy nodes): extent.depth slices of extent.height rows of extent.width
// elements starting at srcPos/dstPos; an element is a byte unless a CUDA array takes part (then
// the array's element; a pointer side's position stays in bytes). Pitched pointers have slices
// ysize rows apart; an array is packed (CudaArray). Validates like the runtime: a bad kind gives
// cudaErrorInvalidMemcpyDirection; a null pointer, both or neither of an array and a pointer on
// one side, an unknown array, arrays of different element sizes, a box outside an array, or
// slices that overlap (ysize below the rows copied), cudaErrorInvalidValue; a pitch below the
// row, cudaErrorInvalidPitchValue. With an array, the kind only says where the pointer side is
// (an array is device memory; cudaMemcpyDefault: from the pointer), as the runtime corrects it;
// rec.copy_arrays marks the array sides and op->array_copy keeps `p`.
cudaError_t InitCopyOpFromParms(Op* op, const cudaMemcpy3DParms& p);

// ---- Events ---------------------------------------------------------------------------------

Event* CreateEvent(unsigned flags);
bool IsLiveEvent(Event* e);
void DestroyEvent(Event* e);
// Enqueues `op` (owned; its identity fields already set) as a record of `e` on `s`, with
// cudaEventRecord's semantics: later waits and queries refer to this record. Returns the op's
// sequence number (0 when captured).
uint64_t RecordEvent(Stream* s, Event* e, Op* op);

// ---- Graphs (see the Graph section above) ---------------------------------------------------

std::mutex& GraphMutex();
Graph* CreateGraph(bool exec);
Graph* CreateGraphLocked(bool exec);  // with GraphMutex() held
bool IsLiveGraph(Graph* g, bool exec);
// With GraphMutex() held: whether `g` is a live graph of that kind / `n` a live node.
bool IsLiveGraphLocked(const Graph* g, bool exec);
bool IsLiveNodeLocked(const GraphNode* n);
// Invalidates the handle; a cudaGraph_t's nodes and child graphs go with it.
void DestroyGraph(Graph* g);
void DestroyGraphLocked(Graph* g);
uint32_t NextGraphNodeId();
// With GraphMutex() held: appends a node with `work` and these dependencies (live nodes of `g`,
// no duplicates: the caller checks) to `g`; returns its handle. `edge_data` may be null. Queues
// a graph node event: CLONED from `cloned_from` if given, else CREATED.
GraphNode* AddNodeLocked(Graph* g, NodeWork work, const std::vector<GraphNode*>& deps,
                         const cudaGraphEdgeData* edge_data,
                         const GraphNode* cloned_from = nullptr);
// With GraphMutex() held: gives `x` (an entry of exec->launch, instantiated from `graph`) its
// exec node with a new id (also set as x->work's graph_node_id) and queues CREATED and CLONED.
void AddExecNodeLocked(Graph* exec, const Graph* graph, ExecNode* x);
// With GraphMutex() held: removes `n` from its graph and from its dependents' edges.
void DestroyNodeLocked(GraphNode* n);
// The node a captured op becomes (type and parameters derived from the op).
NodeWork WorkFromCapturedOp(const Op& op);

// ---- Memory ---------------------------------------------------------------------------------

void TrackAllocation(void* p, size_t size, MemKind kind, int device, bool pooled = false,
                     unsigned host_flags = 0);
// Removes an allocation that starts exactly at p; false if there is none of an accepted kind
// (device_kinds: device or managed memory, else pinned or registered host memory; never a
// kMapped range).
bool UntrackAllocation(void* p, bool device_kinds);
// Removes the kMapped range that starts exactly at p; false if there is none.
bool UntrackMapping(void* p);
// Device memory held outside the allocation table (cuMemCreate's physical allocations): counted
// as in use by cudaMemGetInfo and the out-of-memory checks. `delta` may be negative.
void AddDeviceBytes(int device, int64_t delta);
// The allocation containing p, if any.
bool FindAllocation(const void* p, void** base, Allocation* out);
size_t DeviceBytesInUse(int device);
// The effective cudaMemcpyKind of a copy (resolves cudaMemcpyDefault from the pointers).
int ResolveCopyKind(const void* dst, const void* src, int kind);

// Allocation and free shared by the runtime's entry points and the simulated driver's
// (cudart_driver.cc), without API callbacks or last-error bookkeeping.
// cudaMalloc on the current device: cudaErrorMemoryAllocation beyond the device's memory.
cudaError_t DeviceMalloc(size_t size, void** out);
// cudaFree (NULL succeeds): synchronizes the current device, then frees memory of cudaMalloc
// (and pitched) or gives a pool allocation back; cudaErrorInvalidValue for anything else.
cudaError_t DeviceFree(void* p);
// cudaMallocAsync: from the current pool of the stream's device (`per_thread`: the _ptsz
// meaning of stream 0).
cudaError_t MallocAsyncOn(size_t size, cudaStream_t stream, bool per_thread, void** out);
// The driver's 1D copies and sets (cudart_driver.cc), as the runtime's, enqueued with `corr`
// (their driver call's correlation id). A set writes `count` elements of `element_size` bytes
// (cuMemsetD8/D16/D32) of `value`. `sync`: returns when done (cuMemcpyHtoD, cuMemsetD32, ...).
cudaError_t DriverCopy(uint32_t corr, void* dst, const void* src, size_t count, int kind,
                       cudaStream_t stream, bool per_thread, bool sync);
cudaError_t DriverSet(uint32_t corr, void* dst, unsigned value, unsigned element_size, size_t count,
                      cudaStream_t stream, bool per_thread, bool sync);
// cudaGraphLaunch's work with `corr` (cuGraphLaunch's driver call's correlation id too).
cudaError_t GraphLaunchOn(uint32_t corr, cudaGraphExec_t exec, cudaStream_t stream,
                          bool per_thread);
// cudaFreeAsync; `corr` is the correlation id of the call (on the free op it enqueues).
cudaError_t FreeAsyncOn(void* p, cudaStream_t stream, bool per_thread, uint32_t corr);

// ---- Simulated driver entry points (cudart_driver.cc) ---------------------------------------

// The function cudaGetDriverEntryPoint* returns for a driver symbol ("cuMemCreate"), or nullptr
// when the simulator has none. `per_thread`: the per-thread-default-stream variant of the
// stream-ordered functions (cuMemAllocAsync_ptsz, ...).
void* DriverEntryPoint(const char* symbol, bool per_thread);
// Whether [p, p + bytes) may be read (write: written) by a copy or set: true unless it touches
// an address range reserved with cuMemAddressReserve where some byte is not mapped or not
// accessible (cuMemSetAccess) that way. Cheap when nothing is reserved.
bool VmmAccessible(const void* p, size_t bytes, bool write);

// ---- CUDA arrays (cudart_arrays.cc) ----------------------------------------------------------
//
// A cudaArray_t is a handle to host memory holding width x height x depth elements of the
// channel format's size ((x + y + z + w) bits / 8), packed row-major: rows of width elements,
// slices of height rows (a 1D array has height 1, a 2D one depth 1 here). Its bytes count as
// device memory of the device that was current (AddDeviceBytes), so cudaMemGetInfo sees them.
struct CudaArray {
  char* data;
  size_t element_size;          // bytes
  size_t width, height, depth;  // in elements; at least 1 each
  int device;
  size_t row_bytes() const { return width * element_size; }
  size_t bytes() const { return row_bytes() * height * depth; }
};
// A live array handle (also a level of a live mipmapped array); false for anything else.
bool FindArray(const void* handle, CudaArray* out);
// cudaDeviceReset: frees the arrays and mipmapped arrays allocated on `device`.
void ResetArrays(int device);

// __device__ variables (from __cudaRegisterVar): their host shadow is their device storage.
void RegisterSymbol(const void* host_var, size_t size);
bool SymbolSize(const void* host_var, size_t* size);

// ---- Observer -------------------------------------------------------------------------------

struct Observer {
  GpusimApiCallback api_cb;
  GpusimOpCallback op_cb;
  void* user;
};
const Observer* CurrentObserver();
void SetObserver(GpusimApiCallback api_cb, GpusimOpCallback op_cb, void* user);
uint32_t NextCorrelationId();

// The graph node observer (gpusim_set_graph_observer) and the node id registry.
void SetGraphObserver(GpusimGraphNodeCallback cb, void* user);
uint64_t GraphNodeId(const void* node);
// Delivers the graph node events the calling thread queued. No simulator lock may be held.
void FlushGraphNodeEvents();

// The CUPTI runtime callback id of a runtime function name (highest version), or 0.
int RuntimeCbid(const char* func_name);

// Static description of one API entry point: its name and CUPTI cbid (looked up once).
struct ApiInfo {
  explicit ApiInfo(const char* func_name) : name(func_name), cbid(RuntimeCbid(func_name)) {}
  ApiInfo(const char* func_name, const char* cbid_name)
      : name(func_name), cbid(RuntimeCbid(cbid_name)) {}
  const char* name;
  int cbid;
};

// One runtime API call: allocates its correlation id, calls the observer at enter (in the
// constructor) and exit (in Return), and records errors as the thread's last error.
class ApiCall {
 public:
  explicit ApiCall(const ApiInfo& info, const void* params = nullptr,
                   const char* symbol = nullptr)
      : info_(info), symbol_(symbol), params_(params),
        corr_(NextCorrelationId()), observer_(CurrentObserver()) {
    if (observer_ != nullptr) Enter();
  }
  ApiCall(const ApiCall&) = delete;
  ApiCall& operator=(const ApiCall&) = delete;

  uint32_t corr() const { return corr_; }
  void set_symbol(const char* symbol) { symbol_ = symbol; }
  cudaError_t Return(cudaError_t err) {
    SetError(err);
    FlushGraphNodeEvents();  // nodes this call made, before its exit callback
    if (observer_ != nullptr) Exit(err);
    return err;
  }

 private:
  void Enter();
  void Exit(cudaError_t err);
  const ApiInfo& info_;
  const char* symbol_;
  const void* params_;
  uint32_t corr_;
  const Observer* observer_;
};

// ---- Ground truth ---------------------------------------------------------------------------

bool TruthEnabled();
void TruthWrite(const char* json_object);

}  // namespace gpusim

#endif  // PROFAGENT_TESTS_GPUSIM_SIM_DEVICE_H_
