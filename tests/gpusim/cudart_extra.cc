// Runtime functions that real programs call for hints and set-up, where the simulator has
// nothing to model: managed-memory advice and prefetch, cache configuration, device choice,
// driver entry points. They validate their arguments like the runtime and otherwise succeed (the
// driver entry points find the simulated driver's memory functions, cudart_driver.cc, and fail
// as documented for every other symbol, see below), so third-party programs that use them run
// on gpusim instead of stopping at cudaErrorNotSupported. Each reports itself to the observer and
// records its error as the thread's last, like every entry point.
#include <cuda_runtime_api.h>
#include <generated_cuda_runtime_api_meta.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

#include "tests/gpusim/sim_device.h"

using gpusim::ApiCall;
using gpusim::ApiInfo;

namespace {

cudaError_t CheckLocation(const cudaMemLocation& location) {
  if (location.type == cudaMemLocationTypeDevice &&
      (location.id < 0 || location.id >= gpusim::DeviceCount())) {
    return cudaErrorInvalidDevice;
  }
  return cudaSuccess;
}

// Advice and prefetches on managed memory, for cudaMemRangeGetAttribute(s): one record per
// range and kind (a repeated call on the same range replaces its record, so a program that
// prefetches every step does not grow the table). Records outlive cudaFree: a later managed
// allocation at the same address would read them (the simulator does not track it further).
enum class AdviceKind { kReadMostly, kPreferred, kAccessedBy, kPrefetch };
struct AdviceRecord {
  uintptr_t begin, end;
  AdviceKind kind;
  int device_bit;  // kAccessedBy: 0 for the host, d + 1 for device d
  bool set;
  cudaMemLocation location;
  uint64_t seq;
};
struct AdviceTable {
  std::mutex mu;
  std::vector<AdviceRecord> records;
  uint64_t seq = 0;
};
AdviceTable& Advice() {
  static AdviceTable* table = new AdviceTable;  // never destroyed: used until exit
  return *table;
}

void RecordAdvice(const void* ptr, size_t count, AdviceKind kind, bool set,
                  cudaMemLocation location) {
  if (ptr == nullptr || count == 0) return;
  const uintptr_t begin = reinterpret_cast<uintptr_t>(ptr), end = begin + count;
  const int bit = kind != AdviceKind::kAccessedBy              ? 0
                  : location.type == cudaMemLocationTypeDevice ? location.id + 1
                                                               : 0;
  AdviceTable& t = Advice();
  std::lock_guard<std::mutex> lock(t.mu);
  AdviceRecord rec{begin, end, kind, bit, set, location, ++t.seq};
  for (AdviceRecord& r : t.records) {
    if (r.begin == begin && r.end == end && r.kind == kind && r.device_bit == bit) {
      r = rec;
      return;
    }
  }
  t.records.push_back(rec);
}

struct RangeState {
  bool read_mostly = false;
  cudaMemLocation preferred{cudaMemLocationTypeInvalid, cudaInvalidDeviceId};
  cudaMemLocation prefetched{cudaMemLocationTypeInvalid, cudaInvalidDeviceId};
  uint32_t accessed_by = 0;  // bit 0 the host, bit d + 1 device d
};

// The latest record of each kind that covers all of [begin, end).
RangeState RangeStateOf(uintptr_t begin, uintptr_t end) {
  RangeState st;
  AdviceTable& t = Advice();
  std::lock_guard<std::mutex> lock(t.mu);
  uint64_t seq_read = 0, seq_pref = 0, seq_fetch = 0, seq_by[gpusim::kMaxDevices + 1] = {};
  for (const AdviceRecord& r : t.records) {
    if (r.begin > begin || r.end < end) continue;
    switch (r.kind) {
      case AdviceKind::kReadMostly:
        if (r.seq > seq_read) seq_read = r.seq, st.read_mostly = r.set;
        break;
      case AdviceKind::kPreferred:
        if (r.seq > seq_pref) {
          seq_pref = r.seq;
          st.preferred =
              r.set ? r.location : cudaMemLocation{cudaMemLocationTypeInvalid, cudaInvalidDeviceId};
        }
        break;
      case AdviceKind::kPrefetch:
        if (r.seq > seq_fetch) seq_fetch = r.seq, st.prefetched = r.location;
        break;
      case AdviceKind::kAccessedBy:
        if (r.device_bit >= 0 && r.device_bit <= gpusim::kMaxDevices &&
            r.seq > seq_by[r.device_bit]) {
          seq_by[r.device_bit] = r.seq;
          if (r.set) {
            st.accessed_by |= 1u << r.device_bit;
          } else {
            st.accessed_by &= ~(1u << r.device_bit);
          }
        }
        break;
    }
  }
  return st;
}

std::atomic<int>& DeviceCacheConfig(int device) {
  static std::atomic<int> config[gpusim::kMaxDevices];  // cudaFuncCachePreferNone = 0
  return config[device >= 0 && device < gpusim::kMaxDevices ? device : 0];
}

cudaError_t PrefetchImpl(const ApiInfo& info, const void* ptr, size_t count,
                         cudaMemLocation location, unsigned flags, cudaStream_t stream, bool pt) {
  cudaMemPrefetchAsync_v12020_params params{ptr, count, location, flags, stream};
  ApiCall api(info, &params);
  if (ptr == nullptr && count > 0) return api.Return(cudaErrorInvalidValue);
  cudaError_t err = CheckLocation(location);
  if (err != cudaSuccess) return api.Return(err);
  if (gpusim::ResolveStream(stream, pt) == nullptr) {
    return api.Return(cudaErrorInvalidResourceHandle);
  }
  RecordAdvice(ptr, count, AdviceKind::kPrefetch, true, location);
  return api.Return(cudaSuccess);
}

// cudaMemPrefetchBatchAsync: `count` ranges, locations applied from prefetchLocIdxs[k] on (the
// first index 0, increasing, below count; at most count locations), flags 0. Each range's last
// prefetch location reads back like cudaMemPrefetchAsync's.
cudaError_t PrefetchBatchImpl(const ApiInfo& info, void** dptrs, size_t* sizes, size_t count,
                              cudaMemLocation* locs, size_t* loc_idxs, size_t num_locs,
                              unsigned long long flags, cudaStream_t stream, bool pt) {
  cudaMemPrefetchBatchAsync_v13000_params params{dptrs,    sizes,    count, locs,
                                                 loc_idxs, num_locs, flags, stream};
  ApiCall api(info, &params);
  if (count == 0 || dptrs == nullptr || sizes == nullptr || locs == nullptr ||
      loc_idxs == nullptr || num_locs == 0 || num_locs > count || flags != 0 || loc_idxs[0] != 0) {
    return api.Return(cudaErrorInvalidValue);
  }
  for (size_t k = 0; k < num_locs; ++k) {
    if ((k > 0 && loc_idxs[k] <= loc_idxs[k - 1]) || loc_idxs[k] >= count) {
      return api.Return(cudaErrorInvalidValue);
    }
    if (cudaError_t err = CheckLocation(locs[k]); err != cudaSuccess) return api.Return(err);
  }
  for (size_t i = 0; i < count; ++i) {
    if (dptrs[i] == nullptr && sizes[i] > 0) return api.Return(cudaErrorInvalidValue);
  }
  if (gpusim::ResolveStream(stream, pt) == nullptr) {
    return api.Return(cudaErrorInvalidResourceHandle);
  }
  size_t k = 0;
  for (size_t i = 0; i < count; ++i) {
    while (k + 1 < num_locs && loc_idxs[k + 1] <= i) ++k;
    RecordAdvice(dptrs[i], sizes[i], AdviceKind::kPrefetch, true, locs[k]);
  }
  return api.Return(cudaSuccess);
}

// The native atomic operations of a link, per cudaAtomicOperation (0..12, else
// cudaErrorInvalidValue): between two devices (NVLink-like, as cudaDeviceGetP2PAttribute says),
// all of them on signed and unsigned 32- and 64-bit integers (integer operations; reductions
// for add, min, max and the bitwise ones) and 32/64-bit floats; to the host, none (PCIe on
// x86: cudaDevAttrHostNativeAtomicSupported is 0).
cudaError_t AtomicCapabilities(unsigned* caps, const cudaAtomicOperation* ops, unsigned count,
                               bool peer) {
  if (caps == nullptr || ops == nullptr || count == 0) return cudaErrorInvalidValue;
  for (unsigned i = 0; i < count; ++i) {
    const int op = int(ops[i]);
    if (op < cudaAtomicOperationIntegerAdd || op > cudaAtomicOperationFloatMax) {
      return cudaErrorInvalidValue;
    }
    unsigned c = 0;
    if (peer) {
      const bool fp = op >= cudaAtomicOperationFloatAdd;
      c = cudaAtomicCapabilityScalar32 | cudaAtomicCapabilityScalar64;
      if (!fp) c |= cudaAtomicCapabilitySigned | cudaAtomicCapabilityUnsigned;
      if (op != cudaAtomicOperationExchange && op != cudaAtomicOperationCAS &&
          op != cudaAtomicOperationIntegerIncrement && op != cudaAtomicOperationIntegerDecrement) {
        c |= cudaAtomicCapabilityReduction;
      }
    }
    caps[i] = c;
  }
  return cudaSuccess;
}

cudaError_t AttachImpl(const ApiInfo& info, cudaStream_t stream, void* ptr, size_t length,
                       unsigned flags, bool pt) {
  cudaStreamAttachMemAsync_v6000_params params{stream, ptr, length, flags};
  ApiCall api(info, &params);
  if (ptr == nullptr) return api.Return(cudaErrorInvalidValue);
  if (gpusim::ResolveStream(stream, pt) == nullptr) {
    return api.Return(cudaErrorInvalidResourceHandle);
  }
  return api.Return(cudaSuccess);
}

// There is no driver library to look symbols up in: the simulated driver's functions
// (gpusim::DriverEntryPoint: cuMemCreate, cuMemAlloc, ... see cudart_driver.cc) are found, with
// cudaSuccess and *driverStatus = cudaDriverEntryPointSuccess, for any version up to the
// runtime's (a version below the one cuda.h's ABI of the symbol needs, e.g. cuMemAlloc's _v2
// from 3.2, gets the same function). cuMemAllocAsync and cuMemFreeAsync come in their
// per-thread-default-stream form (_ptsz) with cudaEnablePerThreadDefaultStream, or with
// cudaEnableDefault through the _ptsz entry points (what a --default-stream per-thread build
// calls). Every other lookup fails with cudaErrorNotSupported, *funcPtr set to NULL and
// *driverStatus to cudaDriverEntryPointSymbolNotFound, which callers that probe optional driver
// features take as "not available" and fall back. Bad arguments are cudaErrorInvalidValue, as
// is a CUDA version above the driver's (ByVersion).
cudaError_t DriverEntryPointImpl(const ApiInfo& info, const void* params, const char* symbol,
                                 void** func, unsigned version, unsigned long long flags,
                                 cudaDriverEntryPointQueryResult* status, bool pt) {
  ApiCall api(info, params, symbol);
  if (symbol == nullptr || func == nullptr ||
      (flags & ~static_cast<unsigned long long>(cudaEnableLegacyStream |
                                                cudaEnablePerThreadDefaultStream)) != 0 ||
      version > CUDART_VERSION) {
    return api.Return(cudaErrorInvalidValue);
  }
  const bool per_thread =
      (flags & cudaEnablePerThreadDefaultStream) != 0 || (flags == cudaEnableDefault && pt);
  *func = gpusim::DriverEntryPoint(symbol, per_thread);
  if (*func != nullptr) {
    if (status != nullptr) *status = cudaDriverEntryPointSuccess;
    return api.Return(cudaSuccess);
  }
  if (status != nullptr) *status = cudaDriverEntryPointSymbolNotFound;
  return api.Return(cudaErrorNotSupported);
}

// Managed memory ranges' attributes as cudaMemAdvise and cudaMemPrefetchAsync left them (see
// RangeAdvice above). The range must lie in one managed allocation (cudaErrorInvalidValue
// otherwise, as the runtime says). A value holds when the last advice or prefetch covering the
// whole range set it; otherwise the attribute reads as unset (0, or cudaInvalidDeviceId), the
// runtime's answer for a range with mixed values.
cudaError_t MemRangeAttributeImpl(void* data, size_t size, cudaMemRangeAttribute attribute,
                                  const void* ptr, size_t count) {
  if (data == nullptr || ptr == nullptr || count == 0) return cudaErrorInvalidValue;
  void* base = nullptr;
  gpusim::Allocation a;
  if (!gpusim::FindAllocation(ptr, &base, &a) || a.kind != gpusim::MemKind::kManaged ||
      static_cast<const char*>(ptr) + count > static_cast<const char*>(base) + a.size) {
    return cudaErrorInvalidValue;
  }
  const uintptr_t begin = reinterpret_cast<uintptr_t>(ptr), end = begin + count;
  const RangeState st = RangeStateOf(begin, end);
  auto put = [&](int v) {
    if (size != sizeof(int)) return cudaErrorInvalidValue;
    *static_cast<int*>(data) = v;
    return cudaSuccess;
  };
  switch (attribute) {
    case cudaMemRangeAttributeReadMostly:
      return put(st.read_mostly ? 1 : 0);
    case cudaMemRangeAttributePreferredLocation:
      return put(st.preferred.type == cudaMemLocationTypeDevice ? st.preferred.id
                 : st.preferred.type == cudaMemLocationTypeHost ? cudaCpuDeviceId
                                                                : cudaInvalidDeviceId);
    case cudaMemRangeAttributePreferredLocationType:
      return put(int(st.preferred.type));
    case cudaMemRangeAttributePreferredLocationId:
      return put(st.preferred.id);
    case cudaMemRangeAttributeLastPrefetchLocation:
      return put(st.prefetched.type == cudaMemLocationTypeDevice ? st.prefetched.id
                 : st.prefetched.type == cudaMemLocationTypeHost ? cudaCpuDeviceId
                                                                 : cudaInvalidDeviceId);
    case cudaMemRangeAttributeLastPrefetchLocationType:
      return put(int(st.prefetched.type));
    case cudaMemRangeAttributeLastPrefetchLocationId:
      return put(st.prefetched.id);
    case cudaMemRangeAttributeAccessedBy: {
      // An array of device ids (cudaCpuDeviceId for the host), the rest cudaInvalidDeviceId.
      if (size == 0 || size % sizeof(int) != 0) return cudaErrorInvalidValue;
      int* out = static_cast<int*>(data);
      const size_t n = size / sizeof(int);
      size_t k = 0;
      if ((st.accessed_by & 1u) != 0 && k < n) out[k++] = cudaCpuDeviceId;
      for (int d = 0; d < gpusim::kMaxDevices && k < n; ++d) {
        if ((st.accessed_by >> (d + 1)) & 1u) out[k++] = d;
      }
      for (; k < n; ++k) out[k] = cudaInvalidDeviceId;
      return cudaSuccess;
    }
  }
  return cudaErrorInvalidValue;
}

}  // namespace

extern "C" {

// Declared by the header only under per-thread-default-stream builds.
cudaError_t cudaMemPrefetchAsync_ptsz(const void* devPtr, size_t count, cudaMemLocation location,
                                      unsigned int flags, cudaStream_t stream);
cudaError_t cudaStreamAttachMemAsync_ptsz(cudaStream_t stream, void* devPtr, size_t length,
                                          unsigned int flags);
cudaError_t cudaGetDriverEntryPoint_ptsz(const char* symbol, void** funcPtr,
                                         unsigned long long flags,
                                         cudaDriverEntryPointQueryResult* driverStatus);
cudaError_t cudaGetDriverEntryPointByVersion_ptsz(const char* symbol, void** funcPtr,
                                                  unsigned int cudaVersion,
                                                  unsigned long long flags,
                                                  cudaDriverEntryPointQueryResult* driverStatus);

cudaError_t cudaMemPrefetchBatchAsync_ptsz(void** dptrs, size_t* sizes, size_t count,
                                           cudaMemLocation* prefetchLocs, size_t* prefetchLocIdxs,
                                           size_t numPrefetchLocs, unsigned long long flags,
                                           cudaStream_t stream);

cudaError_t cudaMemPrefetchBatchAsync(void** dptrs, size_t* sizes, size_t count,
                                      cudaMemLocation* prefetchLocs, size_t* prefetchLocIdxs,
                                      size_t numPrefetchLocs, unsigned long long flags,
                                      cudaStream_t stream) {
  static const ApiInfo kInfo("cudaMemPrefetchBatchAsync");
  return PrefetchBatchImpl(kInfo, dptrs, sizes, count, prefetchLocs, prefetchLocIdxs,
                           numPrefetchLocs, flags, stream, false);
}

cudaError_t cudaMemPrefetchBatchAsync_ptsz(void** dptrs, size_t* sizes, size_t count,
                                           cudaMemLocation* prefetchLocs, size_t* prefetchLocIdxs,
                                           size_t numPrefetchLocs, unsigned long long flags,
                                           cudaStream_t stream) {
  static const ApiInfo kInfo("cudaMemPrefetchBatchAsync_ptsz");
  return PrefetchBatchImpl(kInfo, dptrs, sizes, count, prefetchLocs, prefetchLocIdxs,
                           numPrefetchLocs, flags, stream, true);
}

cudaError_t cudaDeviceGetHostAtomicCapabilities(unsigned int* capabilities,
                                                const enum cudaAtomicOperation* operations,
                                                unsigned int count, int device) {
  static const ApiInfo kInfo("cudaDeviceGetHostAtomicCapabilities");
  cudaDeviceGetHostAtomicCapabilities_v13000_params params{capabilities, operations, count, device};
  ApiCall api(kInfo, &params);
  if (device < 0 || device >= gpusim::DeviceCount()) return api.Return(cudaErrorInvalidDevice);
  return api.Return(AtomicCapabilities(capabilities, operations, count, false));
}

cudaError_t cudaDeviceGetP2PAtomicCapabilities(unsigned int* capabilities,
                                               const enum cudaAtomicOperation* operations,
                                               unsigned int count, int srcDevice, int dstDevice) {
  static const ApiInfo kInfo("cudaDeviceGetP2PAtomicCapabilities");
  cudaDeviceGetP2PAtomicCapabilities_v13000_params params{capabilities, operations, count,
                                                          srcDevice, dstDevice};
  ApiCall api(kInfo, &params);
  const int n = gpusim::DeviceCount();
  if (srcDevice < 0 || srcDevice >= n || dstDevice < 0 || dstDevice >= n ||
      srcDevice == dstDevice) {
    return api.Return(cudaErrorInvalidDevice);
  }
  return api.Return(AtomicCapabilities(capabilities, operations, count, true));
}

cudaError_t cudaMemPrefetchAsync(const void* devPtr, size_t count, cudaMemLocation location,
                                 unsigned int flags, cudaStream_t stream) {
  static const ApiInfo kInfo("cudaMemPrefetchAsync");
  return PrefetchImpl(kInfo, devPtr, count, location, flags, stream, false);
}

cudaError_t cudaMemPrefetchAsync_ptsz(const void* devPtr, size_t count, cudaMemLocation location,
                                      unsigned int flags, cudaStream_t stream) {
  static const ApiInfo kInfo("cudaMemPrefetchAsync_ptsz");
  return PrefetchImpl(kInfo, devPtr, count, location, flags, stream, true);
}

cudaError_t cudaMemAdvise(const void* devPtr, size_t count, enum cudaMemoryAdvise advice,
                          cudaMemLocation location) {
  static const ApiInfo kInfo("cudaMemAdvise");
  cudaMemAdvise_v12020_params params{devPtr, count, advice, location};
  ApiCall api(kInfo, &params);
  if (devPtr == nullptr && count > 0) return api.Return(cudaErrorInvalidValue);
  cudaError_t err = CheckLocation(location);
  if (err != cudaSuccess) return api.Return(err);
  switch (advice) {
    case cudaMemAdviseSetReadMostly:
    case cudaMemAdviseUnsetReadMostly:
      RecordAdvice(devPtr, count, AdviceKind::kReadMostly, advice == cudaMemAdviseSetReadMostly,
                   location);
      break;
    case cudaMemAdviseSetPreferredLocation:
    case cudaMemAdviseUnsetPreferredLocation:
      RecordAdvice(devPtr, count, AdviceKind::kPreferred,
                   advice == cudaMemAdviseSetPreferredLocation, location);
      break;
    case cudaMemAdviseSetAccessedBy:
    case cudaMemAdviseUnsetAccessedBy:
      RecordAdvice(devPtr, count, AdviceKind::kAccessedBy, advice == cudaMemAdviseSetAccessedBy,
                   location);
      break;
    default:
      return api.Return(cudaErrorInvalidValue);
  }
  return api.Return(cudaSuccess);
}

cudaError_t cudaStreamAttachMemAsync(cudaStream_t stream, void* devPtr, size_t length,
                                     unsigned int flags) {
  static const ApiInfo kInfo("cudaStreamAttachMemAsync");
  return AttachImpl(kInfo, stream, devPtr, length, flags, false);
}

cudaError_t cudaStreamAttachMemAsync_ptsz(cudaStream_t stream, void* devPtr, size_t length,
                                          unsigned int flags) {
  static const ApiInfo kInfo("cudaStreamAttachMemAsync_ptsz");
  return AttachImpl(kInfo, stream, devPtr, length, flags, true);
}

cudaError_t cudaDeviceSetCacheConfig(enum cudaFuncCache cacheConfig) {
  static const ApiInfo kInfo("cudaDeviceSetCacheConfig");
  cudaDeviceSetCacheConfig_v3020_params params{cacheConfig};
  ApiCall api(kInfo, &params);
  if (int(cacheConfig) < 0 || int(cacheConfig) > 3) return api.Return(cudaErrorInvalidValue);
  DeviceCacheConfig(gpusim::CurrentDevice()) = int(cacheConfig);
  return api.Return(cudaSuccess);
}

// Reads back what cudaDeviceSetCacheConfig stored for the current device (cudaFuncCachePreferNone
// until then).
cudaError_t cudaDeviceGetCacheConfig(enum cudaFuncCache* pCacheConfig) {
  static const ApiInfo kInfo("cudaDeviceGetCacheConfig");
  cudaDeviceGetCacheConfig_v3020_params params{pCacheConfig};
  ApiCall api(kInfo, &params);
  if (pCacheConfig == nullptr) return api.Return(cudaErrorInvalidValue);
  *pCacheConfig = static_cast<cudaFuncCache>(DeviceCacheConfig(gpusim::CurrentDevice()).load());
  return api.Return(cudaSuccess);
}

// Shared memory bank size (deprecated since CUDA 12.x; devices since Volta have 4-byte banks
// only, which is what the query reports). Setting validates the value and is otherwise a no-op,
// as the runtime's is on those devices.
cudaError_t cudaDeviceGetSharedMemConfig(enum cudaSharedMemConfig* pConfig) {
  static const ApiInfo kInfo("cudaDeviceGetSharedMemConfig");
  ApiCall api(kInfo);
  if (pConfig == nullptr) return api.Return(cudaErrorInvalidValue);
  *pConfig = cudaSharedMemBankSizeFourByte;
  return api.Return(cudaSuccess);
}

cudaError_t cudaDeviceSetSharedMemConfig(enum cudaSharedMemConfig config) {
  static const ApiInfo kInfo("cudaDeviceSetSharedMemConfig");
  ApiCall api(kInfo);
  if (int(config) < 0 || int(config) > 2) return api.Return(cudaErrorInvalidValue);
  return api.Return(cudaSuccess);
}

cudaError_t cudaFuncSetSharedMemConfig(const void* func, enum cudaSharedMemConfig config) {
  static const ApiInfo kInfo("cudaFuncSetSharedMemConfig");
  ApiCall api(kInfo);
  if (gpusim::FindKernel(func) == nullptr) return api.Return(cudaErrorInvalidDeviceFunction);
  if (int(config) < 0 || int(config) > 2) return api.Return(cudaErrorInvalidValue);
  return api.Return(cudaSuccess);
}

cudaError_t cudaMemRangeGetAttribute(void* data, size_t dataSize,
                                     enum cudaMemRangeAttribute attribute, const void* devPtr,
                                     size_t count) {
  static const ApiInfo kInfo("cudaMemRangeGetAttribute");
  cudaMemRangeGetAttribute_v8000_params params{data, dataSize, attribute, devPtr, count};
  ApiCall api(kInfo, &params);
  return api.Return(MemRangeAttributeImpl(data, dataSize, attribute, devPtr, count));
}

cudaError_t cudaMemRangeGetAttributes(void** data, size_t* dataSizes,
                                      enum cudaMemRangeAttribute* attributes, size_t numAttributes,
                                      const void* devPtr, size_t count) {
  static const ApiInfo kInfo("cudaMemRangeGetAttributes");
  cudaMemRangeGetAttributes_v8000_params params{data,          dataSizes, attributes,
                                                numAttributes, devPtr,    count};
  ApiCall api(kInfo, &params);
  if (data == nullptr || dataSizes == nullptr || attributes == nullptr || numAttributes == 0) {
    return api.Return(cudaErrorInvalidValue);
  }
  for (size_t i = 0; i < numAttributes; ++i) {
    cudaError_t err = MemRangeAttributeImpl(data[i], dataSizes[i], attributes[i], devPtr, count);
    if (err != cudaSuccess) return api.Return(err);
  }
  return api.Return(cudaSuccess);
}

cudaError_t cudaChooseDevice(int* device, const struct cudaDeviceProp* prop) {
  static const ApiInfo kInfo("cudaChooseDevice");
  cudaChooseDevice_v3020_params params{device, prop};
  ApiCall api(kInfo, &params);
  if (device == nullptr || prop == nullptr) return api.Return(cudaErrorInvalidValue);
  *device = 0;
  return api.Return(cudaSuccess);
}

cudaError_t cudaGetDriverEntryPoint(const char* symbol, void** funcPtr, unsigned long long flags,
                                    cudaDriverEntryPointQueryResult* driverStatus) {
  static const ApiInfo kInfo("cudaGetDriverEntryPoint");
  cudaGetDriverEntryPoint_v11030_params params{symbol, funcPtr, flags, driverStatus};
  return DriverEntryPointImpl(kInfo, &params, symbol, funcPtr, 0, flags, driverStatus, false);
}

cudaError_t cudaGetDriverEntryPoint_ptsz(const char* symbol, void** funcPtr,
                                         unsigned long long flags,
                                         cudaDriverEntryPointQueryResult* driverStatus) {
  static const ApiInfo kInfo("cudaGetDriverEntryPoint_ptsz");
  cudaGetDriverEntryPoint_v11030_params params{symbol, funcPtr, flags, driverStatus};
  return DriverEntryPointImpl(kInfo, &params, symbol, funcPtr, 0, flags, driverStatus, true);
}

cudaError_t cudaGetDriverEntryPointByVersion(const char* symbol, void** funcPtr,
                                             unsigned int cudaVersion, unsigned long long flags,
                                             cudaDriverEntryPointQueryResult* driverStatus) {
  static const ApiInfo kInfo("cudaGetDriverEntryPointByVersion");
  cudaGetDriverEntryPointByVersion_v12050_params params{symbol, funcPtr, cudaVersion, flags,
                                                        driverStatus};
  return DriverEntryPointImpl(kInfo, &params, symbol, funcPtr, cudaVersion, flags, driverStatus,
                              false);
}

cudaError_t cudaGetDriverEntryPointByVersion_ptsz(const char* symbol, void** funcPtr,
                                                  unsigned int cudaVersion,
                                                  unsigned long long flags,
                                                  cudaDriverEntryPointQueryResult* driverStatus) {
  static const ApiInfo kInfo("cudaGetDriverEntryPointByVersion_ptsz");
  cudaGetDriverEntryPointByVersion_v12050_params params{symbol, funcPtr, cudaVersion, flags,
                                                        driverStatus};
  return DriverEntryPointImpl(kInfo, &params, symbol, funcPtr, cudaVersion, flags, driverStatus,
                              true);
}

}  // extern "C"
