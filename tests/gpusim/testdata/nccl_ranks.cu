// A multi-process NCCL program for nccl_sim_test: `nccl_ranks <nranks> <mode>` creates the unique
// id, forks one process per rank (RANK=<r> in its environment) and waits for them. Modes:
//   check   every collective and grouped Send/Recv over several datatypes and ops; each rank
//           compares its results with the expected values, prints "OK <what>" or
//           "FAIL <what> ..." and exits with the number of failures;
//   timing  5 AllReduces of 64 KiB of floats (for the straggler test);
//   biggroup  100 AllReduces in one ncclGroupStart/End;
//   skip    rank 1 initializes and exits without the collective rank 0 runs (timeout test);
//   split   ncclCommSplit by rank parity, then an AllReduce of the ranks on each half;
//   graph   an AllReduce and a grouped Send/Recv ring captured into a CUDA graph (as
//           nccl-tests -G and vLLM's decode graphs do), the graph launched 3 times; results
//           checked after the last launch;
//   graph_late  as graph, 4 launches, each after a synchronize, rank 1 sleeping 3 ms before
//           each (the others' in-graph collectives wait for it);
//   graph_side  multi-stream capture: the capture begins on the rank's stream, a side stream
//           joins it through an event and runs the AllReduce, the main stream joins back; the
//           graph launched 3 times (as graphs with a communication side stream are captured);
//   initall no fork: ncclCommInitAll makes <nranks> communicators in this process, and one
//           grouped AllReduce over them (one stream each) runs;
//   initall_split  as initall, then one thread splits every communicator by rank parity inside
//           one ncclGroupStart/End (as NCCL requires for several ranks of one thread) and runs a
//           grouped AllReduce on the halves.
// The parent prints "RANK <r> EXIT <code>" per child and exits non-zero if any child failed.
#include <cuda_runtime.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <string>
#include <vector>

namespace {

int g_fails = 0;
int g_rank = 0;
int g_n = 0;
ncclComm_t g_comm;
cudaStream_t g_stream;

void Check(bool ok, const std::string& what) {
  if (!ok) ++g_fails;
  printf("%s %s rank %d\n", ok ? "OK" : "FAIL", what.c_str(), g_rank);
}

void NcclOk(ncclResult_t r, const char* what) {
  if (r != ncclSuccess) {
    printf("FAIL %s returned %d (%s) rank %d\n", what, int(r), ncclGetErrorString(r), g_rank);
    ++g_fails;
  }
}

// Copies go through the rank's stream (ordered with its collectives) and a stream sync.
template <typename T>
T* ToDevice(const std::vector<T>& h) {
  T* d = nullptr;
  cudaMalloc(&d, h.size() * sizeof(T) + 1);
  if (!h.empty()) {
    cudaMemcpyAsync(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice, g_stream);
    cudaStreamSynchronize(g_stream);
  }
  return d;
}

template <typename T>
std::vector<T> ToHost(const T* d, size_t n) {
  std::vector<T> h(n);
  cudaMemcpyAsync(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost, g_stream);
  cudaStreamSynchronize(g_stream);
  return h;
}

template <typename T, typename F>
bool AllEqual(const std::vector<T>& got, F want) {
  for (size_t i = 0; i < got.size(); ++i) {
    if (!(double(got[i]) == double(want(i)))) {
      printf("  mismatch at %zu: got %g want %g\n", i, double(got[i]), double(want(i)));
      return false;
    }
  }
  return true;
}

void RunChecks() {
  const int n = g_n, r = g_rank;
  const size_t count = 1000;
  {  // AllReduce sum float
    std::vector<float> in(count);
    for (size_t i = 0; i < count; ++i) in[i] = float((r + 1) * (i % 7));
    float* s = ToDevice(in);
    float* d = ToDevice(std::vector<float>(count, -1.f));
    NcclOk(ncclAllReduce(s, d, count, ncclFloat, ncclSum, g_comm, g_stream), "allreduce");
    Check(AllEqual(ToHost(d, count), [&](size_t i) { return n * (n + 1) / 2 * float(i % 7); }),
          "allreduce_sum_f32");
    // In place, max over int32.
    std::vector<int32_t> mi(count);
    for (size_t i = 0; i < count; ++i) mi[i] = int32_t(r * 1000 + i);
    int32_t* m = ToDevice(mi);
    NcclOk(ncclAllReduce(m, m, count, ncclInt32, ncclMax, g_comm, g_stream), "allreduce");
    Check(AllEqual(ToHost(m, count), [&](size_t i) { return (n - 1) * 1000 + int(i); }),
          "allreduce_max_i32_inplace");
    NcclOk(ncclAllReduce(ToDevice(mi), m, count, ncclInt32, ncclMin, g_comm, g_stream), "ar");
    Check(AllEqual(ToHost(m, count), [&](size_t i) { return int(i); }), "allreduce_min_i32");
  }
  {  // Prod over double, avg over float, sum over half / bfloat16 / uint64, max over int8
    double* p = ToDevice(std::vector<double>(count, r + 1.0));
    NcclOk(ncclAllReduce(p, p, count, ncclDouble, ncclProd, g_comm, g_stream), "ar");
    double fact = 1;
    for (int k = 2; k <= n; ++k) fact *= k;
    Check(AllEqual(ToHost(p, count), [&](size_t) { return fact; }), "allreduce_prod_f64");
    float* a = ToDevice(std::vector<float>(count, float(r)));
    NcclOk(ncclAllReduce(a, a, count, ncclFloat, ncclAvg, g_comm, g_stream), "ar");
    Check(AllEqual(ToHost(a, count), [&](size_t) { return (n - 1) / 2.0f; }), "allreduce_avg_f32");
    __half* h = ToDevice(std::vector<__half>(count, __float2half(float(r + 1))));
    NcclOk(ncclAllReduce(h, h, count, ncclHalf, ncclSum, g_comm, g_stream), "ar");
    std::vector<__half> hh = ToHost(h, count);
    bool ok = true;
    for (auto v : hh) ok = ok && __half2float(v) == float(n * (n + 1) / 2);
    Check(ok, "allreduce_sum_f16");
    __nv_bfloat16* b = ToDevice(std::vector<__nv_bfloat16>(count, __float2bfloat16(float(r + 1))));
    NcclOk(ncclAllReduce(b, b, count, ncclBfloat16, ncclSum, g_comm, g_stream), "ar");
    std::vector<__nv_bfloat16> bb = ToHost(b, count);
    ok = true;
    for (auto v : bb) ok = ok && __bfloat162float(v) == float(n * (n + 1) / 2);
    Check(ok, "allreduce_sum_bf16");
    uint64_t* u = ToDevice(std::vector<uint64_t>(count, (1ull << 40) + r));
    NcclOk(ncclAllReduce(u, u, count, ncclUint64, ncclSum, g_comm, g_stream), "ar");
    Check(AllEqual(ToHost(u, count),
                   [&](size_t) { return double(n * (1ull << 40) + n * (n - 1) / 2); }),
          "allreduce_sum_u64");
    int8_t* c = ToDevice(std::vector<int8_t>(count, int8_t(-r)));
    NcclOk(ncclAllReduce(c, c, count, ncclInt8, ncclMin, g_comm, g_stream), "ar");
    Check(AllEqual(ToHost(c, count), [&](size_t) { return -(n - 1); }), "allreduce_min_i8");
  }
  {  // Broadcast from the last rank, in place (ncclBcast)
    int root = n - 1;
    std::vector<int32_t> v(count);
    for (size_t i = 0; i < count; ++i) v[i] = r == root ? int32_t(42 + i) : -7;
    int32_t* d = ToDevice(v);
    NcclOk(ncclBcast(d, count, ncclInt32, root, g_comm, g_stream), "bcast");
    Check(AllEqual(ToHost(d, count), [&](size_t i) { return 42 + int(i); }), "broadcast");
  }
  {  // Reduce to rank 0
    float* s = ToDevice(std::vector<float>(count, float(r + 1)));
    float* d = ToDevice(std::vector<float>(count, -1.f));
    NcclOk(ncclReduce(s, d, count, ncclFloat, ncclSum, 0, g_comm, g_stream), "reduce");
    std::vector<float> got = ToHost(d, count);
    Check(AllEqual(got, [&](size_t) { return r == 0 ? n * (n + 1) / 2.0f : -1.f; }), "reduce");
  }
  const size_t chunk = 16;
  {  // AllGather
    std::vector<int32_t> v(chunk);
    for (size_t i = 0; i < chunk; ++i) v[i] = int32_t(r * 100 + i);
    int32_t* d = ToDevice(std::vector<int32_t>(chunk * n, -1));
    NcclOk(ncclAllGather(ToDevice(v), d, chunk, ncclInt32, g_comm, g_stream), "allgather");
    Check(AllEqual(ToHost(d, chunk * n),
                   [&](size_t i) { return int((i / chunk) * 100 + i % chunk); }),
          "allgather");
  }
  {  // ReduceScatter
    std::vector<float> v(chunk * n);
    for (size_t j = 0; j < v.size(); ++j) v[j] = float(r + j);
    float* d = ToDevice(std::vector<float>(chunk, -1.f));
    NcclOk(ncclReduceScatter(ToDevice(v), d, chunk, ncclFloat, ncclSum, g_comm, g_stream), "rs");
    Check(AllEqual(ToHost(d, chunk),
                   [&](size_t i) { return float(n * (n - 1) / 2 + n * (r * chunk + i)); }),
          "reducescatter");
  }
  {  // AlltoAll
    std::vector<int32_t> v(chunk * n);
    for (int p = 0; p < n; ++p) {
      for (size_t i = 0; i < chunk; ++i) v[p * chunk + i] = int32_t(r * 1000 + p * 10 + i);
    }
    int32_t* d = ToDevice(std::vector<int32_t>(chunk * n, -1));
    NcclOk(ncclAlltoAll(ToDevice(v), d, chunk, ncclInt32, g_comm, g_stream), "alltoall");
    Check(AllEqual(ToHost(d, chunk * n),
                   [&](size_t j) { return int((j / chunk) * 1000 + r * 10 + j % chunk); }),
          "alltoall");
  }
  {  // Gather to rank 0, Scatter from rank 0
    std::vector<int32_t> v(chunk, r + 5);
    int32_t* d = ToDevice(std::vector<int32_t>(chunk * n, -1));
    NcclOk(ncclGather(ToDevice(v), d, chunk, ncclInt32, 0, g_comm, g_stream), "gather");
    if (r == 0) {
      Check(AllEqual(ToHost(d, chunk * n), [&](size_t j) { return int(j / chunk) + 5; }),
            "gather");
    }
    std::vector<int32_t> all(chunk * n);
    for (size_t j = 0; j < all.size(); ++j) all[j] = int32_t(j * 3);
    int32_t* s = ToDevice(all);
    int32_t* o = ToDevice(std::vector<int32_t>(chunk, -1));
    NcclOk(ncclScatter(s, o, chunk, ncclInt32, 0, g_comm, g_stream), "scatter");
    Check(AllEqual(ToHost(o, chunk), [&](size_t i) { return int((r * chunk + i) * 3); }),
          "scatter");
  }
  {  // Grouped ring exchange: send to the next rank, receive from the previous one
    std::vector<float> v(count);
    for (size_t i = 0; i < count; ++i) v[i] = float(r * 7 + i);
    float* s = ToDevice(v);
    float* d = ToDevice(std::vector<float>(count, -1.f));
    int next = (r + 1) % n, prev = (r + n - 1) % n;
    NcclOk(ncclGroupStart(), "groupstart");
    NcclOk(ncclSend(s, count, ncclFloat, next, g_comm, g_stream), "send");
    NcclOk(ncclRecv(d, count, ncclFloat, prev, g_comm, g_stream), "recv");
    NcclOk(ncclGroupEnd(), "groupend");
    Check(AllEqual(ToHost(d, count), [&](size_t i) { return float(prev * 7 + i); }),
          "sendrecv_ring");
  }
}

// Polls a non-blocking communicator until its last operation completed (NCCL's documented
// pattern); false on an error.
bool WaitReady(ncclComm_t comm) {
  ncclResult_t state = ncclInProgress;
  for (int i = 0; i < 1000000 && state == ncclInProgress; ++i) {
    if (ncclCommGetAsyncError(comm, &state) != ncclSuccess) return false;
  }
  return state == ncclSuccess;
}

int RunRank(const ncclUniqueId& id, const std::string& mode) {
  cudaSetDevice(0);
  cudaStreamCreate(&g_stream);
  ncclResult_t init;
  if (mode == "nonblocking") {
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    init = ncclCommInitRankConfig(&g_comm, g_n, id, g_rank, &config);
    Check(init == ncclInProgress, "nonblocking_init_in_progress");
    if (init == ncclInProgress) init = WaitReady(g_comm) ? ncclSuccess : ncclInternalError;
  } else {
    init = ncclCommInitRank(&g_comm, g_n, id, g_rank);
  }
  if (init != ncclSuccess) {
    printf("FAIL init %d rank %d\n", int(init), g_rank);
    return 1;
  }
  int count = -1, user_rank = -1;
  ncclCommCount(g_comm, &count);
  ncclCommUserRank(g_comm, &user_rank);
  Check(count == g_n && user_rank == g_rank, "comm_queries");
  if (mode == "check") {
    RunChecks();
  } else if (mode == "timing") {
    const size_t count = 1 << 14;  // 64 KiB of floats
    float* d = ToDevice(std::vector<float>(count, 1.f));
    for (int k = 0; k < 5; ++k) {
      NcclOk(ncclAllReduce(d, d, count, ncclFloat, ncclSum, g_comm, g_stream), "allreduce");
    }
    cudaStreamSynchronize(g_stream);
  } else if (mode == "biggroup") {
    // 100 AllReduces of 256 floats (bucketed gradients) in one group: one fused launch.
    std::vector<float*> bufs(100);
    for (float*& b : bufs) b = ToDevice(std::vector<float>(256, float(g_rank + 1)));
    NcclOk(ncclGroupStart(), "groupstart");
    for (float* b : bufs) {
      NcclOk(ncclAllReduce(b, b, 256, ncclFloat, ncclSum, g_comm, g_stream), "allreduce");
    }
    NcclOk(ncclGroupEnd(), "groupend");
    const float want = float(g_n * (g_n + 1) / 2);
    Check(AllEqual(ToHost(bufs[99], 256), [&](size_t) { return want; }), "biggroup");
  } else if (mode == "graph" || mode == "graph_late") {
    const bool late = mode == "graph_late";
    const size_t count = 256;
    std::vector<float> v(count);
    for (size_t i = 0; i < count; ++i) v[i] = float(g_rank + i);
    float* s = ToDevice(v);
    float* d = ToDevice(std::vector<float>(count, -1.f));
    float* rs = ToDevice(std::vector<float>(count, float(g_rank * 3)));
    float* rd = ToDevice(std::vector<float>(count, -1.f));
    const int next = (g_rank + 1) % g_n, prev = (g_rank + g_n - 1) % g_n;
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    Check(cudaStreamBeginCapture(g_stream, cudaStreamCaptureModeGlobal) == cudaSuccess,
          "begin_capture");
    NcclOk(ncclAllReduce(s, d, count, ncclFloat, ncclSum, g_comm, g_stream), "allreduce");
    NcclOk(ncclGroupStart(), "groupstart");
    NcclOk(ncclSend(rs, count, ncclFloat, next, g_comm, g_stream), "send");
    NcclOk(ncclRecv(rd, count, ncclFloat, prev, g_comm, g_stream), "recv");
    NcclOk(ncclGroupEnd(), "groupend");
    Check(cudaStreamEndCapture(g_stream, &graph) == cudaSuccess, "end_capture");
    size_t nodes = 0;
    cudaGraphGetNodes(graph, nullptr, &nodes);
    Check(nodes == 2, "captured_nodes");
    // Nothing ran during capture.
    Check(AllEqual(ToHost(d, count), [](size_t) { return -1.f; }), "nothing_during_capture");
    Check(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess, "instantiate");
    for (int k = 0; k < (late ? 4 : 3); ++k) {
      if (late && g_rank == 1) usleep(3000);
      Check(cudaGraphLaunch(exec, g_stream) == cudaSuccess, "launch");
      if (late) cudaStreamSynchronize(g_stream);
    }
    cudaStreamSynchronize(g_stream);
    const int n = g_n;
    Check(AllEqual(ToHost(d, count), [&](size_t i) { return float(n * (n - 1) / 2 + n * i); }),
          "graph_allreduce");
    Check(AllEqual(ToHost(rd, count), [&](size_t) { return float(prev * 3); }), "graph_ring");
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
  } else if (mode == "graph_side") {
    const size_t count = 256;
    float* s = ToDevice(std::vector<float>(count, float(g_rank + 1)));
    float* d = ToDevice(std::vector<float>(count, -1.f));
    cudaStream_t side = nullptr;
    cudaEvent_t fork = nullptr, join = nullptr;
    Check(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking) == cudaSuccess, "side");
    cudaEventCreateWithFlags(&fork, cudaEventDisableTiming);
    cudaEventCreateWithFlags(&join, cudaEventDisableTiming);
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    Check(cudaStreamBeginCapture(g_stream, cudaStreamCaptureModeGlobal) == cudaSuccess,
          "begin_capture");
    Check(cudaEventRecord(fork, g_stream) == cudaSuccess, "fork_record");
    Check(cudaStreamWaitEvent(side, fork, 0) == cudaSuccess, "fork_wait");
    NcclOk(ncclAllReduce(s, d, count, ncclFloat, ncclSum, g_comm, side), "allreduce");
    Check(cudaEventRecord(join, side) == cudaSuccess, "join_record");
    Check(cudaStreamWaitEvent(g_stream, join, 0) == cudaSuccess, "join_wait");
    Check(cudaStreamEndCapture(g_stream, &graph) == cudaSuccess, "end_capture");
    Check(AllEqual(ToHost(d, count), [](size_t) { return -1.f; }), "nothing_during_capture");
    Check(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess, "instantiate");
    for (int k = 0; k < 3; ++k) Check(cudaGraphLaunch(exec, g_stream) == cudaSuccess, "launch");
    cudaStreamSynchronize(g_stream);
    const int n = g_n;
    Check(AllEqual(ToHost(d, count), [&](size_t) { return float(n * (n + 1) / 2); }),
          "graph_side_allreduce");
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaStreamDestroy(side);
  } else if (mode == "split") {
    ncclComm_t half = nullptr;
    NcclOk(ncclCommSplit(g_comm, g_rank % 2, g_rank, &half, nullptr), "split");
    int hn = -1, hr = -1;
    ncclCommCount(half, &hn);
    ncclCommUserRank(half, &hr);
    Check(hn == (g_n + 1 - g_rank % 2) / 2 && hr == g_rank / 2, "split_ranks");
    int32_t* d = ToDevice(std::vector<int32_t>(8, g_rank));
    NcclOk(ncclAllReduce(d, d, 8, ncclInt32, ncclSum, half, g_stream), "allreduce");
    int want = 0;
    for (int q = g_rank % 2; q < g_n; q += 2) want += q;
    Check(AllEqual(ToHost(d, 8), [&](size_t) { return want; }), "split_allreduce");
    ncclCommDestroy(half);
  } else if (mode == "nonblocking") {
    // A non-blocking split (as PyTorch makes them), polled; then 3 AllGathers of 4096 floats
    // per rank on the half and 2 AllReduces of 1024 floats on the world. No NCCL error is left
    // for the program to read (ncclGetLastError).
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclComm_t half = nullptr;
    Check(ncclCommSplit(g_comm, g_rank % 2, g_rank, &half, &config) == ncclInProgress,
          "nonblocking_split_in_progress");
    Check(half != nullptr && WaitReady(half), "nonblocking_split_ready");
    int hn = -1;
    ncclCommCount(half, &hn);
    float* part = ToDevice(std::vector<float>(4096, float(g_rank)));
    float* all = ToDevice(std::vector<float>(4096 * size_t(hn), -1.f));
    for (int k = 0; k < 3; ++k) {
      NcclOk(ncclAllGather(part, all, 4096, ncclFloat, half, g_stream), "allgather");
    }
    float* w = ToDevice(std::vector<float>(1024, 1.f));
    for (int k = 0; k < 2; ++k) {
      NcclOk(ncclAllReduce(w, w, 1024, ncclFloat, ncclSum, g_comm, g_stream), "allreduce");
    }
    cudaStreamSynchronize(g_stream);
    const char* last = ncclGetLastError(nullptr);
    printf("LASTERROR rank %d [%s]\n", g_rank, last != nullptr ? last : "");
    Check(last == nullptr || *last == '\0', "no_nccl_error_left");
    ncclCommDestroy(half);
    // A split that fails (no parent): an error, nothing made.
    ncclComm_t none = nullptr;
    Check(ncclCommSplit(nullptr, 0, 0, &none, nullptr) == ncclInvalidArgument, "failed_split");
  } else if (mode == "skip") {
    if (g_rank != 1) {
      float* d = ToDevice(std::vector<float>(16, 1.f));
      NcclOk(ncclAllReduce(d, d, 16, ncclFloat, ncclSum, g_comm, g_stream), "allreduce");
      cudaStreamSynchronize(g_stream);
      ncclResult_t async = ncclSuccess;
      ncclCommGetAsyncError(g_comm, &async);
      printf("ASYNC %d rank %d\n", int(async), g_rank);
    }
  }
  ncclCommDestroy(g_comm);
  return g_fails;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr,
            "usage: nccl_ranks <nranks> "
            "<check|timing|biggroup|skip|split|nonblocking|graph|graph_late|graph_side|initall|"
            "initall_split>\n");
    return 2;
  }
  g_n = atoi(argv[1]);
  std::string mode = argv[2];
  if (mode == "initall" || mode == "initall_split") {
    setvbuf(stdout, nullptr, _IOLBF, 0);
    std::vector<ncclComm_t> comms(g_n);
    NcclOk(ncclCommInitAll(comms.data(), g_n, nullptr), "initall");
    std::vector<cudaStream_t> streams(g_n);
    std::vector<float*> bufs(g_n);
    for (int r = 0; r < g_n; ++r) {
      cudaStreamCreate(&streams[r]);
      g_stream = streams[r];
      bufs[r] = ToDevice(std::vector<float>(64, float(r + 1)));
    }
    NcclOk(ncclGroupStart(), "groupstart");
    for (int r = 0; r < g_n; ++r) {
      NcclOk(ncclAllReduce(bufs[r], bufs[r], 64, ncclFloat, ncclSum, comms[r], streams[r]), "ar");
    }
    NcclOk(ncclGroupEnd(), "groupend");
    for (int r = 0; r < g_n; ++r) {
      g_stream = streams[r];
      Check(AllEqual(ToHost(bufs[r], 64), [&](size_t) { return float(g_n * (g_n + 1) / 2); }),
            "initall_allreduce");
    }
    if (mode == "initall_split") {
      std::vector<ncclComm_t> halves(g_n, nullptr);
      NcclOk(ncclGroupStart(), "groupstart_split");
      for (int r = 0; r < g_n; ++r) {
        NcclOk(ncclCommSplit(comms[r], r % 2, r, &halves[r], nullptr), "split");
      }
      NcclOk(ncclGroupEnd(), "groupend_split");
      for (int r = 0; r < g_n; ++r) {
        int count = 0, rank = -1;
        Check(halves[r] != nullptr && ncclCommCount(halves[r], &count) == ncclSuccess &&
                  ncclCommUserRank(halves[r], &rank) == ncclSuccess &&
                  count == (g_n - r % 2 + 1) / 2 && rank == r / 2,
              "split_in_group");
        g_stream = streams[r];
        bufs[r] = ToDevice(std::vector<float>(64, float(r)));
      }
      NcclOk(ncclGroupStart(), "groupstart_half");
      for (int r = 0; r < g_n; ++r) {
        NcclOk(ncclAllReduce(bufs[r], bufs[r], 64, ncclFloat, ncclSum, halves[r], streams[r]),
               "half_ar");
      }
      NcclOk(ncclGroupEnd(), "groupend_half");
      for (int r = 0; r < g_n; ++r) {
        float want = 0;
        for (int q = r % 2; q < g_n; q += 2) want += float(q);
        g_stream = streams[r];
        Check(AllEqual(ToHost(bufs[r], 64), [&](size_t) { return want; }), "half_allreduce");
      }
    }
    return g_fails;
  }
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) return 3;
  fflush(stdout);
  std::vector<pid_t> pids;
  for (int r = 0; r < g_n; ++r) {
    pid_t pid = fork();
    if (pid == 0) {
      setenv("RANK", std::to_string(r).c_str(), 1);
      setvbuf(stdout, nullptr, _IOLBF, 0);
      g_rank = r;
      _exit(RunRank(id, mode));
    }
    pids.push_back(pid);
  }
  int failed = 0;
  for (int r = 0; r < g_n; ++r) {
    int status = 0;
    waitpid(pids[r], &status, 0);
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128;
    printf("RANK %d EXIT %d\n", r, code);
    if (code != 0) ++failed;
  }
  return failed;
}
