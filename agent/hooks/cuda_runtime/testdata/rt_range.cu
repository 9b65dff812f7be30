// The capture range (PROFAGENT_CAPTURE=cudaProfilerApi): work before, between and after two
// cudaProfilerStart/cudaProfilerStop pairs, as torch.cuda.profiler.start()/stop() or a
// benchmark's "measure only this loop" wraps it. Memory is allocated outside the ranges and
// freed inside and outside them. NVTX steps: one before, two inside the first range
// (tokens=2 each), one after it. Exit code 0 when every call succeeded. With the argument
// `handle`, cudaProfilerStart/Stop are called through a dlopen handle of the runtime, as a
// Python engine's ctypes.CDLL makes them: no LD_PRELOAD interposer sees those calls.
#include <cuda_profiler_api.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <nvtx3/nvToolsExt.h>

#include <cstdio>
#include <cstring>

#include "agent/hooks/cuda_runtime/testdata/check.h"

__global__ void outside_kernel(float* p) {}
__global__ void range1_kernel(float* p) {}
__global__ void range2_kernel(float* p) {}

cudaError_t (*start_fn)() = cudaProfilerStart;
cudaError_t (*stop_fn)() = cudaProfilerStop;
#define cudaProfilerStart start_fn
#define cudaProfilerStop stop_fn

int main(int argc, char** argv) {
  if (argc > 1 && strcmp(argv[1], "handle") == 0) {
    void* rt = dlopen("libcudart.so.13", RTLD_NOW | RTLD_LOCAL);
    if (rt == nullptr) return 2;
    start_fn = reinterpret_cast<cudaError_t (*)()>(dlsym(rt, "cudaProfilerStart"));
    stop_fn = reinterpret_cast<cudaError_t (*)()>(dlsym(rt, "cudaProfilerStop"));
    if (start_fn == nullptr || stop_fn == nullptr) return 2;
  }
  float *a = nullptr, *b = nullptr, *c = nullptr;
  float host[256] = {};
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s));
  CHECK(cudaMalloc(&a, 1 << 20));
  CHECK(cudaMalloc(&b, 1 << 16));
  nvtxRangePushA("step tokens=1");
  outside_kernel<<<4, 64, 0, s>>>(a);
  CHECK(cudaStreamSynchronize(s));
  nvtxRangePop();

  CHECK(cudaProfilerStart());
  for (int i = 0; i < 2; ++i) {
    nvtxRangePushA("step tokens=2");
    range1_kernel<<<8, 128, 0, s>>>(a);
    nvtxRangePop();
  }
  range1_kernel<<<8, 128, 0, s>>>(a);
  CHECK(cudaMemcpyAsync(b, host, sizeof(host), cudaMemcpyHostToDevice, s));
  CHECK(cudaMalloc(&c, 1 << 12));
  CHECK(cudaFree(b));
  CHECK(cudaStreamSynchronize(s));
  CHECK(cudaProfilerStop());

  nvtxRangePushA("step tokens=3");
  for (int i = 0; i < 2; ++i) outside_kernel<<<4, 64, 0, s>>>(a);
  nvtxRangePop();
  CHECK(cudaMemcpyAsync(host, a, sizeof(host), cudaMemcpyDeviceToHost, s));
  CHECK(cudaStreamSynchronize(s));

  CHECK(cudaProfilerStart());
  range2_kernel<<<16, 32, 0, s>>>(c);
  CHECK(cudaStreamSynchronize(s));
  CHECK(cudaProfilerStop());

  outside_kernel<<<4, 64, 0, s>>>(a);
  CHECK(cudaStreamSynchronize(s));
  CHECK(cudaFree(a));
  CHECK(cudaFree(c));
  CHECK(cudaStreamDestroy(s));
  printf("errors=%d\n", errors);
  return errors == 0 ? 0 : 1;
}
