// A program that is itself a CUPTI client: it subscribes (one subscriber per process unless the
// CUPTI version allows several), launches a kernel, unsubscribes. Prints "subscribe N": 0 when
// CUPTI_SUCCESS; exit code 0 then.
#include <cuda_runtime.h>
#include <cupti.h>

#include <cstdio>

__global__ void user_kernel(int* p) {}

static void CUPTIAPI OnCallback(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {}

int main() {
  if (cudaFree(nullptr) != cudaSuccess) return 2;
  CUpti_SubscriberHandle sub = nullptr;
  const CUptiResult r = cuptiSubscribe(&sub, OnCallback, nullptr);
  user_kernel<<<1, 32>>>(nullptr);
  cudaDeviceSynchronize();
  if (r == CUPTI_SUCCESS) cuptiUnsubscribe(sub);
  printf("subscribe %d\n", int(r));
  return r == CUPTI_SUCCESS ? 0 : 1;
}
