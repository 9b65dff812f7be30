// One process, one thread per NCCL rank (nccl-tests -t N): `nccl_thread_ranks <nranks>`; thread
// r selects device r, joins the clique with ncclCommInitRank (one unique id), runs 3 AllReduces
// of 1024 floats on its own stream and checks them. With `graph` as second argument each thread
// then captures an AllReduce and a grouped Send/Recv ring into a CUDA graph and launches it 4
// times (nccl-tests -t N -G). Prints "errors=N"; exits 1 on any error.
#include <cuda_runtime.h>
#include <nccl.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

int main(int argc, char** argv) {
  const int n = argc > 1 ? atoi(argv[1]) : 2;
  const bool graph = argc > 2 && strcmp(argv[2], "graph") == 0;
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) return 1;
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      constexpr int kCount = 1024;
      ncclComm_t comm = nullptr;
      cudaStream_t s = nullptr;
      float* buf = nullptr;
      errors += cudaSetDevice(r) != cudaSuccess;
      errors += cudaStreamCreate(&s) != cudaSuccess;
      errors += cudaMalloc(&buf, kCount * sizeof(float)) != cudaSuccess;
      errors += ncclCommInitRank(&comm, n, id, r) != ncclSuccess;
      std::vector<float> host(kCount, float(r + 1));
      for (int i = 0; i < 3; ++i) {
        errors += cudaMemcpyAsync(buf, host.data(), kCount * sizeof(float),
                                  cudaMemcpyHostToDevice, s) != cudaSuccess;
        errors += ncclAllReduce(buf, buf, kCount, ncclFloat, ncclSum, comm, s) != ncclSuccess;
        errors += cudaMemcpyAsync(host.data(), buf, kCount * sizeof(float),
                                  cudaMemcpyDeviceToHost, s) != cudaSuccess;
        errors += cudaStreamSynchronize(s) != cudaSuccess;
        errors += host[0] != float(n * (n + 1) / 2) || host[kCount - 1] != host[0];
        for (float& v : host) v = float(r + 1);
      }
      if (graph) {
        float* ring = nullptr;
        errors += cudaMalloc(&ring, 2 * kCount * sizeof(float)) != cudaSuccess;
        cudaGraph_t g = nullptr;
        cudaGraphExec_t exec = nullptr;
        errors += cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) != cudaSuccess;
        errors += ncclAllReduce(buf, buf, kCount, ncclFloat, ncclSum, comm, s) != ncclSuccess;
        errors += ncclGroupStart() != ncclSuccess;
        errors += ncclSend(ring, kCount, ncclFloat, (r + 1) % n, comm, s) != ncclSuccess;
        errors +=
            ncclRecv(ring + kCount, kCount, ncclFloat, (r + n - 1) % n, comm, s) != ncclSuccess;
        errors += ncclGroupEnd() != ncclSuccess;
        errors += cudaStreamEndCapture(s, &g) != cudaSuccess;
        errors += cudaGraphInstantiate(&exec, g, 0) != cudaSuccess;
        for (int i = 0; i < 4; ++i) {
          errors += cudaGraphLaunch(exec, s) != cudaSuccess;
          errors += cudaStreamSynchronize(s) != cudaSuccess;
        }
        errors += cudaGraphExecDestroy(exec) != cudaSuccess;
        errors += cudaGraphDestroy(g) != cudaSuccess;
        errors += cudaFree(ring) != cudaSuccess;
      }
      errors += ncclCommDestroy(comm) != ncclSuccess;
      errors += cudaFree(buf) != cudaSuccess;
      errors += cudaStreamDestroy(s) != cudaSuccess;
    });
  }
  for (auto& t : threads) t.join();
  printf("errors=%d\n", errors.load());
  return errors == 0 ? 0 : 1;
}
