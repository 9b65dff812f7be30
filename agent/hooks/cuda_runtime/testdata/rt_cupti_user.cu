// A program that is itself a CUPTI client: it subscribes (one subscriber per process unless the
// CUPTI version allows several), launches a kernel, unsubscribes. Prints "subscribe N": 0 when
// CUPTI_SUCCESS; exit code 0 then.
// With argument "takeover", as torch.profiler does mid-run: 200 kernels, then its own activity
// buffer callbacks and kinds (the activity API serves one client per process: the records go
// to it from then on), 200 kernels over about 1.2 s, a flush and cuptiFinalize. Prints
// "records N" (what its buffers got).
#include <cuda_runtime.h>
#include <cupti.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

__global__ void user_kernel(int* p) {}

static void CUPTIAPI OnCallback(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {}

static int g_records = 0;

static void CUPTIAPI Requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *size = 1 << 20;
  *buffer = static_cast<uint8_t*>(aligned_alloc(8, *size));
  *max_records = 0;
}

static void CUPTIAPI Completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* rec = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) ++g_records;
  free(buffer);
}

int main(int argc, char** argv) {
  if (cudaFree(nullptr) != cudaSuccess) return 2;
  if (argc > 1 && strcmp(argv[1], "takeover") == 0) {
    for (int i = 0; i < 200; ++i) user_kernel<<<1, 32>>>(nullptr);
    cudaDeviceSynchronize();
    if (cuptiActivityRegisterCallbacks(Requested, Completed) != CUPTI_SUCCESS) return 3;
    if (cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS) return 4;
    for (int i = 0; i < 200; ++i) {
      user_kernel<<<1, 32>>>(nullptr);
      usleep(6000);
    }
    cudaDeviceSynchronize();
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    cuptiFinalize();
    printf("records %d\n", g_records);
    return 0;
  }
  CUpti_SubscriberHandle sub = nullptr;
  const CUptiResult r = cuptiSubscribe(&sub, OnCallback, nullptr);
  user_kernel<<<1, 32>>>(nullptr);
  cudaDeviceSynchronize();
  if (r == CUPTI_SUCCESS) cuptiUnsubscribe(sub);
  printf("subscribe %d\n", int(r));
  return r == CUPTI_SUCCESS ? 0 : 1;
}
