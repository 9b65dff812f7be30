// Work on a stream of device 1 issued while device 0 is current (run with GPUSIM_DEVICES=2):
// copies and a set on it are device 1's, as the runtime runs them; a kernel on device 0's own
// stream in between. Then stream-ordered allocations, still with device 0 current, that take device
// 1's memory: on device 1's stream (3 MiB), from device 1's default pool on device 0's stream
// (2 MiB), from a pool made on device 1 on the legacy stream (1 MiB); and 256 KiB on device 0's
// stream; then from the pools CUDA 13 gets by location; then a graph of device 1 launched twice.
// Exit code 0 when every call succeeded.
#include <cuda_runtime.h>

#include <cstdio>

#include "agent/hooks/cuda_runtime/testdata/check.h"

__global__ void cross_kernel(float* p) {}

int main() {
  float *d0 = nullptr, *d1 = nullptr;
  cudaStream_t s0 = nullptr, s1 = nullptr;
  static float host[1024];
  CHECK(cudaFree(nullptr));  // the context-creation idiom: a call, not a free
  CHECK(cudaSetDevice(1));
  CHECK(cudaMalloc(&d1, sizeof(host)));
  CHECK(cudaStreamCreate(&s1));
  CHECK(cudaSetDevice(0));
  CHECK(cudaMalloc(&d0, sizeof(host)));
  CHECK(cudaStreamCreate(&s0));
  for (int i = 0; i < 3; ++i) {
    CHECK(cudaMemcpyAsync(d1, host, sizeof(host), cudaMemcpyHostToDevice, s1));
    cross_kernel<<<4, 64, 0, s0>>>(d0);
    CHECK(cudaMemsetAsync(d1, 0, sizeof(host), s1));
  }
  void *on_stream1 = nullptr, *from_default1 = nullptr, *from_made1 = nullptr,
       *on_stream0 = nullptr;
  cudaMemPool_t default1 = nullptr, made1 = nullptr;
  CHECK(cudaDeviceGetDefaultMemPool(&default1, 1));
  cudaMemPoolProps props = {};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = 1;
  CHECK(cudaMemPoolCreate(&made1, &props));
  CHECK(cudaMallocAsync(&on_stream1, 3 << 20, s1));
  CHECK(cudaMallocFromPoolAsync(&from_default1, 2 << 20, default1, s0));
  CHECK(cudaMallocFromPoolAsync(&from_made1, 1 << 20, made1, nullptr));
  CHECK(cudaMallocAsync(&on_stream0, 256 << 10, s0));
  // CUDA 13's pools by location: device 1's default (512 KiB) and current (64 KiB) pools, and
  // the host's (128 KiB of pinned host memory, not device memory), all on device 0's stream.
  cudaMemPool_t loc_default1 = nullptr, loc_current1 = nullptr, host_pool = nullptr;
  cudaMemLocation loc1 = {};
  loc1.type = cudaMemLocationTypeDevice;
  loc1.id = 1;
  cudaMemLocation host_loc = {};
  host_loc.type = cudaMemLocationTypeHost;
  CHECK(cudaMemGetDefaultMemPool(&loc_default1, &loc1, cudaMemAllocationTypePinned));
  CHECK(cudaMemGetMemPool(&loc_current1, &loc1, cudaMemAllocationTypePinned));
  CHECK(cudaMemGetDefaultMemPool(&host_pool, &host_loc, cudaMemAllocationTypePinned));
  void *from_loc_default1 = nullptr, *from_loc_current1 = nullptr, *from_host = nullptr;
  CHECK(cudaMallocFromPoolAsync(&from_loc_default1, 512 << 10, loc_default1, s0));
  CHECK(cudaMallocFromPoolAsync(&from_loc_current1, 64 << 10, loc_current1, s0));
  CHECK(cudaMallocFromPoolAsync(&from_host, 128 << 10, host_pool, s0));
  CHECK(cudaFreeAsync(on_stream1, s1));
  CHECK(cudaFreeAsync(from_default1, s0));
  CHECK(cudaFreeAsync(from_made1, nullptr));
  CHECK(cudaFreeAsync(on_stream0, s0));
  CHECK(cudaFreeAsync(from_loc_default1, s0));
  CHECK(cudaFreeAsync(from_loc_current1, s0));
  CHECK(cudaFreeAsync(from_host, s0));
  CHECK(cudaStreamSynchronize(s1));
  CHECK(cudaStreamSynchronize(s0));
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaMemPoolDestroy(made1));
  // A graph of device 1, launched twice on its stream by a thread on device 1.
  CHECK(cudaSetDevice(1));
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  CHECK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeThreadLocal));
  cross_kernel<<<2, 32, 0, s1>>>(d1);
  CHECK(cudaStreamEndCapture(s1, &graph));
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (int i = 0; i < 2; ++i) CHECK(cudaGraphLaunch(exec, s1));
  CHECK(cudaStreamSynchronize(s1));
  CHECK(cudaGraphExecDestroy(exec));
  CHECK(cudaGraphDestroy(graph));
  CHECK(cudaSetDevice(0));
  CHECK(cudaStreamDestroy(s1));
  CHECK(cudaStreamDestroy(s0));
  CHECK(cudaFree(d0));
  CHECK(cudaSetDevice(1));
  CHECK(cudaFree(d1));
  printf("errors=%d\n", errors);
  return errors == 0 ? 0 : 1;
}
