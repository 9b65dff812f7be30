// A CUPTI tool watching the driver's memory calls, as a profiler does for PyTorch's expandable
// segments and vLLM's CuMemAllocator (which reach cuMemCreate through cudaGetDriverEntryPoint,
// past any interposer): driver-API callbacks enabled for cuMemCreate, cuMemRelease,
// cuMemAlloc_v2 and cuMemFree_v2 only, and driver API activity records. The workload maps two
// allocations of device 0 and one of device 1, makes failing calls, and uses cuMemAlloc on both
// devices. Run by cupti_sim_test with GPUSIM_DEVICES=2. Prints:
//   CB <enter|exit> <cbid> <corr> <function> <size> <device> <value> <ret>
//      size/device: cuMemCreate's size and prop->location.id, cuMemAlloc_v2's bytesize and the
//      device of the callback's context (cuMemFree_v2 too); value: at a successful exit
//      *handle / *dptr, else cuMemRelease's handle / cuMemFree_v2's dptr, else 0; ret: the
//      CUresult at exit (-1 at enter)
//   CALL <function> <ret> <value> <size> <device>  (each call of those four, as the program saw)
//   OTHER <domain> <cbid>                            (a callback that was not enabled)
//   API <cbid> <corr> <returnValue>                  (driver API activity records)
//   RESULT <what> <code>
#include <cuda.h>
#include <cuda_runtime.h>
#include <cupti.h>
#include <stdio.h>
#include <stdlib.h>

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"  // cudaGetDriverEntryPoint

namespace {

void CUPTIAPI OnCallback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                         const void* data) {
  if (domain != CUPTI_CB_DOMAIN_DRIVER_API) {
    printf("OTHER %d %u\n", int(domain), cbid);
    return;
  }
  const auto* cb = static_cast<const CUpti_CallbackData*>(data);
  const bool exit = cb->callbackSite == CUPTI_API_EXIT;
  int ret = exit ? *static_cast<const CUresult*>(cb->functionReturnValue) : -1;
  uint32_t ctx_device = 0;
  cuptiGetDeviceId(cb->context, &ctx_device);
  unsigned long long size = 0, value = 0;
  int device = -1;
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuMemCreate: {
      auto* p = static_cast<const cuMemCreate_params*>(cb->functionParams);
      size = p->size;
      device = p->prop->location.id;
      if (exit && ret == CUDA_SUCCESS) value = *p->handle;
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemRelease:
      value = static_cast<const cuMemRelease_params*>(cb->functionParams)->handle;
      break;
    case CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2: {
      auto* p = static_cast<const cuMemAlloc_v2_params*>(cb->functionParams);
      size = p->bytesize;
      device = int(ctx_device);
      if (exit && ret == CUDA_SUCCESS) value = *p->dptr;
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2:
      value = static_cast<const cuMemFree_v2_params*>(cb->functionParams)->dptr;
      device = int(ctx_device);
      break;
    default:
      printf("OTHER %d %u\n", int(domain), cbid);
      return;
  }
  printf("CB %s %u %u %s %llu %d %llu %d\n", exit ? "exit" : "enter", cbid, cb->correlationId,
         cb->functionName, size, device, value, ret);
}

void CUPTIAPI BufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *size = 64 * 1024;
  *buffer = static_cast<uint8_t*>(aligned_alloc(8, *size));
  *max_records = 0;
}

void CUPTIAPI BufferCompleted(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* rec = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
    if (rec->kind == CUPTI_ACTIVITY_KIND_DRIVER) {
      auto* a = reinterpret_cast<CUpti_ActivityAPI*>(rec);
      printf("API %u %u %u\n", a->cbid, a->correlationId, a->returnValue);
    }
  }
  free(buffer);
}

template <typename F>
F Driver(const char* name) {
  void* f = nullptr;
  cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
  cudaGetDriverEntryPoint(name, &f, cudaEnableDefault, &q);
  return q == cudaDriverEntryPointSuccess ? reinterpret_cast<F>(f) : nullptr;
}

void PrintCall(const char* func, CUresult r, unsigned long long value, size_t size, int device) {
  printf("CALL %s %d %llu %zu %d\n", func, int(r), value, size, device);
}

}  // namespace

int main() {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  auto mem_create = Driver<decltype(&cuMemCreate)>("cuMemCreate");
  auto mem_release = Driver<decltype(&cuMemRelease)>("cuMemRelease");
  auto reserve = Driver<decltype(&cuMemAddressReserve)>("cuMemAddressReserve");
  auto address_free = Driver<decltype(&cuMemAddressFree)>("cuMemAddressFree");
  auto map = Driver<decltype(&cuMemMap)>("cuMemMap");
  auto unmap = Driver<decltype(&cuMemUnmap)>("cuMemUnmap");
  auto set_access = Driver<decltype(&cuMemSetAccess)>("cuMemSetAccess");
  auto mem_alloc = Driver<decltype(&cuMemAlloc)>("cuMemAlloc");
  auto mem_free = Driver<decltype(&cuMemFree)>("cuMemFree");
  bool found = mem_create && mem_release && reserve && address_free && map && unmap && set_access &&
               mem_alloc && mem_free;
  printf("RESULT lookups %d\n", found ? 0 : 1);
  if (!found) return 1;

  CUpti_SubscriberHandle sub = nullptr;
  printf("RESULT subscribe %d\n",
         int(cuptiSubscribe(&sub, reinterpret_cast<CUpti_CallbackFunc>(&OnCallback), nullptr)));
  const CUpti_CallbackId kCbids[] = {
      CUPTI_DRIVER_TRACE_CBID_cuMemCreate, CUPTI_DRIVER_TRACE_CBID_cuMemRelease,
      CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2};
  int enable = 0;
  for (CUpti_CallbackId id : kCbids) {
    enable |= int(cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_DRIVER_API, id));
  }
  printf("RESULT enable_callbacks %d\n", enable);
  printf("RESULT register %d\n",
         int(cuptiActivityRegisterCallbacks(&BufferRequested, &BufferCompleted)));
  printf("RESULT activity_driver %d\n", int(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_DRIVER)));

  const size_t chunk = 2 << 20;
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  CUdeviceptr base = 0;
  int vmm = int(reserve(&base, 4 * chunk, 0, 0, 0));
  CUmemGenericAllocationHandle h[3] = {0, 0, 0};
  for (int i = 0; i < 3; ++i) {
    prop.location.id = i == 2 ? 1 : 0;
    CUresult r = mem_create(&h[i], chunk, &prop, 0);
    PrintCall("cuMemCreate", r, h[i], chunk, prop.location.id);
    vmm |= int(map(base + i * chunk, chunk, 0, h[i], 0));
  }
  CUmemAccessDesc access[2] = {};
  for (int d = 0; d < 2; ++d) {
    access[d].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access[d].location.id = d;
    access[d].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  }
  vmm |= int(set_access(base, 3 * chunk, access, 2));
  vmm |= int(cudaMemset(reinterpret_cast<void*>(base), 1, 3 * chunk));
  // Failures: a size that is not a multiple of the granularity, a device that does not exist.
  CUmemGenericAllocationHandle bad = 0;
  prop.location.id = 0;
  PrintCall("cuMemCreate", mem_create(&bad, chunk / 2, &prop, 0), bad, chunk / 2, 0);
  prop.location.id = 7;
  PrintCall("cuMemCreate", mem_create(&bad, chunk, &prop, 0), bad, chunk, 7);
  vmm |= int(unmap(base, 3 * chunk));
  for (int i = 0; i < 3; ++i) PrintCall("cuMemRelease", mem_release(h[i]), h[i], 0, -1);
  PrintCall("cuMemRelease", mem_release(h[0]), h[0], 0, -1);
  vmm |= int(address_free(base, 4 * chunk));
  printf("RESULT vmm %d\n", vmm);

  // cuMemAlloc / cuMemFree on device 0, then on device 1 (the context's device).
  for (int device = 0; device < 2; ++device) {
    cudaSetDevice(device);
    CUdeviceptr d = 0;
    size_t bytes = size_t(4 - 3 * device) << 20;
    CUresult r = mem_alloc(&d, bytes);
    PrintCall("cuMemAlloc_v2", r, d, bytes, device);
    PrintCall("cuMemFree_v2", mem_free(d), d, 0, device);
    if (device == 0) PrintCall("cuMemFree_v2", mem_free(d), d, 0, device);
  }
  cudaSetDevice(0);
  void* runtime = nullptr;  // runtime calls: no callbacks (not enabled)
  cudaMalloc(&runtime, 4096);
  cudaFree(runtime);
  cudaDeviceSynchronize();
  printf("RESULT flush %d\n", int(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED)));
  cuptiUnsubscribe(sub);
  return 0;
}
