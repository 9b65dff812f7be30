// The driver's memory functions reached the way PyTorch's expandable segments and vLLM's
// CuMemAllocator reach them: cudaGetDriverEntryPoint, no link to libcuda. Virtual memory
// management (reserve 8 MiB, two 2 MiB physical allocations mapped side by side, access set, a
// kernel launched on the range and bytes copied in and out through it, one allocation mapped
// twice, released while mapped, unmapped, the range freed), cuMemAlloc / cuMemFree and the
// stream-ordered pair, cuGetErrorString, each with the driver's error cases. An observer
// (gpusim_internal.h) checks that every driver call is one driver-domain callback pair with its
// CUPTI cbid, name, parameter struct and CUresult. Run with GPUSIM_DEVICES=2. Prints
// "ok <check>" / "FAIL <check>", "<key> <value>" lines the test reads and "failures N"; exit
// code = failures. Also built with --default-stream per-thread (sim_vmm_ptsz), where the
// cudaEnableDefault lookups go through cudaGetDriverEntryPoint_ptsz and so give the _ptsz forms
// of cuMemAllocAsync / cuMemFreeAsync.
#include <cuda.h>
#include <cuda_runtime.h>
#include <cupti.h>  // header only: the driver cbids and parameter structs
#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "tests/gpusim/gpusim_internal.h"

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"  // cudaGetDriverEntryPoint

#if defined(__CUDART_API_PER_THREAD_DEFAULT_STREAM)
constexpr bool kPerThread = true;
#else
constexpr bool kPerThread = false;
#endif

__global__ void vmm_fill_kernel(int* p, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) p[i] = i;
}

static int failures = 0;
static void Check(bool ok, const char* what) {
  printf("%s %s\n", ok ? "ok" : "FAIL", what);
  if (!ok) ++failures;
}

// ---- Observer -------------------------------------------------------------------------------

// One driver-domain callback, with what its parameter struct said at that moment.
struct DrvRec {
  int is_exit = 0, cbid = 0, ret = -1;
  bool ret_null = true, symbol_null = true, params_null = true;
  std::string func;
  uint32_t corr = 0;
  size_t size = 0;
  int device = -1;             // cuMemCreate: prop->location.id
  unsigned long long out = 0;  // at exit: *handle / *dptr
  unsigned long long arg = 0;  // cuMemRelease handle, cuMemFree(Async) dptr, cuMemMap ptr
};
static std::mutex g_mu;
static std::vector<DrvRec> g_drv;
static thread_local int t_driver_depth = 0;
static int g_runtime_inside_driver = 0;

static void OnApi(void*, int domain, int is_exit, int cbid, const char* func, const char* symbol,
                  uint32_t corr, const void* params, const void* ret) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (domain == GPUSIM_DOMAIN_RUNTIME) {
    if (t_driver_depth > 0) ++g_runtime_inside_driver;
    return;
  }
  if (domain != GPUSIM_DOMAIN_DRIVER) return;
  t_driver_depth += is_exit ? -1 : 1;
  DrvRec r;
  r.is_exit = is_exit;
  r.cbid = cbid;
  r.func = func != nullptr ? func : "";
  r.corr = corr;
  r.ret_null = ret == nullptr;
  if (ret != nullptr) r.ret = *static_cast<const int*>(ret);
  r.symbol_null = symbol == nullptr;
  r.params_null = params == nullptr;
  const bool ok_exit = is_exit && r.ret == CUDA_SUCCESS;
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuMemCreate: {
      auto* p = static_cast<const cuMemCreate_params*>(params);
      r.size = p->size;
      r.device = p->prop != nullptr ? p->prop->location.id : -1;
      if (ok_exit) r.out = *p->handle;
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemRelease:
      r.arg = static_cast<const cuMemRelease_params*>(params)->handle;
      break;
    case CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2: {
      auto* p = static_cast<const cuMemAlloc_v2_params*>(params);
      r.size = p->bytesize;
      if (ok_exit) r.out = *p->dptr;
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2:
      r.arg = static_cast<const cuMemFree_v2_params*>(params)->dptr;
      break;
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz: {
      auto* p = static_cast<const cuMemAllocAsync_params*>(params);
      r.size = p->bytesize;
      if (ok_exit) r.out = *p->dptr;
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz:
      r.arg = static_cast<const cuMemFreeAsync_params*>(params)->dptr;
      break;
    case CUPTI_DRIVER_TRACE_CBID_cuMemMap: {
      auto* p = static_cast<const cuMemMap_params*>(params);
      r.arg = p->ptr;
      r.size = p->size;
      r.out = p->handle;
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAddressReserve: {
      auto* p = static_cast<const cuMemAddressReserve_params*>(params);
      r.size = p->size;
      if (ok_exit) r.out = *p->ptr;
      break;
    }
    default:
      break;
  }
  g_drv.push_back(r);
}

// Every driver call the program makes, in order, with what it returned.
struct Call {
  std::string func;  // as CUPTI names it
  int ret;
  unsigned long long out = 0;  // the handle / pointer it returned (successful allocations)
};
static std::vector<Call> g_calls;

static CUresult Note(const char* func, CUresult r, unsigned long long out = 0) {
  g_calls.push_back(Call{func, static_cast<int>(r), r == CUDA_SUCCESS ? out : 0});
  return r;
}

// ---- Driver entry points --------------------------------------------------------------------

template <typename F>
static F Lookup(const char* name, unsigned long long flags = cudaEnableDefault) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult status = cudaDriverEntryPointSymbolNotFound;
  cudaError_t err = cudaGetDriverEntryPoint(name, &fn, flags, &status);
  if (err != cudaSuccess || status != cudaDriverEntryPointSuccess || fn == nullptr) {
    printf("FAIL lookup %s: %d %d\n", name, int(err), int(status));
    ++failures;
  }
  return reinterpret_cast<F>(fn);
}

static decltype(&cuMemCreate) mem_create;
static decltype(&cuMemRelease) mem_release;
static decltype(&cuMemAddressReserve) reserve;
static decltype(&cuMemAddressFree) address_free;
static decltype(&cuMemMap) mem_map;
static decltype(&cuMemUnmap) mem_unmap;
static decltype(&cuMemSetAccess) set_access;
static decltype(&cuMemGetAllocationGranularity) granularity;
static decltype(&cuMemAlloc) mem_alloc;
static decltype(&cuMemFree) mem_free;
static CUresult (*alloc_async)(CUdeviceptr*, size_t, CUstream);
static CUresult (*free_async)(CUdeviceptr, CUstream);
static CUresult (*alloc_async_pt)(CUdeviceptr*, size_t, CUstream);
static CUresult (*free_async_pt)(CUdeviceptr, CUstream);
static decltype(&cuGetErrorString) error_string;

// Wrappers that note each call.
static CUresult Create(CUmemGenericAllocationHandle* h, size_t size, const CUmemAllocationProp* p,
                       unsigned long long flags = 0) {
  CUresult r = mem_create(h, size, p, flags);
  return Note("cuMemCreate", r, r == CUDA_SUCCESS ? *h : 0);
}
static CUresult Release(CUmemGenericAllocationHandle h) {
  return Note("cuMemRelease", mem_release(h));
}
static CUresult Reserve(CUdeviceptr* p, size_t size, size_t align = 0, CUdeviceptr hint = 0,
                        unsigned long long flags = 0) {
  CUresult r = reserve(p, size, align, hint, flags);
  return Note("cuMemAddressReserve", r, r == CUDA_SUCCESS ? *p : 0);
}
static CUresult AddressFree(CUdeviceptr p, size_t size) {
  return Note("cuMemAddressFree", address_free(p, size));
}
static CUresult Map(CUdeviceptr p, size_t size, size_t offset, CUmemGenericAllocationHandle h,
                    unsigned long long flags = 0) {
  return Note("cuMemMap", mem_map(p, size, offset, h, flags));
}
static CUresult Unmap(CUdeviceptr p, size_t size) { return Note("cuMemUnmap", mem_unmap(p, size)); }
static CUresult SetAccess(CUdeviceptr p, size_t size, int device,
                          CUmemAccess_flags flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
                          CUmemLocationType type = CU_MEM_LOCATION_TYPE_DEVICE) {
  CUmemAccessDesc d = {};
  d.location.type = type;
  d.location.id = device;
  d.flags = flags;
  return Note("cuMemSetAccess", set_access(p, size, &d, 1));
}
static CUresult Granularity(size_t* g, const CUmemAllocationProp* p,
                            CUmemAllocationGranularity_flags option) {
  return Note("cuMemGetAllocationGranularity", granularity(g, p, option));
}
static CUresult Alloc(CUdeviceptr* d, size_t size) {
  CUresult r = mem_alloc(d, size);
  return Note("cuMemAlloc_v2", r, r == CUDA_SUCCESS ? *d : 0);
}
static CUresult Free(CUdeviceptr d) { return Note("cuMemFree_v2", mem_free(d)); }
static CUresult AllocAsync(CUdeviceptr* d, size_t size, CUstream s, bool pt = kPerThread) {
  CUresult r = (pt ? alloc_async_pt : alloc_async)(d, size, s);
  return Note(pt ? "cuMemAllocAsync_ptsz" : "cuMemAllocAsync", r, r == CUDA_SUCCESS ? *d : 0);
}
static CUresult FreeAsync(CUdeviceptr d, CUstream s, bool pt = kPerThread) {
  CUresult r = (pt ? free_async_pt : free_async)(d, s);
  return Note(pt ? "cuMemFreeAsync_ptsz" : "cuMemFreeAsync", r);
}
static CUresult ErrorString(CUresult e, const char** s) {
  return Note("cuGetErrorString", error_string(e, s));
}

static CUmemAllocationProp DeviceProp(int device) {
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  return prop;
}

static size_t UsedBytes() {
  size_t free_bytes = 0, total = 0;
  cudaMemGetInfo(&free_bytes, &total);
  return total - free_bytes;
}

static cudaPointerAttributes Attributes(const void* p) {
  cudaPointerAttributes a;
  memset(&a, 0, sizeof(a));
  cudaPointerGetAttributes(&a, p);
  return a;
}

constexpr size_t kMiB = 1 << 20;
constexpr size_t kChunk = 2 * kMiB;

// ---- Scenarios ------------------------------------------------------------------------------

static void Lookups() {
  mem_create = Lookup<decltype(mem_create)>("cuMemCreate");
  mem_release = Lookup<decltype(mem_release)>("cuMemRelease");
  reserve = Lookup<decltype(reserve)>("cuMemAddressReserve");
  address_free = Lookup<decltype(address_free)>("cuMemAddressFree");
  mem_map = Lookup<decltype(mem_map)>("cuMemMap");
  mem_unmap = Lookup<decltype(mem_unmap)>("cuMemUnmap");
  set_access = Lookup<decltype(set_access)>("cuMemSetAccess");
  granularity = Lookup<decltype(granularity)>("cuMemGetAllocationGranularity");
  mem_alloc = Lookup<decltype(mem_alloc)>("cuMemAlloc");
  mem_free = Lookup<decltype(mem_free)>("cuMemFree");
  error_string = Lookup<decltype(error_string)>("cuGetErrorString");
  auto def_alloc = Lookup<decltype(alloc_async)>("cuMemAllocAsync");
  auto def_free = Lookup<decltype(free_async)>("cuMemFreeAsync");
  alloc_async = Lookup<decltype(alloc_async)>("cuMemAllocAsync", cudaEnableLegacyStream);
  free_async = Lookup<decltype(free_async)>("cuMemFreeAsync", cudaEnableLegacyStream);
  alloc_async_pt =
      Lookup<decltype(alloc_async_pt)>("cuMemAllocAsync", cudaEnablePerThreadDefaultStream);
  free_async_pt =
      Lookup<decltype(free_async_pt)>("cuMemFreeAsync", cudaEnablePerThreadDefaultStream);
  Check(alloc_async != alloc_async_pt && free_async != free_async_pt,
        "stream_ordered_functions_have_a_per_thread_form");
  Check(def_alloc == (kPerThread ? alloc_async_pt : alloc_async) &&
            def_free == (kPerThread ? free_async_pt : free_async),
        "default_lookup_follows_the_build");
  Check(Lookup<void*>("cuMemCreate", cudaEnablePerThreadDefaultStream) ==
            reinterpret_cast<void*>(mem_create),
        "per_thread_lookup_of_a_streamless_function");

  // By version: every version up to the runtime's gives the same function, also below the one
  // cuda.h's ABI of the symbol needs (cuMemAlloc's _v2: 3.2).
  bool same = true;
  for (unsigned version : {3000u, 3020u, 10020u, 12000u, unsigned(CUDART_VERSION)}) {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult status = cudaDriverEntryPointSymbolNotFound;
    same &= cudaGetDriverEntryPointByVersion("cuMemAlloc", &fn, version, cudaEnableDefault,
                                             &status) == cudaSuccess &&
            status == cudaDriverEntryPointSuccess && fn == reinterpret_cast<void*>(mem_alloc);
    fn = nullptr;
    same &= cudaGetDriverEntryPointByVersion("cuMemCreate", &fn, version, cudaEnableDefault,
                                             nullptr) == cudaSuccess &&
            fn == reinterpret_cast<void*>(mem_create);
  }
  Check(same, "by_version_same_functions");
  void* fn = nullptr;
  Check(cudaGetDriverEntryPointByVersion("cuMemCreate", &fn, CUDART_VERSION + 1000,
                                         cudaEnableDefault, nullptr) == cudaErrorInvalidValue,
        "future_version_invalid");

  // Other symbols fail as before.
  bool not_found = true;
  for (const char* name : {"cuNoSuchFunction", "cuMemAlloc_v2", "cuCtxCreate", "cuMemcpy2D",
                           "cuMemAllocAsync_ptsz", "cudaMalloc", ""}) {
    fn = reinterpret_cast<void*>(1);
    cudaDriverEntryPointQueryResult status = cudaDriverEntryPointSuccess;
    not_found &=
        cudaGetDriverEntryPoint(name, &fn, cudaEnableDefault, &status) == cudaErrorNotSupported &&
        fn == nullptr && status == cudaDriverEntryPointSymbolNotFound;
    fn = reinterpret_cast<void*>(1);
    status = cudaDriverEntryPointSuccess;
    not_found &= cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &status) ==
                     cudaErrorNotSupported &&
                 fn == nullptr && status == cudaDriverEntryPointSymbolNotFound;
  }
  Check(not_found, "unknown_symbols_not_found");
  Check(cudaGetDriverEntryPoint("cuMemCreate", nullptr, cudaEnableDefault, nullptr) ==
            cudaErrorInvalidValue,
        "lookup_without_output_invalid");
  cudaGetLastError();
}

static void Granularities() {
  CUmemAllocationProp prop = DeviceProp(0);
  size_t min = 0, rec = 0;
  Check(Granularity(&min, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) == CUDA_SUCCESS &&
            Granularity(&rec, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED) == CUDA_SUCCESS,
        "granularity");
  printf("granularity_minimum %zu\n", min);
  printf("granularity_recommended %zu\n", rec);
  prop.location.id = 1;
  size_t g1 = 0;
  Check(Granularity(&g1, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) == CUDA_SUCCESS && g1 == kChunk,
        "granularity_device_1");
  size_t g = 0;
  prop.location.id = 2;  // GPUSIM_DEVICES=2
  Check(Granularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) == CUDA_ERROR_INVALID_DEVICE,
        "granularity_bad_device");
  prop = DeviceProp(0);
  prop.type = CU_MEM_ALLOCATION_TYPE_MANAGED;
  Check(Granularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) == CUDA_ERROR_INVALID_VALUE,
        "granularity_bad_type");
  prop = DeviceProp(0);
  Check(
      Granularity(&g, &prop, CUmemAllocationGranularity_flags(5)) == CUDA_ERROR_INVALID_VALUE &&
          Granularity(nullptr, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) == CUDA_ERROR_INVALID_VALUE,
      "granularity_bad_arguments");
}

static void CreateErrors() {
  CUmemGenericAllocationHandle h = 0;
  CUmemAllocationProp prop = DeviceProp(0);
  Check(Create(&h, 0, &prop) == CUDA_ERROR_INVALID_VALUE &&
            Create(&h, kMiB, &prop) == CUDA_ERROR_INVALID_VALUE &&
            Create(&h, 3 * kMiB, &prop) == CUDA_ERROR_INVALID_VALUE,
        "create_bad_sizes");
  prop.location.id = 2;
  bool bad_device = Create(&h, kChunk, &prop) == CUDA_ERROR_INVALID_DEVICE;
  prop.location.id = -1;
  bad_device &= Create(&h, kChunk, &prop) == CUDA_ERROR_INVALID_DEVICE;
  Check(bad_device, "create_bad_devices");
  prop = DeviceProp(0);
  prop.location.type = CU_MEM_LOCATION_TYPE_HOST;
  bool bad = Create(&h, kChunk, &prop) == CUDA_ERROR_INVALID_VALUE;
  prop = DeviceProp(0);
  prop.type = CU_MEM_ALLOCATION_TYPE_INVALID;
  bad &= Create(&h, kChunk, &prop) == CUDA_ERROR_INVALID_VALUE;
  prop = DeviceProp(0);
  bad &= Create(&h, kChunk, &prop, 1) == CUDA_ERROR_INVALID_VALUE;
  bad &= Create(nullptr, kChunk, &prop) == CUDA_ERROR_INVALID_VALUE;
  bad &= Create(&h, kChunk, nullptr) == CUDA_ERROR_INVALID_VALUE;
  Check(bad && h == 0, "create_bad_properties");
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_FABRIC;
  Check(Create(&h, kChunk, &prop) == CUDA_ERROR_NOT_SUPPORTED, "create_fabric_not_supported");
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  Check(Create(&h, kChunk, &prop) == CUDA_SUCCESS && h != 0 && Release(h) == CUDA_SUCCESS,
        "create_posix_fd_handle_type");
  Check(cudaGetLastError() == cudaSuccess, "driver_errors_leave_the_runtime_error_alone");
}

// Reserve 8 MiB, two 2 MiB allocations mapped side by side, a kernel and copies through them.
static void VirtualMemory() {
  const size_t used0 = UsedBytes();
  CUdeviceptr base = 0;
  Check(Reserve(&base, 4 * kChunk) == CUDA_SUCCESS && base != 0 && base % kChunk == 0,
        "reserve_8_mib");
  CUmemAllocationProp prop = DeviceProp(0);
  CUmemGenericAllocationHandle h[2] = {0, 0};
  for (auto& handle : h) Create(&handle, kChunk, &prop);
  Check(h[0] != 0 && h[1] != 0 && h[0] != h[1], "create_two_unique_handles");
  printf("handles %llu %llu\n", (unsigned long long)h[0], (unsigned long long)h[1]);
  Check(UsedBytes() - used0 == 2 * kChunk, "physical_memory_counts_as_used");
  Check(Map(base, kChunk, 0, h[0]) == CUDA_SUCCESS &&
            Map(base + kChunk, kChunk, 0, h[1]) == CUDA_SUCCESS,
        "map_two_allocations");
  int word = 7;
  Check(cudaMemcpy(reinterpret_cast<void*>(base), &word, sizeof(word), cudaMemcpyHostToDevice) ==
            cudaErrorInvalidValue,
        "copy_before_access_refused");
  cudaGetLastError();
  Check(SetAccess(base, 2 * kChunk, 0) == CUDA_SUCCESS, "set_access_read_write");

  cudaPointerAttributes a = Attributes(reinterpret_cast<void*>(base + 3 * kMiB));
  Check(a.type == cudaMemoryTypeDevice && a.device == 0 &&
            a.devicePointer == reinterpret_cast<void*>(base + 3 * kMiB) && a.hostPointer == nullptr,
        "mapped_pointer_is_device_memory");

  // A kernel on the mapped range: accepted like any device pointer (gpusim runs no device code,
  // so the bytes below are moved by copies and sets).
  const int n = int(2 * kChunk / sizeof(int));
  vmm_fill_kernel<<<64, 256>>>(reinterpret_cast<int*>(base), n);
  Check(cudaGetLastError() == cudaSuccess, "kernel_on_mapped_memory");
  std::vector<int> in(n), out(n, -1);
  for (int i = 0; i < n; ++i) in[i] = 3 * i + 1;
  // Across both mappings; cudaMemcpyDefault resolves the mapped side as device memory.
  Check(cudaMemcpy(reinterpret_cast<void*>(base), in.data(), 2 * kChunk, cudaMemcpyDefault) ==
            cudaSuccess,
        "copy_in_default_kind");
  Check(cudaMemset(reinterpret_cast<void*>(base + 3 * kMiB), 0x5a, 4096) == cudaSuccess,
        "memset_mapped");
  Check(cudaMemcpy(out.data(), reinterpret_cast<void*>(base), 2 * kChunk, cudaMemcpyDeviceToHost) ==
            cudaSuccess,
        "copy_out_device_to_host");
  bool values = true;
  for (int i = 0; i < n; ++i) {
    size_t byte = size_t(i) * sizeof(int);
    int want = byte >= 3 * kMiB && byte < 3 * kMiB + 4096 ? 0x5a5a5a5a : 3 * i + 1;
    values &= out[i] == want;
  }
  Check(values, "mapped_values_round_trip");
  // Device to device into cudaMalloc memory (cudaMemcpyDefault), and back to the host.
  void* d = nullptr;
  cudaMalloc(&d, kMiB);
  std::vector<int> mid(kMiB / sizeof(int), -1);
  Check(
      cudaMemcpy(d, reinterpret_cast<void*>(base + kMiB), kMiB, cudaMemcpyDefault) == cudaSuccess &&
          cudaMemcpy(mid.data(), d, kMiB, cudaMemcpyDefault) == cudaSuccess &&
          mid[0] == in[kMiB / sizeof(int)] && mid.back() == in[2 * kMiB / sizeof(int) - 1],
      "device_to_device_from_mapped");
  cudaFree(d);

  // The first allocation mapped a second time: the same physical memory.
  Check(Map(base + 2 * kChunk, kChunk, 0, h[0]) == CUDA_SUCCESS &&
            SetAccess(base + 2 * kChunk, kChunk, 0) == CUDA_SUCCESS,
        "map_twice");
  int alias_in[16], alias_out[16] = {};
  for (int i = 0; i < 16; ++i) alias_in[i] = 1000 + i;
  cudaMemcpy(reinterpret_cast<void*>(base + 2 * kChunk), alias_in, sizeof(alias_in),
             cudaMemcpyHostToDevice);
  cudaMemcpy(alias_out, reinterpret_cast<void*>(base), sizeof(alias_out), cudaMemcpyDeviceToHost);
  Check(memcmp(alias_in, alias_out, sizeof(alias_in)) == 0, "two_mappings_share_memory");

  // Mapping and access errors.
  CUmemGenericAllocationHandle spare = 0;
  Create(&spare, kChunk, &prop);
  bool map_errors = Map(base + 3 * kChunk + 4096, kChunk, 0, spare) == CUDA_ERROR_INVALID_VALUE;
  map_errors &= Map(base, kChunk, 0, spare) == CUDA_ERROR_INVALID_VALUE;  // already mapped
  map_errors &= Map(base + 3 * kChunk, kChunk, kChunk, spare) == CUDA_ERROR_INVALID_VALUE;
  map_errors &= Map(base + 3 * kChunk, 2 * kChunk, 0, spare) == CUDA_ERROR_INVALID_VALUE;
  map_errors &= Map(base + 4 * kChunk, kChunk, 0, spare) == CUDA_ERROR_INVALID_VALUE;
  map_errors &= Map(base + 3 * kChunk, kChunk, 0, 0xdead) == CUDA_ERROR_INVALID_VALUE;
  map_errors &= Map(base + 3 * kChunk, kChunk, 0, spare, 1) == CUDA_ERROR_INVALID_VALUE;
  Check(map_errors, "map_errors");
  Check(Release(spare) == CUDA_SUCCESS, "release_unmapped");
  Check(SetAccess(base + 3 * kChunk, kChunk, 0) == CUDA_ERROR_INVALID_VALUE &&
            SetAccess(base, kMiB, 0) == CUDA_ERROR_INVALID_VALUE &&
            SetAccess(base, kChunk, 2) == CUDA_ERROR_INVALID_DEVICE &&
            SetAccess(base, kChunk, 0, CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
                      CU_MEM_LOCATION_TYPE_HOST) == CUDA_ERROR_INVALID_VALUE,
        "set_access_errors");
  Check(Unmap(base, kMiB) == CUDA_ERROR_INVALID_VALUE &&
            Unmap(base + 2 * kChunk, 2 * kChunk) == CUDA_ERROR_INVALID_VALUE,
        "unmap_errors");
  Check(cudaFree(reinterpret_cast<void*>(base)) == cudaErrorInvalidValue,
        "cudaFree_refuses_mapped_memory");
  cudaGetLastError();

  // Released while mapped: the memory stays usable until its last mapping goes.
  Check(Release(h[0]) == CUDA_SUCCESS, "release_while_mapped");
  Check(Release(h[0]) == CUDA_ERROR_INVALID_VALUE, "release_twice_invalid");
  Check(Map(base + 3 * kChunk, kChunk, 0, h[0]) == CUDA_ERROR_INVALID_VALUE,
        "map_released_invalid");
  memset(alias_out, 0, sizeof(alias_out));
  cudaMemcpy(alias_out, reinterpret_cast<void*>(base + 2 * kChunk), sizeof(alias_out),
             cudaMemcpyDefault);
  Check(memcmp(alias_in, alias_out, sizeof(alias_in)) == 0, "released_memory_valid_while_mapped");
  Check(UsedBytes() - used0 == 2 * kChunk, "released_mapped_memory_still_used");

  // Unmap both side-by-side mappings in one call.
  Check(Unmap(base, 2 * kChunk) == CUDA_SUCCESS, "unmap_two_mappings");
  a = Attributes(reinterpret_cast<void*>(base));
  Check(a.type == cudaMemoryTypeUnregistered, "unmapped_pointer_unregistered");
  Check(cudaMemcpy(reinterpret_cast<void*>(base), &word, sizeof(word), cudaMemcpyHostToDevice) ==
            cudaErrorInvalidValue,
        "copy_to_unmapped_refused");
  cudaGetLastError();
  Check(UsedBytes() - used0 == 2 * kChunk, "unmapped_unreleased_memory_still_used");
  Check(AddressFree(base, 4 * kChunk) == CUDA_ERROR_INVALID_VALUE, "address_free_while_mapped");
  Check(Unmap(base + 2 * kChunk, kChunk) == CUDA_SUCCESS, "unmap_last_mapping");
  Check(UsedBytes() - used0 == kChunk, "last_unmap_frees_released_memory");
  Check(Release(h[1]) == CUDA_SUCCESS, "release_unmapped_allocation");
  Check(UsedBytes() == used0, "all_physical_memory_returned");
  Check(AddressFree(base, 2 * kChunk) == CUDA_ERROR_INVALID_VALUE &&
            AddressFree(base + kChunk, 3 * kChunk) == CUDA_ERROR_INVALID_VALUE,
        "address_free_must_match");
  Check(AddressFree(base, 4 * kChunk) == CUDA_SUCCESS, "address_free");
  Check(AddressFree(base, 4 * kChunk) == CUDA_ERROR_INVALID_VALUE, "address_free_twice");

  CUdeviceptr p = 0;
  Check(Reserve(&p, 4096 + 1) == CUDA_ERROR_INVALID_VALUE &&
            Reserve(&p, kChunk, 3 * 4096) == CUDA_ERROR_INVALID_VALUE &&
            Reserve(&p, kChunk, 0, 0, 1) == CUDA_ERROR_INVALID_VALUE &&
            Reserve(nullptr, kChunk) == CUDA_ERROR_INVALID_VALUE,
        "reserve_errors");
  Check(Reserve(&p, kChunk, 8 * kChunk) == CUDA_SUCCESS && p % (8 * kChunk) == 0 &&
            AddressFree(p, kChunk) == CUDA_SUCCESS,
        "reserve_aligned");
}

// An allocation of device 1 mapped and used from device 1.
static void SecondDevice() {
  CUmemAllocationProp prop = DeviceProp(1);
  CUmemGenericAllocationHandle h = 0;
  CUdeviceptr base = 0;
  bool ok = Reserve(&base, kChunk) == CUDA_SUCCESS && Create(&h, kChunk, &prop) == CUDA_SUCCESS &&
            Map(base, kChunk, 0, h) == CUDA_SUCCESS && SetAccess(base, kChunk, 1) == CUDA_SUCCESS;
  Check(ok, "device_1_allocation_mapped");
  cudaPointerAttributes a = Attributes(reinterpret_cast<void*>(base + 100));
  Check(a.type == cudaMemoryTypeDevice && a.device == 1, "device_1_pointer_attributes");
  cudaSetDevice(1);
  long long v = 0x123456789abcLL, back = 0;
  Check(cudaMemcpy(reinterpret_cast<void*>(base + 64), &v, sizeof(v), cudaMemcpyDefault) ==
                cudaSuccess &&
            cudaMemcpy(&back, reinterpret_cast<void*>(base + 64), sizeof(back),
                       cudaMemcpyDefault) == cudaSuccess &&
            back == v,
        "device_1_copies");
  cudaSetDevice(0);
  Check(Unmap(base, kChunk) == CUDA_SUCCESS && Release(h) == CUDA_SUCCESS &&
            AddressFree(base, kChunk) == CUDA_SUCCESS,
        "device_1_released");
}

// cuMemAlloc / cuMemFree: cudaMalloc / cudaFree's memory.
static void LinearMemory() {
  const size_t used0 = UsedBytes();
  CUdeviceptr d = 0;
  Check(Alloc(&d, 4 * kMiB) == CUDA_SUCCESS && d != 0, "cuMemAlloc");
  printf("cuMemAlloc_ptr %llu\n", (unsigned long long)d);
  Check(UsedBytes() - used0 == 4 * kMiB, "cuMemAlloc_counts_as_used");
  cudaPointerAttributes a = Attributes(reinterpret_cast<void*>(d));
  Check(a.type == cudaMemoryTypeDevice && a.device == 0, "cuMemAlloc_is_device_memory");
  std::vector<unsigned char> out(4 * kMiB, 0);
  Check(cudaMemset(reinterpret_cast<void*>(d), 0x3c, 4 * kMiB) == cudaSuccess &&
            cudaMemcpy(out.data(), reinterpret_cast<void*>(d), 4 * kMiB, cudaMemcpyDefault) ==
                cudaSuccess &&
            out.front() == 0x3c && out.back() == 0x3c,
        "cuMemAlloc_memory_usable");
  Check(Free(d) == CUDA_SUCCESS, "cuMemFree");
  Check(Free(d) == CUDA_ERROR_INVALID_VALUE, "cuMemFree_twice_invalid");
  Check(Free(0) == CUDA_SUCCESS, "cuMemFree_null");
  CUdeviceptr z = 0;
  Check(Alloc(&z, 0) == CUDA_ERROR_INVALID_VALUE && Alloc(nullptr, 16) == CUDA_ERROR_INVALID_VALUE,
        "cuMemAlloc_bad_arguments");
  Check(Alloc(&z, size_t(200) << 30) == CUDA_ERROR_OUT_OF_MEMORY, "cuMemAlloc_out_of_memory");
  Check(Alloc(&d, 1000) == CUDA_SUCCESS && cudaFree(reinterpret_cast<void*>(d)) == cudaSuccess,
        "cudaFree_of_cuMemAlloc");
  void* r = nullptr;
  cudaMalloc(&r, 1000);
  Check(Free(reinterpret_cast<CUdeviceptr>(r)) == CUDA_SUCCESS, "cuMemFree_of_cudaMalloc");
  Check(UsedBytes() == used0, "linear_memory_returned");
}

// cuMemAllocAsync / cuMemFreeAsync: the stream-ordered allocator's pools.
static void StreamOrdered() {
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  CUstream cs = reinterpret_cast<CUstream>(s);
  CUdeviceptr d = 0;
  Check(AllocAsync(&d, kMiB, cs) == CUDA_SUCCESS && d != 0, "cuMemAllocAsync");
  cudaMemPool_t pool = nullptr;
  cudaDeviceGetDefaultMemPool(&pool, 0);
  uint64_t used = 0;
  cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used);
  Check(used == kMiB, "cuMemAllocAsync_from_the_default_pool");
  unsigned char b = 0;
  Check(cudaMemsetAsync(reinterpret_cast<void*>(d), 0x77, kMiB, s) == cudaSuccess &&
            cudaMemcpyAsync(&b, reinterpret_cast<void*>(d + kMiB - 1), 1, cudaMemcpyDefault, s) ==
                cudaSuccess &&
            cudaStreamSynchronize(s) == cudaSuccess && b == 0x77,
        "cuMemAllocAsync_memory_usable");
  Check(FreeAsync(d, cs) == CUDA_SUCCESS, "cuMemFreeAsync");
  cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used);
  Check(used == 0, "cuMemFreeAsync_returns_to_the_pool");
  CUstream bad = reinterpret_cast<CUstream>(0x4321);
  Check(AllocAsync(&d, kMiB, bad) == CUDA_ERROR_INVALID_HANDLE &&
            FreeAsync(d, bad) == CUDA_ERROR_INVALID_HANDLE,
        "stream_ordered_bad_stream");
  Check(AllocAsync(nullptr, kMiB, cs) == CUDA_ERROR_INVALID_VALUE, "cuMemAllocAsync_null");
  int host = 0;
  Check(FreeAsync(reinterpret_cast<CUdeviceptr>(&host), cs) == CUDA_ERROR_INVALID_VALUE,
        "cuMemFreeAsync_unknown_pointer");
  Check(AllocAsync(&d, 4096, cs) == CUDA_SUCCESS &&
            cudaFreeAsync(reinterpret_cast<void*>(d), s) == cudaSuccess,
        "cudaFreeAsync_of_cuMemAllocAsync");
  void* r = nullptr;
  cudaMallocAsync(&r, 4096, s);
  Check(FreeAsync(reinterpret_cast<CUdeviceptr>(r), cs) == CUDA_SUCCESS,
        "cuMemFreeAsync_of_cudaMallocAsync");
  // Both forms on the default stream: legacy and per-thread.
  Check(AllocAsync(&d, 4096, nullptr, false) == CUDA_SUCCESS &&
            FreeAsync(d, nullptr, false) == CUDA_SUCCESS &&
            AllocAsync(&d, 4096, nullptr, true) == CUDA_SUCCESS &&
            FreeAsync(d, nullptr, true) == CUDA_SUCCESS,
        "legacy_and_per_thread_forms");
  cudaStreamSynchronize(s);
  cudaDeviceSynchronize();
  cudaStreamDestroy(s);
}

static void ErrorStrings() {
  const char* s = nullptr;
  Check(ErrorString(CUDA_SUCCESS, &s) == CUDA_SUCCESS && s != nullptr && strcmp(s, "no error") == 0,
        "error_string_success");
  Check(ErrorString(CUDA_ERROR_INVALID_VALUE, &s) == CUDA_SUCCESS &&
            strcmp(s, "invalid argument") == 0,
        "error_string_invalid_value");
  Check(
      ErrorString(CUDA_ERROR_OUT_OF_MEMORY, &s) == CUDA_SUCCESS && strcmp(s, "out of memory") == 0,
      "error_string_out_of_memory");
  Check(ErrorString(CUDA_ERROR_LAUNCH_TIMEOUT, &s) == CUDA_SUCCESS &&
            strcmp(s, "launch timeout") == 0,
        "error_string_derived");
  s = "x";
  Check(ErrorString(CUresult(12345), &s) == CUDA_ERROR_INVALID_VALUE && s == nullptr,
        "error_string_unknown_code");
  Check(ErrorString(CUDA_SUCCESS, nullptr) == CUDA_ERROR_INVALID_VALUE, "error_string_null");
}

// ---- Callbacks ------------------------------------------------------------------------------

static int ExpectedCbid(const std::string& f) {
  static const std::map<std::string, int> kCbids = {
      {"cuMemCreate", CUPTI_DRIVER_TRACE_CBID_cuMemCreate},
      {"cuMemRelease", CUPTI_DRIVER_TRACE_CBID_cuMemRelease},
      {"cuMemAddressReserve", CUPTI_DRIVER_TRACE_CBID_cuMemAddressReserve},
      {"cuMemAddressFree", CUPTI_DRIVER_TRACE_CBID_cuMemAddressFree},
      {"cuMemMap", CUPTI_DRIVER_TRACE_CBID_cuMemMap},
      {"cuMemUnmap", CUPTI_DRIVER_TRACE_CBID_cuMemUnmap},
      {"cuMemSetAccess", CUPTI_DRIVER_TRACE_CBID_cuMemSetAccess},
      {"cuMemGetAllocationGranularity", CUPTI_DRIVER_TRACE_CBID_cuMemGetAllocationGranularity},
      {"cuMemAlloc_v2", CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2},
      {"cuMemFree_v2", CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2},
      {"cuMemAllocAsync", CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync},
      {"cuMemAllocAsync_ptsz", CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz},
      {"cuMemFreeAsync", CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync},
      {"cuMemFreeAsync_ptsz", CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz},
      {"cuGetErrorString", CUPTI_DRIVER_TRACE_CBID_cuGetErrorString},
  };
  auto it = kCbids.find(f);
  return it != kCbids.end() ? it->second : -1;
}

static void CheckCallbacks() {
  std::lock_guard<std::mutex> lock(g_mu);
  printf("driver_calls %zu\n", g_calls.size());
  printf("driver_callbacks %zu\n", g_drv.size());
  Check(g_drv.size() == 2 * g_calls.size(), "one_enter_and_one_exit_per_call");
  bool order = true, cbids = true, rets = true, shape = true, outs = true;
  std::map<std::string, int> per_func;
  for (size_t i = 0; i < g_calls.size() && 2 * i + 1 < g_drv.size(); ++i) {
    const Call& c = g_calls[i];
    const DrvRec& in = g_drv[2 * i];
    const DrvRec& ex = g_drv[2 * i + 1];
    ++per_func[c.func];
    order &= in.is_exit == 0 && ex.is_exit == 1 && in.corr == ex.corr && in.corr != 0 &&
             in.func == c.func && ex.func == c.func;
    cbids &= in.cbid == ExpectedCbid(c.func) && ex.cbid == in.cbid;
    rets &= in.ret_null && !ex.ret_null && ex.ret == c.ret;
    shape &= in.symbol_null && ex.symbol_null && !in.params_null && !ex.params_null;
    if (c.ret == CUDA_SUCCESS && (in.cbid == CUPTI_DRIVER_TRACE_CBID_cuMemCreate ||
                                  in.cbid == CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2 ||
                                  in.cbid == CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync ||
                                  in.cbid == CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz ||
                                  in.cbid == CUPTI_DRIVER_TRACE_CBID_cuMemAddressReserve)) {
      outs &= ex.out == c.out && c.out != 0 && ex.size == in.size;
    }
    if (!order || !cbids || !rets) {
      printf("mismatch at call %zu %s ret %d: %s/%s cbid %d ret %d\n", i, c.func.c_str(), c.ret,
             in.func.c_str(), ex.func.c_str(), in.cbid, ex.ret);
      break;
    }
  }
  Check(order, "callbacks_in_call_order");
  Check(cbids, "cupti_driver_cbids");
  Check(rets, "return_value_at_exit");
  Check(shape, "params_given_symbol_null");
  Check(outs, "results_in_params_at_exit");
  Check(g_runtime_inside_driver == 0, "no_runtime_callbacks_inside_driver_calls");
  // Specific parameters: the cuMemCreate calls of the two 2 MiB allocations on device 0 and the
  // one on device 1, the 4 MiB cuMemAlloc, the releases naming their handles.
  int creates_dev0 = 0, creates_dev1 = 0, alloc_4mib = 0, releases_named = 0;
  for (size_t i = 0; i + 1 < g_drv.size(); i += 2) {
    const DrvRec& in = g_drv[i];
    const DrvRec& ex = g_drv[i + 1];
    if (in.cbid == CUPTI_DRIVER_TRACE_CBID_cuMemCreate && ex.ret == CUDA_SUCCESS) {
      creates_dev0 += in.size == kChunk && in.device == 0 && ex.out != 0;
      creates_dev1 += in.size == kChunk && in.device == 1 && ex.out != 0;
    }
    if (in.cbid == CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2 && ex.ret == CUDA_SUCCESS) {
      alloc_4mib += in.size == 4 * kMiB;
    }
    if (in.cbid == CUPTI_DRIVER_TRACE_CBID_cuMemRelease && ex.ret == CUDA_SUCCESS) {
      for (size_t j = 0; j + 1 < i; j += 2) {
        releases_named +=
            g_drv[j].cbid == CUPTI_DRIVER_TRACE_CBID_cuMemCreate && g_drv[j + 1].out == in.arg;
      }
    }
  }
  printf("creates_device0 %d\n", creates_dev0);
  printf("creates_device1 %d\n", creates_dev1);
  Check(creates_dev0 == 4 && creates_dev1 == 1, "cuMemCreate_params");  // + spare, posix fd
  Check(alloc_4mib == 1, "cuMemAlloc_params");
  Check(releases_named == 5, "cuMemRelease_names_created_handles");
  printf("calls_cuMemAllocAsync %d\n", per_func["cuMemAllocAsync"]);
  printf("calls_cuMemAllocAsync_ptsz %d\n", per_func["cuMemAllocAsync_ptsz"]);
}

int main() {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  auto set_observer =
      reinterpret_cast<decltype(&gpusim_set_observer)>(dlsym(RTLD_DEFAULT, "gpusim_set_observer"));
  Check(set_observer != nullptr, "observer_symbol");
  if (failures != 0) return failures;
  int devices = 0;
  cudaGetDeviceCount(&devices);
  Check(devices == 2, "two_devices");
  Lookups();
  if (failures != 0) return failures;
  set_observer(OnApi, nullptr, nullptr);
  Granularities();
  CreateErrors();
  VirtualMemory();
  SecondDevice();
  LinearMemory();
  StreamOrdered();
  ErrorStrings();
  cudaDeviceSynchronize();
  set_observer(nullptr, nullptr, nullptr);
  CheckCallbacks();
  printf("failures %d\n", failures);
  return failures;
}
