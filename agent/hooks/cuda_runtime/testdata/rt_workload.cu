// Workload for the CUDA-runtime surface's end-to-end tests (run on gpusim under the agent).
// The very first CUDA call is a kernel launch; then 3 threads with their own streams launch
// kernels and do copies and sets; a captured graph of 3 kernels is launched twice; every
// allocation kind is made and freed. Kernel names are unique so tests can match them against
// the ground truth. Prints the check values below; exits with argv[1] (default 0) when every
// CUDA call succeeded, else 1.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "agent/hooks/cuda_runtime/testdata/check.h"

__global__ void first_kernel(int n) {}
__global__ void worker_kernel_a(float* p, int n) {}
__global__ void worker_kernel_b(float* p, int n) {}
__global__ void graph_k1() {}
__global__ void graph_k2(int v) {}
__global__ void graph_k3() {}
__global__ void excl_kernel(float* p) {}


static void Worker(int id, int iters, double* checksum) {
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const size_t n = 1 << 16;
  float* d = nullptr;
  float* h = nullptr;
  CHECK(cudaMalloc(&d, n * sizeof(float)));
  CHECK(cudaMallocHost(&h, n * sizeof(float)));
  for (size_t i = 0; i < n; ++i) h[i] = float(id + 1);
  for (int it = 0; it < iters; ++it) {
    CHECK(cudaMemcpyAsync(d, h, n * sizeof(float), cudaMemcpyHostToDevice, s));
    worker_kernel_a<<<64 * (id + 1), 256, 0, s>>>(d, int(n));
    worker_kernel_b<<<dim3(8, 2, 1), dim3(32, 4, 1), 128, s>>>(d, int(n));
    CHECK(cudaMemsetAsync(d, 0, 4096, s));
    CHECK(cudaMemcpyAsync(h, d, n * sizeof(float), cudaMemcpyDeviceToHost, s));
  }
  CHECK(cudaStreamSynchronize(s));
  double sum = 0;
  for (size_t i = 0; i < n; ++i) sum += h[i];
  *checksum = sum;
  CHECK(cudaFreeHost(h));
  CHECK(cudaFree(d));
  CHECK(cudaStreamDestroy(s));
}

int main(int argc, char** argv) {
  int exit_code = argc > 1 ? atoi(argv[1]) : 0;
  first_kernel<<<1, 32>>>(1);  // before anything else
  CHECK(cudaDeviceSynchronize());

  // Threads and streams.
  const int kThreads = 3, kIters = 4;
  double sums[kThreads] = {0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(Worker, t, kIters, &sums[t]);
  for (auto& t : threads) t.join();

  // Synchronous copies and sets, 2D, device-to-device.
  float *a = nullptr, *b = nullptr;
  CHECK(cudaMalloc(&a, 1 << 20));
  CHECK(cudaMalloc(&b, 1 << 20));
  CHECK(cudaMemset(a, 1, 1 << 20));
  CHECK(cudaMemcpy(b, a, 1 << 20, cudaMemcpyDeviceToDevice));
  CHECK(cudaMemcpy2D(b, 1024, a, 1024, 512, 64, cudaMemcpyDeviceToDevice));
  CHECK(cudaMemset2D(a, 1024, 0, 512, 64));
  std::vector<unsigned char> host(1 << 20);
  CHECK(cudaMemcpy(host.data(), b, 1 << 20, cudaMemcpyDeviceToHost));

  // A captured graph, launched twice.
  cudaStream_t gs;
  CHECK(cudaStreamCreate(&gs));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CHECK(cudaStreamBeginCapture(gs, cudaStreamCaptureModeGlobal));
  graph_k1<<<4, 64, 0, gs>>>();
  graph_k2<<<8, 64, 0, gs>>>(3);
  graph_k3<<<2, 32, 0, gs>>>();
  CHECK(cudaStreamEndCapture(gs, &graph));
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  CHECK(cudaGraphLaunch(exec, gs));
  CHECK(cudaGraphLaunch(exec, gs));
  CHECK(cudaStreamSynchronize(gs));

  // Events across streams, extended launch.
  cudaEvent_t ev;
  CHECK(cudaEventCreate(&ev));
  CHECK(cudaEventRecord(ev, gs));
  CHECK(cudaStreamWaitEvent(0, ev, 0));
  CHECK(cudaEventSynchronize(ev));
  cudaLaunchConfig_t cfg;
  memset(&cfg, 0, sizeof(cfg));
  cfg.gridDim = dim3(16, 1, 1);
  cfg.blockDim = dim3(128, 1, 1);
  cfg.stream = gs;
  void* args[] = {&a};
  CHECK(cudaLaunchKernelExC(&cfg, reinterpret_cast<const void*>(excl_kernel), args));
  CHECK(cudaDeviceSynchronize());

  // Other allocation kinds.
  void *m = nullptr, *ha = nullptr, *as = nullptr;
  CHECK(cudaMallocManaged(&m, 3000, cudaMemAttachGlobal));
  CHECK(cudaHostAlloc(&ha, 5000, cudaHostAllocDefault));
  CHECK(cudaMallocAsync(&as, 7000, gs));
  CHECK(cudaFreeAsync(as, gs));
  CHECK(cudaStreamSynchronize(gs));
  CHECK(cudaFree(m));
  CHECK(cudaFreeHost(ha));
  CHECK(cudaFree(a));
  CHECK(cudaFree(b));
  CHECK(cudaEventDestroy(ev));
  CHECK(cudaGraphExecDestroy(exec));
  CHECK(cudaGraphDestroy(graph));
  CHECK(cudaStreamDestroy(gs));

  printf("checksums %.0f %.0f %.0f\n", sums[0], sums[1], sums[2]);
  printf("host[0]=%d errors=%d\n", int(host[0]), errors);
  return errors ? 1 : exit_code;
}
