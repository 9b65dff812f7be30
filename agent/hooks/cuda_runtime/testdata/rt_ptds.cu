// Workload built with `nvcc --default-stream per-thread`: every stream-taking call goes to the
// runtime's _ptsz entry point and every synchronous copy or set to its _ptds one (cudaMemcpy ->
// cudaMemcpy_ptds, ...), as in programs built that way. Also the calls the other test workloads
// leave out: symbol copies, pitched, pool and registered allocations, event records with flags,
// polls, host functions, stream capture. Prints "errors=N"; exits 1 when any call failed.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>
#include <ctime>
#include <vector>

#include "agent/hooks/cuda_runtime/testdata/check.h"

__device__ float dev_table[256];

__global__ void ptds_kernel_a(float* p) {}
__global__ void ptds_kernel_b(float* p, int n) {}
__global__ void ptds_graph_kernel() {}


static int host_calls = 0;
static void CUDART_CB HostFn(void* p) { ++*static_cast<int*>(p); }
// Holds the stream for 20 ms, so the kernels enqueued behind it start when their predecessor
// ends, not when the host gets round to launching them (CUDA-event timing of a kernel on an
// idle stream includes that launch latency, which on a loaded machine reaches a millisecond).
static void CUDART_CB HoldStream(void*) {
  timespec ts{0, 20 * 1000 * 1000};
  nanosleep(&ts, nullptr);
}

int main() {
  const size_t n = 1 << 16;
  float* d = nullptr;
  CHECK(cudaMalloc(&d, n * sizeof(float)));
  std::vector<float> h(n, 1.0f);

  // Synchronous copies and sets (-> _ptds), kernels on the per-thread default stream (-> _ptsz).
  CHECK(cudaMemcpy(d, h.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  CHECK(cudaMemset(d, 0, 8192));
  CHECK(cudaLaunchHostFunc(0, HoldStream, nullptr));
  ptds_kernel_a<<<32, 128>>>(d);
  ptds_kernel_b<<<dim3(4, 2), dim3(64, 2)>>>(d, int(n));
  CHECK(cudaMemcpy2D(d, 1024, d + 4096, 1024, 512, 16, cudaMemcpyDeviceToDevice));
  CHECK(cudaMemset2D(d, 1024, 0, 256, 8));
  CHECK(cudaMemcpyToSymbol(dev_table, h.data(), sizeof(float) * 256));
  float back[256];
  CHECK(cudaMemcpyFromSymbol(back, dev_table, sizeof(back)));

  // Asynchronous work on the per-thread default stream (stream 0 under per-thread semantics).
  CHECK(cudaMemcpyAsync(h.data(), d, 4096, cudaMemcpyDeviceToHost, 0));
  CHECK(cudaMemcpyToSymbolAsync(dev_table, h.data(), 512, 0, cudaMemcpyHostToDevice, 0));
  CHECK(cudaMemcpy2DAsync(d, 2048, d + 8192, 2048, 1024, 4, cudaMemcpyDeviceToDevice, 0));
  CHECK(cudaMemsetAsync(d, 0, 3000, 0));
  CHECK(cudaLaunchHostFunc(0, HostFn, &host_calls));
  cudaEvent_t ev;
  CHECK(cudaEventCreate(&ev));
  CHECK(cudaEventRecord(ev, 0));
  CHECK(cudaEventRecordWithFlags(ev, 0, cudaEventRecordDefault));
  CHECK(cudaStreamWaitEvent(0, ev, 0));
  cudaError_t q = cudaStreamQuery(0);
  if (q != cudaSuccess && q != cudaErrorNotReady) CHECK(q);
  q = cudaEventQuery(ev);
  if (q != cudaSuccess && q != cudaErrorNotReady) CHECK(q);
  CHECK(cudaStreamSynchronize(0));

  // Allocations the other workloads do not make.
  void *pitched = nullptr, *pooled = nullptr, *async = nullptr;
  size_t pitch = 0;
  CHECK(cudaMallocPitch(&pitched, &pitch, 1000, 10));
  cudaMemPool_t pool;
  CHECK(cudaDeviceGetDefaultMemPool(&pool, 0));
  CHECK(cudaMallocFromPoolAsync(&pooled, 9000, pool, 0));
  CHECK(cudaMallocAsync(&async, 11000, 0));
  CHECK(cudaFreeAsync(async, 0));
  CHECK(cudaFreeAsync(pooled, 0));
  static char registered[65536];
  CHECK(cudaHostRegister(registered, sizeof(registered), cudaHostRegisterDefault));
  CHECK(cudaHostUnregister(registered));

  // A graph captured from a created stream, launched on the per-thread default stream.
  cudaStream_t cs;
  CHECK(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CHECK(cudaStreamBeginCapture(cs, cudaStreamCaptureModeThreadLocal));
  ptds_graph_kernel<<<2, 32, 0, cs>>>();
  CHECK(cudaStreamEndCapture(cs, &graph));
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  CHECK(cudaGraphLaunch(exec, 0));
  CHECK(cudaStreamSynchronize(0));
  CHECK(cudaGraphExecDestroy(exec));
  CHECK(cudaGraphDestroy(graph));
  CHECK(cudaStreamDestroy(cs));
  CHECK(cudaDeviceSynchronize());

  CHECK(cudaFree(pitched));
  CHECK(cudaFree(d));
  CHECK(cudaEventDestroy(ev));
  printf("pitch=%zu host_calls=%d errors=%d\n", pitch, host_calls, errors);
  return errors ? 1 : 0;
}
