// The private interface between gpusim's three libraries.
//
// libcudart.so.13 (gpusim) owns the simulated device: streams, their FIFO workers, the clock,
// correlation ids and the ground-truth log. It exports the functions below (C linkage, version
// node GPUSIM_INTERNAL in its version script) so that the simulated libcupti.so.13 and
// libnccl.so.2 can observe and extend it. Those two find them with dlsym(RTLD_DEFAULT, ...)
// at first use (no link-time dependency, so each library can be loaded alone); if they are absent
// (NVIDIA's libcudart is loaded instead), they fail gracefully.
//
// Nothing in an application or in the profiler may use this header: it is not part of CUDA.
#ifndef PROFAGENT_TESTS_GPUSIM_GPUSIM_INTERNAL_H_
#define PROFAGENT_TESTS_GPUSIM_GPUSIM_INTERNAL_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct CUstream_st* gpusim_stream_t;  // same type as cudaStream_t

enum GpusimOpKind {
  GPUSIM_OP_KERNEL = 0,
  GPUSIM_OP_MEMCPY = 1,
  GPUSIM_OP_MEMSET = 2,
  GPUSIM_OP_COLLECTIVE = 3,  // enqueued by libnccl
  GPUSIM_OP_HOSTFN = 4,
  GPUSIM_OP_EVENT = 5,       // event record marker
};

// What the device executed. Times are CLOCK_MONOTONIC ns of this host.
typedef struct GpusimOpRecord {
  int kind;                   // GpusimOpKind
  const char* name;           // demangled kernel name / collective name (valid during callback)
  const char* mangled_name;   // as registered (kernels), else NULL
  uint64_t queued_ns;         // when the host enqueued it
  uint64_t start_ns;
  uint64_t end_ns;
  uint32_t stream_id;         // unique per stream in the process (the default stream is 0... see
                              // gpusim_stream_id), equal to CUPTI's streamId in activity records
  uint32_t correlation_id;    // the API call that enqueued it (runtime or driver domain)
  uint32_t device;
  uint32_t context_id;
  uint32_t grid[3];
  uint32_t block[3];
  uint32_t shared_mem;
  uint64_t bytes;             // memcpy/memset/collective bytes
  int copy_kind;              // cudaMemcpyKind for memcpy
  uint32_t graph_id;          // non-zero when executed as part of a graph launch
  uint32_t graph_node_id;
  // (libcudart, additive) memcpy: which sides are CUDA arrays (GpusimCopyArrays bits; 0 for
  // copies between pointers). copy_kind then names the direction with an array counted as
  // device memory: HtoA = cudaMemcpyHostToDevice + GPUSIM_COPY_DST_ARRAY, AtoH =
  // cudaMemcpyDeviceToHost + GPUSIM_COPY_SRC_ARRAY, AtoA = cudaMemcpyDeviceToDevice + both, AtoD
  // and DtoA = cudaMemcpyDeviceToDevice + the array's side.
  uint32_t copy_arrays;
} GpusimOpRecord;
enum GpusimCopyArrays { GPUSIM_COPY_SRC_ARRAY = 1, GPUSIM_COPY_DST_ARRAY = 2 };
// (libcudart, additive note) The op callback also receives GPUSIM_OP_EVENT records for
// cudaEventRecord markers (name NULL, start_ns == end_ns == the event's timestamp); they have no
// ground-truth line. Device times: an op starts when the device could start it (enqueued,
// previous op of its stream ended, awaited ops ended) and lasts exactly its modelled cost; the
// worker never completes it before end_ns in real time.

// Domains of API callbacks (values equal CUpti_CallbackDomain).
enum { GPUSIM_DOMAIN_DRIVER = 1, GPUSIM_DOMAIN_RUNTIME = 2 };

// Called on the calling thread at the enter (is_exit = 0) and exit (is_exit = 1) of every
// simulated runtime API function (libcudart, additive note: except the registration and
// call-configuration functions nvcc's generated code calls, __cudaRegister*, __cudaPush/
// PopCallConfiguration, __cudaGetKernel, and cudaGetErrorString/Name; a <<<>>> launch is
// reported as cudaLaunchKernel, cbid CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000 or its
// _ptsz twin, symbol_name = the mangled kernel name; `params` is the CUPTI params struct of
// generated_cuda_runtime_api_meta.h for launches, cudaMemcpy(Async), cudaMemset(Async),
// cudaMalloc(Async), cudaFree(Async), cudaStreamSynchronize, cudaStreamWaitEvent,
// cudaEventRecord, cudaEventSynchronize, cudaLaunchHostFunc, cudaGraphLaunch, the 3D copies
// and sets, cudaMalloc3D, the CUDA array functions (allocation, free, info, copies to, from
// and between arrays) and batch copies, the memory pool and stream attribute functions, the hints
// (prefetch, advise, ...) and driver entry point lookups; NULL elsewhere), and of simulated
// "driver" calls (e.g. the kernel launch NCCL does inside ncclAllReduce, and the driver entry
// points cudaGetDriverEntryPoint returns). `cbid` is the CUPTI callback id of the function in
// that domain (cupti_runtime_cbid.h / cupti_driver_cbid.h), `params` points to the function's
// parameter struct (or NULL where the simulator has none), `ret` to its return value as an int
// (a cudaError_t in the runtime domain, a CUresult in the driver domain; valid at exit, NULL at
// enter).
typedef void (*GpusimApiCallback)(void* user, int domain, int is_exit, int cbid,
                                  const char* func_name, const char* symbol_name,
                                  uint32_t correlation_id, const void* params, const void* ret);
// Called on a stream worker thread when an operation completed.
typedef void (*GpusimOpCallback)(void* user, const GpusimOpRecord* rec);

// Installs (or, with NULLs, removes) the single observer (the simulated CUPTI).
void gpusim_set_observer(GpusimApiCallback api_cb, GpusimOpCallback op_cb, void* user);

// A fresh correlation id (process-wide, increasing, never 0).
uint32_t gpusim_next_correlation_id(void);

// Emits an API callback pair around a simulated driver call made by another gpusim library:
// gpusim_driver_call_begin returns the correlation id to put on the operations it enqueues.
// `params` is what CUPTI hands out as the call's functionParams (e.g. cuLaunchKernelEx_params),
// or NULL.
uint32_t gpusim_driver_call_begin(int cbid, const char* func_name, const char* symbol_name,
                                  const void* params);
// The exit callback of a driver call that succeeded: its `ret` points to CUDA_SUCCESS (0).
void gpusim_driver_call_end(int cbid, const char* func_name, const char* symbol_name,
                            uint32_t correlation_id, const void* params);
// (libcudart, additive) The exit callback of a driver call that returned `result` (a CUresult):
// the API callback's `ret` points to an int holding it (what CUPTI hands out as the exit's
// functionReturnValue, a CUresult*), valid during the callback. gpusim_driver_call_end is this
// with result 0. The simulated driver entry points of libcudart (cudaGetDriverEntryPoint:
// cuMemCreate, cuMemAlloc, ...) report themselves through these two functions on the calling
// thread, symbol_name NULL, params = their generated_cuda_meta.h struct (cuMemCreate_params,
// cuMemAlloc_v2_params, ...), filled with the call's arguments, so output pointers (*handle,
// *dptr) hold the result at exit.
void gpusim_driver_call_end_result(int cbid, const char* func_name, const char* symbol_name,
                                   uint32_t correlation_id, const void* params, int result);

// Enqueues a custom operation on `stream` (NULL = legacy default stream). When the stream
// worker reaches it, it sets rec->start_ns, calls run(arg, rec) which blocks for as long as the
// operation lasts (e.g. waits for the other ranks, then sleeps the transfer time) and may set
// rec->start_ns/end_ns itself; then the op is reported (observer + ground truth) and `arg` freed
// with free_arg. `tmpl` provides kind/name/bytes/correlation id (copied).
// Returns 0 on success, else a cudaError_t value (e.g. invalid stream).
// (libcudart, additive note) rec->start_ns is the worker's clock just before run(); if run()
// leaves end_ns below start_ns, end_ns is the clock after run(). libcudart writes the ground-
// truth line for custom ops of every kind except GPUSIM_OP_COLLECTIVE, whose line (with the
// collective keys) the enqueuer writes with gpusim_truth_write. A custom op enqueued on a
// capturing stream is not captured: it is dropped (free_arg called, one line on stderr).
int gpusim_stream_enqueue(gpusim_stream_t stream, const GpusimOpRecord* tmpl,
                          void (*run)(void* arg, GpusimOpRecord* rec), void* arg,
                          void (*free_arg)(void* arg));

// As gpusim_stream_enqueue, but an op enqueued on a capturing stream becomes a kernel node of
// the capture graph (with the grid and block of `tmpl`); `arg` is then kept by the graph as a
// template, never run nor freed, and every launch of the graph enqueues the op with
// clone_arg(template) as its argument (freed with free_arg after it ran; a NULL clone skips the
// node). How NCCL calls captured into CUDA graphs replay at each launch.
int gpusim_stream_enqueue_graphable(gpusim_stream_t stream, const GpusimOpRecord* tmpl,
                                    void (*run)(void* arg, GpusimOpRecord* rec), void* arg,
                                    void (*free_arg)(void* arg),
                                    void* (*clone_arg)(void* arg));

// Non-zero while `stream` is being captured into a graph.
int gpusim_stream_capturing(gpusim_stream_t stream);

// The id the simulator uses for `stream` in op records (and CUPTI streamId).
// (libcudart, additive note) The legacy default stream of device d has id d; created and
// per-thread default streams get ids from 64 up; an invalid handle gives 0xffffffff.
uint32_t gpusim_stream_id(gpusim_stream_t stream);

// CLOCK_MONOTONIC ns (the simulator's clock).
uint64_t gpusim_now_ns(void);

// Appends one JSON object (no trailing newline needed) to the ground-truth log, if enabled.
void gpusim_truth_write(const char* json_object);

// The current device of the calling thread.
int gpusim_current_device(void);

// ---- Graph node events (what CUPTI reports as CUPTI_CB_DOMAIN_RESOURCE callbacks) ----------
//
// Values equal CUPTI's CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED / _CLONED.
enum { GPUSIM_GRAPHNODE_CREATED = 13, GPUSIM_GRAPHNODE_CLONED = 20 };

// One graph node event, valid during the callback only. The handles are the runtime's
// (cudaGraph_t, cudaGraphNode_t, cudaGraphExec_t: the same pointers as CUgraph, CUgraphNode,
// CUgraphExec); NULL where not applicable.
typedef struct GpusimGraphNodeEvent {
  int what;                   // GPUSIM_GRAPHNODE_CREATED or GPUSIM_GRAPHNODE_CLONED
  void* graph;                // the graph `node` belongs to (exec nodes: the graph instantiated)
  void* original_graph;       // CLONED: the graph of `original_node`; else NULL
  void* node;                 // the new node
  void* original_node;        // CLONED: the node `node` was copied from; else NULL
  int node_type;              // cudaGraphNodeType of `node` (= CUgraphNodeType)
  void* graph_exec;           // nodes of an executable graph: that cudaGraphExec_t; else NULL
  uint64_t node_id;           // gpusim_graph_node_id(node)
  uint64_t original_node_id;  // CLONED: gpusim_graph_node_id(original_node); else 0
} GpusimGraphNodeEvent;
typedef void (*GpusimGraphNodeCallback)(void* user, const GpusimGraphNodeEvent* ev);

// Installs (or, with NULL, removes) the single graph node observer (the simulated CUPTI). It is
// called on the thread of the API call that made the node, while that call runs (after its API
// enter callback, before its exit callback), with no simulator lock held:
// - CREATED for every node a graph gets: each node stream capture adds (kernels of every launch
//   entry point, copies, sets, host functions, captured frees, NCCL's graphable ops inside their
//   cuLaunchKernelEx driver call; captured event records and waits add edges, no node), and
//   each node of cudaGraphAdd*Node / cudaGraphAddNode (graph, node, node_type).
// - CLONED for every node cudaGraphClone copies (graph = the clone, original_* = the source),
//   and for the nodes of the copy cudaGraphAddChildGraphNode (or cudaGraphAddNode without
//   ownership move) makes of a child graph; then CREATED for the child graph node itself.
// - cudaGraphInstantiate (all variants): each node of the executable graph gets a new id; in
//   launch order, CREATED (graph = the graph instantiated, node = the exec node, graph_exec) then
//   CLONED (original_node = the node it was instantiated from, inside a child graph for the
//   nodes of child graphs, which are flattened; child graph nodes themselves have no exec
//   node). Ops of that exec's launches carry the exec node's id as graph_node_id.
//   cudaGraphExecUpdate and cudaGraphExec*SetParams keep the exec node ids. A failed call issues
//   nothing.
void gpusim_set_graph_observer(GpusimGraphNodeCallback cb, void* user);

// The unique id (never 0) of a node handle the simulator handed out (graph nodes, also after
// their graph was destroyed, and exec nodes of graph node events); 0 for anything else.
uint64_t gpusim_graph_node_id(const void* node);

#ifdef __cplusplus
}

#include <signal.h>

#include <thread>
#include <utility>

namespace gpusim {
// Starts one of the simulator's own threads (a stream's worker, CUPTI's delivery thread),
// detached, with the process-directed signals blocked (the faults, which only the thread's own
// instructions raise, excepted). They stand in for device hardware and the driver's threads: the
// legacy stream's worker is created before main, where no real CUDA thread exists, and must not
// take a signal the application's threads all block (a server's sigwait thread would never see
// it, and the process would die of it instead).
template <typename F, typename... Args>
void StartSimThread(F&& f, Args&&... args) {
  sigset_t block, old;
  sigfillset(&block);
  for (int fault : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS, SIGABRT}) {
    sigdelset(&block, fault);
  }
  pthread_sigmask(SIG_BLOCK, &block, &old);
  std::thread(std::forward<F>(f), std::forward<Args>(args)...).detach();
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}
}  // namespace gpusim
#endif

#endif  // PROFAGENT_TESTS_GPUSIM_GPUSIM_INTERNAL_H_
