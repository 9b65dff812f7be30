// One process, one thread per NCCL rank (nccl-tests -t N): `nccl_thread_ranks <nranks>`; thread
// r selects device r, joins the clique with ncclCommInitRank (one unique id), runs 3 AllReduces
// of 1024 floats on its own stream and checks them. Prints "errors=N"; exits 1 on any error.
#include <cuda_runtime.h>
#include <nccl.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

int main(int argc, char** argv) {
  const int n = argc > 1 ? atoi(argv[1]) : 2;
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
      errors += ncclCommDestroy(comm) != ncclSuccess;
      errors += cudaFree(buf) != cudaSuccess;
      errors += cudaStreamDestroy(s) != cudaSuccess;
    });
  }
  for (auto& t : threads) t.join();
  printf("errors=%d\n", errors.load());
  return errors == 0 ? 0 : 1;
}
