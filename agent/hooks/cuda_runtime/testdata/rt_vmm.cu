// Device memory allocated through the driver API, reached as PyTorch's expandable segments and
// vLLM's CuMemAllocator reach it: cudaGetDriverEntryPoint, no link to libcuda. A cudaMalloc of
// 1 MiB; two 2 MiB physical allocations (cuMemCreate) mapped into one reserved range, set, written
// by a kernel and read back; a cuMemAlloc of 4 MiB; then everything released. Prints the handles
// and pointers, and errors=N (exit 1 when a call failed).
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdio>

#include "agent/hooks/cuda_runtime/testdata/check.h"
#include "agent/hooks/cuda_runtime/testdata/driver.h"

__global__ void vmm_fill_kernel(int* p, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) p[i] = i;
}

int main() {
  auto mem_create = Driver<decltype(&cuMemCreate)>("cuMemCreate");
  auto mem_release = Driver<decltype(&cuMemRelease)>("cuMemRelease");
  auto reserve = Driver<decltype(&cuMemAddressReserve)>("cuMemAddressReserve");
  auto address_free = Driver<decltype(&cuMemAddressFree)>("cuMemAddressFree");
  auto map = Driver<decltype(&cuMemMap)>("cuMemMap");
  auto unmap = Driver<decltype(&cuMemUnmap)>("cuMemUnmap");
  auto set_access = Driver<decltype(&cuMemSetAccess)>("cuMemSetAccess");
  auto mem_alloc = Driver<decltype(&cuMemAlloc)>("cuMemAlloc");
  auto mem_free = Driver<decltype(&cuMemFree)>("cuMemFree");
  if (!mem_create || !mem_release || !reserve || !address_free || !map || !unmap || !set_access ||
      !mem_alloc || !mem_free) {
    printf("driver entry points missing\nerrors=1\n");
    return 1;
  }
  void* a = nullptr;
  CHECK(cudaMalloc(&a, 1 << 20));

  const size_t chunk = 2 << 20;
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  CUdeviceptr base = 0;
  CU(reserve(&base, 4 * chunk, 0, 0, 0));
  CUmemGenericAllocationHandle h[2] = {0, 0};
  for (int i = 0; i < 2; ++i) {
    CU(mem_create(&h[i], chunk, &prop, 0));
    CU(map(base + i * chunk, chunk, 0, h[i], 0));
  }
  CUmemAccessDesc access = {};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  CU(set_access(base, 2 * chunk, &access, 1));
  const int n = int(2 * chunk / sizeof(int));
  CHECK(cudaMemset(reinterpret_cast<void*>(base), 0x5a, 2 * chunk));
  vmm_fill_kernel<<<64, 256>>>(reinterpret_cast<int*>(base), n);
  CHECK(cudaGetLastError());
  unsigned last = 0;  // across both allocations: the last int of the second
  CHECK(
      cudaMemcpy(&last, reinterpret_cast<int*>(base) + n - 1, sizeof(int), cudaMemcpyDeviceToHost));
  if (last != 0x5a5a5a5au && last != unsigned(n - 1)) {  // set, or written (on a real GPU)
    printf("FAIL mapped memory read %x\n", last);
    ++errors;
  }

  CUdeviceptr d = 0;
  CU(mem_alloc(&d, 4 << 20));
  printf("handles %llx %llx alloc %llx\n", (unsigned long long)h[0], (unsigned long long)h[1],
         (unsigned long long)d);

  CU(unmap(base, 2 * chunk));
  for (int i = 0; i < 2; ++i) CU(mem_release(h[i]));
  CU(address_free(base, 4 * chunk));
  CU(mem_free(d));
  CHECK(cudaFree(a));
  CHECK(cudaDeviceSynchronize());
  printf("errors=%d\n", errors);
  return errors == 0 ? 0 : 1;
}
