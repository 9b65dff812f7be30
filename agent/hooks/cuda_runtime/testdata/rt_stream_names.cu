// Streams named with NVTX, as an engine names its prefill and decode streams for Nsight: a
// stream named through the runtime module (nvtxNameCudaStreamA), one through the wide form and
// renamed through the driver module (nvtxNameCuStreamW, the last name wins), the legacy default
// stream and the per-thread default stream, each running its own kernel; device, event and context
// names too. Device 1's stream is named while device 0 is current (run with GPUSIM_DEVICES=2).
// Exit code 0 when every call succeeded.
#include <cuda.h>
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExtCuda.h>
#include <nvtx3/nvToolsExtCudaRt.h>

#include <cstdio>

#include "agent/hooks/cuda_runtime/testdata/check.h"

__global__ void prefill_named_kernel(float* p) {}
__global__ void decode_named_kernel(float* p) {}
__global__ void legacy_named_kernel(float* p) {}
__global__ void ptds_named_kernel(float* p) {}
__global__ void other_device_kernel(float* p) {}
__global__ void unnamed_kernel(float* p) {}

int main() {
  float* d = nullptr;
  cudaStream_t prefill = nullptr, decode = nullptr, unnamed = nullptr, other = nullptr;
  cudaEvent_t done = nullptr;
  CHECK(cudaSetDevice(1));
  CHECK(cudaStreamCreate(&other));
  CHECK(cudaSetDevice(0));
  CHECK(cudaMalloc(&d, 4096));
  CHECK(cudaStreamCreateWithFlags(&prefill, cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithFlags(&decode, cudaStreamNonBlocking));
  CHECK(cudaStreamCreate(&unnamed));
  CHECK(cudaEventCreate(&done));
  nvtxNameCudaDeviceA(0, "gpu-main");
  nvtxNameCudaEventA(done, "step-done");
  nvtxNameCudaStreamA(prefill, "prefill");
  nvtxNameCudaStreamW(decode, L"d\u00e9code");
  nvtxNameCuStreamA(reinterpret_cast<CUstream>(prefill), "prefill-main");
  nvtxNameCudaStreamA(cudaStreamLegacy, "legacy");
  nvtxNameCudaStreamA(cudaStreamPerThread, "main-thread");
  nvtxNameCudaStreamA(other, "peer");
  for (int i = 0; i < 2; ++i) {
    prefill_named_kernel<<<8, 64, 0, prefill>>>(d);
    decode_named_kernel<<<8, 64, 0, decode>>>(d);
    legacy_named_kernel<<<8, 64>>>(d);
    ptds_named_kernel<<<8, 64, 0, cudaStreamPerThread>>>(d);
    unnamed_kernel<<<8, 64, 0, unnamed>>>(d);
  }
  CHECK(cudaSetDevice(1));
  other_device_kernel<<<8, 64, 0, other>>>(nullptr);
  CHECK(cudaStreamSynchronize(other));
  CHECK(cudaSetDevice(0));
  CHECK(cudaEventRecord(done, decode));
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaEventDestroy(done));
  for (cudaStream_t s : {prefill, decode, unnamed}) CHECK(cudaStreamDestroy(s));
  CHECK(cudaStreamDestroy(other));
  CHECK(cudaFree(d));
  printf("errors=%d\n", errors);
  return errors == 0 ? 0 : 1;
}
