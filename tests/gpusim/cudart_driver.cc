// The driver functions gpusim's libcudart.so.13 hands out through cudaGetDriverEntryPoint and
// cudaGetDriverEntryPointByVersion (and their _ptsz twins): the memory functions programs reach
// that way instead of linking libcuda (PyTorch's expandable segments, vLLM's CuMemAllocator,
// NCCL's ncclMemAlloc, Triton), so that they run on the simulator:
//
//   cuMemAddressReserve, cuMemAddressFree, cuMemCreate, cuMemRelease, cuMemMap, cuMemUnmap,
//   cuMemSetAccess, cuMemGetAllocationGranularity  (virtual memory management, "VMM")
//   cuMemAlloc (the _v2 ABI), cuMemFree (_v2), cuMemAllocAsync, cuMemFreeAsync (and their
//   _ptsz forms: cudaEnablePerThreadDefaultStream, or cudaEnableDefault through the _ptsz
//   lookup a --default-stream per-thread build calls), cuGetErrorString.
//   cuMemcpyHtoD, cuMemcpyDtoH, cuMemcpyHtoDAsync, cuMemcpyDtoHAsync (the _v2 ABI), cuMemsetD32,
//   cuMemsetD32Async, cuStreamSynchronize, cuCtxSynchronize: the runtime's 1D copies and sets
//   (and syncs) under the driver call's correlation id (JAX/XLA-, CuPy- and numba-style code).
//   cuGraphLaunch (and _ptsz): cudaGraphLaunch's work under the driver call's correlation id
//   (cuda-python's driver bindings launch graphs so).
//
// Every lookup of one of these names succeeds, whatever CUDA version is requested (up to the
// runtime's, as for every lookup); every other name fails as before (cudart_extra.cc). The
// functions have cuda.h's signatures and return CUresult codes.
//
// Observer: each call is one driver-domain API callback pair on the calling thread
// (gpusim_driver_call_begin / gpusim_driver_call_end_result): cbid CUPTI_DRIVER_TRACE_CBID_<name>
// (cuMemAlloc_v2, cuMemFree_v2, cuMemAllocAsync_ptsz, ...), func_name the name CUPTI gives
// ("cuMemAlloc_v2"), params the generated_cuda_meta.h struct holding the call's arguments (so
// *handle / *dptr hold the result at exit), the CUresult readable at exit. The driver functions
// make no runtime-domain callbacks and leave the runtime's last error alone, as NVIDIA's do.
//
// Semantics (the driver's; device = the location of the allocation, "context" = the calling
// thread's current device, as with the primary context the runtime uses):
// - Granularity 2 MiB (minimum and recommended) for pinned device memory of a valid device.
// - cuMemCreate: `prop` pinned, located on a device (other location types and handle types
//   other than none / POSIX fd are refused), size a non-zero multiple of 2 MiB, flags 0. The
//   physical memory is a memfd of that size, counted as device memory (cudaMemGetInfo) until it
//   is released and unmapped. Handles are unique, non-zero, never reused.
// - cuMemAddressReserve: a PROT_NONE range of the host's address space (size and hint a
//   multiple of the page size, alignment a power of two; the base is aligned to at least
//   2 MiB; a free hint address is honoured). cuMemAddressFree: exactly a reservation, with
//   nothing mapped in it (else CUDA_ERROR_INVALID_VALUE).
// - cuMemMap: a whole granule-aligned range of one reservation that nothing is mapped on, from a
//   live (not released) handle, at a granule-aligned offset within it; mmap(MAP_SHARED |
//   MAP_FIXED) of the memfd, inaccessible (PROT_NONE) until cuMemSetAccess. Mapping one handle
//   twice aliases the same memory, as on the device.
// - cuMemSetAccess: a range made of whole mappings; each descriptor a device location (valid
//   device) with PROT_NONE, READ or READWRITE. The host protection of a mapping is the widest
//   access any device has (one host stands for every device).
// - cuMemUnmap: a range made of whole mappings; it waits for the work queued on every device
//   (which may still use the range), then the range is a PROT_NONE reservation again. The
//   physical memory goes when its handle is released and its last mapping unmapped.
// - Mapped ranges are tracked as device memory of the allocation's device (MemKind::kMapped):
//   cudaMemcpyDefault resolves them, cudaPointerGetAttributes says cudaMemoryTypeDevice,
//   copies, sets and kernel launches accept them; cudaFree refuses them. A copy or set touching
//   a reserved byte that is not mapped or not accessible fails with cudaErrorInvalidValue.
// - cuMemAlloc / cuMemFree are cudaMalloc / cudaFree (the same allocations: either frees the
//   other's), except that cuMemAlloc of 0 bytes is CUDA_ERROR_INVALID_VALUE; cuMemAllocAsync /
//   cuMemFreeAsync are cudaMallocAsync / cudaFreeAsync (current pool of the stream's device).
//
// No ground-truth lines: the simulator writes none for allocations (only for what the device
// executes: kernels, copies, sets, host functions).
#include <cuda.h>
#include <cupti.h>  // the driver cbids and generated_cuda_meta.h's params (in cupti.h's order)
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "tests/gpusim/sim_device.h"

namespace {

constexpr size_t kGranularity = 2u << 20;

struct CuErrorEntry {
  int code;
  const char* name;
};
const CuErrorEntry kCuErrors[] = {
#include "tests/gpusim/cudart_cu_error_table.inc"
};

// cuGetErrorString's text for the codes programs meet most (NVIDIA's wording); the others are
// derived from the name (CUDA_ERROR_LAUNCH_TIMEOUT -> "launch timeout").
const char* KnownCuErrorString(int code) {
  switch (code) {
    case CUDA_SUCCESS:
      return "no error";
    case CUDA_ERROR_INVALID_VALUE:
      return "invalid argument";
    case CUDA_ERROR_OUT_OF_MEMORY:
      return "out of memory";
    case CUDA_ERROR_NOT_INITIALIZED:
      return "initialization error";
    case CUDA_ERROR_DEINITIALIZED:
      return "driver shutting down";
    case CUDA_ERROR_NO_DEVICE:
      return "no CUDA-capable device is detected";
    case CUDA_ERROR_INVALID_DEVICE:
      return "invalid device ordinal";
    case CUDA_ERROR_INVALID_CONTEXT:
      return "invalid device context";
    case CUDA_ERROR_INVALID_HANDLE:
      return "invalid resource handle";
    case CUDA_ERROR_NOT_FOUND:
      return "named symbol not found";
    case CUDA_ERROR_NOT_READY:
      return "device not ready";
    case CUDA_ERROR_ILLEGAL_ADDRESS:
      return "an illegal memory access was encountered";
    case CUDA_ERROR_NOT_PERMITTED:
      return "operation not permitted";
    case CUDA_ERROR_NOT_SUPPORTED:
      return "operation not supported";
    case CUDA_ERROR_UNKNOWN:
      return "unknown error";
    default:
      return nullptr;
  }
}

const char* CuErrorString(int code) {
  const char* known = KnownCuErrorString(code);
  if (known != nullptr) return known;
  constexpr size_t kCount = sizeof(kCuErrors) / sizeof(kCuErrors[0]);
  static std::mutex mu;
  static std::string* strings = new std::string[kCount];
  for (size_t i = 0; i < kCount; ++i) {
    if (kCuErrors[i].code != code) continue;
    std::lock_guard<std::mutex> lock(mu);
    std::string& s = strings[i];
    if (s.empty()) {
      const char* p = kCuErrors[i].name + strlen("CUDA_ERROR_");
      for (; *p != '\0'; ++p) {
        s.push_back(*p == '_' ? ' ' : static_cast<char>(tolower(static_cast<unsigned char>(*p))));
      }
    }
    return s.c_str();
  }
  return nullptr;
}

CUresult ToCu(cudaError_t err) {
  switch (err) {
    case cudaSuccess:
      return CUDA_SUCCESS;
    case cudaErrorInvalidValue:
      return CUDA_ERROR_INVALID_VALUE;
    case cudaErrorMemoryAllocation:
      return CUDA_ERROR_OUT_OF_MEMORY;
    case cudaErrorInvalidDevice:
      return CUDA_ERROR_INVALID_DEVICE;
    case cudaErrorInvalidResourceHandle:
      return CUDA_ERROR_INVALID_HANDLE;
    case cudaErrorNotSupported:
      return CUDA_ERROR_NOT_SUPPORTED;
    default:
      return CUDA_ERROR_UNKNOWN;
  }
}

// One driver call: the enter callback in the constructor, the exit callback with the result in
// Return.
class DriverCall {
 public:
  DriverCall(int cbid, const char* name, const void* params)
      : cbid_(cbid),
        name_(name),
        params_(params),
        corr_(gpusim_driver_call_begin(cbid, name, nullptr, params)) {}
  DriverCall(const DriverCall&) = delete;
  DriverCall& operator=(const DriverCall&) = delete;
  uint32_t corr() const { return corr_; }
  CUresult Return(CUresult result) {
    gpusim_driver_call_end_result(cbid_, name_, nullptr, corr_, params_, static_cast<int>(result));
    return result;
  }

 private:
  int cbid_;
  const char* name_;
  const void* params_;
  uint32_t corr_;
};

// ---- Virtual memory management state ----------------------------------------------------------

// Physical memory of cuMemCreate.
struct Physical {
  uint64_t handle = 0;
  int fd = -1;
  size_t size = 0;
  int device = 0;
  bool released = false;  // cuMemRelease'd: goes with its last mapping
  int mappings = 0;
};

// One cuMemMap.
struct Mapping {
  size_t size = 0;
  Physical* phys = nullptr;
  unsigned char access[gpusim::kMaxDevices] = {};  // CUmemAccess_flags per device
  int prot = PROT_NONE;                            // the host protection
};

struct Vmm {
  std::mutex mu;  // guards everything below; taken before the allocation table's lock
  uint64_t next_handle = 1;
  std::map<uint64_t, Physical*> handles;     // live (unreleased) handles
  std::map<uintptr_t, size_t> reservations;  // base -> size
  std::map<uintptr_t, Mapping> mappings;     // base -> mapping
  std::atomic<size_t> reservation_count{0};  // lets VmmAccessible skip the lock
};

Vmm& V() {
  static Vmm* vmm = new Vmm();  // never destroyed: stream workers may run at exit
  return *vmm;
}

// With mu held: frees physical memory nothing refers to any more.
void DestroyIfUnused(Physical* phys) {
  if (!phys->released || phys->mappings > 0) return;
  close(phys->fd);
  gpusim::AddDeviceBytes(phys->device, -static_cast<int64_t>(phys->size));
  delete phys;
}

// With mu held: whether [p, p + size) is made of whole adjacent mappings; their bases in `out`.
bool WholeMappings(Vmm& v, uintptr_t p, size_t size, std::vector<uintptr_t>* out) {
  if (size == 0 || p + size < p) return false;
  const uintptr_t end = p + size;
  auto it = v.mappings.find(p);
  for (uintptr_t at = p; at < end; ++it) {
    if (it == v.mappings.end() || it->first != at || it->second.size > end - at) return false;
    out->push_back(at);
    at += it->second.size;
  }
  return true;
}

// Validates an allocation's properties like cuMemCreate: pinned memory located on a device.
CUresult CheckProp(const CUmemAllocationProp& prop) {
  if (prop.type != CU_MEM_ALLOCATION_TYPE_PINNED ||
      prop.location.type != CU_MEM_LOCATION_TYPE_DEVICE) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (prop.location.id < 0 || prop.location.id >= gpusim::DeviceCount()) {
    return CUDA_ERROR_INVALID_DEVICE;
  }
  return CUDA_SUCCESS;
}

// ---- The driver functions ---------------------------------------------------------------------

CUresult CUDAAPI SimGetErrorString(CUresult error, const char** str) {
  cuGetErrorString_params params{error, str};
  DriverCall call(CUPTI_DRIVER_TRACE_CBID_cuGetErrorString, "cuGetErrorString", &params);
  if (str == nullptr) return call.Return(CUDA_ERROR_INVALID_VALUE);
  *str = CuErrorString(static_cast<int>(error));
  return call.Return(*str != nullptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE);
}

CUresult CUDAAPI SimMemGetAllocationGranularity(size_t* granularity,
                                                const CUmemAllocationProp* prop,
                                                CUmemAllocationGranularity_flags option) {
  cuMemGetAllocationGranularity_params params{granularity, prop, option};
  DriverCall call(CUPTI_DRIVER_TRACE_CBID_cuMemGetAllocationGranularity,
                  "cuMemGetAllocationGranularity", &params);
  if (granularity == nullptr || prop == nullptr ||
      (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM &&
       option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED)) {
    return call.Return(CUDA_ERROR_INVALID_VALUE);
  }
  CUresult r = CheckProp(*prop);
  if (r != CUDA_SUCCESS) return call.Return(r);
  *granularity = kGranularity;
  return call.Return(CUDA_SUCCESS);
}

CUresult CUDAAPI SimMemCreate(CUmemGenericAllocationHandle* handle, size_t size,
                              const CUmemAllocationProp* prop, unsigned long long flags) {
  cuMemCreate_params params{handle, size, prop, flags};
  DriverCall call(CUPTI_DRIVER_TRACE_CBID_cuMemCreate, "cuMemCreate", &params);
  if (handle == nullptr || prop == nullptr || flags != 0) {
    return call.Return(CUDA_ERROR_INVALID_VALUE);
  }
  CUresult r = CheckProp(*prop);
  if (r != CUDA_SUCCESS) return call.Return(r);
  if ((prop->requestedHandleTypes & ~CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) != 0) {
    return call.Return(CUDA_ERROR_NOT_SUPPORTED);  // Windows and fabric handles
  }
  if (size == 0 || size % kGranularity != 0) return call.Return(CUDA_ERROR_INVALID_VALUE);
  const int device = prop->location.id;
  if (size > gpusim::kDeviceMemoryBytes - gpusim::DeviceBytesInUse(device)) {
    return call.Return(CUDA_ERROR_OUT_OF_MEMORY);
  }
  int fd = memfd_create("gpusim-cuMemCreate", MFD_CLOEXEC);
  if (fd < 0) return call.Return(CUDA_ERROR_OUT_OF_MEMORY);
  if (ftruncate(fd, static_cast<off_t>(size)) != 0) {
    close(fd);
    return call.Return(CUDA_ERROR_OUT_OF_MEMORY);
  }
  auto* phys = new Physical();
  phys->fd = fd;
  phys->size = size;
  phys->device = device;
  gpusim::AddDeviceBytes(device, static_cast<int64_t>(size));
  {
    Vmm& v = V();
    std::lock_guard<std::mutex> lock(v.mu);
    phys->handle = v.next_handle++;
    v.handles[phys->handle] = phys;
  }
  *handle = phys->handle;
  return call.Return(CUDA_SUCCESS);
}

CUresult CUDAAPI SimMemRelease(CUmemGenericAllocationHandle handle) {
  cuMemRelease_params params{handle};
  DriverCall call(CUPTI_DRIVER_TRACE_CBID_cuMemRelease, "cuMemRelease", &params);
  Vmm& v = V();
  std::lock_guard<std::mutex> lock(v.mu);
  auto it = v.handles.find(handle);
  if (it == v.handles.end()) return call.Return(CUDA_ERROR_INVALID_VALUE);
  Physical* phys = it->second;
  v.handles.erase(it);
  phys->released = true;
  DestroyIfUnused(phys);  // else when its last mapping goes
  return call.Return(CUDA_SUCCESS);
}

CUresult CUDAAPI SimMemAddressReserve(CUdeviceptr* ptr, size_t size, size_t alignment,
                                      CUdeviceptr addr, unsigned long long flags) {
  cuMemAddressReserve_params params{ptr, size, alignment, addr, flags};
  DriverCall call(CUPTI_DRIVER_TRACE_CBID_cuMemAddressReserve, "cuMemAddressReserve", &params);
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  if (ptr == nullptr || size == 0 || size % page != 0 || addr % page != 0 || flags != 0 ||
      (alignment & (alignment - 1)) != 0) {
    return call.Return(CUDA_ERROR_INVALID_VALUE);
  }
  const size_t align = std::max(alignment, kGranularity);
  if (size > SIZE_MAX - align) return call.Return(CUDA_ERROR_OUT_OF_MEMORY);
  constexpr int kFlags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
  uintptr_t base = 0;
  if (addr != 0 && addr % align == 0) {  // the hint, if that range is free
    void* p =
        mmap(reinterpret_cast<void*>(addr), size, PROT_NONE, kFlags | MAP_FIXED_NOREPLACE, -1, 0);
    if (p != MAP_FAILED && reinterpret_cast<uintptr_t>(p) != addr) munmap(p, size);
    if (p != MAP_FAILED && reinterpret_cast<uintptr_t>(p) == addr) base = addr;
  }
  if (base == 0) {
    void* p = mmap(nullptr, size + align, PROT_NONE, kFlags, -1, 0);
    if (p == MAP_FAILED) return call.Return(CUDA_ERROR_OUT_OF_MEMORY);
    const uintptr_t raw = reinterpret_cast<uintptr_t>(p);
    base = (raw + align - 1) / align * align;
    if (base > raw) munmap(p, base - raw);
    const uintptr_t raw_end = raw + size + align;
    if (raw_end > base + size) munmap(reinterpret_cast<void*>(base + size), raw_end - base - size);
  }
  {
    Vmm& v = V();
    std::lock_guard<std::mutex> lock(v.mu);
    v.reservations[base] = size;
    v.reservation_count.fetch_add(1, std::memory_order_release);
  }
  *ptr = static_cast<CUdeviceptr>(base);
  return call.Return(CUDA_SUCCESS);
}

CUresult CUDAAPI SimMemAddressFree(CUdeviceptr ptr, size_t size) {
  cuMemAddressFree_params params{ptr, size};
  DriverCall call(CUPTI_DRIVER_TRACE_CBID_cuMemAddressFree, "cuMemAddressFree", &params);
  Vmm& v = V();
  std::lock_guard<std::mutex> lock(v.mu);
  auto it = v.reservations.find(static_cast<uintptr_t>(ptr));
  if (it == v.reservations.end() || it->second != size) {
    return call.Return(CUDA_ERROR_INVALID_VALUE);
  }
  auto m = v.mappings.lower_bound(static_cast<uintptr_t>(ptr));
  if (m != v.mappings.end() && m->first < ptr + size) {
    return call.Return(CUDA_ERROR_INVALID_VALUE);  // still mapped: cuMemUnmap first
  }
  munmap(reinterpret_cast<void*>(ptr), size);
  v.reservations.erase(it);
  v.reservation_count.fetch_sub(1, std::memory_order_release);
  return call.Return(CUDA_SUCCESS);
}

CUresult CUDAAPI SimMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                           CUmemGenericAllocationHandle handle, unsigned long long flags) {
  cuMemMap_params params{ptr, size, offset, handle, flags};
  DriverCall call(CUPTI_DRIVER_TRACE_CBID_cuMemMap, "cuMemMap", &params);
  if (flags != 0 || size == 0 || ptr % kGranularity != 0 || size % kGranularity != 0 ||
      offset % kGranularity != 0 || ptr + size < ptr) {
    return call.Return(CUDA_ERROR_INVALID_VALUE);
  }
  Vmm& v = V();
  std::lock_guard<std::mutex> lock(v.mu);
  auto h = v.handles.find(handle);
  if (h == v.handles.end()) return call.Return(CUDA_ERROR_INVALID_VALUE);
  Physical* phys = h->second;
  if (offset > phys->size || size > phys->size - offset) {
    return call.Return(CUDA_ERROR_INVALID_VALUE);
  }
  // Inside one reservation...
  auto r = v.reservations.upper_bound(static_cast<uintptr_t>(ptr));
  if (r == v.reservations.begin()) return call.Return(CUDA_ERROR_INVALID_VALUE);
  --r;
  if (ptr < r->first || ptr + size > r->first + r->second) {
    return call.Return(CUDA_ERROR_INVALID_VALUE);
  }
  // ... on nothing mapped.
  auto next = v.mappings.lower_bound(static_cast<uintptr_t>(ptr));
  if (next != v.mappings.end() && next->first < ptr + size) {
    return call.Return(CUDA_ERROR_INVALID_VALUE);
  }
  if (next != v.mappings.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second.size > ptr) return call.Return(CUDA_ERROR_INVALID_VALUE);
  }
  void* p = mmap(reinterpret_cast<void*>(ptr), size, PROT_NONE, MAP_SHARED | MAP_FIXED, phys->fd,
                 static_cast<off_t>(offset));
  if (p == MAP_FAILED) return call.Return(CUDA_ERROR_OUT_OF_MEMORY);
  Mapping& m = v.mappings[static_cast<uintptr_t>(ptr)];
  m.size = size;
  m.phys = phys;
  ++phys->mappings;
  gpusim::TrackAllocation(reinterpret_cast<void*>(ptr), size, gpusim::MemKind::kMapped,
                          phys->device);
  return call.Return(CUDA_SUCCESS);
}

CUresult CUDAAPI SimMemUnmap(CUdeviceptr ptr, size_t size) {
  cuMemUnmap_params params{ptr, size};
  DriverCall call(CUPTI_DRIVER_TRACE_CBID_cuMemUnmap, "cuMemUnmap", &params);
  Vmm& v = V();
  {
    std::vector<uintptr_t> bases;
    std::lock_guard<std::mutex> lock(v.mu);
    if (!WholeMappings(v, static_cast<uintptr_t>(ptr), size, &bases)) {
      return call.Return(CUDA_ERROR_INVALID_VALUE);
    }
  }
  // Queued copies and sets may still use the range: let them finish (without the lock, which
  // API calls on other threads take).
  for (int d = 0; d < gpusim::DeviceCount(); ++d) gpusim::SynchronizeDevice(d);
  std::vector<uintptr_t> bases;
  std::lock_guard<std::mutex> lock(v.mu);
  if (!WholeMappings(v, static_cast<uintptr_t>(ptr), size, &bases)) {
    return call.Return(CUDA_ERROR_INVALID_VALUE);  // unmapped by another thread meanwhile
  }
  for (uintptr_t base : bases) {
    auto it = v.mappings.find(base);
    Mapping m = it->second;
    v.mappings.erase(it);
    mmap(reinterpret_cast<void*>(base), m.size, PROT_NONE,
         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
    gpusim::UntrackMapping(reinterpret_cast<void*>(base));
    --m.phys->mappings;
    DestroyIfUnused(m.phys);
  }
  return call.Return(CUDA_SUCCESS);
}

CUresult CUDAAPI SimMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc,
                                 size_t count) {
  cuMemSetAccess_params params{ptr, size, desc, count};
  DriverCall call(CUPTI_DRIVER_TRACE_CBID_cuMemSetAccess, "cuMemSetAccess", &params);
  if (desc == nullptr || count == 0) return call.Return(CUDA_ERROR_INVALID_VALUE);
  for (size_t i = 0; i < count; ++i) {
    if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
        (desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_NONE &&
         desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READ &&
         desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)) {
      return call.Return(CUDA_ERROR_INVALID_VALUE);
    }
    if (desc[i].location.id < 0 || desc[i].location.id >= gpusim::DeviceCount()) {
      return call.Return(CUDA_ERROR_INVALID_DEVICE);
    }
  }
  Vmm& v = V();
  std::lock_guard<std::mutex> lock(v.mu);
  std::vector<uintptr_t> bases;
  if (!WholeMappings(v, static_cast<uintptr_t>(ptr), size, &bases)) {
    return call.Return(CUDA_ERROR_INVALID_VALUE);
  }
  for (uintptr_t base : bases) {
    Mapping& m = v.mappings[base];
    for (size_t i = 0; i < count; ++i) {
      m.access[desc[i].location.id] = static_cast<unsigned char>(desc[i].flags);
    }
    unsigned widest = 0;
    for (unsigned char a : m.access) widest |= a;
    m.prot = (widest & 2) ? PROT_READ | PROT_WRITE : (widest & 1) ? PROT_READ : PROT_NONE;
    mprotect(reinterpret_cast<void*>(base), m.size, m.prot);
  }
  return call.Return(CUDA_SUCCESS);
}

CUresult MemAllocImpl(CUdeviceptr* dptr, size_t bytesize) {
  cuMemAlloc_v2_params params{dptr, bytesize};
  DriverCall call(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, "cuMemAlloc_v2", &params);
  if (dptr == nullptr || bytesize == 0) return call.Return(CUDA_ERROR_INVALID_VALUE);
  void* p = nullptr;
  cudaError_t err = gpusim::DeviceMalloc(bytesize, &p);
  if (err == cudaSuccess) *dptr = reinterpret_cast<CUdeviceptr>(p);
  return call.Return(ToCu(err));
}

CUresult CUDAAPI SimMemAlloc(CUdeviceptr* dptr, size_t bytesize) {
  return MemAllocImpl(dptr, bytesize);
}

CUresult CUDAAPI SimMemFree(CUdeviceptr dptr) {
  cuMemFree_v2_params params{dptr};
  DriverCall call(CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2, "cuMemFree_v2", &params);
  return call.Return(ToCu(gpusim::DeviceFree(reinterpret_cast<void*>(dptr))));
}

CUresult MemAllocAsyncImpl(int cbid, const char* name, CUdeviceptr* dptr, size_t bytesize,
                           CUstream stream, bool pt) {
  // cuMemAllocAsync_ptsz_params has the same layout.
  cuMemAllocAsync_params params{dptr, bytesize, stream};
  DriverCall call(cbid, name, &params);
  if (dptr == nullptr) return call.Return(CUDA_ERROR_INVALID_VALUE);
  void* p = nullptr;
  cudaError_t err = gpusim::MallocAsyncOn(bytesize, reinterpret_cast<cudaStream_t>(stream), pt, &p);
  if (err == cudaSuccess) *dptr = reinterpret_cast<CUdeviceptr>(p);
  return call.Return(ToCu(err));
}

CUresult MemFreeAsyncImpl(int cbid, const char* name, CUdeviceptr dptr, CUstream stream, bool pt) {
  cuMemFreeAsync_params params{dptr, stream};  // = cuMemFreeAsync_ptsz_params
  DriverCall call(cbid, name, &params);
  return call.Return(ToCu(gpusim::FreeAsyncOn(
      reinterpret_cast<void*>(dptr), reinterpret_cast<cudaStream_t>(stream), pt, call.corr())));
}

CUresult CUDAAPI SimMemAllocAsync(CUdeviceptr* dptr, size_t bytesize, CUstream stream) {
  return MemAllocAsyncImpl(CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync, "cuMemAllocAsync", dptr,
                           bytesize, stream, false);
}
CUresult CUDAAPI SimMemAllocAsyncPtsz(CUdeviceptr* dptr, size_t bytesize, CUstream stream) {
  return MemAllocAsyncImpl(CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz, "cuMemAllocAsync_ptsz",
                           dptr, bytesize, stream, true);
}
CUresult CUDAAPI SimMemFreeAsync(CUdeviceptr dptr, CUstream stream) {
  return MemFreeAsyncImpl(CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync, "cuMemFreeAsync", dptr, stream,
                          false);
}
CUresult CUDAAPI SimMemFreeAsyncPtsz(CUdeviceptr dptr, CUstream stream) {
  return MemFreeAsyncImpl(CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz, "cuMemFreeAsync_ptsz", dptr,
                          stream, true);
}

// ---- Copies, sets and synchronizations ----------------------------------------------------
// The 1D copies and 32-bit sets of JAX/XLA-, CuPy- and numba-style driver code, and the host
// synchronizations: the runtime's work, under the driver call's correlation id.

CUresult CUDAAPI SimMemcpyHtoD(CUdeviceptr dst, const void* src, size_t n) {
  cuMemcpyHtoD_v2_params params{dst, src, n};
  DriverCall call(CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2, "cuMemcpyHtoD_v2", &params);
  return call.Return(ToCu(gpusim::DriverCopy(call.corr(), reinterpret_cast<void*>(dst), src, n,
                                             cudaMemcpyHostToDevice, nullptr, false, true)));
}
CUresult CUDAAPI SimMemcpyDtoH(void* dst, CUdeviceptr src, size_t n) {
  cuMemcpyDtoH_v2_params params{dst, src, n};
  DriverCall call(CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2, "cuMemcpyDtoH_v2", &params);
  return call.Return(ToCu(gpusim::DriverCopy(call.corr(), dst, reinterpret_cast<void*>(src), n,
                                             cudaMemcpyDeviceToHost, nullptr, false, true)));
}
CUresult CUDAAPI SimMemcpyHtoDAsync(CUdeviceptr dst, const void* src, size_t n, CUstream s) {
  cuMemcpyHtoDAsync_v2_params params{dst, src, n, s};
  DriverCall call(CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2, "cuMemcpyHtoDAsync_v2", &params);
  return call.Return(ToCu(gpusim::DriverCopy(call.corr(), reinterpret_cast<void*>(dst), src, n,
                                             cudaMemcpyHostToDevice,
                                             reinterpret_cast<cudaStream_t>(s), false, false)));
}
CUresult CUDAAPI SimMemcpyDtoHAsync(void* dst, CUdeviceptr src, size_t n, CUstream s) {
  cuMemcpyDtoHAsync_v2_params params{dst, src, n, s};
  DriverCall call(CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2, "cuMemcpyDtoHAsync_v2", &params);
  return call.Return(ToCu(gpusim::DriverCopy(call.corr(), dst, reinterpret_cast<void*>(src), n,
                                             cudaMemcpyDeviceToHost,
                                             reinterpret_cast<cudaStream_t>(s), false, false)));
}
CUresult CUDAAPI SimMemsetD32(CUdeviceptr dst, unsigned int value, size_t n) {
  cuMemsetD32_v2_params params{dst, value, n};
  DriverCall call(CUPTI_DRIVER_TRACE_CBID_cuMemsetD32_v2, "cuMemsetD32_v2", &params);
  return call.Return(ToCu(gpusim::DriverSet(call.corr(), reinterpret_cast<void*>(dst), value, 4, n,
                                            nullptr, false, true)));
}
CUresult CUDAAPI SimMemsetD32Async(CUdeviceptr dst, unsigned int value, size_t n, CUstream s) {
  cuMemsetD32Async_params params{dst, value, n, s};
  DriverCall call(CUPTI_DRIVER_TRACE_CBID_cuMemsetD32Async, "cuMemsetD32Async", &params);
  return call.Return(ToCu(gpusim::DriverSet(call.corr(), reinterpret_cast<void*>(dst), value, 4, n,
                                            reinterpret_cast<cudaStream_t>(s), false, false)));
}
CUresult CUDAAPI SimStreamSynchronize(CUstream s) {
  cuStreamSynchronize_params params{s};
  DriverCall call(CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize, "cuStreamSynchronize", &params);
  gpusim::Stream* stream = gpusim::ResolveStream(reinterpret_cast<cudaStream_t>(s), false);
  if (stream == nullptr) return call.Return(CUDA_ERROR_INVALID_HANDLE);
  gpusim::SynchronizeStream(stream);
  return call.Return(CUDA_SUCCESS);
}
// cuGraphLaunch and its _ptsz form (the same parameters).
template <bool kPtsz>
CUresult CUDAAPI SimGraphLaunch(CUgraphExec exec, CUstream s) {
  cuGraphLaunch_params params{exec, s};
  DriverCall call(
      kPtsz ? CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz : CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch,
      kPtsz ? "cuGraphLaunch_ptsz" : "cuGraphLaunch", &params);
  return call.Return(
      ToCu(gpusim::GraphLaunchOn(call.corr(), reinterpret_cast<cudaGraphExec_t>(exec),
                                 reinterpret_cast<cudaStream_t>(s), kPtsz)));
}
CUresult CUDAAPI SimCtxSynchronize() {
  DriverCall call(CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize, "cuCtxSynchronize", nullptr);
  gpusim::SynchronizeDevice(gpusim::CurrentDevice());
  return call.Return(CUDA_SUCCESS);
}

// The lookup table: name as cudaGetDriverEntryPoint takes it, the function, and its
// per-thread-default-stream variant where the driver has one.
struct DriverEntry {
  const char* name;
  void* fn;
  void* fn_ptsz;
};

template <typename F>
void* Fn(F f) {
  return reinterpret_cast<void*>(f);
}

const DriverEntry kDriverEntries[] = {
    {"cuGetErrorString", Fn(&SimGetErrorString), nullptr},
    {"cuMemAddressReserve", Fn(&SimMemAddressReserve), nullptr},
    {"cuMemAddressFree", Fn(&SimMemAddressFree), nullptr},
    {"cuMemCreate", Fn(&SimMemCreate), nullptr},
    {"cuMemRelease", Fn(&SimMemRelease), nullptr},
    {"cuMemMap", Fn(&SimMemMap), nullptr},
    {"cuMemUnmap", Fn(&SimMemUnmap), nullptr},
    {"cuMemSetAccess", Fn(&SimMemSetAccess), nullptr},
    {"cuMemGetAllocationGranularity", Fn(&SimMemGetAllocationGranularity), nullptr},
    {"cuMemAlloc", Fn(&SimMemAlloc), nullptr},
    {"cuMemFree", Fn(&SimMemFree), nullptr},
    {"cuMemAllocAsync", Fn(&SimMemAllocAsync), Fn(&SimMemAllocAsyncPtsz)},
    {"cuMemFreeAsync", Fn(&SimMemFreeAsync), Fn(&SimMemFreeAsyncPtsz)},
    {"cuMemcpyHtoD", Fn(&SimMemcpyHtoD), nullptr},
    {"cuMemcpyDtoH", Fn(&SimMemcpyDtoH), nullptr},
    {"cuMemcpyHtoDAsync", Fn(&SimMemcpyHtoDAsync), nullptr},
    {"cuMemcpyDtoHAsync", Fn(&SimMemcpyDtoHAsync), nullptr},
    {"cuMemsetD32", Fn(&SimMemsetD32), nullptr},
    {"cuMemsetD32Async", Fn(&SimMemsetD32Async), nullptr},
    {"cuStreamSynchronize", Fn(&SimStreamSynchronize), nullptr},
    {"cuCtxSynchronize", Fn(&SimCtxSynchronize), nullptr},
    {"cuGraphLaunch", Fn(&SimGraphLaunch<false>), Fn(&SimGraphLaunch<true>)},
};

}  // namespace

namespace gpusim {

void* DriverEntryPoint(const char* symbol, bool per_thread) {
  for (const DriverEntry& e : kDriverEntries) {
    if (strcmp(e.name, symbol) == 0) {
      return per_thread && e.fn_ptsz != nullptr ? e.fn_ptsz : e.fn;
    }
  }
  return nullptr;
}

bool VmmAccessible(const void* p, size_t bytes, bool write) {
  Vmm& v = V();
  if (v.reservation_count.load(std::memory_order_acquire) == 0 || bytes == 0) return true;
  const uintptr_t begin = reinterpret_cast<uintptr_t>(p);
  const uintptr_t end = begin + bytes < begin ? UINTPTR_MAX : begin + bytes;
  const int need = write ? PROT_WRITE : PROT_READ;
  std::lock_guard<std::mutex> lock(v.mu);
  auto r = v.reservations.upper_bound(begin);
  if (r != v.reservations.begin()) --r;
  for (; r != v.reservations.end() && r->first < end; ++r) {
    const uintptr_t lo = std::max(begin, r->first);
    const uintptr_t hi = std::min(end, r->first + r->second);
    // Every byte of [lo, hi) must lie in a mapping with the access needed.
    for (uintptr_t at = lo; at < hi;) {
      auto m = v.mappings.upper_bound(at);
      if (m == v.mappings.begin()) return false;
      --m;
      if (at >= m->first + m->second.size || (m->second.prot & need) == 0) return false;
      at = m->first + m->second.size;
    }
  }
  return true;
}

}  // namespace gpusim
