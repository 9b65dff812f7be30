// CUDA runtime entry points of gpusim's libcudart.so.13 for graphs: creating and destroying
// graphs, adding nodes by hand (kernel, memcpy, memset, host, empty, child graph, event record
// and wait), edges, queries, node parameters, cloning, instantiation, executable-graph updates
// and launches. Stream capture (cudart_launch.cc) builds the same Graph structure.
//
// Semantics follow CUDA's documentation:
// - Node handles are stable and validated: a destroyed node, or a node of a destroyed graph,
//   gives cudaErrorInvalidValue. Parameters are copied into the node when it is added or set,
//   except kernel arguments: device code does not run, so kernelParams/extra are kept as the
//   pointers given (GetParams returns them; they are never dereferenced).
// - cudaGraphAddChildGraphNode clones the child graph into the node; cudaGraphClone deep-copies
//   a graph (new node handles, found again with cudaGraphNodeFindInClone).
// - Instantiation snapshots the graph: later edits of the graph do not change the executable
//   graph. The snapshot is the graph's nodes in a topological order (among the nodes whose
//   dependencies are all placed, the one created first; so a captured graph runs in capture
//   order), child graphs inlined at their node's place. A cycle fails with
//   cudaErrorInvalidValue. Like CUDA's, each node of the snapshot is a clone with an id of its
//   own (what CUPTI reports as graphNodeId), reported with graph node events (CREATED, then
//   CLONED from the graph's node; gpusim_internal.h), as are the nodes graphs get and clone.
// - cudaGraphLaunch enqueues that order serially on the launch stream: each node starts after
//   the previous one ended, which satisfies every dependency but runs independent branches one
//   after the other (real hardware may overlap them). Every op carries the executable graph's id
//   (the id of the graph it was instantiated from), its exec node's id and the launch's
//   correlation id. A launch on another stream than the previous launch of the same executable
//   graph waits for that launch, as CUDA orders launches of one cudaGraphExec_t. Event record nodes
//   record their event on the launch stream; event wait nodes wait for the event's latest record.
// - cudaGraphExecUpdate succeeds when the graph has the executable graph's topology (same node
//   count, node types in creation order, the same dependencies, child graphs alike, memcpy
//   directions unchanged) and then takes every node's parameters from it; otherwise it returns
//   cudaErrorGraphExecUpdateFailure with the result info filled and the executable unchanged.
//
// Not simulated (generated stubs: "gpusim: <function> is not supported"): memory allocation and
// free nodes added by hand, external semaphore nodes, conditional nodes, kernel node attributes,
// cudaGraphExecChildGraphNodeSetParams, user objects. Memcpy nodes take CUDA arrays like
// cudaMemcpy3D (InitCopyOpFromParms).
#include <cuda_runtime_api.h>
#include <generated_cuda_runtime_api_meta.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <mutex>
#include <queue>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tests/gpusim/cudart_unsupported.h"
#include "tests/gpusim/sim_device.h"

using gpusim::ApiCall;
using gpusim::ApiInfo;
using gpusim::ExecNode;
using gpusim::Graph;
using gpusim::GraphNode;
using gpusim::Kernel;
using gpusim::NodeShape;
using gpusim::NodeWork;
using gpusim::Op;
using gpusim::Stream;

namespace {

Graph* AsGraph(cudaGraph_t g) { return reinterpret_cast<Graph*>(g); }
Graph* AsGraph(cudaGraphExec_t g) { return reinterpret_cast<Graph*>(g); }
GraphNode* AsNode(cudaGraphNode_t n) { return reinterpret_cast<GraphNode*>(n); }
cudaGraphNode_t Handle(GraphNode* n) { return reinterpret_cast<cudaGraphNode_t>(n); }
gpusim::Event* AsEvent(cudaEvent_t e) { return reinterpret_cast<gpusim::Event*>(e); }

bool IsDefaultEdge(const cudaGraphEdgeData& e) {
  static const cudaGraphEdgeData kDefault = {};
  return memcmp(&e, &kDefault, sizeof(e)) == 0;
}

// ---- Node work from API parameters ----------------------------------------------------------

cudaError_t KernelWork(const cudaKernelNodeParams* p, NodeWork* w) {
  if (p == nullptr || (p->kernelParams != nullptr && p->extra != nullptr)) {
    return cudaErrorInvalidValue;
  }
  const Kernel* k = gpusim::FindKernel(p->func);
  if (k == nullptr) return cudaErrorInvalidDeviceFunction;
  dim3 grid = p->gridDim, block = p->blockDim;
  uint64_t threads_per_block = static_cast<uint64_t>(block.x) * block.y * block.z;
  uint64_t blocks = static_cast<uint64_t>(grid.x) * grid.y * grid.z;
  if (threads_per_block == 0 || threads_per_block > 1024 || blocks == 0 || block.z > 64 ||
      grid.y > 65535 || grid.z > 65535) {
    return cudaErrorInvalidValue;
  }
  w->type = cudaGraphNodeTypeKernel;
  w->op = Op();
  gpusim::InitKernelOp(&w->op, k, grid, block, p->sharedMemBytes);
  w->kernel = *p;
  return cudaSuccess;
}

// A memcpy node copies extent.depth slices of extent.height rows of extent.width elements
// between pitched pointers (slices ysize rows apart) and CUDA arrays, validated like
// cudaMemcpy3D.
cudaError_t MemcpyWork(const cudaMemcpy3DParms* p, NodeWork* w) {
  if (p == nullptr) return cudaErrorInvalidValue;
  Op op;
  cudaError_t err = gpusim::InitCopyOpFromParms(&op, *p);
  if (err != cudaSuccess) return err;
  w->type = cudaGraphNodeTypeMemcpy;
  w->op = std::move(op);
  w->copy = *p;
  return cudaSuccess;
}

cudaMemcpy3DParms Copy1D(void* dst, const void* src, size_t count, cudaMemcpyKind kind) {
  cudaMemcpy3DParms p = {};
  p.srcPtr = cudaPitchedPtr{const_cast<void*>(src), count, count, 1};
  p.dstPtr = cudaPitchedPtr{dst, count, count, 1};
  p.extent = cudaExtent{count, 1, 1};
  p.kind = kind;
  return p;
}

// A __device__ variable's host shadow is its device storage; `offset + count` must fit in it.
cudaError_t SymbolAddress(const void* symbol, size_t count, size_t offset, char** address) {
  size_t size = 0;
  if (symbol == nullptr || !gpusim::SymbolSize(symbol, &size)) return cudaErrorInvalidSymbol;
  if (offset > size || count > size - offset) return cudaErrorInvalidValue;
  *address = static_cast<char*>(const_cast<void*>(symbol)) + offset;
  return cudaSuccess;
}

// A copy to a symbol is a copy to device memory: the direction comes from the other side.
cudaMemcpyKind SymbolCopyKind(cudaMemcpyKind kind, const void* other, bool to_symbol) {
  if (kind != cudaMemcpyDefault) return kind;
  gpusim::Allocation a;
  bool found = gpusim::FindAllocation(other, nullptr, &a);
  if (found && gpusim::OnDevice(a.kind)) {
    return cudaMemcpyDeviceToDevice;
  }
  return to_symbol ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost;
}

cudaError_t ToSymbolWork(const void* symbol, const void* src, size_t count, size_t offset,
                         cudaMemcpyKind kind, NodeWork* w) {
  char* dst = nullptr;
  cudaError_t err = SymbolAddress(symbol, count, offset, &dst);
  if (err != cudaSuccess) return err;
  if (kind != cudaMemcpyHostToDevice && kind != cudaMemcpyDeviceToDevice &&
      kind != cudaMemcpyDefault) {
    return cudaErrorInvalidMemcpyDirection;
  }
  cudaMemcpy3DParms p = Copy1D(dst, src, count, SymbolCopyKind(kind, src, true));
  return MemcpyWork(&p, w);
}

cudaError_t FromSymbolWork(void* dst, const void* symbol, size_t count, size_t offset,
                           cudaMemcpyKind kind, NodeWork* w) {
  char* src = nullptr;
  cudaError_t err = SymbolAddress(symbol, count, offset, &src);
  if (err != cudaSuccess) return err;
  if (kind != cudaMemcpyDeviceToHost && kind != cudaMemcpyDeviceToDevice &&
      kind != cudaMemcpyDefault) {
    return cudaErrorInvalidMemcpyDirection;
  }
  cudaMemcpy3DParms p = Copy1D(dst, src, count, SymbolCopyKind(kind, dst, false));
  return MemcpyWork(&p, w);
}

// Memset nodes set `height` rows of `width` elements of elementSize (1, 2 or 4) bytes to
// `value` (truncated to the element size); `pitch` is unused for a single row.
cudaError_t MemsetWork(const cudaMemsetParams* p, NodeWork* w) {
  if (p == nullptr || p->dst == nullptr) return cudaErrorInvalidValue;
  unsigned size = p->elementSize;
  if (size != 1 && size != 2 && size != 4) return cudaErrorInvalidValue;
  size_t row_bytes = p->width * size;
  if (p->height > 1 && p->pitch < row_bytes) return cudaErrorInvalidValue;
  uint32_t value = p->value;
  if (size == 1) value &= 0xffu;
  if (size == 2) value &= 0xffffu;
  w->type = cudaGraphNodeTypeMemset;
  w->op = Op();
  gpusim::InitSetOp(&w->op, p->dst, p->height > 1 ? p->pitch : row_bytes,
                    static_cast<int>(value), size, row_bytes, p->height);
  w->set = *p;
  return cudaSuccess;
}

cudaError_t HostWork(const cudaHostNodeParams* p, NodeWork* w) {
  if (p == nullptr || p->fn == nullptr) return cudaErrorInvalidValue;
  w->type = cudaGraphNodeTypeHost;
  w->op = Op();
  w->op.action = Op::kHostFn;
  w->op.report = true;
  w->op.rec.kind = GPUSIM_OP_HOSTFN;
  w->op.host_fn = p->fn;
  w->op.user_data = p->userData;
  w->host = *p;
  return cudaSuccess;
}

cudaError_t EventWork(cudaGraphNodeType type, cudaEvent_t event, NodeWork* w) {
  if (!gpusim::IsLiveEvent(AsEvent(event))) return cudaErrorInvalidValue;
  w->type = type;
  w->op = Op();
  w->event = AsEvent(event);
  return cudaSuccess;
}

// ---- Graph algorithms (GraphMutex() held) ---------------------------------------------------

// A deep copy of `src`: new nodes (cloned_from set, a CLONED event each), the same edges,
// child graphs cloned.
Graph* CloneLocked(const Graph* src) {
  Graph* c = gpusim::CreateGraphLocked(false);
  std::unordered_map<const GraphNode*, GraphNode*> copies;
  for (GraphNode* n : src->nodes) {
    NodeWork w = n->work;
    if (w.child != nullptr) w.child = CloneLocked(w.child);
    copies[n] = gpusim::AddNodeLocked(c, std::move(w), {}, nullptr, /*cloned_from=*/n);
  }
  for (GraphNode* n : src->nodes) {
    GraphNode* m = copies[n];
    for (GraphNode* d : n->deps) m->deps.push_back(copies[d]);
    m->edge_data = n->edge_data;
  }
  return c;
}

std::unordered_map<const GraphNode*, size_t> IndexOf(const Graph* g) {
  std::unordered_map<const GraphNode*, size_t> index;
  for (size_t i = 0; i < g->nodes.size(); ++i) index[g->nodes[i]] = i;
  return index;
}

// Indices of g's nodes in a topological order; among the ready nodes the one created first.
// False if the edges have a cycle.
bool TopologicalOrder(const Graph* g, std::vector<size_t>* order) {
  size_t n = g->nodes.size();
  std::unordered_map<const GraphNode*, size_t> index = IndexOf(g);
  std::vector<size_t> waiting(n);
  std::vector<std::vector<size_t>> dependents(n);
  for (size_t i = 0; i < n; ++i) {
    waiting[i] = g->nodes[i]->deps.size();
    for (const GraphNode* d : g->nodes[i]->deps) dependents[index[d]].push_back(i);
  }
  std::priority_queue<size_t, std::vector<size_t>, std::greater<size_t>> ready;
  for (size_t i = 0; i < n; ++i) {
    if (waiting[i] == 0) ready.push(i);
  }
  order->clear();
  while (!ready.empty()) {
    size_t i = ready.top();
    ready.pop();
    order->push_back(i);
    for (size_t j : dependents[i]) {
      if (--waiting[j] == 0) ready.push(j);
    }
  }
  return order->size() == n;
}

// Appends g's work in launch order (child graphs inlined). Top-level entries remember their
// node, for the cudaGraphExec*SetParams functions.
bool FlattenLocked(const Graph* g, bool top, std::vector<ExecNode>* out) {
  std::vector<size_t> order;
  if (!TopologicalOrder(g, &order)) return false;
  for (size_t i : order) {
    const GraphNode* n = g->nodes[i];
    if (n->work.type == cudaGraphNodeTypeGraph) {
      if (!FlattenLocked(n->work.child, false, out)) return false;
      continue;
    }
    ExecNode x;
    x.origin = top ? n : nullptr;
    x.source = n;
    x.work = n->work;
    out->push_back(std::move(x));
  }
  return true;
}

std::vector<NodeShape> ShapeLocked(const Graph* g);

std::string EncodeShape(const std::vector<NodeShape>& shape) {
  std::string s;
  for (const NodeShape& n : shape) {
    s += "t" + std::to_string(static_cast<int>(n.type)) + "(";
    for (size_t d : n.deps) s += std::to_string(d) + ",";
    s += ")";
    if (!n.child.empty()) s += "{" + n.child + "}";
  }
  return s;
}

std::vector<NodeShape> ShapeLocked(const Graph* g) {
  std::unordered_map<const GraphNode*, size_t> index = IndexOf(g);
  std::vector<NodeShape> shape;
  for (const GraphNode* n : g->nodes) {
    NodeShape s;
    s.type = n->work.type;
    for (const GraphNode* d : n->deps) s.deps.push_back(index[d]);
    std::sort(s.deps.begin(), s.deps.end());
    // The memory types of a memcpy node: its direction and which sides are arrays.
    s.copy_kind = n->work.type == cudaGraphNodeTypeMemcpy
                      ? n->work.op.rec.copy_kind | static_cast<int>(n->work.op.rec.copy_arrays << 8)
                      : -1;
    if (n->work.child != nullptr) s.child = EncodeShape(ShapeLocked(n->work.child));
    shape.push_back(std::move(s));
  }
  return shape;
}

// Checks that `deps` (n handles) are distinct live nodes of `g`.
cudaError_t CheckDepsLocked(const Graph* g, const cudaGraphNode_t* deps, size_t n,
                            std::vector<GraphNode*>* out) {
  if (n > 0 && deps == nullptr) return cudaErrorInvalidValue;
  for (size_t i = 0; i < n; ++i) {
    GraphNode* d = AsNode(deps[i]);
    if (!gpusim::IsLiveNodeLocked(d) || d->graph != g) return cudaErrorInvalidValue;
    if (std::find(out->begin(), out->end(), d) != out->end()) return cudaErrorInvalidValue;
    out->push_back(d);
  }
  return cudaSuccess;
}

// Checks where a node is to be added (GraphMutex() held): an output handle, a live graph,
// distinct live dependencies in it.
cudaError_t CheckAddLocked(cudaGraphNode_t* out, cudaGraph_t graph, const cudaGraphNode_t* deps,
                           size_t num_deps, std::vector<GraphNode*>* dep_nodes) {
  if (out == nullptr || !gpusim::IsLiveGraphLocked(AsGraph(graph), false)) {
    return cudaErrorInvalidValue;
  }
  return CheckDepsLocked(AsGraph(graph), deps, num_deps, dep_nodes);
}

cudaError_t AddNode(cudaGraphNode_t* out, cudaGraph_t graph, const cudaGraphNode_t* deps,
                    size_t num_deps, cudaError_t built, NodeWork work) {
  if (built != cudaSuccess) return built;
  std::lock_guard<std::mutex> lock(gpusim::GraphMutex());
  std::vector<GraphNode*> dep_nodes;
  cudaError_t err = CheckAddLocked(out, graph, deps, num_deps, &dep_nodes);
  if (err != cudaSuccess) return err;
  *out = Handle(gpusim::AddNodeLocked(AsGraph(graph), std::move(work), dep_nodes, nullptr));
  return cudaSuccess;
}

// Adds a child graph node to `graph` (GraphMutex() held): the node owns a clone of `child`,
// or, for cudaGraphChildGraphOwnershipMove, `child` itself (which must not be `graph`).
cudaError_t AddChildLocked(cudaGraphNode_t* out, cudaGraph_t graph, const cudaGraphNode_t* deps,
                           const cudaGraphEdgeData* edge_data, size_t num_deps,
                           cudaGraph_t child, bool move) {
  std::vector<GraphNode*> dep_nodes;
  cudaError_t err = CheckAddLocked(out, graph, deps, num_deps, &dep_nodes);
  if (err != cudaSuccess) return err;
  Graph* c = AsGraph(child);
  if (!gpusim::IsLiveGraphLocked(c, false) || c->owner != nullptr ||
      (move && c == AsGraph(graph))) {
    return cudaErrorInvalidValue;
  }
  NodeWork w;
  w.type = cudaGraphNodeTypeGraph;
  w.child = move ? c : CloneLocked(c);
  *out = Handle(gpusim::AddNodeLocked(AsGraph(graph), std::move(w), dep_nodes, edge_data));
  return cudaSuccess;
}

// The live node `node` (GraphMutex() held) if it has type `type`; nullptr otherwise.
GraphNode* NodeOfTypeLocked(cudaGraphNode_t node, cudaGraphNodeType type) {
  GraphNode* n = AsNode(node);
  if (!gpusim::IsLiveNodeLocked(n) || n->work.type != type) return nullptr;
  return n;
}

// The getters of node parameters: `*out = read(node's work)` for a live node of `type`.
template <typename T, typename Read>
cudaError_t ReadNode(cudaGraphNode_t node, cudaGraphNodeType type, T* out, Read read) {
  if (out == nullptr) return cudaErrorInvalidValue;
  std::lock_guard<std::mutex> lock(gpusim::GraphMutex());
  GraphNode* n = NodeOfTypeLocked(node, type);
  if (n == nullptr) return cudaErrorInvalidValue;
  *out = read(n->work);
  return cudaSuccess;
}

// Replaces the work of `node` (of the same type); the node keeps its id and edges.
cudaError_t SetNodeWork(cudaGraphNode_t node, cudaError_t built, NodeWork work) {
  if (built != cudaSuccess) return built;
  std::lock_guard<std::mutex> lock(gpusim::GraphMutex());
  GraphNode* n = NodeOfTypeLocked(node, work.type);
  if (n == nullptr) return cudaErrorInvalidValue;
  work.op.rec.graph_node_id = n->id;
  n->work = std::move(work);
  return cudaSuccess;
}

// Replaces the work `node` contributes to an executable graph instantiated from its graph. A
// memcpy node cannot change its direction (CUDA: memory types cannot change).
cudaError_t SetExecNodeWork(cudaGraphExec_t exec, cudaGraphNode_t node, cudaError_t built,
                            NodeWork work) {
  if (built != cudaSuccess) return built;
  std::lock_guard<std::mutex> lock(gpusim::GraphMutex());
  Graph* e = AsGraph(exec);
  GraphNode* n = AsNode(node);
  if (!gpusim::IsLiveGraphLocked(e, true) || !gpusim::IsLiveNodeLocked(n)) {
    return cudaErrorInvalidValue;
  }
  for (ExecNode& x : e->launch) {
    if (x.origin != n) continue;
    if (x.work.type != work.type) return cudaErrorInvalidValue;
    if (work.type == cudaGraphNodeTypeMemcpy &&
        (x.work.op.rec.copy_kind != work.op.rec.copy_kind ||
         x.work.op.rec.copy_arrays != work.op.rec.copy_arrays)) {
      return cudaErrorInvalidValue;
    }
    work.op.rec.graph_node_id = x.work.op.rec.graph_node_id;
    x.work = std::move(work);
    return cudaSuccess;
  }
  return cudaErrorInvalidValue;  // not a node of the graph `exec` was instantiated from
}

// Copies up to *count handles of `nodes` into `out` (NULL-padded), as cudaGraphGetNodes does.
void ReturnNodes(const std::vector<GraphNode*>& nodes, cudaGraphNode_t* out, size_t* count) {
  if (out == nullptr) {
    *count = nodes.size();
    return;
  }
  size_t n = std::min(*count, nodes.size());
  for (size_t i = 0; i < *count; ++i) out[i] = i < n ? Handle(nodes[i]) : nullptr;
  *count = n;
}

// Returns edges (from[i] -> to[i], data[i]) with cudaGraphGetEdges' conventions: counting when
// `from` and `to` are NULL, NULL padding, cudaErrorLossyQuery when `data` is NULL and a returned
// edge has non-default data.
cudaError_t ReturnEdges(const std::vector<GraphNode*>& from_nodes,
                        const std::vector<GraphNode*>& to_nodes,
                        const std::vector<cudaGraphEdgeData>& data, cudaGraphNode_t* from,
                        cudaGraphNode_t* to, cudaGraphEdgeData* edge_data, size_t* count) {
  if (from == nullptr && to == nullptr) {
    *count = from_nodes.size();
    return cudaSuccess;
  }
  size_t n = std::min(*count, from_nodes.size());
  bool lossy = false;
  for (size_t i = 0; i < *count; ++i) {
    if (from != nullptr) from[i] = i < n ? Handle(from_nodes[i]) : nullptr;
    if (to != nullptr) to[i] = i < n ? Handle(to_nodes[i]) : nullptr;
    if (edge_data != nullptr) edge_data[i] = i < n ? data[i] : cudaGraphEdgeData{};
    if (i < n && edge_data == nullptr && !IsDefaultEdge(data[i])) lossy = true;
  }
  *count = n;
  return lossy ? cudaErrorLossyQuery : cudaSuccess;
}

// cudaGraphNodeGetDependencies / GetDependentNodes: `edge_data` needs `nodes`.
cudaError_t NeighboursImpl(cudaGraphNode_t node, cudaGraphNode_t* nodes,
                           cudaGraphEdgeData* edge_data, size_t* count, bool dependents) {
  if (count == nullptr || (edge_data != nullptr && nodes == nullptr)) {
    return cudaErrorInvalidValue;
  }
  std::lock_guard<std::mutex> lock(gpusim::GraphMutex());
  GraphNode* n = AsNode(node);
  if (!gpusim::IsLiveNodeLocked(n)) return cudaErrorInvalidValue;
  std::vector<GraphNode*> list;
  std::vector<cudaGraphEdgeData> data;
  if (dependents) {
    for (GraphNode* m : n->graph->nodes) {
      for (size_t i = 0; i < m->deps.size(); ++i) {
        if (m->deps[i] != n) continue;
        list.push_back(m);
        data.push_back(m->edge_data[i]);
      }
    }
  } else {
    list = n->deps;
    data = n->edge_data;
  }
  return ReturnEdges(list, list, data, nodes, nullptr, edge_data, count);
}

// `params`: the call's CUPTI parameter struct (what a callback subscriber reads).
cudaError_t InstantiateImpl(const ApiInfo& info, cudaGraphExec_t* exec, cudaGraph_t graph,
                            unsigned long long flags, cudaGraphInstantiateResult* result,
                            const void* params) {
  ApiCall api(info, params);
  if (result != nullptr) *result = cudaGraphInstantiateError;
  if (exec == nullptr) return api.Return(cudaErrorInvalidValue);
  {
    std::lock_guard<std::mutex> lock(gpusim::GraphMutex());
    Graph* g = AsGraph(graph);
    if (!gpusim::IsLiveGraphLocked(g, false)) return api.Return(cudaErrorInvalidValue);
    std::vector<ExecNode> launch;
    if (!FlattenLocked(g, true, &launch)) {
      if (result != nullptr) *result = cudaGraphInstantiateInvalidStructure;
      return api.Return(cudaErrorInvalidValue);
    }
    Graph* e = gpusim::CreateGraphLocked(/*exec=*/true);
    e->id = g->id;  // ops of a launch carry the id of the graph they were instantiated from
    e->launch = std::move(launch);
    // Every exec node is a copy of its graph's node with an id of its own, which the ops of
    // launches carry (CREATED + CLONED events, delivered by api.Return below).
    for (ExecNode& x : e->launch) gpusim::AddExecNodeLocked(e, g, &x);
    e->shape = ShapeLocked(g);
    e->flags = flags;
    *exec = reinterpret_cast<cudaGraphExec_t>(e);
  }
  if (result != nullptr) *result = cudaGraphInstantiateSuccess;
  return api.Return(cudaSuccess);
}

cudaError_t GraphLaunchImpl(const ApiInfo& info, cudaGraphExec_t exec, cudaStream_t stream,
                            bool pt) {
  cudaGraphLaunch_v10000_params params{exec, stream};
  ApiCall api(info, &params);
  return api.Return(gpusim::GraphLaunchOn(api.corr(), exec, stream, pt));
}

}  // namespace

// cudaGraphLaunch's work (and cuGraphLaunch's, cudart_driver.cc), under `corr`.
cudaError_t gpusim::GraphLaunchOn(uint32_t corr, cudaGraphExec_t exec, cudaStream_t stream,
                                  bool pt) {
  Graph* g = AsGraph(exec);
  Stream* s = gpusim::ResolveStream(stream, pt);
  std::vector<ExecNode> launch;
  Stream* prev_stream = nullptr;
  uint64_t prev_seq = 0;
  {
    std::lock_guard<std::mutex> lock(gpusim::GraphMutex());
    if (!gpusim::IsLiveGraphLocked(g, /*exec=*/true)) return cudaErrorInvalidValue;
    if (s == nullptr) return cudaErrorInvalidResourceHandle;
    launch = g->launch;
    prev_stream = g->last_stream;
    prev_seq = g->last_seq;
  }
  uint64_t now = gpusim::NowNs();
  uint64_t last_seq = 0;
  auto stamp = [&](Op* op, const ExecNode& x) {
    op->rec.correlation_id = corr;
    op->rec.graph_id = g->id;
    op->rec.graph_node_id = x.work.op.rec.graph_node_id;
    op->rec.queued_ns = now;
  };
  if (prev_stream != nullptr && prev_stream != s &&
      prev_stream->completed_seq.load(std::memory_order_acquire) < prev_seq) {
    Op* op = new Op();  // behind the previous launch of this executable graph
    op->rec.correlation_id = corr;
    op->waits.emplace_back(prev_stream, prev_seq);
    last_seq = gpusim::Enqueue(s, op);
  }
  for (const ExecNode& x : launch) {
    if (!x.enabled) continue;
    uint64_t seq = 0;
    switch (x.work.type) {
      case cudaGraphNodeTypeKernel:
      case cudaGraphNodeTypeMemcpy:
      case cudaGraphNodeTypeMemset:
      case cudaGraphNodeTypeHost: {
        Op* op = new Op(x.work.op);
        if (op->action == Op::kCustom) {  // a captured NCCL call: a fresh argument per launch
          op->arg = op->clone_arg != nullptr ? op->clone_arg(op->arg) : nullptr;
          if (op->arg == nullptr) {
            delete op;
            break;
          }
        }
        stamp(op, x);
        seq = gpusim::Enqueue(s, op);
        break;
      }
      case cudaGraphNodeTypeEventRecord:
        if (gpusim::IsLiveEvent(x.work.event)) {
          Op* op = new Op();
          stamp(op, x);
          seq = gpusim::RecordEvent(s, x.work.event, op);
        }
        break;
      case cudaGraphNodeTypeWaitEvent: {
        if (!gpusim::IsLiveEvent(x.work.event)) break;
        Stream* after = nullptr;
        uint64_t after_seq = 0;
        {
          std::lock_guard<std::mutex> lock(x.work.event->mu);
          after = x.work.event->stream;
          after_seq = x.work.event->seq;
        }
        if (after == nullptr || after == s) break;
        Op* op = new Op();
        stamp(op, x);
        op->waits.emplace_back(after, after_seq);
        seq = gpusim::Enqueue(s, op);
        break;
      }
      default:  // empty nodes (and captured memory free nodes) enqueue nothing
        break;
    }
    if (seq != 0) last_seq = seq;
  }
  if (last_seq != 0) {
    std::lock_guard<std::mutex> lock(gpusim::GraphMutex());
    g->last_stream = s;
    g->last_seq = last_seq;
  }
  return cudaSuccess;
}

namespace {

// Compares the executable graph's instantiated shape with `g`'s; fills `info` on a mismatch.
cudaGraphExecUpdateResult CompareShapeLocked(const std::vector<NodeShape>& old_shape,
                                             const Graph* g,
                                             cudaGraphExecUpdateResultInfo* info) {
  std::vector<NodeShape> shape = ShapeLocked(g);
  if (shape.size() != old_shape.size()) return cudaGraphExecUpdateErrorTopologyChanged;
  for (size_t i = 0; i < shape.size(); ++i) {
    const NodeShape& a = old_shape[i];
    const NodeShape& b = shape[i];
    info->errorNode = Handle(g->nodes[i]);
    if (a.type != b.type) return cudaGraphExecUpdateErrorNodeTypeChanged;
    if (a.deps != b.deps || a.child != b.child) {
      for (size_t d : b.deps) {
        if (std::find(a.deps.begin(), a.deps.end(), d) == a.deps.end()) {
          info->errorFromNode = Handle(g->nodes[d]);
          break;
        }
      }
      return cudaGraphExecUpdateErrorTopologyChanged;
    }
    if (a.copy_kind != b.copy_kind) return cudaGraphExecUpdateErrorParametersChanged;
  }
  info->errorNode = nullptr;
  return cudaGraphExecUpdateSuccess;
}

// ---- cudaGraphNodeParams (cudaGraphAddNode and friends) -------------------------------------

// The work described by a cudaGraphNodeParams of a type gpusim simulates, except child graphs
// (cudaGraphAddNode adds those itself; setting them is not simulated).
cudaError_t WorkFromNodeParams(const cudaGraphNodeParams* p, NodeWork* w) {
  static gpusim::UnsupportedOnce unsupported;
  if (p == nullptr) return cudaErrorInvalidValue;
  switch (p->type) {
    case cudaGraphNodeTypeKernel: {
      cudaKernelNodeParams k;
      k.func = p->kernel.func;
      k.gridDim = p->kernel.gridDim;
      k.blockDim = p->kernel.blockDim;
      k.sharedMemBytes = p->kernel.sharedMemBytes;
      k.kernelParams = p->kernel.kernelParams;
      k.extra = p->kernel.extra;
      return KernelWork(&k, w);
    }
    case cudaGraphNodeTypeMemcpy:
      return MemcpyWork(&p->memcpy.copyParams, w);
    case cudaGraphNodeTypeMemset: {
      cudaMemsetParams m;
      m.dst = p->memset.dst;
      m.pitch = p->memset.pitch;
      m.value = p->memset.value;
      m.elementSize = p->memset.elementSize;
      m.width = p->memset.width;
      m.height = p->memset.height;
      return MemsetWork(&m, w);
    }
    case cudaGraphNodeTypeHost: {
      cudaHostNodeParams h{p->host.fn, p->host.userData};
      return HostWork(&h, w);
    }
    case cudaGraphNodeTypeEmpty:
      w->type = cudaGraphNodeTypeEmpty;
      w->op = Op();
      return cudaSuccess;
    case cudaGraphNodeTypeWaitEvent:
      return EventWork(p->type, p->eventWait.event, w);
    case cudaGraphNodeTypeEventRecord:
      return EventWork(p->type, p->eventRecord.event, w);
    default:
      break;
  }
  return static_cast<cudaError_t>(gpusim::ReportUnsupported(
      "cudaGraphAddNode/cudaGraph(Exec)NodeSetParams for this node type", &unsupported));
}

const char* NodeTypeName(cudaGraphNodeType t) {
  switch (t) {
    case cudaGraphNodeTypeKernel: return "kernel";
    case cudaGraphNodeTypeMemcpy: return "memcpy";
    case cudaGraphNodeTypeMemset: return "memset";
    case cudaGraphNodeTypeHost: return "host";
    case cudaGraphNodeTypeGraph: return "graph";
    case cudaGraphNodeTypeEmpty: return "empty";
    case cudaGraphNodeTypeWaitEvent: return "event_wait";
    case cudaGraphNodeTypeEventRecord: return "event_record";
    case cudaGraphNodeTypeMemFree: return "mem_free";
    default: return "other";
  }
}

void DotNodesLocked(const Graph* g, FILE* f) {
  for (const GraphNode* n : g->nodes) {
    const char* name = n->work.type == cudaGraphNodeTypeKernel ? n->work.op.rec.name : "";
    fprintf(f, "  n%u [label=\"%u %s %s\"];\n", n->id, n->id, NodeTypeName(n->work.type),
            name);
    for (const GraphNode* d : n->deps) fprintf(f, "  n%u -> n%u;\n", d->id, n->id);
    if (n->work.child != nullptr) {
      fprintf(f, "  subgraph cluster_%u {\n", n->id);
      DotNodesLocked(n->work.child, f);
      fprintf(f, "  }\n");
    }
  }
}

}  // namespace

extern "C" {

// Declared by the header only under per-thread-default-stream builds.
cudaError_t cudaGraphInstantiateWithParams_ptsz(cudaGraphExec_t* exec, cudaGraph_t graph,
                                                cudaGraphInstantiateParams* params);
cudaError_t cudaGraphUpload_ptsz(cudaGraphExec_t exec, cudaStream_t stream);

// ---- Graphs ---------------------------------------------------------------------------------

cudaError_t cudaGraphCreate(cudaGraph_t* graph, unsigned int flags) {
  static const ApiInfo kInfo("cudaGraphCreate");
  const cudaGraphCreate_v10000_params prm{graph, flags};
  ApiCall api(kInfo, &prm);
  if (graph == nullptr || flags != 0) return api.Return(cudaErrorInvalidValue);
  *graph = reinterpret_cast<cudaGraph_t>(gpusim::CreateGraph(false));
  return api.Return(cudaSuccess);
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  static const ApiInfo kInfo("cudaGraphDestroy");
  const cudaGraphDestroy_v10000_params prm{graph};
  ApiCall api(kInfo, &prm);
  std::lock_guard<std::mutex> lock(gpusim::GraphMutex());
  Graph* g = AsGraph(graph);
  // A child graph belongs to its node and goes with it.
  if (!gpusim::IsLiveGraphLocked(g, false) || g->owner != nullptr) {
    return api.Return(cudaErrorInvalidValue);
  }
  gpusim::DestroyGraphLocked(g);
  return api.Return(cudaSuccess);
}

cudaError_t cudaGraphClone(cudaGraph_t* clone, cudaGraph_t original) {
  static const ApiInfo kInfo("cudaGraphClone");
  const cudaGraphClone_v10000_params prm{clone, original};
  ApiCall api(kInfo, &prm);
  if (clone == nullptr) return api.Return(cudaErrorInvalidValue);
  {
    std::lock_guard<std::mutex> lock(gpusim::GraphMutex());
    Graph* g = AsGraph(original);
    if (!gpusim::IsLiveGraphLocked(g, false)) return api.Return(cudaErrorInvalidValue);
    *clone = reinterpret_cast<cudaGraph_t>(CloneLocked(g));
  }
  return api.Return(cudaSuccess);  // delivers the CLONED events with no lock held
}

cudaError_t cudaGraphNodeFindInClone(cudaGraphNode_t* node, cudaGraphNode_t original,
                                     cudaGraph_t clone) {
  static const ApiInfo kInfo("cudaGraphNodeFindInClone");
  ApiCall api(kInfo);
  if (node == nullptr || original == nullptr) return api.Return(cudaErrorInvalidValue);
  std::lock_guard<std::mutex> lock(gpusim::GraphMutex());
  Graph* c = AsGraph(clone);
  if (!gpusim::IsLiveGraphLocked(c, false)) return api.Return(cudaErrorInvalidValue);
  for (GraphNode* n : c->nodes) {
    if (n->cloned_from == AsNode(original)) {
      *node = Handle(n);
      return api.Return(cudaSuccess);
    }
  }
  return api.Return(cudaErrorInvalidValue);
}

cudaError_t cudaGraphDebugDotPrint(cudaGraph_t graph, const char* path, unsigned int) {
  static const ApiInfo kInfo("cudaGraphDebugDotPrint");
  ApiCall api(kInfo);
  if (path == nullptr) return api.Return(cudaErrorInvalidValue);
  std::lock_guard<std::mutex> lock(gpusim::GraphMutex());
  Graph* g = AsGraph(graph);
  if (!gpusim::IsLiveGraphLocked(g, false)) return api.Return(cudaErrorInvalidValue);
  FILE* f = fopen(path, "w");
  if (f == nullptr) return api.Return(cudaErrorOperatingSystem);
  fprintf(f, "digraph gpusim_graph_%u {\n", g->id);
  DotNodesLocked(g, f);
  fprintf(f, "}\n");
  fclose(f);
  return api.Return(cudaSuccess);
}

// ---- Adding nodes ---------------------------------------------------------------------------

cudaError_t cudaGraphAddKernelNode(cudaGraphNode_t* node, cudaGraph_t graph,
                                   const cudaGraphNode_t* deps, size_t num_deps,
                                   const struct cudaKernelNodeParams* params) {
  static const ApiInfo kInfo("cudaGraphAddKernelNode");
  const Kernel* k = params != nullptr ? gpusim::FindKernel(params->func) : nullptr;
  ApiCall api(kInfo, nullptr, k != nullptr ? k->mangled.c_str() : nullptr);
  NodeWork w;
  cudaError_t built = KernelWork(params, &w);
  return api.Return(AddNode(node, graph, deps, num_deps, built, std::move(w)));
}

cudaError_t cudaGraphAddMemcpyNode(cudaGraphNode_t* node, cudaGraph_t graph,
                                   const cudaGraphNode_t* deps, size_t num_deps,
                                   const struct cudaMemcpy3DParms* params) {
  static const ApiInfo kInfo("cudaGraphAddMemcpyNode");
  ApiCall api(kInfo);
  NodeWork w;
  cudaError_t built = MemcpyWork(params, &w);
  return api.Return(AddNode(node, graph, deps, num_deps, built, std::move(w)));
}

cudaError_t cudaGraphAddMemcpyNode1D(cudaGraphNode_t* node, cudaGraph_t graph,
                                     const cudaGraphNode_t* deps, size_t num_deps, void* dst,
                                     const void* src, size_t count, enum cudaMemcpyKind kind) {
  static const ApiInfo kInfo("cudaGraphAddMemcpyNode1D");
  ApiCall api(kInfo);
  NodeWork w;
  cudaMemcpy3DParms p = Copy1D(dst, src, count, kind);
  cudaError_t built = MemcpyWork(&p, &w);
  return api.Return(AddNode(node, graph, deps, num_deps, built, std::move(w)));
}

cudaError_t cudaGraphAddMemcpyNodeToSymbol(cudaGraphNode_t* node, cudaGraph_t graph,
                                           const cudaGraphNode_t* deps, size_t num_deps,
                                           const void* symbol, const void* src, size_t count,
                                           size_t offset, enum cudaMemcpyKind kind) {
  static const ApiInfo kInfo("cudaGraphAddMemcpyNodeToSymbol");
  ApiCall api(kInfo);
  NodeWork w;
  cudaError_t built = ToSymbolWork(symbol, src, count, offset, kind, &w);
  return api.Return(AddNode(node, graph, deps, num_deps, built, std::move(w)));
}

cudaError_t cudaGraphAddMemcpyNodeFromSymbol(cudaGraphNode_t* node, cudaGraph_t graph,
                                             const cudaGraphNode_t* deps, size_t num_deps,
                                             void* dst, const void* symbol, size_t count,
                                             size_t offset, enum cudaMemcpyKind kind) {
  static const ApiInfo kInfo("cudaGraphAddMemcpyNodeFromSymbol");
  ApiCall api(kInfo);
  NodeWork w;
  cudaError_t built = FromSymbolWork(dst, symbol, count, offset, kind, &w);
  return api.Return(AddNode(node, graph, deps, num_deps, built, std::move(w)));
}

cudaError_t cudaGraphAddMemsetNode(cudaGraphNode_t* node, cudaGraph_t graph,
                                   const cudaGraphNode_t* deps, size_t num_deps,
                                   const struct cudaMemsetParams* params) {
  static const ApiInfo kInfo("cudaGraphAddMemsetNode");
  ApiCall api(kInfo);
  NodeWork w;
  cudaError_t built = MemsetWork(params, &w);
  return api.Return(AddNode(node, graph, deps, num_deps, built, std::move(w)));
}

cudaError_t cudaGraphAddHostNode(cudaGraphNode_t* node, cudaGraph_t graph,
                                 const cudaGraphNode_t* deps, size_t num_deps,
                                 const struct cudaHostNodeParams* params) {
  static const ApiInfo kInfo("cudaGraphAddHostNode");
  ApiCall api(kInfo);
  NodeWork w;
  cudaError_t built = HostWork(params, &w);
  return api.Return(AddNode(node, graph, deps, num_deps, built, std::move(w)));
}

cudaError_t cudaGraphAddEmptyNode(cudaGraphNode_t* node, cudaGraph_t graph,
                                  const cudaGraphNode_t* deps, size_t num_deps) {
  static const ApiInfo kInfo("cudaGraphAddEmptyNode");
  ApiCall api(kInfo);
  NodeWork w;
  w.type = cudaGraphNodeTypeEmpty;
  return api.Return(AddNode(node, graph, deps, num_deps, cudaSuccess, std::move(w)));
}

cudaError_t cudaGraphAddChildGraphNode(cudaGraphNode_t* node, cudaGraph_t graph,
                                       const cudaGraphNode_t* deps, size_t num_deps,
                                       cudaGraph_t child) {
  static const ApiInfo kInfo("cudaGraphAddChildGraphNode");
  ApiCall api(kInfo);
  cudaError_t err;
  {
    std::lock_guard<std::mutex> lock(gpusim::GraphMutex());
    err = AddChildLocked(node, graph, deps, nullptr, num_deps, child, false);
  }
  return api.Return(err);
}

cudaError_t cudaGraphAddEventRecordNode(cudaGraphNode_t* node, cudaGraph_t graph,
                                        const cudaGraphNode_t* deps, size_t num_deps,
                                        cudaEvent_t event) {
  static const ApiInfo kInfo("cudaGraphAddEventRecordNode");
  ApiCall api(kInfo);
  NodeWork w;
  cudaError_t built = EventWork(cudaGraphNodeTypeEventRecord, event, &w);
  return api.Return(AddNode(node, graph, deps, num_deps, built, std::move(w)));
}

cudaError_t cudaGraphAddEventWaitNode(cudaGraphNode_t* node, cudaGraph_t graph,
                                      const cudaGraphNode_t* deps, size_t num_deps,
                                      cudaEvent_t event) {
  static const ApiInfo kInfo("cudaGraphAddEventWaitNode");
  ApiCall api(kInfo);
  NodeWork w;
  cudaError_t built = EventWork(cudaGraphNodeTypeWaitEvent, event, &w);
  return api.Return(AddNode(node, graph, deps, num_deps, built, std::move(w)));
}

cudaError_t cudaGraphAddNode(cudaGraphNode_t* node, cudaGraph_t graph,
                             const cudaGraphNode_t* deps, const cudaGraphEdgeData* edge_data,
                             size_t num_deps, struct cudaGraphNodeParams* params) {
  static const ApiInfo kInfo("cudaGraphAddNode");
  ApiCall api(kInfo);
  if (params != nullptr && params->type == cudaGraphNodeTypeGraph) {
    cudaError_t err;
    {
      std::lock_guard<std::mutex> lock(gpusim::GraphMutex());
      err = AddChildLocked(node, graph, deps, edge_data, num_deps, params->graph.graph,
                           params->graph.ownership == cudaGraphChildGraphOwnershipMove);
    }
    return api.Return(err);
  }
  NodeWork w;
  cudaError_t err = WorkFromNodeParams(params, &w);
  if (err != cudaSuccess) return api.Return(err);
  {
    std::lock_guard<std::mutex> lock(gpusim::GraphMutex());
    std::vector<GraphNode*> dep_nodes;
    err = CheckAddLocked(node, graph, deps, num_deps, &dep_nodes);
    if (err != cudaSuccess) return api.Return(err);
    *node = Handle(gpusim::AddNodeLocked(AsGraph(graph), std::move(w), dep_nodes, edge_data));
  }
  return api.Return(cudaSuccess);  // delivers the CREATED event with no lock held
}

cudaError_t cudaGraphDestroyNode(cudaGraphNode_t node) {
  static const ApiInfo kInfo("cudaGraphDestroyNode");
  ApiCall api(kInfo);
  std::lock_guard<std::mutex> lock(gpusim::GraphMutex());
  GraphNode* n = AsNode(node);
  if (!gpusim::IsLiveNodeLocked(n)) return api.Return(cudaErrorInvalidValue);
  gpusim::DestroyNodeLocked(n);
  return api.Return(cudaSuccess);
}

// ---- Edges and queries ----------------------------------------------------------------------

cudaError_t cudaGraphAddDependencies(cudaGraph_t graph, const cudaGraphNode_t* from,
                                     const cudaGraphNode_t* to,
                                     const cudaGraphEdgeData* edge_data, size_t count) {
  static const ApiInfo kInfo("cudaGraphAddDependencies");
  ApiCall api(kInfo);
  if (count == 0) return api.Return(cudaSuccess);
  if (from == nullptr || to == nullptr) return api.Return(cudaErrorInvalidValue);
  std::lock_guard<std::mutex> lock(gpusim::GraphMutex());
  Graph* g = AsGraph(graph);
  if (!gpusim::IsLiveGraphLocked(g, false)) return api.Return(cudaErrorInvalidValue);
  // Every edge is checked before any is added: a failing call changes nothing.
  for (size_t i = 0; i < count; ++i) {
    GraphNode* a = AsNode(from[i]);
    GraphNode* b = AsNode(to[i]);
    if (!gpusim::IsLiveNodeLocked(a) || !gpusim::IsLiveNodeLocked(b) || a->graph != g ||
        b->graph != g || a == b ||
        std::find(b->deps.begin(), b->deps.end(), a) != b->deps.end()) {
      return api.Return(cudaErrorInvalidValue);
    }
    for (size_t j = 0; j < i; ++j) {
      if (from[j] == from[i] && to[j] == to[i]) return api.Return(cudaErrorInvalidValue);
    }
  }
  for (size_t i = 0; i < count; ++i) {
    GraphNode* b = AsNode(to[i]);
    b->deps.push_back(AsNode(from[i]));
    b->edge_data.push_back(edge_data != nullptr ? edge_data[i] : cudaGraphEdgeData{});
  }
  return api.Return(cudaSuccess);
}

cudaError_t cudaGraphRemoveDependencies(cudaGraph_t graph, const cudaGraphNode_t* from,
                                        const cudaGraphNode_t* to,
                                        const cudaGraphEdgeData* edge_data, size_t count) {
  static const ApiInfo kInfo("cudaGraphRemoveDependencies");
  ApiCall api(kInfo);
  if (count == 0) return api.Return(cudaSuccess);
  if (from == nullptr || to == nullptr) return api.Return(cudaErrorInvalidValue);
  std::lock_guard<std::mutex> lock(gpusim::GraphMutex());
  Graph* g = AsGraph(graph);
  if (!gpusim::IsLiveGraphLocked(g, false)) return api.Return(cudaErrorInvalidValue);
  std::vector<std::pair<GraphNode*, size_t>> doomed;  // (node, index in its deps)
  for (size_t i = 0; i < count; ++i) {
    GraphNode* a = AsNode(from[i]);
    GraphNode* b = AsNode(to[i]);
    if (!gpusim::IsLiveNodeLocked(a) || !gpusim::IsLiveNodeLocked(b) || b->graph != g) {
      return api.Return(cudaErrorInvalidValue);
    }
    cudaGraphEdgeData want = edge_data != nullptr ? edge_data[i] : cudaGraphEdgeData{};
    size_t k = 0;
    while (k < b->deps.size() &&
           (b->deps[k] != a || memcmp(&b->edge_data[k], &want, sizeof(want)) != 0)) {
      ++k;
    }
    if (k == b->deps.size()) return api.Return(cudaErrorInvalidValue);
    doomed.emplace_back(b, k);
  }
  // Highest index first, so that earlier indices of the same node stay valid.
  std::sort(doomed.begin(), doomed.end(),
            [](const std::pair<GraphNode*, size_t>& x, const std::pair<GraphNode*, size_t>& y) {
              return x.first != y.first ? x.first < y.first : x.second > y.second;
            });
  doomed.erase(std::unique(doomed.begin(), doomed.end()), doomed.end());
  for (const auto& d : doomed) {
    d.first->deps.erase(d.first->deps.begin() + static_cast<long>(d.second));
    d.first->edge_data.erase(d.first->edge_data.begin() + static_cast<long>(d.second));
  }
  return api.Return(cudaSuccess);
}

cudaError_t cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t* nodes, size_t* count) {
  static const ApiInfo kInfo("cudaGraphGetNodes");
  ApiCall api(kInfo);
  if (count == nullptr) return api.Return(cudaErrorInvalidValue);
  std::lock_guard<std::mutex> lock(gpusim::GraphMutex());
  Graph* g = AsGraph(graph);
  if (!gpusim::IsLiveGraphLocked(g, false)) return api.Return(cudaErrorInvalidValue);
  ReturnNodes(g->nodes, nodes, count);
  return api.Return(cudaSuccess);
}

cudaError_t cudaGraphGetRootNodes(cudaGraph_t graph, cudaGraphNode_t* nodes, size_t* count) {
  static const ApiInfo kInfo("cudaGraphGetRootNodes");
  ApiCall api(kInfo);
  if (count == nullptr) return api.Return(cudaErrorInvalidValue);
  std::lock_guard<std::mutex> lock(gpusim::GraphMutex());
  Graph* g = AsGraph(graph);
  if (!gpusim::IsLiveGraphLocked(g, false)) return api.Return(cudaErrorInvalidValue);
  std::vector<GraphNode*> roots;
  for (GraphNode* n : g->nodes) {
    if (n->deps.empty()) roots.push_back(n);
  }
  ReturnNodes(roots, nodes, count);
  return api.Return(cudaSuccess);
}

cudaError_t cudaGraphGetEdges(cudaGraph_t graph, cudaGraphNode_t* from, cudaGraphNode_t* to,
                              cudaGraphEdgeData* edge_data, size_t* count) {
  static const ApiInfo kInfo("cudaGraphGetEdges");
  ApiCall api(kInfo);
  if (count == nullptr || (from == nullptr) != (to == nullptr) ||
      (edge_data != nullptr && from == nullptr)) {
    return api.Return(cudaErrorInvalidValue);
  }
  std::lock_guard<std::mutex> lock(gpusim::GraphMutex());
  Graph* g = AsGraph(graph);
  if (!gpusim::IsLiveGraphLocked(g, false)) return api.Return(cudaErrorInvalidValue);
  std::vector<GraphNode*> sources, targets;
  std::vector<cudaGraphEdgeData> data;
  for (GraphNode* n : g->nodes) {
    for (size_t i = 0; i < n->deps.size(); ++i) {
      sources.push_back(n->deps[i]);
      targets.push_back(n);
      data.push_back(n->edge_data[i]);
    }
  }
  return api.Return(ReturnEdges(sources, targets, data, from, to, edge_data, count));
}

cudaError_t cudaGraphNodeGetDependencies(cudaGraphNode_t node, cudaGraphNode_t* deps,
                                         cudaGraphEdgeData* edge_data, size_t* count) {
  static const ApiInfo kInfo("cudaGraphNodeGetDependencies");
  ApiCall api(kInfo);
  return api.Return(NeighboursImpl(node, deps, edge_data, count, /*dependents=*/false));
}

cudaError_t cudaGraphNodeGetDependentNodes(cudaGraphNode_t node, cudaGraphNode_t* dependents,
                                           cudaGraphEdgeData* edge_data, size_t* count) {
  static const ApiInfo kInfo("cudaGraphNodeGetDependentNodes");
  ApiCall api(kInfo);
  return api.Return(NeighboursImpl(node, dependents, edge_data, count, /*dependents=*/true));
}

cudaError_t cudaGraphNodeGetType(cudaGraphNode_t node, enum cudaGraphNodeType* type) {
  static const ApiInfo kInfo("cudaGraphNodeGetType");
  ApiCall api(kInfo);
  if (type == nullptr) return api.Return(cudaErrorInvalidValue);
  std::lock_guard<std::mutex> lock(gpusim::GraphMutex());
  GraphNode* n = AsNode(node);
  if (!gpusim::IsLiveNodeLocked(n)) return api.Return(cudaErrorInvalidValue);
  *type = n->work.type;
  return api.Return(cudaSuccess);
}

cudaError_t cudaGraphChildGraphNodeGetGraph(cudaGraphNode_t node, cudaGraph_t* graph) {
  static const ApiInfo kInfo("cudaGraphChildGraphNodeGetGraph");
  ApiCall api(kInfo);
  return api.Return(ReadNode(node, cudaGraphNodeTypeGraph, graph, [](const NodeWork& w) {
    return reinterpret_cast<cudaGraph_t>(w.child);
  }));
}

// ---- Node parameters ------------------------------------------------------------------------

cudaError_t cudaGraphKernelNodeGetParams(cudaGraphNode_t node,
                                         struct cudaKernelNodeParams* params) {
  static const ApiInfo kInfo("cudaGraphKernelNodeGetParams");
  ApiCall api(kInfo);
  return api.Return(
      ReadNode(node, cudaGraphNodeTypeKernel, params, [](const NodeWork& w) { return w.kernel; }));
}

cudaError_t cudaGraphKernelNodeSetParams(cudaGraphNode_t node,
                                         const struct cudaKernelNodeParams* params) {
  static const ApiInfo kInfo("cudaGraphKernelNodeSetParams");
  ApiCall api(kInfo);
  NodeWork w;
  cudaError_t built = KernelWork(params, &w);
  return api.Return(SetNodeWork(node, built, std::move(w)));
}

cudaError_t cudaGraphMemcpyNodeGetParams(cudaGraphNode_t node, struct cudaMemcpy3DParms* params) {
  static const ApiInfo kInfo("cudaGraphMemcpyNodeGetParams");
  ApiCall api(kInfo);
  return api.Return(
      ReadNode(node, cudaGraphNodeTypeMemcpy, params, [](const NodeWork& w) { return w.copy; }));
}

cudaError_t cudaGraphMemcpyNodeSetParams(cudaGraphNode_t node,
                                         const struct cudaMemcpy3DParms* params) {
  static const ApiInfo kInfo("cudaGraphMemcpyNodeSetParams");
  ApiCall api(kInfo);
  NodeWork w;
  cudaError_t built = MemcpyWork(params, &w);
  return api.Return(SetNodeWork(node, built, std::move(w)));
}

cudaError_t cudaGraphMemcpyNodeSetParams1D(cudaGraphNode_t node, void* dst, const void* src,
                                           size_t count, enum cudaMemcpyKind kind) {
  static const ApiInfo kInfo("cudaGraphMemcpyNodeSetParams1D");
  ApiCall api(kInfo);
  NodeWork w;
  cudaMemcpy3DParms p = Copy1D(dst, src, count, kind);
  cudaError_t built = MemcpyWork(&p, &w);
  return api.Return(SetNodeWork(node, built, std::move(w)));
}

cudaError_t cudaGraphMemcpyNodeSetParamsToSymbol(cudaGraphNode_t node, const void* symbol,
                                                 const void* src, size_t count, size_t offset,
                                                 enum cudaMemcpyKind kind) {
  static const ApiInfo kInfo("cudaGraphMemcpyNodeSetParamsToSymbol");
  ApiCall api(kInfo);
  NodeWork w;
  cudaError_t built = ToSymbolWork(symbol, src, count, offset, kind, &w);
  return api.Return(SetNodeWork(node, built, std::move(w)));
}

cudaError_t cudaGraphMemcpyNodeSetParamsFromSymbol(cudaGraphNode_t node, void* dst,
                                                   const void* symbol, size_t count, size_t offset,
                                                   enum cudaMemcpyKind kind) {
  static const ApiInfo kInfo("cudaGraphMemcpyNodeSetParamsFromSymbol");
  ApiCall api(kInfo);
  NodeWork w;
  cudaError_t built = FromSymbolWork(dst, symbol, count, offset, kind, &w);
  return api.Return(SetNodeWork(node, built, std::move(w)));
}

cudaError_t cudaGraphMemsetNodeGetParams(cudaGraphNode_t node, struct cudaMemsetParams* params) {
  static const ApiInfo kInfo("cudaGraphMemsetNodeGetParams");
  ApiCall api(kInfo);
  return api.Return(
      ReadNode(node, cudaGraphNodeTypeMemset, params, [](const NodeWork& w) { return w.set; }));
}

cudaError_t cudaGraphMemsetNodeSetParams(cudaGraphNode_t node,
                                         const struct cudaMemsetParams* params) {
  static const ApiInfo kInfo("cudaGraphMemsetNodeSetParams");
  ApiCall api(kInfo);
  NodeWork w;
  cudaError_t built = MemsetWork(params, &w);
  return api.Return(SetNodeWork(node, built, std::move(w)));
}

cudaError_t cudaGraphHostNodeGetParams(cudaGraphNode_t node, struct cudaHostNodeParams* params) {
  static const ApiInfo kInfo("cudaGraphHostNodeGetParams");
  ApiCall api(kInfo);
  return api.Return(
      ReadNode(node, cudaGraphNodeTypeHost, params, [](const NodeWork& w) { return w.host; }));
}

cudaError_t cudaGraphHostNodeSetParams(cudaGraphNode_t node,
                                       const struct cudaHostNodeParams* params) {
  static const ApiInfo kInfo("cudaGraphHostNodeSetParams");
  ApiCall api(kInfo);
  NodeWork w;
  cudaError_t built = HostWork(params, &w);
  return api.Return(SetNodeWork(node, built, std::move(w)));
}

cudaError_t cudaGraphEventRecordNodeGetEvent(cudaGraphNode_t node, cudaEvent_t* event) {
  static const ApiInfo kInfo("cudaGraphEventRecordNodeGetEvent");
  ApiCall api(kInfo);
  return api.Return(ReadNode(node, cudaGraphNodeTypeEventRecord, event, [](const NodeWork& w) {
    return reinterpret_cast<cudaEvent_t>(w.event);
  }));
}

cudaError_t cudaGraphEventRecordNodeSetEvent(cudaGraphNode_t node, cudaEvent_t event) {
  static const ApiInfo kInfo("cudaGraphEventRecordNodeSetEvent");
  ApiCall api(kInfo);
  NodeWork w;
  cudaError_t built = EventWork(cudaGraphNodeTypeEventRecord, event, &w);
  return api.Return(SetNodeWork(node, built, std::move(w)));
}

cudaError_t cudaGraphEventWaitNodeGetEvent(cudaGraphNode_t node, cudaEvent_t* event) {
  static const ApiInfo kInfo("cudaGraphEventWaitNodeGetEvent");
  ApiCall api(kInfo);
  return api.Return(ReadNode(node, cudaGraphNodeTypeWaitEvent, event, [](const NodeWork& w) {
    return reinterpret_cast<cudaEvent_t>(w.event);
  }));
}

cudaError_t cudaGraphEventWaitNodeSetEvent(cudaGraphNode_t node, cudaEvent_t event) {
  static const ApiInfo kInfo("cudaGraphEventWaitNodeSetEvent");
  ApiCall api(kInfo);
  NodeWork w;
  cudaError_t built = EventWork(cudaGraphNodeTypeWaitEvent, event, &w);
  return api.Return(SetNodeWork(node, built, std::move(w)));
}

cudaError_t cudaGraphNodeSetParams(cudaGraphNode_t node, struct cudaGraphNodeParams* params) {
  static const ApiInfo kInfo("cudaGraphNodeSetParams");
  ApiCall api(kInfo);
  NodeWork w;
  cudaError_t built = WorkFromNodeParams(params, &w);
  return api.Return(SetNodeWork(node, built, std::move(w)));
}

// ---- Executable graphs ----------------------------------------------------------------------

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph,
                                 unsigned long long flags) {
  static const ApiInfo kInfo("cudaGraphInstantiate");
  const cudaGraphInstantiate_v12000_params prm{exec, graph, flags};
  return InstantiateImpl(kInfo, exec, graph, flags, nullptr, &prm);
}

cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t* exec, cudaGraph_t graph,
                                          unsigned long long flags) {
  static const ApiInfo kInfo("cudaGraphInstantiateWithFlags");
  const cudaGraphInstantiateWithFlags_v11040_params prm{exec, graph, flags};
  return InstantiateImpl(kInfo, exec, graph, flags, nullptr, &prm);
}

cudaError_t cudaGraphInstantiateWithParams(cudaGraphExec_t* exec, cudaGraph_t graph,
                                           cudaGraphInstantiateParams* params) {
  static const ApiInfo kInfo("cudaGraphInstantiateWithParams");
  const cudaGraphInstantiateWithParams_v12000_params prm{exec, graph, params};
  if (params == nullptr) return InstantiateImpl(kInfo, nullptr, graph, 0, nullptr, &prm);
  params->errNode_out = nullptr;
  return InstantiateImpl(kInfo, exec, graph, params->flags, &params->result_out, &prm);
}

cudaError_t cudaGraphInstantiateWithParams_ptsz(cudaGraphExec_t* exec, cudaGraph_t graph,
                                                cudaGraphInstantiateParams* params) {
  static const ApiInfo kInfo("cudaGraphInstantiateWithParams_ptsz");
  const cudaGraphInstantiateWithParams_ptsz_v12000_params prm{exec, graph, params};
  if (params == nullptr) return InstantiateImpl(kInfo, nullptr, graph, 0, nullptr, &prm);
  params->errNode_out = nullptr;
  return InstantiateImpl(kInfo, exec, graph, params->flags, &params->result_out, &prm);
}

cudaError_t cudaGraphExecGetFlags(cudaGraphExec_t exec, unsigned long long* flags) {
  static const ApiInfo kInfo("cudaGraphExecGetFlags");
  ApiCall api(kInfo);
  if (flags == nullptr) return api.Return(cudaErrorInvalidValue);
  std::lock_guard<std::mutex> lock(gpusim::GraphMutex());
  Graph* e = AsGraph(exec);
  if (!gpusim::IsLiveGraphLocked(e, true)) return api.Return(cudaErrorInvalidValue);
  *flags = e->flags;
  return api.Return(cudaSuccess);
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  static const ApiInfo kInfo("cudaGraphLaunch");
  return GraphLaunchImpl(kInfo, exec, stream, false);
}

cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t exec, cudaStream_t stream) {
  static const ApiInfo kInfo("cudaGraphLaunch_ptsz");
  return GraphLaunchImpl(kInfo, exec, stream, true);
}

// Nothing to upload: a launch enqueues the snapshot directly.
cudaError_t cudaGraphUpload(cudaGraphExec_t exec, cudaStream_t stream) {
  static const ApiInfo kInfo("cudaGraphUpload");
  ApiCall api(kInfo);
  if (!gpusim::IsLiveGraph(AsGraph(exec), true)) return api.Return(cudaErrorInvalidValue);
  if (gpusim::ResolveStream(stream, false) == nullptr) {
    return api.Return(cudaErrorInvalidResourceHandle);
  }
  return api.Return(cudaSuccess);
}

cudaError_t cudaGraphUpload_ptsz(cudaGraphExec_t exec, cudaStream_t stream) {
  static const ApiInfo kInfo("cudaGraphUpload_ptsz");
  ApiCall api(kInfo);
  if (!gpusim::IsLiveGraph(AsGraph(exec), true)) return api.Return(cudaErrorInvalidValue);
  if (gpusim::ResolveStream(stream, true) == nullptr) {
    return api.Return(cudaErrorInvalidResourceHandle);
  }
  return api.Return(cudaSuccess);
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  static const ApiInfo kInfo("cudaGraphExecDestroy");
  const cudaGraphExecDestroy_v10000_params prm{exec};
  ApiCall api(kInfo, &prm);
  std::lock_guard<std::mutex> lock(gpusim::GraphMutex());
  Graph* e = AsGraph(exec);
  if (!gpusim::IsLiveGraphLocked(e, true)) return api.Return(cudaErrorInvalidValue);
  gpusim::DestroyGraphLocked(e);
  return api.Return(cudaSuccess);
}

cudaError_t cudaGraphExecKernelNodeSetParams(cudaGraphExec_t exec, cudaGraphNode_t node,
                                             const struct cudaKernelNodeParams* params) {
  static const ApiInfo kInfo("cudaGraphExecKernelNodeSetParams");
  const cudaGraphExecKernelNodeSetParams_v10010_params prm{exec, node, params};
  ApiCall api(kInfo, &prm);
  NodeWork w;
  cudaError_t built = KernelWork(params, &w);
  return api.Return(SetExecNodeWork(exec, node, built, std::move(w)));
}

cudaError_t cudaGraphExecMemcpyNodeSetParams(cudaGraphExec_t exec, cudaGraphNode_t node,
                                             const struct cudaMemcpy3DParms* params) {
  static const ApiInfo kInfo("cudaGraphExecMemcpyNodeSetParams");
  ApiCall api(kInfo);
  NodeWork w;
  cudaError_t built = MemcpyWork(params, &w);
  return api.Return(SetExecNodeWork(exec, node, built, std::move(w)));
}

cudaError_t cudaGraphExecMemcpyNodeSetParams1D(cudaGraphExec_t exec, cudaGraphNode_t node,
                                               void* dst, const void* src, size_t count,
                                               enum cudaMemcpyKind kind) {
  static const ApiInfo kInfo("cudaGraphExecMemcpyNodeSetParams1D");
  ApiCall api(kInfo);
  NodeWork w;
  cudaMemcpy3DParms p = Copy1D(dst, src, count, kind);
  cudaError_t built = MemcpyWork(&p, &w);
  return api.Return(SetExecNodeWork(exec, node, built, std::move(w)));
}

cudaError_t cudaGraphExecMemcpyNodeSetParamsToSymbol(cudaGraphExec_t exec, cudaGraphNode_t node,
                                                     const void* symbol, const void* src,
                                                     size_t count, size_t offset,
                                                     enum cudaMemcpyKind kind) {
  static const ApiInfo kInfo("cudaGraphExecMemcpyNodeSetParamsToSymbol");
  ApiCall api(kInfo);
  NodeWork w;
  cudaError_t built = ToSymbolWork(symbol, src, count, offset, kind, &w);
  return api.Return(SetExecNodeWork(exec, node, built, std::move(w)));
}

cudaError_t cudaGraphExecMemcpyNodeSetParamsFromSymbol(cudaGraphExec_t exec,
                                                       cudaGraphNode_t node, void* dst,
                                                       const void* symbol, size_t count,
                                                       size_t offset, enum cudaMemcpyKind kind) {
  static const ApiInfo kInfo("cudaGraphExecMemcpyNodeSetParamsFromSymbol");
  ApiCall api(kInfo);
  NodeWork w;
  cudaError_t built = FromSymbolWork(dst, symbol, count, offset, kind, &w);
  return api.Return(SetExecNodeWork(exec, node, built, std::move(w)));
}

cudaError_t cudaGraphExecMemsetNodeSetParams(cudaGraphExec_t exec, cudaGraphNode_t node,
                                             const struct cudaMemsetParams* params) {
  static const ApiInfo kInfo("cudaGraphExecMemsetNodeSetParams");
  ApiCall api(kInfo);
  NodeWork w;
  cudaError_t built = MemsetWork(params, &w);
  return api.Return(SetExecNodeWork(exec, node, built, std::move(w)));
}

cudaError_t cudaGraphExecHostNodeSetParams(cudaGraphExec_t exec, cudaGraphNode_t node,
                                           const struct cudaHostNodeParams* params) {
  static const ApiInfo kInfo("cudaGraphExecHostNodeSetParams");
  ApiCall api(kInfo);
  NodeWork w;
  cudaError_t built = HostWork(params, &w);
  return api.Return(SetExecNodeWork(exec, node, built, std::move(w)));
}

cudaError_t cudaGraphExecEventRecordNodeSetEvent(cudaGraphExec_t exec, cudaGraphNode_t node,
                                                 cudaEvent_t event) {
  static const ApiInfo kInfo("cudaGraphExecEventRecordNodeSetEvent");
  ApiCall api(kInfo);
  NodeWork w;
  cudaError_t built = EventWork(cudaGraphNodeTypeEventRecord, event, &w);
  return api.Return(SetExecNodeWork(exec, node, built, std::move(w)));
}

cudaError_t cudaGraphExecEventWaitNodeSetEvent(cudaGraphExec_t exec, cudaGraphNode_t node,
                                               cudaEvent_t event) {
  static const ApiInfo kInfo("cudaGraphExecEventWaitNodeSetEvent");
  ApiCall api(kInfo);
  NodeWork w;
  cudaError_t built = EventWork(cudaGraphNodeTypeWaitEvent, event, &w);
  return api.Return(SetExecNodeWork(exec, node, built, std::move(w)));
}

cudaError_t cudaGraphExecNodeSetParams(cudaGraphExec_t exec, cudaGraphNode_t node,
                                       struct cudaGraphNodeParams* params) {
  static const ApiInfo kInfo("cudaGraphExecNodeSetParams");
  ApiCall api(kInfo);
  NodeWork w;
  cudaError_t built = WorkFromNodeParams(params, &w);
  return api.Return(SetExecNodeWork(exec, node, built, std::move(w)));
}

// Only kernel, memcpy and memset nodes can be disabled (CUDA's rule); a disabled node does
// nothing when the graph is launched.
cudaError_t cudaGraphNodeSetEnabled(cudaGraphExec_t exec, cudaGraphNode_t node,
                                    unsigned int enabled) {
  static const ApiInfo kInfo("cudaGraphNodeSetEnabled");
  ApiCall api(kInfo);
  std::lock_guard<std::mutex> lock(gpusim::GraphMutex());
  Graph* e = AsGraph(exec);
  GraphNode* n = AsNode(node);
  if (!gpusim::IsLiveGraphLocked(e, true) || !gpusim::IsLiveNodeLocked(n)) {
    return api.Return(cudaErrorInvalidValue);
  }
  for (ExecNode& x : e->launch) {
    if (x.origin != n) continue;
    cudaGraphNodeType t = x.work.type;
    if (t != cudaGraphNodeTypeKernel && t != cudaGraphNodeTypeMemcpy &&
        t != cudaGraphNodeTypeMemset) {
      break;
    }
    x.enabled = enabled != 0;
    return api.Return(cudaSuccess);
  }
  return api.Return(cudaErrorInvalidValue);
}

cudaError_t cudaGraphNodeGetEnabled(cudaGraphExec_t exec, cudaGraphNode_t node,
                                    unsigned int* enabled) {
  static const ApiInfo kInfo("cudaGraphNodeGetEnabled");
  ApiCall api(kInfo);
  if (enabled == nullptr) return api.Return(cudaErrorInvalidValue);
  std::lock_guard<std::mutex> lock(gpusim::GraphMutex());
  Graph* e = AsGraph(exec);
  GraphNode* n = AsNode(node);
  if (!gpusim::IsLiveGraphLocked(e, true) || !gpusim::IsLiveNodeLocked(n)) {
    return api.Return(cudaErrorInvalidValue);
  }
  for (const ExecNode& x : e->launch) {
    if (x.origin != n) continue;
    cudaGraphNodeType t = x.work.type;
    if (t != cudaGraphNodeTypeKernel && t != cudaGraphNodeTypeMemcpy &&
        t != cudaGraphNodeTypeMemset) {
      break;
    }
    *enabled = x.enabled ? 1 : 0;
    return api.Return(cudaSuccess);
  }
  return api.Return(cudaErrorInvalidValue);
}

cudaError_t cudaGraphExecUpdate(cudaGraphExec_t exec, cudaGraph_t graph,
                                cudaGraphExecUpdateResultInfo* result_info) {
  static const ApiInfo kInfo("cudaGraphExecUpdate");
  const cudaGraphExecUpdate_v10020_params prm{exec, graph, result_info};
  ApiCall api(kInfo, &prm);
  cudaGraphExecUpdateResultInfo info = {cudaGraphExecUpdateError, nullptr, nullptr};
  cudaError_t err = cudaSuccess;
  {
    std::lock_guard<std::mutex> lock(gpusim::GraphMutex());
    Graph* e = AsGraph(exec);
    Graph* g = AsGraph(graph);
    std::vector<ExecNode> launch;
    if (!gpusim::IsLiveGraphLocked(e, true) || !gpusim::IsLiveGraphLocked(g, false)) {
      err = cudaErrorInvalidValue;
    } else if ((info.result = CompareShapeLocked(e->shape, g, &info)) !=
               cudaGraphExecUpdateSuccess) {
      err = cudaErrorGraphExecUpdateFailure;
    } else if (!FlattenLocked(g, true, &launch) || launch.size() != e->launch.size()) {
      info.result = cudaGraphExecUpdateError;  // unreachable with equal shapes
      err = cudaErrorGraphExecUpdateFailure;
    } else {
      // Same shape, so the same launch order: entry i updates entry i, which keeps its node
      // (for later cudaGraphExec*SetParams), its exec node and id, and its enabled state.
      for (size_t i = 0; i < launch.size(); ++i) {
        launch[i].origin = e->launch[i].origin;
        launch[i].source = e->launch[i].source;
        launch[i].node = e->launch[i].node;
        launch[i].enabled = e->launch[i].enabled;
        launch[i].work.op.rec.graph_node_id = e->launch[i].work.op.rec.graph_node_id;
      }
      e->launch = std::move(launch);
    }
  }
  if (result_info != nullptr) *result_info = info;
  return api.Return(err);
}

}  // extern "C"
