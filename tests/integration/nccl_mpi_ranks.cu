// A plain NCCL + MPI program (no profiler code), one rank per process: rank 0 creates the
// ncclUniqueId and broadcasts it with MPI_Bcast, every rank joins the communicator, runs a fixed
// sequence of collectives on its stream and checks the results on the host; exit status non-zero
// (MPI_Abort) on a wrong result. Run on the CPU GPU simulator (tests/gpusim) by
// nccl_gpusim_test, which checks what the agent recorded against the simulator's ground truth.
//
// Per iteration (kIters): 0 AllReduce f32[16384] sum, 1 Broadcast i32[1000] root 1,
// 2 Reduce f64[512] max root 0, 3 AllGather f32[256], 4 ReduceScatter f32[128] sum,
// 5 AlltoAll i32[64] per peer, then one group {Send f32[100] to the right, Recv f32[100] from
// the left}. Then ncclCommSplit by rank parity and one AllReduce i32[32] sum on each half.
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

int g_rank = 0;
constexpr int kIters = 3;

void Fail(const char* what) {
  std::fprintf(stderr, "rank %d: %s\n", g_rank, what);
  MPI_Abort(MPI_COMM_WORLD, 3);
}
void Nccl(ncclResult_t r, const char* what) {
  if (r != ncclSuccess) Fail(what);
}
void Cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) Fail(what);
}

template <typename T>
T* Dev(size_t n) {
  T* p = nullptr;
  Cuda(cudaMalloc(&p, n * sizeof(T)), "cudaMalloc");
  return p;
}
template <typename T>
void Up(T* d, const std::vector<T>& h) {
  Cuda(cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice), "upload");
}
template <typename T>
std::vector<T> Down(const T* d, size_t n) {
  std::vector<T> h(n);
  Cuda(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost), "download");
  return h;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, n = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  g_rank = rank;
  Cuda(cudaSetDevice(0), "cudaSetDevice");

  ncclUniqueId id;
  if (rank == 0) Nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
  ncclComm_t comm;
  Nccl(ncclCommInitRank(&comm, n, id, rank), "ncclCommInitRank");
  cudaStream_t s;
  Cuda(cudaStreamCreate(&s), "cudaStreamCreate");
  const int left = (rank - 1 + n) % n, right = (rank + 1) % n;

  float* f = Dev<float>(16384);
  float* fo = Dev<float>(16384);
  int* i = Dev<int>(1000 * 4);
  int* io = Dev<int>(1000 * 4);
  double* d = Dev<double>(512);
  double* dout = Dev<double>(512);
  for (int it = 0; it < kIters; ++it) {
    Up(f, std::vector<float>(16384, float(rank + 1 + it)));
    Nccl(ncclAllReduce(f, fo, 16384, ncclFloat32, ncclSum, comm, s), "AllReduce");
    // Rank 0 also makes a call NCCL rejects (no such reduction): nothing is enqueued, and its
    // number must not shift rank 0's later calls against the other ranks'.
    if (rank == 0 && ncclAllReduce(f, fo, 16384, ncclFloat32, static_cast<ncclRedOp_t>(42), comm,
                                   s) != ncclInvalidArgument)
      Fail("invalid AllReduce accepted");
    std::vector<int> bsrc(1000, rank == 1 % n ? 77 + it : -1);
    Up(i, bsrc);
    Nccl(ncclBroadcast(i, io, 1000, ncclInt32, 1 % n, comm, s), "Broadcast");
    Up(d, std::vector<double>(512, double(rank)));
    Nccl(ncclReduce(d, dout, 512, ncclFloat64, ncclMax, 0, comm, s), "Reduce");
    Nccl(ncclAllGather(f, fo, 256, ncclFloat32, comm, s), "AllGather");
    Cuda(cudaStreamSynchronize(s), "sync");
    // Check before fo is reused.
    std::vector<float> ag = Down(fo, 256 * n);
    for (int r = 0; r < n; ++r)
      if (ag[256 * r] != float(r + 1 + it)) Fail("AllGather result");
    Nccl(ncclReduceScatter(f, fo, 128, ncclFloat32, ncclSum, comm, s), "ReduceScatter");
    Up(i, std::vector<int>(64 * n, rank));
    Nccl(ncclAlltoAll(i, io + 1000, 64, ncclInt32, comm, s), "AlltoAll");
    Up(f + 8192, std::vector<float>(100, float(1000 * rank)));
    Nccl(ncclGroupStart(), "GroupStart");
    Nccl(ncclSend(f + 8192, 100, ncclFloat32, right, comm, s), "Send");
    Nccl(ncclRecv(fo + 8192, 100, ncclFloat32, left, comm, s), "Recv");
    Nccl(ncclGroupEnd(), "GroupEnd");
    Cuda(cudaStreamSynchronize(s), "sync");

    const float tri = float(n * (n + 1) / 2 + n * it);  // sum over r of (r + 1 + it)
    std::vector<float> rs = Down(fo, 128);
    if (rs[0] != tri || rs[127] != tri) Fail("ReduceScatter result");
    std::vector<int> bc = Down(io, 1000);
    if (bc[0] != 77 + it || bc[999] != 77 + it) Fail("Broadcast result");
    if (rank == 0) {
      std::vector<double> mx = Down(dout, 512);
      if (mx[0] != double(n - 1)) Fail("Reduce result");
    }
    std::vector<int> a2a = Down(io + 1000, 64 * n);
    for (int r = 0; r < n; ++r)
      if (a2a[64 * r] != r) Fail("AlltoAll result");
    std::vector<float> p2p = Down(fo + 8192, 100);
    if (p2p[0] != float(1000 * left) || p2p[99] != p2p[0]) Fail("Send/Recv result");
  }
  // AllReduce result of the last iteration was overwritten; run one more check on a fresh one.
  Up(f, std::vector<float>(16384, 1.0f));
  Nccl(ncclAllReduce(f, fo, 16384, ncclFloat32, ncclSum, comm, s), "AllReduce");
  Cuda(cudaStreamSynchronize(s), "sync");
  std::vector<float> ar = Down(fo, 16384);
  if (ar[0] != float(n) || ar[16383] != float(n)) Fail("AllReduce result");

  ncclComm_t half;
  Nccl(ncclCommSplit(comm, rank % 2, rank, &half, nullptr), "ncclCommSplit");
  Up(i, std::vector<int>(32, rank));
  Nccl(ncclAllReduce(i, io, 32, ncclInt32, ncclSum, half, s), "AllReduce half");
  Cuda(cudaStreamSynchronize(s), "sync");
  int expect = 0;
  for (int r = rank % 2; r < n; r += 2) expect += r;
  if (Down(io, 32)[31] != expect) Fail("AllReduce on split result");

  Nccl(ncclCommDestroy(half), "destroy half");
  Nccl(ncclCommDestroy(comm), "destroy");
  MPI_Finalize();
  if (rank == 0) std::printf("nccl_mpi_ranks: %d ranks, all results correct\n", n);
  return 0;
}
