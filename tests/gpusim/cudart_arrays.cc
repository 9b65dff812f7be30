// CUDA runtime entry points of gpusim's libcudart.so.13 for CUDA arrays: cudaMallocArray,
// cudaMalloc3DArray, cudaMallocMipmappedArray, cudaGetMipmappedArrayLevel, cudaFreeArray,
// cudaFreeMipmappedArray, cudaArrayGetInfo, cudaGetChannelDesc. Copies to, from and between
// arrays are in cudart_memory.cc (they share the copy path through InitCopyOpFromParms).
//
// An array (sim_device.h, CudaArray) is host memory of width x height x depth elements of the
// channel format's size, packed row-major, counted as device memory of the device current at
// allocation (cudaMemGetInfo sees it; beyond the device's 80 GB: cudaErrorMemoryAllocation).
// The handle is the address of a registry entry; a freed or unknown handle is refused.
//
// Validation follows the runtime's documentation: NULL output or descriptor, a zero width, a
// height of 0 with a depth (unless layered), flags the function does not take, cubemaps that are
// not square with 6 faces (a multiple of 6 when layered), texture gather on a non-2D array, an
// extent beyond the device's texture (surface, with cudaArraySurfaceLoadStore) limits:
// cudaErrorInvalidValue. A channel format the hardware has no array format for (channels of
// different sizes, 3 channels, a size other than 8/16/32 bits, 8-bit floats, kind None):
// cudaErrorInvalidChannelDescriptor. Not simulated (cudaErrorNotSupported with a one-time
// message): sparse and deferred-mapping arrays (cuMemMapArrayAsync would back them), NV12 and
// block-compressed formats.
#include <cuda_runtime_api.h>
#include <generated_cuda_runtime_api_meta.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "tests/gpusim/cudart_unsupported.h"
#include "tests/gpusim/sim_device.h"

using gpusim::ApiCall;
using gpusim::ApiInfo;
using gpusim::CudaArray;

namespace {

struct Mipmap;

// A cudaArray_t.
struct ArrayEntry {
  CudaArray a;
  cudaChannelFormatDesc desc;
  cudaExtent extent;  // as allocated: height 0 for 1D, depth 0 for 2D (cudaArrayGetInfo)
  unsigned flags;
  Mipmap* owner;  // the mipmapped array this is a level of; nullptr for cudaMalloc*Array's
};

// A cudaMipmappedArray_t: its levels are arrays of their own (cudaGetMipmappedArrayLevel).
struct Mipmap {
  std::vector<ArrayEntry*> levels;
  int device;
  size_t bytes;  // all levels
};

struct Registry {
  std::mutex mu;
  std::unordered_set<const ArrayEntry*> arrays;  // live arrays, mipmap levels included
  std::unordered_set<const Mipmap*> mipmaps;
};
Registry& R() {
  static Registry* r = new Registry();
  return *r;
}

ArrayEntry* AsEntry(const void* handle) {
  return const_cast<ArrayEntry*>(static_cast<const ArrayEntry*>(handle));
}

// ---- Limits of the simulated device (sm_90, as the CUDA C Programming Guide lists them) ------

constexpr size_t kTex1D = 131072, kTex2DW = 131072, kTex2DH = 65536, kTex3D = 16384;
constexpr size_t kTex3DAltW = 8192, kTex3DAltD = 32768;
constexpr size_t kTex2DGather = 32768, kTexLayered = 32768, kLayers = 2048;
constexpr size_t kCubemap = 32768, kCubemapLayers = 2046, kTex1DMipmap = 32768;
constexpr size_t kTex2DMipmap = 32768, kSurf1D = 32768;

// The bytes of one element of `d` (x + y + z + w bits / 8), after checking that it is a format
// CUDA arrays have: 1, 2 or 4 channels of one size. cudaErrorNotSupported for the formats
// gpusim does not simulate (reported once by the caller).
cudaError_t ElementSize(const cudaChannelFormatDesc& d, size_t* out) {
  const int bits[4] = {d.x, d.y, d.z, d.w};
  int channels = 0;
  for (int i = 0; i < 4; ++i) {
    if (bits[i] < 0) return cudaErrorInvalidChannelDescriptor;
    if (bits[i] == 0) break;
    ++channels;
  }
  for (int i = channels; i < 4; ++i) {
    if (bits[i] != 0) return cudaErrorInvalidChannelDescriptor;  // a gap between channels
  }
  if (d.f == cudaChannelFormatKindUnsignedNormalized1010102) {
    if (d.x != 10 || d.y != 10 || d.z != 10 || d.w != 2) return cudaErrorInvalidChannelDescriptor;
    *out = 4;
    return cudaSuccess;
  }
  if (channels == 0 || channels == 3) return cudaErrorInvalidChannelDescriptor;
  for (int i = 1; i < channels; ++i) {
    if (bits[i] != d.x) return cudaErrorInvalidChannelDescriptor;
  }
  switch (d.f) {
    case cudaChannelFormatKindSigned:
    case cudaChannelFormatKindUnsigned:
      if (d.x != 8 && d.x != 16 && d.x != 32) return cudaErrorInvalidChannelDescriptor;
      break;
    case cudaChannelFormatKindFloat:
      if (d.x != 16 && d.x != 32) return cudaErrorInvalidChannelDescriptor;
      break;
    case cudaChannelFormatKindUnsignedNormalized8X1:
    case cudaChannelFormatKindUnsignedNormalized8X2:
    case cudaChannelFormatKindUnsignedNormalized8X4:
    case cudaChannelFormatKindUnsignedNormalized16X1:
    case cudaChannelFormatKindUnsignedNormalized16X2:
    case cudaChannelFormatKindUnsignedNormalized16X4:
    case cudaChannelFormatKindSignedNormalized8X1:
    case cudaChannelFormatKindSignedNormalized8X2:
    case cudaChannelFormatKindSignedNormalized8X4:
    case cudaChannelFormatKindSignedNormalized16X1:
    case cudaChannelFormatKindSignedNormalized16X2:
    case cudaChannelFormatKindSignedNormalized16X4: {
      // The kind names the layout: (kind - first) % 3 -> 1, 2, 4 channels; 8 or 16 bits.
      int k = d.f >= cudaChannelFormatKindSignedNormalized8X1
                  ? d.f - cudaChannelFormatKindSignedNormalized8X1
                  : d.f - cudaChannelFormatKindUnsignedNormalized8X1;
      const int want_bits = k < 3 ? 8 : 16;
      const int want_channels = k % 3 == 0 ? 1 : (k % 3 == 1 ? 2 : 4);
      if (d.x != want_bits || channels != want_channels) {
        return cudaErrorInvalidChannelDescriptor;
      }
      break;
    }
    case cudaChannelFormatKindNone:
      return cudaErrorInvalidChannelDescriptor;
    default:
      return cudaErrorNotSupported;  // NV12, block-compressed formats
  }
  *out = static_cast<size_t>(d.x / 8) * channels;
  return cudaSuccess;
}

// The extent and flags of an array as CUDA documents them (cudaMalloc3DArray's table; all
// values in elements). `mipmapped`: cudaMallocMipmappedArray's 1D and 2D limits.
cudaError_t CheckShape(const cudaExtent& e, unsigned flags, bool mipmapped) {
  const size_t w = e.width, h = e.height, d = e.depth;
  if (w == 0) return cudaErrorInvalidValue;
  const bool layered = (flags & cudaArrayLayered) != 0;
  const bool cubemap = (flags & cudaArrayCubemap) != 0;
  const bool surface = (flags & cudaArraySurfaceLoadStore) != 0;
  if ((flags & cudaArrayTextureGather) != 0 && (h == 0 || d != 0 || layered || cubemap)) {
    return cudaErrorInvalidValue;  // texture gather: 2D arrays only
  }
  if (cubemap) {
    if (w != h || d == 0 || (layered ? d % 6 != 0 : d != 6)) return cudaErrorInvalidValue;
    return w <= kCubemap && (!layered || d / 6 <= kCubemapLayers) ? cudaSuccess
                                                                  : cudaErrorInvalidValue;
  }
  if (layered) {
    if (d == 0 || d > kLayers || w > kTexLayered || h > kTexLayered) return cudaErrorInvalidValue;
    return cudaSuccess;  // 1D layered (h == 0) or 2D layered
  }
  if (h == 0) {
    if (d != 0) return cudaErrorInvalidValue;  // a depth needs a height (or layers)
    return w <= (surface ? kSurf1D : (mipmapped ? kTex1DMipmap : kTex1D)) ? cudaSuccess
                                                                          : cudaErrorInvalidValue;
  }
  if (d == 0) {
    if ((flags & cudaArrayTextureGather) != 0) {
      return w <= kTex2DGather && h <= kTex2DGather ? cudaSuccess : cudaErrorInvalidValue;
    }
    if (mipmapped && !surface) {
      return w <= kTex2DMipmap && h <= kTex2DMipmap ? cudaSuccess : cudaErrorInvalidValue;
    }
    return w <= kTex2DW && h <= kTex2DH ? cudaSuccess : cudaErrorInvalidValue;
  }
  const bool fits = (w <= kTex3D && h <= kTex3D && d <= kTex3D) ||
                    (!surface && w <= kTex3DAltW && h <= kTex3DAltW && d <= kTex3DAltD);
  return fits ? cudaSuccess : cudaErrorInvalidValue;
}

// Flags a function accepts besides the ones gpusim does not simulate.
constexpr unsigned kMallocArrayFlags = cudaArraySurfaceLoadStore | cudaArrayTextureGather;
constexpr unsigned k3DArrayFlags =
    cudaArrayLayered | cudaArraySurfaceLoadStore | cudaArrayCubemap | cudaArrayTextureGather;
constexpr unsigned kUnbacked = cudaArraySparse | cudaArrayDeferredMapping;

// Reports a request gpusim does not simulate once per kind of request.
cudaError_t Unsupported(const char* what) {
  static gpusim::UnsupportedOnce unbacked, format;
  return static_cast<cudaError_t>(
      gpusim::ReportUnsupported(what, strstr(what, "format") != nullptr ? &format : &unbacked));
}

// Zero-filled host memory for `bytes` (at least one byte), 256-byte aligned like cudaMalloc's.
char* ArrayMemory(size_t bytes) {
  size_t rounded = (std::max<size_t>(bytes, 1) + 255) / 256 * 256;
  void* p = aligned_alloc(256, rounded);
  if (p != nullptr) memset(p, 0, rounded);
  return static_cast<char*>(p);
}

ArrayEntry* NewEntry(const cudaChannelFormatDesc& desc, size_t element, const cudaExtent& e,
                     unsigned flags, int device, Mipmap* owner) {
  ArrayEntry* entry = new ArrayEntry();
  entry->desc = desc;
  entry->extent = e;
  entry->flags = flags;
  entry->owner = owner;
  entry->a.element_size = element;
  entry->a.width = e.width;
  entry->a.height = std::max<size_t>(e.height, 1);
  entry->a.depth = std::max<size_t>(e.depth, 1);
  entry->a.device = device;
  entry->a.data = ArrayMemory(entry->a.bytes());
  if (entry->a.data == nullptr) {
    delete entry;
    return nullptr;
  }
  return entry;
}

void FreeEntry(ArrayEntry* entry) {
  free(entry->a.data);
  delete entry;
}

// Whether `bytes` more fit in the device's memory.
bool Fits(int device, size_t bytes) {
  return bytes <= gpusim::kDeviceMemoryBytes - gpusim::DeviceBytesInUse(device);
}

// cudaMallocArray and cudaMalloc3DArray: validates, allocates, registers.
cudaError_t AllocArray(cudaArray_t* array, const cudaChannelFormatDesc* desc, cudaExtent e,
                       unsigned flags, unsigned accepted) {
  if (array == nullptr || desc == nullptr) return cudaErrorInvalidValue;
  if ((flags & ~(accepted | kUnbacked)) != 0) return cudaErrorInvalidValue;
  cudaError_t err = CheckShape(e, flags, false);
  if (err != cudaSuccess) return err;
  size_t element = 0;
  err = ElementSize(*desc, &element);
  if (err == cudaErrorNotSupported) return Unsupported("an array of an NV12 or compressed format");
  if (err != cudaSuccess) return err;
  if ((flags & kUnbacked) != 0) return Unsupported("a sparse or deferred-mapping CUDA array");
  const int device = gpusim::CurrentDevice();
  const size_t bytes =
      element * e.width * std::max<size_t>(e.height, 1) * std::max<size_t>(e.depth, 1);
  if (!Fits(device, bytes)) return cudaErrorMemoryAllocation;
  ArrayEntry* entry = NewEntry(*desc, element, e, flags, device, nullptr);
  if (entry == nullptr) return cudaErrorMemoryAllocation;
  gpusim::AddDeviceBytes(device, static_cast<int64_t>(bytes));
  {
    std::lock_guard<std::mutex> lock(R().mu);
    R().arrays.insert(entry);
  }
  *array = reinterpret_cast<cudaArray_t>(entry);
  return cudaSuccess;
}

// The number of levels of a full mip chain: 1 + floor(log2(max(width, height, depth))).
unsigned MaxLevels(const cudaExtent& e, bool layers) {
  size_t m = std::max(e.width, layers ? e.height : std::max(e.height, e.depth));
  unsigned n = 1;
  while (m > 1) {
    m >>= 1;
    ++n;
  }
  return n;
}

// Level `l` of a mipmapped array: each dimension halved per level down to 1; 0 stays 0, and
// the layers (depth of a layered or cubemap array) stay.
cudaExtent LevelExtent(const cudaExtent& e, unsigned l, bool layers) {
  auto halve = [l](size_t v) { return v == 0 ? 0 : std::max<size_t>(v >> l, 1); };
  return cudaExtent{halve(e.width), halve(e.height), layers ? e.depth : halve(e.depth)};
}

}  // namespace

namespace gpusim {

bool FindArray(const void* handle, CudaArray* out) {
  if (handle == nullptr) return false;
  std::lock_guard<std::mutex> lock(R().mu);
  if (R().arrays.count(static_cast<const ArrayEntry*>(handle)) == 0) return false;
  *out = static_cast<const ArrayEntry*>(handle)->a;
  return true;
}

void ResetArrays(int device) {
  std::vector<ArrayEntry*> arrays;
  std::vector<Mipmap*> mipmaps;
  {
    std::lock_guard<std::mutex> lock(R().mu);
    for (auto it = R().mipmaps.begin(); it != R().mipmaps.end();) {
      Mipmap* m = const_cast<Mipmap*>(*it);
      if (m->device != device) {
        ++it;
        continue;
      }
      for (ArrayEntry* level : m->levels) R().arrays.erase(level);
      mipmaps.push_back(m);
      it = R().mipmaps.erase(it);
    }
    for (auto it = R().arrays.begin(); it != R().arrays.end();) {
      ArrayEntry* a = AsEntry(*it);
      if (a->a.device != device) {
        ++it;
        continue;
      }
      arrays.push_back(a);
      it = R().arrays.erase(it);
    }
  }
  for (ArrayEntry* a : arrays) {
    AddDeviceBytes(device, -static_cast<int64_t>(a->a.bytes()));
    FreeEntry(a);
  }
  for (Mipmap* m : mipmaps) {
    AddDeviceBytes(device, -static_cast<int64_t>(m->bytes));
    for (ArrayEntry* level : m->levels) FreeEntry(level);
    delete m;
  }
}

}  // namespace gpusim

extern "C" {

cudaError_t cudaMallocArray(cudaArray_t* array, const struct cudaChannelFormatDesc* desc,
                            size_t width, size_t height, unsigned int flags) {
  static const ApiInfo kInfo("cudaMallocArray");
  cudaMallocArray_v3020_params params{array, desc, width, height, flags};
  ApiCall api(kInfo, &params);
  return api.Return(
      AllocArray(array, desc, cudaExtent{width, height, 0}, flags, kMallocArrayFlags));
}

cudaError_t cudaMalloc3DArray(cudaArray_t* array, const struct cudaChannelFormatDesc* desc,
                              struct cudaExtent extent, unsigned int flags) {
  static const ApiInfo kInfo("cudaMalloc3DArray");
  cudaMalloc3DArray_v3020_params params{array, desc, extent, flags};
  ApiCall api(kInfo, &params);
  return api.Return(AllocArray(array, desc, extent, flags, k3DArrayFlags));
}

// Levels are allocated separately; their bytes (the sum) count as one allocation.
cudaError_t cudaMallocMipmappedArray(cudaMipmappedArray_t* mipmapped,
                                     const struct cudaChannelFormatDesc* desc,
                                     struct cudaExtent extent, unsigned int num_levels,
                                     unsigned int flags) {
  static const ApiInfo kInfo("cudaMallocMipmappedArray");
  cudaMallocMipmappedArray_v5000_params params{mipmapped, desc, extent, num_levels, flags};
  ApiCall api(kInfo, &params);
  if (mipmapped == nullptr || desc == nullptr) return api.Return(cudaErrorInvalidValue);
  if ((flags & ~(k3DArrayFlags | kUnbacked)) != 0) return api.Return(cudaErrorInvalidValue);
  cudaError_t err = CheckShape(extent, flags, true);
  if (err != cudaSuccess) return api.Return(err);
  size_t element = 0;
  err = ElementSize(*desc, &element);
  if (err == cudaErrorNotSupported) {
    return api.Return(Unsupported("an array of an NV12 or compressed format"));
  }
  if (err != cudaSuccess) return api.Return(err);
  if ((flags & kUnbacked) != 0) {
    return api.Return(Unsupported("a sparse or deferred-mapping CUDA array"));
  }
  const bool layers = (flags & (cudaArrayLayered | cudaArrayCubemap)) != 0;
  const unsigned levels = std::min(std::max(num_levels, 1u), MaxLevels(extent, layers));
  const int device = gpusim::CurrentDevice();
  size_t bytes = 0;
  for (unsigned l = 0; l < levels; ++l) {
    cudaExtent le = LevelExtent(extent, l, layers);
    bytes += element * le.width * std::max<size_t>(le.height, 1) * std::max<size_t>(le.depth, 1);
  }
  if (!Fits(device, bytes)) return api.Return(cudaErrorMemoryAllocation);
  Mipmap* m = new Mipmap();
  m->device = device;
  m->bytes = bytes;
  for (unsigned l = 0; l < levels; ++l) {
    ArrayEntry* level = NewEntry(*desc, element, LevelExtent(extent, l, layers), flags, device, m);
    if (level == nullptr) {
      for (ArrayEntry* a : m->levels) FreeEntry(a);
      delete m;
      return api.Return(cudaErrorMemoryAllocation);
    }
    m->levels.push_back(level);
  }
  gpusim::AddDeviceBytes(device, static_cast<int64_t>(bytes));
  {
    std::lock_guard<std::mutex> lock(R().mu);
    R().mipmaps.insert(m);
    for (ArrayEntry* level : m->levels) R().arrays.insert(level);
  }
  *mipmapped = reinterpret_cast<cudaMipmappedArray_t>(m);
  return api.Return(cudaSuccess);
}

cudaError_t cudaGetMipmappedArrayLevel(cudaArray_t* level_array,
                                       cudaMipmappedArray_const_t mipmapped, unsigned int level) {
  static const ApiInfo kInfo("cudaGetMipmappedArrayLevel");
  cudaGetMipmappedArrayLevel_v5000_params params{level_array, mipmapped, level};
  ApiCall api(kInfo, &params);
  const Mipmap* m = reinterpret_cast<const Mipmap*>(mipmapped);
  cudaError_t err = cudaSuccess;
  {
    std::lock_guard<std::mutex> lock(R().mu);  // released before the exit callback
    if (m == nullptr || R().mipmaps.count(m) == 0) {
      err = cudaErrorInvalidResourceHandle;
    } else if (level_array == nullptr || level >= m->levels.size()) {
      err = cudaErrorInvalidValue;
    } else {
      *level_array = reinterpret_cast<cudaArray_t>(m->levels[level]);
    }
  }
  return api.Return(err);
}

// Like cudaFree, synchronizes the array's device first (no copy is still using the memory).
cudaError_t cudaFreeArray(cudaArray_t array) {
  static const ApiInfo kInfo("cudaFreeArray");
  cudaFreeArray_v3020_params params{array};
  ApiCall api(kInfo, &params);
  if (array == nullptr) return api.Return(cudaSuccess);
  ArrayEntry* entry = AsEntry(array);
  int device = -1;
  {
    std::lock_guard<std::mutex> lock(R().mu);
    // A level of a mipmapped array goes with its cudaFreeMipmappedArray only.
    if (R().arrays.count(entry) != 0 && entry->owner == nullptr) device = entry->a.device;
  }
  if (device < 0) return api.Return(cudaErrorInvalidValue);
  gpusim::SynchronizeDevice(device);
  bool erased = false;
  {
    std::lock_guard<std::mutex> lock(R().mu);
    erased = R().arrays.erase(entry) != 0;  // false: another thread freed it meanwhile
  }
  if (!erased) return api.Return(cudaErrorInvalidValue);
  gpusim::AddDeviceBytes(device, -static_cast<int64_t>(entry->a.bytes()));
  FreeEntry(entry);
  return api.Return(cudaSuccess);
}

cudaError_t cudaFreeMipmappedArray(cudaMipmappedArray_t mipmapped) {
  static const ApiInfo kInfo("cudaFreeMipmappedArray");
  cudaFreeMipmappedArray_v5000_params params{mipmapped};
  ApiCall api(kInfo, &params);
  if (mipmapped == nullptr) return api.Return(cudaSuccess);
  Mipmap* m = reinterpret_cast<Mipmap*>(mipmapped);
  int device = -1;
  {
    std::lock_guard<std::mutex> lock(R().mu);
    if (R().mipmaps.count(m) != 0) device = m->device;
  }
  if (device < 0) return api.Return(cudaErrorInvalidValue);
  gpusim::SynchronizeDevice(device);
  bool erased = false;
  {
    std::lock_guard<std::mutex> lock(R().mu);
    erased = R().mipmaps.erase(m) != 0;
    if (erased) {
      for (ArrayEntry* level : m->levels) R().arrays.erase(level);
    }
  }
  if (!erased) return api.Return(cudaErrorInvalidValue);
  gpusim::AddDeviceBytes(device, -static_cast<int64_t>(m->bytes));
  for (ArrayEntry* level : m->levels) FreeEntry(level);
  delete m;
  return api.Return(cudaSuccess);
}

// The format, extent (as allocated: height 0 for a 1D array, depth 0 for a 2D one; a level's
// own extent) and flags of an array; any output may be NULL.
cudaError_t cudaArrayGetInfo(struct cudaChannelFormatDesc* desc, struct cudaExtent* extent,
                             unsigned int* flags, cudaArray_t array) {
  static const ApiInfo kInfo("cudaArrayGetInfo");
  cudaArrayGetInfo_v4010_params params{desc, extent, flags, array};
  ApiCall api(kInfo, &params);
  bool found = false;
  {
    std::lock_guard<std::mutex> lock(R().mu);  // released before the exit callback
    const ArrayEntry* entry = AsEntry(array);
    found = array != nullptr && R().arrays.count(entry) != 0;
    if (found) {
      if (desc != nullptr) *desc = entry->desc;
      if (extent != nullptr) *extent = entry->extent;
      if (flags != nullptr) *flags = entry->flags;
    }
  }
  return api.Return(found ? cudaSuccess : cudaErrorInvalidValue);
}

cudaError_t cudaGetChannelDesc(struct cudaChannelFormatDesc* desc, cudaArray_const_t array) {
  static const ApiInfo kInfo("cudaGetChannelDesc");
  cudaGetChannelDesc_v3020_params params{desc, array};
  ApiCall api(kInfo, &params);
  bool found = false;
  {
    std::lock_guard<std::mutex> lock(R().mu);
    const ArrayEntry* entry = AsEntry(array);
    found = desc != nullptr && array != nullptr && R().arrays.count(entry) != 0;
    if (found) *desc = entry->desc;
  }
  return api.Return(found ? cudaSuccess : cudaErrorInvalidValue);
}

}  // extern "C"

// ---- Texture and surface objects ------------------------------------------------------------
// Kernels do not run, so an object is its descriptors, kept for the Get*Desc queries. Handles
// are 1, 2, ... (0 is never a valid object); a destroyed or unknown handle is
// cudaErrorInvalidValue. The resource is checked as the runtime documents: a live array
// (surfaces: one allocated with cudaArraySurfaceLoadStore) or mipmapped array, a non-NULL
// linear or pitched pointer with a channel format, a pitch of at least a row.

namespace {

cudaError_t CheckResource(const cudaResourceDesc* res, bool surface) {
  if (res == nullptr) return cudaErrorInvalidValue;
  std::lock_guard<std::mutex> lock(R().mu);
  switch (res->resType) {
    case cudaResourceTypeArray: {
      const ArrayEntry* e = AsEntry(res->res.array.array);
      if (res->res.array.array == nullptr || R().arrays.count(e) == 0) {
        return cudaErrorInvalidValue;
      }
      if (surface && (e->flags & cudaArraySurfaceLoadStore) == 0) return cudaErrorInvalidValue;
      return cudaSuccess;
    }
    case cudaResourceTypeMipmappedArray:
      if (surface || res->res.mipmap.mipmap == nullptr ||
          R().mipmaps.count(reinterpret_cast<const Mipmap*>(res->res.mipmap.mipmap)) == 0) {
        return cudaErrorInvalidValue;
      }
      return cudaSuccess;
    case cudaResourceTypeLinear:
      if (surface || res->res.linear.devPtr == nullptr || res->res.linear.sizeInBytes == 0) {
        return cudaErrorInvalidValue;
      }
      return cudaSuccess;
    case cudaResourceTypePitch2D: {
      if (surface || res->res.pitch2D.devPtr == nullptr || res->res.pitch2D.width == 0 ||
          res->res.pitch2D.height == 0) {
        return cudaErrorInvalidValue;
      }
      const cudaChannelFormatDesc& d = res->res.pitch2D.desc;
      const size_t element = size_t(d.x + d.y + d.z + d.w) / 8;
      if (res->res.pitch2D.pitchInBytes < res->res.pitch2D.width * element) {
        return cudaErrorInvalidValue;
      }
      return cudaSuccess;
    }
  }
  return cudaErrorInvalidValue;
}

struct TexObject {
  cudaResourceDesc res;
  cudaTextureDesc tex;
  cudaResourceViewDesc view;
  bool surface;
};
struct TexRegistry {
  std::mutex mu;
  std::unordered_map<unsigned long long, TexObject> objects;
  unsigned long long next = 1;
};
TexRegistry& Tex() {
  static TexRegistry* r = new TexRegistry();
  return *r;
}

unsigned long long NewTexObject(const TexObject& o) {
  std::lock_guard<std::mutex> lock(Tex().mu);
  const unsigned long long h = Tex().next++;
  Tex().objects.emplace(h, o);
  return h;
}

// Copies out the object's descriptors; false if `h` is not a live object of that kind.
bool FindTexObject(unsigned long long h, bool surface, TexObject* out) {
  std::lock_guard<std::mutex> lock(Tex().mu);
  auto it = Tex().objects.find(h);
  if (it == Tex().objects.end() || it->second.surface != surface) return false;
  *out = it->second;
  return true;
}

bool DestroyTexObject(unsigned long long h, bool surface) {
  std::lock_guard<std::mutex> lock(Tex().mu);
  auto it = Tex().objects.find(h);
  if (it == Tex().objects.end() || it->second.surface != surface) return false;
  Tex().objects.erase(it);
  return true;
}

}  // namespace

extern "C" {

cudaError_t cudaCreateTextureObject(cudaTextureObject_t* pTexObject,
                                    const struct cudaResourceDesc* pResDesc,
                                    const struct cudaTextureDesc* pTexDesc,
                                    const struct cudaResourceViewDesc* pResViewDesc) {
  static const ApiInfo kInfo("cudaCreateTextureObject");
  cudaCreateTextureObject_v5000_params params{pTexObject, pResDesc, pTexDesc, pResViewDesc};
  ApiCall api(kInfo, &params);
  if (pTexObject == nullptr || pTexDesc == nullptr) return api.Return(cudaErrorInvalidValue);
  if (cudaError_t err = CheckResource(pResDesc, false); err != cudaSuccess) {
    return api.Return(err);
  }
  // A resource view is for arrays only.
  if (pResViewDesc != nullptr && pResDesc->resType != cudaResourceTypeArray &&
      pResDesc->resType != cudaResourceTypeMipmappedArray) {
    return api.Return(cudaErrorInvalidValue);
  }
  TexObject o{*pResDesc, *pTexDesc, cudaResourceViewDesc(), false};
  if (pResViewDesc != nullptr) o.view = *pResViewDesc;
  *pTexObject = NewTexObject(o);
  return api.Return(cudaSuccess);
}

cudaError_t cudaDestroyTextureObject(cudaTextureObject_t texObject) {
  static const ApiInfo kInfo("cudaDestroyTextureObject");
  cudaDestroyTextureObject_v5000_params params{texObject};
  ApiCall api(kInfo, &params);
  return api.Return(DestroyTexObject(texObject, false) ? cudaSuccess : cudaErrorInvalidValue);
}

cudaError_t cudaGetTextureObjectResourceDesc(struct cudaResourceDesc* pResDesc,
                                             cudaTextureObject_t texObject) {
  static const ApiInfo kInfo("cudaGetTextureObjectResourceDesc");
  cudaGetTextureObjectResourceDesc_v5000_params params{pResDesc, texObject};
  ApiCall api(kInfo, &params);
  TexObject o;
  if (pResDesc == nullptr || !FindTexObject(texObject, false, &o)) {
    return api.Return(cudaErrorInvalidValue);
  }
  *pResDesc = o.res;
  return api.Return(cudaSuccess);
}

cudaError_t cudaGetTextureObjectTextureDesc(struct cudaTextureDesc* pTexDesc,
                                            cudaTextureObject_t texObject) {
  static const ApiInfo kInfo("cudaGetTextureObjectTextureDesc");
  ApiCall api(kInfo);
  TexObject o;
  if (pTexDesc == nullptr || !FindTexObject(texObject, false, &o)) {
    return api.Return(cudaErrorInvalidValue);
  }
  *pTexDesc = o.tex;
  return api.Return(cudaSuccess);
}

cudaError_t cudaGetTextureObjectResourceViewDesc(struct cudaResourceViewDesc* pResViewDesc,
                                                 cudaTextureObject_t texObject) {
  static const ApiInfo kInfo("cudaGetTextureObjectResourceViewDesc");
  cudaGetTextureObjectResourceViewDesc_v5000_params params{pResViewDesc, texObject};
  ApiCall api(kInfo, &params);
  TexObject o;
  if (pResViewDesc == nullptr || !FindTexObject(texObject, false, &o)) {
    return api.Return(cudaErrorInvalidValue);
  }
  *pResViewDesc = o.view;
  return api.Return(cudaSuccess);
}

cudaError_t cudaCreateSurfaceObject(cudaSurfaceObject_t* pSurfObject,
                                    const struct cudaResourceDesc* pResDesc) {
  static const ApiInfo kInfo("cudaCreateSurfaceObject");
  cudaCreateSurfaceObject_v5000_params params{pSurfObject, pResDesc};
  ApiCall api(kInfo, &params);
  if (pSurfObject == nullptr) return api.Return(cudaErrorInvalidValue);
  if (cudaError_t err = CheckResource(pResDesc, true); err != cudaSuccess) {
    return api.Return(err);
  }
  *pSurfObject =
      NewTexObject(TexObject{*pResDesc, cudaTextureDesc(), cudaResourceViewDesc(), true});
  return api.Return(cudaSuccess);
}

cudaError_t cudaDestroySurfaceObject(cudaSurfaceObject_t surfObject) {
  static const ApiInfo kInfo("cudaDestroySurfaceObject");
  cudaDestroySurfaceObject_v5000_params params{surfObject};
  ApiCall api(kInfo, &params);
  return api.Return(DestroyTexObject(surfObject, true) ? cudaSuccess : cudaErrorInvalidValue);
}

cudaError_t cudaGetSurfaceObjectResourceDesc(struct cudaResourceDesc* pResDesc,
                                             cudaSurfaceObject_t surfObject) {
  static const ApiInfo kInfo("cudaGetSurfaceObjectResourceDesc");
  cudaGetSurfaceObjectResourceDesc_v5000_params params{pResDesc, surfObject};
  ApiCall api(kInfo, &params);
  TexObject o;
  if (pResDesc == nullptr || !FindTexObject(surfObject, true, &o)) {
    return api.Return(cudaErrorInvalidValue);
  }
  *pResDesc = o.res;
  return api.Return(cudaSuccess);
}

}  // extern "C"
