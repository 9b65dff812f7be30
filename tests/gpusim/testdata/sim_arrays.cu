// CUDA arrays and batch copies against gpusim's libcudart.so.13, allocated and filled the way
// texture code (cuda-samples' simpleTexture / simpleTexture3D / simpleLayeredTexture) does and
// batched the way CUDA 12.8's transfers are, checked against CUDA's documented behaviour:
// - arrays (1D, 2D, 3D, layered, mipmapped): allocation, cudaArrayGetInfo / cudaGetChannelDesc,
//   the bytes cudaMemGetInfo counts (elements x element size), validation, free, reset;
// - every copy to, from and between arrays (2D, 1D deprecated, 3D, sync / async, kinds given and
//   cudaMemcpyDefault), with every value read back;
// - captured array copies and a hand-built memcpy node with an array, launched twice;
// - cudaMemcpyBatchAsync and cudaMemcpy3DBatchAsync with their argument checks.
// An observer (gpusim_internal.h) checks each call's CUPTI cbid and parameter struct and that
// every op carries its call's correlation id. For each copy it prints
//   copy <label> <corr> <truth kind> <bytes>
// (one truth line expected with that correlation id), for a batch
//   batch <label> <corr> <copies> then  batch_copy <label> <corr> <truth kind> <bytes>  per copy,
// plus "ok <check>" / "FAIL <check>", "<key> <value>" lines and "failures N" (the exit code).
// Also built with --default-stream per-thread (the _ptds / _ptsz entry points).
#include <cuda_runtime.h>
#include <cupti_runtime_cbid.h>
#include <dlfcn.h>
#include <generated_cuda_runtime_api_meta.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "tests/gpusim/gpusim_internal.h"

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"  // cudaMemcpyToArray & co.

#if defined(__CUDART_API_PER_THREAD_DEFAULT_STREAM)
#define PT 1
#define ENTRY(name, version, suffix, pt_version) \
  { #name "_" #suffix, CUPTI_RUNTIME_TRACE_CBID_##name##_##suffix##_##pt_version }
#define CALL_NAME(name, suffix) #name "_" #suffix
#else
#define PT 0
#define ENTRY(name, version, suffix, pt_version) \
  { #name, CUPTI_RUNTIME_TRACE_CBID_##name##_##version }
#define CALL_NAME(name, suffix) #name
#endif

static int failures = 0;
static void Check(bool ok, const char* what) {
  printf("%s %s\n", ok ? "ok" : "FAIL", what);
  if (!ok) ++failures;
}

// ---- Observer -------------------------------------------------------------------------------

struct ApiRec {
  std::string func;
  int cbid, is_exit, ret;
  uint32_t corr;
  std::string params;  // a digest of the parameter struct of the calls checked below
};
struct OpRec {
  int kind;
  uint32_t corr, graph, node;
  uint64_t bytes;
  int copy_kind;
  uint32_t copy_arrays;
};
static std::mutex g_mu;
static std::vector<ApiRec> g_api;
static std::vector<OpRec> g_ops;

// What the parameter struct of some calls holds at enter (exit for outputs).
static std::string Digest(int cbid, int is_exit, const void* p) {
  if (p == nullptr) return "null";
  char buf[256] = "";
  switch (cbid) {
    case CUPTI_RUNTIME_TRACE_CBID_cudaMallocArray_v3020: {
      auto* a = static_cast<const cudaMallocArray_v3020_params*>(p);
      snprintf(buf, sizeof(buf), "desc.x=%d w=%zu h=%zu flags=%u out=%p",
               a->desc != nullptr ? a->desc->x : -1, a->width, a->height, a->flags,
               is_exit && a->array != nullptr ? static_cast<void*>(*a->array) : nullptr);
      break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMalloc3DArray_v3020: {
      auto* a = static_cast<const cudaMalloc3DArray_v3020_params*>(p);
      snprintf(buf, sizeof(buf), "desc.x=%d w=%zu h=%zu d=%zu flags=%u out=%p",
               a->desc != nullptr ? a->desc->x : -1, a->extent.width, a->extent.height,
               a->extent.depth, a->flags,
               is_exit && a->array != nullptr ? static_cast<void*>(*a->array) : nullptr);
      break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaFreeArray_v3020:
      snprintf(buf, sizeof(buf), "array=%p",
               static_cast<void*>(static_cast<const cudaFreeArray_v3020_params*>(p)->array));
      break;
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DToArray_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DToArray_ptds_v7000: {
      auto* a = static_cast<const cudaMemcpy2DToArray_v3020_params*>(p);
      snprintf(buf, sizeof(buf),
               "dst=%p w=%zu h=%zu src=%p spitch=%zu width=%zu height=%zu "
               "kind=%d",
               static_cast<void*>(a->dst), a->wOffset, a->hOffset, a->src, a->spitch, a->width,
               a->height, int(a->kind));
      break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DFromArrayAsync_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DFromArrayAsync_ptsz_v7000: {
      auto* a = static_cast<const cudaMemcpy2DFromArrayAsync_v3020_params*>(p);
      snprintf(buf, sizeof(buf),
               "dst=%p dpitch=%zu src=%p w=%zu h=%zu width=%zu height=%zu "
               "kind=%d stream=%p",
               a->dst, a->dpitch, static_cast<const void*>(a->src), a->wOffset, a->hOffset,
               a->width, a->height, int(a->kind), static_cast<void*>(a->stream));
      break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyBatchAsync_v13000:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyBatchAsync_ptsz_v13000: {
      auto* a = static_cast<const cudaMemcpyBatchAsync_v13000_params*>(p);
      snprintf(buf, sizeof(buf), "count=%zu size0=%zu numAttrs=%zu stream=%p", a->count,
               a->sizes != nullptr ? a->sizes[0] : 0, a->numAttrs, static_cast<void*>(a->stream));
      break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DBatchAsync_v13000:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DBatchAsync_ptsz_v13000: {
      auto* a = static_cast<const cudaMemcpy3DBatchAsync_v13000_params*>(p);
      snprintf(buf, sizeof(buf), "numOps=%zu list=%p flags=%llu stream=%p", a->numOps,
               static_cast<void*>(a->opList), a->flags, static_cast<void*>(a->stream));
      break;
    }
    default:
      break;
  }
  return buf;
}

static void OnApi(void*, int domain, int is_exit, int cbid, const char* func, const char*,
                  uint32_t corr, const void* params, const void* ret) {
  if (domain != GPUSIM_DOMAIN_RUNTIME) return;
  std::string digest = Digest(cbid, is_exit, params);
  std::lock_guard<std::mutex> lock(g_mu);
  g_api.push_back(ApiRec{func != nullptr ? func : "", cbid, is_exit,
                         ret != nullptr ? *static_cast<const int*>(ret) : -1, corr, digest});
}

static void OnOp(void*, const GpusimOpRecord* rec) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_ops.push_back(OpRec{rec->kind, rec->correlation_id, rec->graph_id, rec->graph_node_id,
                        rec->bytes, rec->copy_kind, rec->copy_arrays});
}

// The last call of `func` (its exit record).
static ApiRec Last(const std::string& func) {
  std::lock_guard<std::mutex> lock(g_mu);
  for (auto it = g_api.rbegin(); it != g_api.rend(); ++it) {
    if (it->func == func && it->is_exit == 1) return *it;
  }
  return ApiRec{"", 0, 0, -1, 0, ""};
}
// The enter record of the call with correlation id `corr`.
static ApiRec Enter(uint32_t corr) {
  std::lock_guard<std::mutex> lock(g_mu);
  for (const ApiRec& a : g_api) {
    if (a.corr == corr && a.is_exit == 0) return a;
  }
  return ApiRec{"", 0, 0, -1, 0, ""};
}

// Prints the copy line of the last call of `func` (see the header) and checks the observer's
// ops of that call: one memcpy with the kind and bytes (after a synchronization).
static void ExpectCopy(const char* label, const std::string& func, const char* kind,
                       uint64_t bytes) {
  cudaDeviceSynchronize();
  ApiRec call = Last(func);
  printf("copy %s %u %s %llu\n", label, call.corr, kind, (unsigned long long)bytes);
  int n = 0;
  std::lock_guard<std::mutex> lock(g_mu);
  for (const OpRec& op : g_ops) n += op.corr == call.corr && op.kind == GPUSIM_OP_MEMCPY;
  char what[128];
  snprintf(what, sizeof(what), "one_op_%s", label);
  Check(call.ret == cudaSuccess && n == 1, what);
}

static size_t FreeBytes() {
  size_t free_b = 0, total = 0;
  cudaMemGetInfo(&free_b, &total);
  return free_b;
}

static bool Same(const void* a, const void* b, size_t n) { return memcmp(a, b, n) == 0; }

// ---- Arrays: allocation, info, validation ---------------------------------------------------

static cudaArray_t g_a = nullptr, g_b = nullptr, g_vol = nullptr, g_line = nullptr;
static const size_t kW = 64, kH = 32;            // the 2D float arrays
static const size_t kVW = 16, kVH = 8, kVD = 4;  // the uchar4 volume

static void Allocation() {
  const size_t before = FreeBytes();
  cudaChannelFormatDesc fdesc = cudaCreateChannelDesc<float>();
  cudaChannelFormatDesc u4 = cudaCreateChannelDesc<uchar4>();
  cudaChannelFormatDesc s2 = cudaCreateChannelDesc<short2>();
  Check(cudaMallocArray(&g_a, &fdesc, kW, kH) == cudaSuccess && g_a != nullptr, "malloc_array");
  Check(cudaMallocArray(&g_b, &fdesc, kW, kH, cudaArraySurfaceLoadStore) == cudaSuccess,
        "malloc_array_surface");
  Check(cudaMalloc3DArray(&g_vol, &u4, make_cudaExtent(kVW, kVH, kVD)) == cudaSuccess,
        "malloc_3d_array");
  Check(cudaMallocArray(&g_line, &s2, 100) == cudaSuccess, "malloc_1d_array");
  // The device memory in use grew by the elements times their size, nothing more.
  printf("array_bytes_counted %zu\n", before - FreeBytes());
  Check(before - FreeBytes() == 2 * kW * kH * 4 + kVW * kVH * kVD * 4 + 100 * 4,
        "array_bytes_elements_times_size");

  cudaChannelFormatDesc d = {};
  cudaExtent e = {};
  unsigned flags = 99;
  Check(cudaArrayGetInfo(&d, &e, &flags, g_a) == cudaSuccess && d.x == 32 && d.y == 0 &&
            d.f == cudaChannelFormatKindFloat && e.width == kW && e.height == kH && e.depth == 0 &&
            flags == 0,
        "array_get_info_2d");
  Check(cudaArrayGetInfo(nullptr, &e, &flags, g_b) == cudaSuccess &&
            flags == cudaArraySurfaceLoadStore,
        "array_get_info_flags");
  Check(cudaArrayGetInfo(&d, &e, nullptr, g_vol) == cudaSuccess && d.x == 8 && d.w == 8 &&
            e.width == kVW && e.height == kVH && e.depth == kVD,
        "array_get_info_3d");
  Check(cudaArrayGetInfo(&d, &e, nullptr, g_line) == cudaSuccess && e.width == 100 &&
            e.height == 0 && e.depth == 0 && d.x == 16 && d.y == 16,
        "array_get_info_1d");
  Check(cudaGetChannelDesc(&d, g_vol) == cudaSuccess && d.x == 8 && d.y == 8 && d.z == 8 &&
            d.w == 8 && d.f == cudaChannelFormatKindUnsigned,
        "get_channel_desc");

  // The observer saw the real parameter structs: the request at enter, the handle at exit.
  char want[160];
  snprintf(want, sizeof(want), "desc.x=32 w=%zu h=%zu flags=0 out=%p", kW, kH,
           static_cast<void*>(g_a));
  bool found = false;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    for (const ApiRec& a : g_api) found |= a.is_exit == 1 && a.params == want;
  }
  Check(found, "malloc_array_params_struct");
  ApiRec m3 = Last("cudaMalloc3DArray");
  snprintf(want, sizeof(want), "desc.x=8 w=%zu h=%zu d=%zu flags=0 out=%p", kVW, kVH, kVD,
           static_cast<void*>(g_vol));
  Check(m3.params == want && m3.cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMalloc3DArray_v3020,
        "malloc_3d_array_params_struct");

  // Validation: nothing allocated, nothing counted.
  const size_t mid = FreeBytes();
  cudaArray_t x = nullptr;
  Check(cudaMallocArray(nullptr, &fdesc, 4, 4) == cudaErrorInvalidValue, "null_array_out");
  Check(cudaMallocArray(&x, nullptr, 4, 4) == cudaErrorInvalidValue, "null_desc");
  Check(cudaMallocArray(&x, &fdesc, 0, 4) == cudaErrorInvalidValue, "zero_width");
  Check(cudaMallocArray(&x, &fdesc, 4, 4, cudaArrayLayered) == cudaErrorInvalidValue,
        "malloc_array_refuses_layered");
  Check(cudaMallocArray(&x, &fdesc, 4, 4, 0x100) == cudaErrorInvalidValue, "unknown_flag");
  cudaChannelFormatDesc three = cudaCreateChannelDesc(32, 32, 32, 0, cudaChannelFormatKindFloat);
  Check(cudaMallocArray(&x, &three, 4, 4) == cudaErrorInvalidChannelDescriptor,
        "three_channels_refused");
  cudaChannelFormatDesc mixed = cudaCreateChannelDesc(8, 16, 0, 0, cudaChannelFormatKindSigned);
  Check(cudaMallocArray(&x, &mixed, 4, 4) == cudaErrorInvalidChannelDescriptor,
        "mixed_channel_sizes_refused");
  cudaChannelFormatDesc byte_float = cudaCreateChannelDesc(8, 0, 0, 0, cudaChannelFormatKindFloat);
  Check(cudaMallocArray(&x, &byte_float, 4, 4) == cudaErrorInvalidChannelDescriptor,
        "8_bit_float_refused");
  Check(cudaMalloc3DArray(&x, &fdesc, make_cudaExtent(4, 0, 3)) == cudaErrorInvalidValue,
        "depth_without_height");
  Check(cudaMalloc3DArray(&x, &fdesc, make_cudaExtent(16, 16, 5), cudaArrayCubemap) ==
            cudaErrorInvalidValue,
        "cubemap_needs_6_faces");
  Check(cudaMalloc3DArray(&x, &fdesc, make_cudaExtent(4, 4, 4), cudaArrayTextureGather) ==
            cudaErrorInvalidValue,
        "gather_2d_only");
  Check(cudaMallocArray(&x, &fdesc, 131073) == cudaErrorInvalidValue, "beyond_max_texture_1d");
  Check(cudaMallocArray(&x, &fdesc, 40000, 0, cudaArraySurfaceLoadStore) == cudaErrorInvalidValue,
        "beyond_max_surface_1d");
  cudaChannelFormatDesc f4 = cudaCreateChannelDesc<float4>();
  Check(cudaMallocArray(&x, &f4, 131072, 65536) == cudaErrorMemoryAllocation,  // 128 GiB
        "beyond_device_memory");
  Check(cudaGetLastError() == cudaErrorMemoryAllocation, "errors_set_last_error");
  Check(FreeBytes() == mid, "failed_allocations_count_nothing");

  // Layered, cubemap: their layers (faces) are the depth.
  cudaChannelFormatDesc u1 = cudaCreateChannelDesc<unsigned char>();
  cudaArray_t layered = nullptr, cube = nullptr;
  Check(cudaMalloc3DArray(&layered, &u1, make_cudaExtent(32, 0, 3), cudaArrayLayered) ==
                cudaSuccess &&
            cudaMalloc3DArray(&cube, &u1, make_cudaExtent(8, 8, 6), cudaArrayCubemap) ==
                cudaSuccess &&
            cudaArrayGetInfo(nullptr, &e, &flags, layered) == cudaSuccess && e.width == 32 &&
            e.height == 0 && e.depth == 3 && flags == cudaArrayLayered,
        "layered_and_cubemap");
  Check(mid - FreeBytes() == 32 * 3 + 8 * 8 * 6, "layered_bytes");
  Check(cudaFreeArray(layered) == cudaSuccess && cudaFreeArray(cube) == cudaSuccess &&
            FreeBytes() == mid,
        "layered_freed");

  // Frees: NULL is nothing; unknown, freed twice, or used after the free: invalid.
  Check(cudaFreeArray(nullptr) == cudaSuccess, "free_null_array");
  Check(cudaFreeArray(reinterpret_cast<cudaArray_t>(0x1000)) == cudaErrorInvalidValue,
        "free_unknown_array");
  cudaArray_t tmp = nullptr;
  cudaMallocArray(&tmp, &fdesc, 8, 8);
  Check(cudaFreeArray(tmp) == cudaSuccess && cudaFreeArray(tmp) == cudaErrorInvalidValue &&
            cudaArrayGetInfo(&d, &e, &flags, tmp) == cudaErrorInvalidValue,
        "double_free_and_stale_handle");
  cudaGetLastError();
}

// Mipmapped arrays: levels halve down to 1x1; a level is an array of its own.
static void Mipmaps() {
  const size_t before = FreeBytes();
  cudaChannelFormatDesc fdesc = cudaCreateChannelDesc<float>();
  cudaMipmappedArray_t mm = nullptr;
  Check(cudaMallocMipmappedArray(&mm, &fdesc, make_cudaExtent(kW, kH, 0), 10) == cudaSuccess,
        "malloc_mipmapped");
  // 10 levels asked, 7 possible (64 -> 1): 64x32, 32x16, 16x8, 8x4, 4x2, 2x1, 1x1 floats.
  const size_t bytes = 4 * (2048 + 512 + 128 + 32 + 8 + 2 + 1);
  printf("mipmap_bytes_counted %zu\n", before - FreeBytes());
  Check(before - FreeBytes() == bytes, "mipmap_bytes_all_levels");
  cudaArray_t level2 = nullptr, level6 = nullptr, level7 = nullptr;
  cudaExtent e = {};
  Check(cudaGetMipmappedArrayLevel(&level2, mm, 2) == cudaSuccess &&
            cudaArrayGetInfo(nullptr, &e, nullptr, level2) == cudaSuccess && e.width == 16 &&
            e.height == 8 && e.depth == 0,
        "mipmap_level_extent");
  Check(cudaGetMipmappedArrayLevel(&level6, mm, 6) == cudaSuccess &&
            cudaGetMipmappedArrayLevel(&level7, mm, 7) == cudaErrorInvalidValue,
        "mipmap_levels_clamped");
  Check(cudaGetMipmappedArrayLevel(&level2, nullptr, 0) == cudaErrorInvalidResourceHandle,
        "mipmap_null_handle");
  std::vector<float> in(16 * 8), out(16 * 8, -1.f);
  for (size_t i = 0; i < in.size(); ++i) in[i] = 0.5f * i;
  Check(cudaMemcpy2DToArray(level2, 0, 0, in.data(), 64, 64, 8, cudaMemcpyHostToDevice) ==
                cudaSuccess &&
            cudaMemcpy2DFromArray(out.data(), 64, level2, 0, 0, 64, 8, cudaMemcpyDeviceToHost) ==
                cudaSuccess &&
            in == out,
        "mipmap_level_roundtrip");
  Check(cudaFreeArray(level2) == cudaErrorInvalidValue, "level_not_freed_alone");
  Check(cudaFreeMipmappedArray(mm) == cudaSuccess && FreeBytes() == before &&
            cudaArrayGetInfo(nullptr, &e, nullptr, level2) == cudaErrorInvalidValue &&
            cudaFreeMipmappedArray(mm) == cudaErrorInvalidValue,
        "mipmap_freed_with_levels");
  Check(cudaFreeMipmappedArray(nullptr) == cudaSuccess, "free_null_mipmap");
  cudaGetLastError();
}

// ---- Copies -----------------------------------------------------------------------------------

static void Copies2D(cudaStream_t s) {
  const size_t row = kW * sizeof(float);
  std::vector<float> image(kW * kH), back(kW * kH, -1.f);
  for (size_t i = 0; i < image.size(); ++i) image[i] = float(i) + 0.25f;
  // In, array to array, out: the image comes back.
  Check(cudaMemcpy2DToArray(g_a, 0, 0, image.data(), row, row, kH, cudaMemcpyHostToDevice) ==
            cudaSuccess,
        "2d_to_array");
  ExpectCopy("2d_to_array", CALL_NAME(cudaMemcpy2DToArray, ptds), "HtoA", row * kH);
  char want[256];
  snprintf(want, sizeof(want), "dst=%p w=0 h=0 src=%p spitch=%zu width=%zu height=%zu kind=1",
           static_cast<void*>(g_a), static_cast<void*>(image.data()), row, row, kH);
  Check(Enter(Last(CALL_NAME(cudaMemcpy2DToArray, ptds)).corr).params == want,
        "2d_to_array_params_struct");
  Check(cudaMemcpy2DArrayToArray(g_b, 0, 0, g_a, 0, 0, row, kH) == cudaSuccess,
        "2d_array_to_array");
  ExpectCopy("2d_array_to_array", CALL_NAME(cudaMemcpy2DArrayToArray, ptds), "AtoA", row * kH);
  Check(cudaMemcpy2DFromArrayAsync(back.data(), row, g_b, 0, 0, row, kH, cudaMemcpyDeviceToHost,
                                   s) == cudaSuccess &&
            cudaStreamSynchronize(s) == cudaSuccess && back == image,
        "every_value_2d_roundtrip");
  ExpectCopy("2d_from_array_async", CALL_NAME(cudaMemcpy2DFromArrayAsync, ptsz), "AtoH", row * kH);
  snprintf(want, sizeof(want),
           "dst=%p dpitch=%zu src=%p w=0 h=0 width=%zu height=%zu kind=2 stream=%p",
           static_cast<void*>(back.data()), row, static_cast<void*>(g_b), row, kH,
           static_cast<void*>(s));
  Check(Enter(Last(CALL_NAME(cudaMemcpy2DFromArrayAsync, ptsz)).corr).params == want,
        "2d_from_array_async_params_struct");

  // A patch of 8 x 3 floats from a padded source (40-byte rows) at column 4, row 2 (byte
  // offset 16), async from pinned memory; read back with cudaMemcpyDefault.
  float* patch = nullptr;
  cudaMallocHost(&patch, 10 * 3 * sizeof(float));
  for (int i = 0; i < 30; ++i) patch[i] = -1.0f - i;
  Check(cudaMemcpy2DToArrayAsync(g_a, 16, 2, patch, 40, 32, 3, cudaMemcpyHostToDevice, s) ==
            cudaSuccess,
        "2d_to_array_async_offsets");
  ExpectCopy("2d_to_array_async_patch", CALL_NAME(cudaMemcpy2DToArrayAsync, ptsz), "HtoA", 96);
  Check(
      cudaMemcpy2DFromArray(back.data(), row, g_a, 0, 0, row, kH, cudaMemcpyDefault) == cudaSuccess,
      "2d_from_array_default_kind");
  ExpectCopy("2d_from_array_default", CALL_NAME(cudaMemcpy2DFromArray, ptds), "AtoH", row * kH);
  bool ok = true;
  for (size_t y = 0; y < kH; ++y) {
    for (size_t x = 0; x < kW; ++x) {
      bool in = x >= 4 && x < 12 && y >= 2 && y < 5;
      float want_v = in ? patch[(y - 2) * 10 + (x - 4)] : image[y * kW + x];
      ok &= back[y * kW + x] == want_v;
    }
  }
  Check(ok, "every_value_patch_at_offsets");

  // Device memory on the other side: a 5 x 4 box of floats out to a pitched buffer (AtoD), then
  // into b at column 10, row 20 (DtoA), with cudaMemcpyDefault; b read back.
  float* dev = nullptr;
  size_t pitch = 0;
  cudaMallocPitch(reinterpret_cast<void**>(&dev), &pitch, 5 * sizeof(float), 4);
  Check(cudaMemcpy2DFromArray(dev, pitch, g_a, 3 * sizeof(float), 1, 5 * sizeof(float), 4,
                              cudaMemcpyDeviceToDevice) == cudaSuccess,
        "2d_from_array_to_device");
  ExpectCopy("2d_array_to_device", CALL_NAME(cudaMemcpy2DFromArray, ptds), "AtoD", 80);
  Check(cudaMemcpy2DToArrayAsync(g_b, 10 * sizeof(float), 20, dev, pitch, 5 * sizeof(float), 4,
                                 cudaMemcpyDefault, s) == cudaSuccess,
        "2d_device_to_array_default");
  ExpectCopy("2d_device_to_array", CALL_NAME(cudaMemcpy2DToArrayAsync, ptsz), "DtoA", 80);
  cudaMemcpy2DFromArray(back.data(), row, g_b, 0, 0, row, kH, cudaMemcpyDeviceToHost);
  ExpectCopy("2d_from_array_check_b", CALL_NAME(cudaMemcpy2DFromArray, ptds), "AtoH", row * kH);
  ok = true;
  for (size_t y = 0; y < kH; ++y) {
    for (size_t x = 0; x < kW; ++x) {
      bool in = x >= 10 && x < 15 && y >= 20 && y < 24;
      // a's values at (3.., 1..): rows 1..4 of a are the image there (the patch is at x 4..11,
      // rows 2..4, so part of the box comes from it).
      size_t ax = x - 10 + 3, ay = y - 20 + 1;
      float a_v = (ax >= 4 && ax < 12 && ay >= 2 && ay < 5) ? patch[(ay - 2) * 10 + (ax - 4)]
                                                            : image[ay * kW + ax];
      ok &= back[y * kW + x] == (in ? a_v : image[y * kW + x]);
    }
  }
  Check(ok, "every_value_through_device_memory");

  // Errors, none of which copies anything.
  const size_t ops_before = g_ops.size();
  Check(cudaMemcpy2DToArray(g_a, 2, 0, image.data(), row, 8, 1, cudaMemcpyHostToDevice) ==
            cudaErrorInvalidValue,
        "offset_not_whole_element");
  Check(cudaMemcpy2DToArray(g_a, 8, 0, image.data(), row, row, 1, cudaMemcpyHostToDevice) ==
            cudaErrorInvalidValue,
        "row_beyond_array_width");
  Check(cudaMemcpy2DToArray(g_a, 0, 30, image.data(), row, row, 3, cudaMemcpyHostToDevice) ==
            cudaErrorInvalidValue,
        "rows_beyond_array_height");
  Check(cudaMemcpy2DToArray(g_a, 0, 0, image.data(), 16, 32, 2, cudaMemcpyHostToDevice) ==
            cudaErrorInvalidPitchValue,
        "pitch_below_width");
  Check(cudaMemcpy2DToArray(g_a, 0, 0, nullptr, row, row, 2, cudaMemcpyHostToDevice) ==
            cudaErrorInvalidValue,
        "null_source");
  Check(cudaMemcpy2DToArray(reinterpret_cast<cudaArray_t>(0x1000), 0, 0, image.data(), row, row, 2,
                            cudaMemcpyHostToDevice) == cudaErrorInvalidValue,
        "unknown_array");
  Check(cudaMemcpy2DFromArray(back.data(), row, g_a, 0, 0, row, 2,
                              static_cast<cudaMemcpyKind>(9)) == cudaErrorInvalidMemcpyDirection,
        "bad_kind");
  Check(cudaMemcpy2DArrayToArray(g_line, 0, 0, g_vol, 0, 0, 4, 1) == cudaSuccess,
        "same_element_size_arrays");  // short2 and uchar4: 4 bytes each
  ExpectCopy("2d_array_to_array_mixed_formats", CALL_NAME(cudaMemcpy2DArrayToArray, ptds), "AtoA",
             4);
  Check(cudaMemcpy2DToArray(g_a, 0, 0, image.data(), row, 0, 5, cudaMemcpyHostToDevice) ==
            cudaSuccess,
        "empty_copy_succeeds");
  cudaDeviceSynchronize();
  Check(g_ops.size() == ops_before + 1, "failed_and_empty_copies_move_nothing");
  cudaGetLastError();
  cudaFree(dev);
  cudaFreeHost(patch);
}

// The deprecated 1D forms: count bytes from (x bytes, y rows) on, through the following rows.
static void Copies1D(cudaStream_t s) {
  const size_t row = kW * sizeof(float), total = row * kH;
  std::vector<float> values(kW * kH), back(kW * kH, 0.f);
  for (size_t i = 0; i < values.size(); ++i) values[i] = 1000.0f + i;
  Check(cudaMemcpyToArray(g_a, 0, 0, values.data(), total, cudaMemcpyHostToDevice) == cudaSuccess,
        "to_array_whole");
  ExpectCopy("1d_to_array_whole", CALL_NAME(cudaMemcpyToArray, ptds), "HtoA", total);
  Check(cudaMemcpyArrayToArray(g_b, 0, 0, g_a, 0, 0, total) == cudaSuccess, "array_to_array");
  ExpectCopy("1d_array_to_array", CALL_NAME(cudaMemcpyArrayToArray, ptds), "AtoA", total);
  float six[6] = {};
  Check(cudaMemcpyFromArray(six, g_b, 2 * sizeof(float), 1, sizeof(six), cudaMemcpyDeviceToHost) ==
                cudaSuccess &&
            Same(six, &values[kW + 2], sizeof(six)),
        "from_array_part_of_a_row");
  ExpectCopy("1d_from_array_part", CALL_NAME(cudaMemcpyFromArray, ptds), "AtoH", sizeof(six));
  // A span from column 62 of row 0 into row 1 (four floats), asynchronously.
  float four[4] = {-1.f, -2.f, -3.f, -4.f};
  Check(cudaMemcpyToArrayAsync(g_a, 62 * sizeof(float), 0, four, sizeof(four),
                               cudaMemcpyHostToDevice, s) == cudaSuccess,
        "to_array_async_across_rows");
  ExpectCopy("1d_to_array_async_span", CALL_NAME(cudaMemcpyToArrayAsync, ptsz), "HtoA",
             sizeof(four));
  Check(cudaMemcpyFromArrayAsync(back.data(), g_a, 0, 0, total, cudaMemcpyDeviceToHost, s) ==
                cudaSuccess &&
            cudaStreamSynchronize(s) == cudaSuccess,
        "from_array_async_whole");
  ExpectCopy("1d_from_array_async_whole", CALL_NAME(cudaMemcpyFromArrayAsync, ptsz), "AtoH", total);
  bool ok = true;
  for (size_t i = 0; i < values.size(); ++i) {
    ok &= back[i] == (i >= 62 && i < 66 ? four[i - 62] : values[i]);
  }
  Check(ok, "every_value_1d_copies");
  Check(cudaMemcpyToArray(g_a, 4, kH - 1, values.data(), row, cudaMemcpyHostToDevice) ==
            cudaErrorInvalidValue,
        "1d_span_beyond_array");
  Check(cudaMemcpyToArray(g_a, 1, 0, values.data(), 4, cudaMemcpyHostToDevice) ==
            cudaErrorInvalidValue,
        "1d_offset_not_whole_element");
  cudaGetLastError();
}

// Element i of the volume as Copies3D fills it.
static uchar4 VolumeValue(size_t i) {
  return make_uchar4(uint8_t(i), uint8_t(i >> 8), uint8_t(i * 3), 7);
}

static bool SameElement(const uchar4& a, const uchar4& b) {
  return a.x == b.x && a.y == b.y && a.z == b.z && a.w == b.w;
}

static void Copies3D(cudaStream_t s) {
  const size_t n = kVW * kVH * kVD;
  std::vector<uchar4> in(n), out(n);
  for (size_t i = 0; i < n; ++i) in[i] = VolumeValue(i);
  // Extents in elements when an array takes part.
  cudaMemcpy3DParms up = {};
  up.srcPtr = make_cudaPitchedPtr(in.data(), kVW * sizeof(uchar4), kVW, kVH);
  up.dstArray = g_vol;
  up.extent = make_cudaExtent(kVW, kVH, kVD);
  up.kind = cudaMemcpyHostToDevice;
  Check(cudaMemcpy3D(&up) == cudaSuccess, "3d_to_array");
  ExpectCopy("3d_to_array", CALL_NAME(cudaMemcpy3D, ptds), "HtoA", n * 4);
  // A second volume, a sub-box of the first at (2, 1, 1) into it at (0, 0, 0), async.
  cudaArray_t vol2 = nullptr;
  cudaChannelFormatDesc u4 = cudaCreateChannelDesc<uchar4>();
  cudaMalloc3DArray(&vol2, &u4, make_cudaExtent(8, 4, 2));
  cudaMemcpy3DParms box = {};
  box.srcArray = g_vol;
  box.srcPos = make_cudaPos(2, 1, 1);
  box.dstArray = vol2;
  box.extent = make_cudaExtent(8, 4, 2);
  box.kind = cudaMemcpyDeviceToDevice;
  Check(cudaMemcpy3DAsync(&box, s) == cudaSuccess, "3d_array_to_array_async");
  ExpectCopy("3d_array_box", CALL_NAME(cudaMemcpy3DAsync, ptsz), "AtoA", 8 * 4 * 2 * 4);
  std::vector<uchar4> small(8 * 4 * 2);
  cudaMemcpy3DParms down = {};
  down.srcArray = vol2;
  down.dstPtr = make_cudaPitchedPtr(small.data(), 8 * sizeof(uchar4), 8, 4);
  down.extent = make_cudaExtent(8, 4, 2);
  down.kind = cudaMemcpyHostToHost;  // corrected by the runtime: the array is on the device
  Check(cudaMemcpy3D(&down) == cudaSuccess, "3d_from_array_kind_corrected");
  ExpectCopy("3d_from_small_array", CALL_NAME(cudaMemcpy3D, ptds), "AtoH", 8 * 4 * 2 * 4);
  bool ok = true;
  for (size_t z = 0; z < 2; ++z) {
    for (size_t y = 0; y < 4; ++y) {
      for (size_t x = 0; x < 8; ++x) {
        ok &= SameElement(small[(z * 4 + y) * 8 + x], in[((z + 1) * kVH + y + 1) * kVW + x + 2]);
      }
    }
  }
  Check(ok, "every_value_3d_box");
  down.srcArray = g_vol;
  down.dstPtr = make_cudaPitchedPtr(out.data(), kVW * sizeof(uchar4), kVW, kVH);
  down.extent = make_cudaExtent(kVW, kVH, kVD);
  down.kind = cudaMemcpyDeviceToHost;
  Check(cudaMemcpy3D(&down) == cudaSuccess && Same(in.data(), out.data(), n * 4),
        "every_value_3d_roundtrip");
  ExpectCopy("3d_from_array", CALL_NAME(cudaMemcpy3D, ptds), "AtoH", n * 4);

  // Errors.
  cudaMemcpy3DParms bad = up;
  bad.srcArray = vol2;  // a source array and a source pointer
  Check(cudaMemcpy3D(&bad) == cudaErrorInvalidValue, "3d_two_sources");
  bad = up;
  bad.dstPos = make_cudaPos(1, 0, 0);  // the box leaves the array
  Check(cudaMemcpy3D(&bad) == cudaErrorInvalidValue, "3d_box_outside_array");
  bad = box;
  bad.dstArray = g_a;  // float vs uchar4: same size, fine; g_line (short2) too; 1-byte: not
  cudaArray_t bytes = nullptr;
  cudaChannelFormatDesc u1 = cudaCreateChannelDesc<unsigned char>();
  cudaMallocArray(&bytes, &u1, 64, 8);
  bad.dstArray = bytes;
  Check(cudaMemcpy3DAsync(&bad, s) == cudaErrorInvalidValue, "3d_element_sizes_differ");
  bad = up;
  bad.dstArray = reinterpret_cast<cudaArray_t>(0x1000);
  Check(cudaMemcpy3D(&bad) == cudaErrorInvalidValue, "3d_unknown_array");
  cudaGetLastError();
  cudaFreeArray(bytes);
  cudaFreeArray(vol2);
}

// ---- Capture and graph nodes ----------------------------------------------------------------

static void Graphs(cudaStream_t s) {
  const size_t row = kW * sizeof(float);
  float *src = nullptr, *dst = nullptr;
  cudaMallocHost(&src, row * 4);
  cudaMallocHost(&dst, row * 4);
  for (size_t i = 0; i < kW * 4; ++i) src[i] = 7.0f + i;
  // Captured: rows 10..13 of a in, then out; a launch reads the source as it is then.
  cudaGraph_t graph = nullptr;
  Check(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaSuccess &&
            cudaMemcpy2DToArrayAsync(g_a, 0, 10, src, row, row, 4, cudaMemcpyHostToDevice, s) ==
                cudaSuccess &&
            cudaMemcpy2DFromArrayAsync(dst, row, g_a, 0, 10, row, 4, cudaMemcpyDeviceToHost, s) ==
                cudaSuccess &&
            cudaStreamEndCapture(s, &graph) == cudaSuccess,
        "captured_array_copies");
  cudaGraphNode_t nodes[2] = {};
  size_t count = 2;
  cudaMemcpy3DParms p0 = {}, p1 = {};
  Check(cudaGraphGetNodes(graph, nodes, &count) == cudaSuccess && count == 2 &&
            cudaGraphMemcpyNodeGetParams(nodes[0], &p0) == cudaSuccess &&
            cudaGraphMemcpyNodeGetParams(nodes[1], &p1) == cudaSuccess && p0.dstArray == g_a &&
            p0.dstPos.y == 10 && p0.extent.width == kW && p0.extent.height == 4 &&
            p0.srcPtr.ptr == src && p1.srcArray == g_a && p1.dstPtr.ptr == dst,
        "captured_nodes_read_back_with_the_array");
  // By hand: the volume's first slice out to pinned memory.
  uchar4* slice = nullptr;
  cudaMallocHost(&slice, kVW * kVH * sizeof(uchar4));
  cudaMemcpy3DParms hp = {};
  hp.srcArray = g_vol;
  hp.dstPtr = make_cudaPitchedPtr(slice, kVW * sizeof(uchar4), kVW, kVH);
  hp.extent = make_cudaExtent(kVW, kVH, 1);
  hp.kind = cudaMemcpyDeviceToHost;
  cudaGraphNode_t hand = nullptr;
  cudaMemcpy3DParms hp_back = {};
  Check(cudaGraphAddMemcpyNode(&hand, graph, &nodes[1], 1, &hp) == cudaSuccess &&
            cudaGraphMemcpyNodeGetParams(hand, &hp_back) == cudaSuccess &&
            hp_back.srcArray == g_vol,
        "memcpy_node_with_array_added");
  cudaMemcpy3DParms stale = hp;
  stale.srcArray = reinterpret_cast<cudaArray_t>(0x1000);
  cudaGraphNode_t bad = nullptr;
  Check(cudaGraphAddMemcpyNode(&bad, graph, nullptr, 0, &stale) == cudaErrorInvalidValue,
        "memcpy_node_unknown_array_refused");
  cudaGetLastError();
  cudaGraphExec_t exec = nullptr;
  Check(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess, "instantiate");
  bool ok = true;
  for (int launch = 0; launch < 2; ++launch) {
    for (size_t i = 0; i < kW * 4; ++i) src[i] = 100.0f * (launch + 1) + i;
    memset(dst, 0, row * 4);
    ok &= cudaGraphLaunch(exec, s) == cudaSuccess && cudaStreamSynchronize(s) == cudaSuccess &&
          Same(src, dst, row * 4);
  }
  Check(ok, "every_value_each_graph_launch");
  std::vector<uchar4> first(kVW * kVH);
  cudaMemcpy3DParms check = hp;
  check.dstPtr.ptr = first.data();
  cudaMemcpy3D(&check);
  Check(Same(first.data(), slice, first.size() * sizeof(uchar4)), "hand_node_copied_the_slice");
  printf("graph_launches 2\n");
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);

  // A captured batch: a memcpy node per copy (pointer copies: 1D nodes), one launch.
  char* dev = nullptr;
  cudaMalloc(&dev, 2 * 512);
  memset(dst, 0, 2 * 512);
  void* dsts[2] = {dev, dev + 512};
  const void* srcs[2] = {src, src + 128};
  size_t sizes[2] = {512, 512};
  cudaMemcpyAttributes attr = {};
  attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
  size_t idx = 0;
  cudaGraph_t batch_graph = nullptr;
  count = 3;
  cudaGraphNode_t batch_nodes[3] = {};
  Check(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaSuccess &&
            cudaMemcpyBatchAsync(dsts, srcs, sizes, 2, &attr, &idx, 1, s) == cudaSuccess &&
            cudaStreamEndCapture(s, &batch_graph) == cudaSuccess &&
            cudaGraphGetNodes(batch_graph, batch_nodes, &count) == cudaSuccess && count == 2,
        "captured_batch_one_node_per_copy");
  cudaGraphExec_t batch_exec = nullptr;
  Check(cudaGraphInstantiate(&batch_exec, batch_graph, 0) == cudaSuccess &&
            cudaGraphLaunch(batch_exec, s) == cudaSuccess &&
            cudaStreamSynchronize(s) == cudaSuccess &&
            cudaMemcpy(dst, dev, 1024, cudaMemcpyDeviceToHost) == cudaSuccess &&
            Same(dst, src, 1024),
        "every_value_captured_batch");
  cudaGraphExecDestroy(batch_exec);
  cudaGraphDestroy(batch_graph);
  cudaFree(dev);
  cudaFreeHost(src);
  cudaFreeHost(dst);
  cudaFreeHost(slice);
}

// ---- Batches ----------------------------------------------------------------------------------

static void HoldStream(void*) { usleep(50000); }

// Prints the batch lines of the last call of `func` (see the header) with each copy's kind and
// bytes as the observer saw them (in order), and checks them against `want`.
static void ExpectBatch(const char* label, const std::string& func,
                        const std::vector<std::pair<std::string, uint64_t>>& want) {
  cudaDeviceSynchronize();
  ApiRec call = Last(func);
  printf("batch %s %u %zu\n", label, call.corr, want.size());
  for (const auto& w : want) {
    printf("batch_copy %s %u %s %llu\n", label, call.corr, w.first.c_str(),
           (unsigned long long)w.second);
  }
  std::vector<uint64_t> bytes;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    for (const OpRec& op : g_ops) {
      if (op.corr == call.corr && op.kind == GPUSIM_OP_MEMCPY) bytes.push_back(op.bytes);
    }
  }
  bool ok = call.ret == cudaSuccess && bytes.size() == want.size();
  for (size_t i = 0; ok && i < want.size(); ++i) ok &= bytes[i] == want[i].second;
  char what[128];
  snprintf(what, sizeof(what), "batch_ops_%s", label);
  Check(ok, what);
}

static void Batches(cudaStream_t s) {
  char *d0, *d1, *d2, *d3, *pinned;
  cudaMalloc(&d0, 4096);
  cudaMalloc(&d1, 4096);
  cudaMalloc(&d2, 4096);
  cudaMalloc(&d3, 4096);
  cudaMallocHost(&pinned, 4096);
  cudaMemset(d2, 0x5a, 4096);
  cudaDeviceSynchronize();
  std::vector<char> src0(4096, 1), src1(2048, 2), check(4096);
  char ephemeral[1024];
  memset(ephemeral, 3, sizeof(ephemeral));
  void* dsts[4] = {d0, d1, d3, pinned};
  const void* srcs[4] = {src0.data(), src1.data(), ephemeral, d2};
  size_t sizes[4] = {4096, 2048, 1024, 4096};
  // Copies 0-1 read in stream order, 2 during the call (its source changes right after), 3 any
  // time.
  cudaMemcpyAttributes attrs[3] = {};
  attrs[0].srcAccessOrder = cudaMemcpySrcAccessOrderStream;
  attrs[1].srcAccessOrder = cudaMemcpySrcAccessOrderDuringApiCall;
  attrs[2].srcAccessOrder = cudaMemcpySrcAccessOrderAny;
  attrs[2].flags = cudaMemcpyFlagPreferOverlapWithCompute;
  size_t idxs[3] = {0, 2, 3};
  cudaLaunchHostFunc(s, HoldStream, nullptr);  // the copies run after the call returned
  Check(cudaMemcpyBatchAsync(dsts, srcs, sizes, 4, attrs, idxs, 3, s) == cudaSuccess,
        "memcpy_batch");
  memset(ephemeral, 9, sizeof(ephemeral));
  cudaStreamSynchronize(s);
  bool ok = true;
  cudaMemcpy(check.data(), d0, 4096, cudaMemcpyDeviceToHost);
  for (int i = 0; i < 4096; ++i) ok &= check[i] == 1;
  cudaMemcpy(check.data(), d1, 2048, cudaMemcpyDeviceToHost);
  for (int i = 0; i < 2048; ++i) ok &= check[i] == 2;
  cudaMemcpy(check.data(), d3, 1024, cudaMemcpyDeviceToHost);
  for (int i = 0; i < 1024; ++i) ok &= check[i] == 3;  // taken during the call
  for (int i = 0; i < 4096; ++i) ok &= pinned[i] == 0x5a;
  Check(ok, "every_value_batch");
  ExpectBatch("memcpy_batch", CALL_NAME(cudaMemcpyBatchAsync, ptsz),
              {{"HtoD", 4096}, {"HtoD", 2048}, {"HtoD", 1024}, {"DtoH", 4096}});
  char want[160];
  snprintf(want, sizeof(want), "count=4 size0=4096 numAttrs=3 stream=%p", static_cast<void*>(s));
  Check(Enter(Last(CALL_NAME(cudaMemcpyBatchAsync, ptsz)).corr).params == want,
        "memcpy_batch_params_struct");

  // Argument checks: nothing is enqueued by a refused batch.
  const size_t ops_before = g_ops.size();
  auto batch = [&](void* const* d, const void* const* sr, const size_t* sz, size_t n,
                   cudaMemcpyAttributes* a, size_t* ix, size_t na,
                   cudaStream_t st) { return cudaMemcpyBatchAsync(d, sr, sz, n, a, ix, na, st); };
  Check(batch(dsts, srcs, sizes, 0, attrs, idxs, 1, s) == cudaErrorInvalidValue, "batch_count_0");
  Check(batch(nullptr, srcs, sizes, 4, attrs, idxs, 1, s) == cudaErrorInvalidValue,
        "batch_null_dsts");
  Check(batch(dsts, nullptr, sizes, 4, attrs, idxs, 1, s) == cudaErrorInvalidValue,
        "batch_null_srcs");
  Check(batch(dsts, srcs, nullptr, 4, attrs, idxs, 1, s) == cudaErrorInvalidValue,
        "batch_null_sizes");
  Check(batch(dsts, srcs, sizes, 4, attrs, idxs, 0, s) == cudaErrorInvalidValue,
        "batch_num_attrs_0");
  Check(batch(dsts, srcs, sizes, 4, nullptr, idxs, 1, s) == cudaErrorInvalidValue,
        "batch_null_attrs");
  size_t from_one[1] = {1};
  Check(batch(dsts, srcs, sizes, 4, attrs, from_one, 1, s) == cudaErrorInvalidValue,
        "batch_first_attr_index_not_0");
  size_t not_increasing[3] = {0, 2, 2};
  Check(batch(dsts, srcs, sizes, 4, attrs, not_increasing, 3, s) == cudaErrorInvalidValue,
        "batch_attr_indices_increase");
  size_t past_end[2] = {0, 4};
  Check(batch(dsts, srcs, sizes, 4, attrs, past_end, 2, s) == cudaErrorInvalidValue,
        "batch_attr_index_below_count");
  Check(batch(dsts, srcs, sizes, 1, attrs, idxs, 3, s) == cudaErrorInvalidValue,
        "batch_more_attrs_than_copies");
  cudaMemcpyAttributes no_order = {};
  size_t zero = 0;
  Check(batch(dsts, srcs, sizes, 4, &no_order, &zero, 1, s) == cudaErrorInvalidValue,
        "batch_access_order_required");
  cudaMemcpyAttributes bad_flags = attrs[0];
  bad_flags.flags = 0x80;
  Check(batch(dsts, srcs, sizes, 4, &bad_flags, &zero, 1, s) == cudaErrorInvalidValue,
        "batch_unknown_flag");
  const void* with_null[4] = {src0.data(), nullptr, ephemeral, d2};
  Check(batch(dsts, with_null, sizes, 4, attrs, idxs, 3, s) == cudaErrorInvalidValue,
        "batch_null_pointer_refused_whole");
  Check(batch(dsts, srcs, sizes, 4, attrs, idxs, 3, reinterpret_cast<cudaStream_t>(0x4321)) ==
            cudaErrorInvalidResourceHandle,
        "batch_bad_stream");
  Check(batch(dsts, srcs, sizes, 4, attrs, idxs, 3, cudaStreamLegacy) == cudaErrorInvalidValue,
        "batch_not_on_legacy_stream");
#if !PT
  Check(batch(dsts, srcs, sizes, 4, attrs, idxs, 3, 0) == cudaErrorInvalidValue,
        "batch_not_on_null_stream");
#else
  // Stream 0 is this thread's default stream here, which a batch may use.
  Check(batch(dsts, srcs, sizes, 1, attrs, idxs, 1, 0) == cudaSuccess, "batch_on_per_thread_0");
  cudaStreamSynchronize(cudaStreamPerThread);
  ExpectBatch("memcpy_batch_stream_0", CALL_NAME(cudaMemcpyBatchAsync, ptsz), {{"HtoD", 4096}});
#endif
  cudaDeviceSynchronize();
  Check(g_ops.size() == ops_before + PT, "refused_batches_enqueue_nothing");
  cudaGetLastError();

  // 3D batch of independent copies: host -> a new volume (HtoA), a box of the volume Copies3D
  // filled -> pitched device memory (AtoD), device -> host between pointers (DtoH, extent in
  // bytes).
  const size_t n = kVW * kVH * kVD;
  std::vector<uchar4> vin(n), vout(n);
  for (size_t i = 0; i < n; ++i) vin[i] = make_uchar4(uint8_t(i * 5), 1, 2, uint8_t(i));
  cudaArray_t vol3 = nullptr;
  cudaChannelFormatDesc u4 = cudaCreateChannelDesc<uchar4>();
  cudaMalloc3DArray(&vol3, &u4, make_cudaExtent(kVW, kVH, kVD));
  uchar4* box = nullptr;
  cudaMalloc(&box, 8 * 4 * 3 * sizeof(uchar4));  // rows of 8 elements, layers of 4 rows
  std::vector<char> tail(200, 0);
  cudaMemcpy3DBatchOp ops[3] = {};
  ops[0].src.type = cudaMemcpyOperandTypePointer;
  ops[0].src.op.ptr.ptr = vin.data();
  ops[0].dst.type = cudaMemcpyOperandTypeArray;
  ops[0].dst.op.array.array = vol3;
  ops[0].extent = make_cudaExtent(kVW, kVH, kVD);
  ops[0].srcAccessOrder = cudaMemcpySrcAccessOrderDuringApiCall;
  ops[1].src.type = cudaMemcpyOperandTypeArray;
  ops[1].src.op.array.array = g_vol;
  ops[1].src.op.array.offset = {2, 1, 1};
  ops[1].dst.type = cudaMemcpyOperandTypePointer;
  ops[1].dst.op.ptr.ptr = box;
  ops[1].dst.op.ptr.rowLength = 8;
  ops[1].dst.op.ptr.layerHeight = 4;
  ops[1].extent = make_cudaExtent(4, 3, 2);
  ops[1].srcAccessOrder = cudaMemcpySrcAccessOrderStream;
  ops[2].src.type = cudaMemcpyOperandTypePointer;
  ops[2].src.op.ptr.ptr = d0;
  ops[2].dst.type = cudaMemcpyOperandTypePointer;
  ops[2].dst.op.ptr.ptr = tail.data();
  ops[2].extent = make_cudaExtent(100, 2, 1);
  ops[2].srcAccessOrder = cudaMemcpySrcAccessOrderStream;
  cudaLaunchHostFunc(s, HoldStream, nullptr);
  Check(cudaMemcpy3DBatchAsync(3, ops, 0, s) == cudaSuccess, "memcpy_3d_batch");
  std::fill(vin.begin(), vin.end(), make_uchar4(0, 0, 0, 0));  // taken during the call
  cudaStreamSynchronize(s);
  ExpectBatch("memcpy_3d_batch", CALL_NAME(cudaMemcpy3DBatchAsync, ptsz),
              {{"HtoA", n * 4}, {"AtoD", 4 * 3 * 2 * 4}, {"DtoH", 200}});
  snprintf(want, sizeof(want), "numOps=3 list=%p flags=0 stream=%p", static_cast<void*>(ops),
           static_cast<void*>(s));
  Check(Enter(Last(CALL_NAME(cudaMemcpy3DBatchAsync, ptsz)).corr).params == want,
        "memcpy_3d_batch_params_struct");
  cudaMemcpy3DParms read = {};
  read.srcArray = vol3;
  read.dstPtr = make_cudaPitchedPtr(vout.data(), kVW * sizeof(uchar4), kVW, kVH);
  read.extent = make_cudaExtent(kVW, kVH, kVD);
  read.kind = cudaMemcpyDeviceToHost;
  cudaMemcpy3D(&read);
  ok = true;
  for (size_t i = 0; i < n; ++i) {
    ok &= SameElement(vout[i], make_uchar4(uint8_t(i * 5), 1, 2, uint8_t(i)));
  }
  std::vector<uchar4> box_back(8 * 4 * 3);
  cudaMemcpy(box_back.data(), box, box_back.size() * sizeof(uchar4), cudaMemcpyDeviceToHost);
  for (size_t z = 0; z < 2; ++z) {
    for (size_t y = 0; y < 3; ++y) {
      for (size_t x = 0; x < 4; ++x) {
        ok &= SameElement(box_back[(z * 4 + y) * 8 + x],
                          VolumeValue(((z + 1) * kVH + y + 1) * kVW + x + 2));
      }
    }
  }
  for (int i = 0; i < 200; ++i) ok &= tail[i] == 1;
  Check(ok, "every_value_3d_batch");
  const size_t ops_before_3d = g_ops.size();
  cudaMemcpy3DBatchOp bad = ops[1];
  Check(cudaMemcpy3DBatchAsync(0, ops, 0, s) == cudaErrorInvalidValue, "3d_batch_no_ops");
  Check(cudaMemcpy3DBatchAsync(1, nullptr, 0, s) == cudaErrorInvalidValue, "3d_batch_null_list");
  Check(cudaMemcpy3DBatchAsync(1, ops, 1, s) == cudaErrorInvalidValue, "3d_batch_flags_zero");
  bad.extent.depth = 0;
  Check(cudaMemcpy3DBatchAsync(1, &bad, 0, s) == cudaErrorInvalidValue, "3d_batch_zero_extent");
  bad = ops[1];
  bad.dst.op.ptr.rowLength = 3;
  Check(cudaMemcpy3DBatchAsync(1, &bad, 0, s) == cudaErrorInvalidValue,
        "3d_batch_row_length_below_width");
  bad = ops[1];
  bad.src.type = static_cast<cudaMemcpy3DOperandType>(0);
  Check(cudaMemcpy3DBatchAsync(1, &bad, 0, s) == cudaErrorInvalidValue, "3d_batch_operand_type");
  bad = ops[1];
  bad.src.op.array.array = reinterpret_cast<cudaArray_t>(0x1000);
  Check(cudaMemcpy3DBatchAsync(1, &bad, 0, s) == cudaErrorInvalidValue, "3d_batch_unknown_array");
  bad = ops[1];
  bad.srcAccessOrder = cudaMemcpySrcAccessOrderInvalid;
  Check(cudaMemcpy3DBatchAsync(1, &bad, 0, s) == cudaErrorInvalidValue,
        "3d_batch_access_order_required");
  bad = ops[1];
  bad.src.op.array.offset = {14, 0, 0};  // 14 + 4 > 16
  cudaMemcpy3DBatchOp two[2] = {ops[2], bad};
  Check(cudaMemcpy3DBatchAsync(2, two, 0, s) == cudaErrorInvalidValue,
        "3d_batch_box_outside_refused_whole");
  Check(cudaMemcpy3DBatchAsync(1, ops, 0, cudaStreamLegacy) == cudaErrorInvalidValue,
        "3d_batch_not_on_legacy_stream");
  cudaDeviceSynchronize();
  Check(g_ops.size() == ops_before_3d, "refused_3d_batches_enqueue_nothing");
  cudaGetLastError();
  cudaFree(d0);
  cudaFree(d1);
  cudaFree(d2);
  cudaFree(d3);
  cudaFree(box);
  cudaFreeArray(vol3);
  cudaFreeHost(pinned);
}

int main() {
  auto set_observer =
      reinterpret_cast<decltype(&gpusim_set_observer)>(dlsym(RTLD_DEFAULT, "gpusim_set_observer"));
  Check(set_observer != nullptr, "observer_symbol");
  if (failures != 0) return failures;
  set_observer(OnApi, OnOp, nullptr);
  cudaStream_t s;
  cudaStreamCreate(&s);
  Allocation();
  Mipmaps();
  Copies2D(s);
  Copies1D(s);
  Copies3D(s);
  Graphs(s);
  Batches(s);
  cudaStreamDestroy(s);

  // Freed arrays give their bytes back; cudaDeviceReset frees the ones left.
  const size_t before = FreeBytes();
  Check(cudaFreeArray(g_a) == cudaSuccess && cudaFreeArray(g_b) == cudaSuccess &&
            FreeBytes() - before == 2 * kW * kH * 4,
        "free_array_gives_bytes_back");
  cudaArray_t left = g_vol;
  cudaDeviceReset();
  cudaChannelFormatDesc d;
  Check(cudaGetChannelDesc(&d, left) == cudaErrorInvalidValue &&
            cudaFreeArray(g_line) == cudaErrorInvalidValue,
        "device_reset_frees_arrays");
  cudaGetLastError();
  Check(FreeBytes() - before == 2 * kW * kH * 4 + kVW * kVH * kVD * 4 + 100 * 4,
        "device_reset_gives_bytes_back");
  cudaDeviceSynchronize();
  set_observer(nullptr, nullptr, nullptr);

  // Every call reported at enter and exit with its CUPTI cbid.
  const std::map<std::string, int> kCbids = {
      {"cudaMallocArray", CUPTI_RUNTIME_TRACE_CBID_cudaMallocArray_v3020},
      {"cudaMalloc3DArray", CUPTI_RUNTIME_TRACE_CBID_cudaMalloc3DArray_v3020},
      {"cudaMallocMipmappedArray", CUPTI_RUNTIME_TRACE_CBID_cudaMallocMipmappedArray_v5000},
      {"cudaGetMipmappedArrayLevel", CUPTI_RUNTIME_TRACE_CBID_cudaGetMipmappedArrayLevel_v5000},
      {"cudaFreeArray", CUPTI_RUNTIME_TRACE_CBID_cudaFreeArray_v3020},
      {"cudaFreeMipmappedArray", CUPTI_RUNTIME_TRACE_CBID_cudaFreeMipmappedArray_v5000},
      {"cudaArrayGetInfo", CUPTI_RUNTIME_TRACE_CBID_cudaArrayGetInfo_v4010},
      {"cudaGetChannelDesc", CUPTI_RUNTIME_TRACE_CBID_cudaGetChannelDesc_v3020},
      ENTRY(cudaMemcpy2DToArray, v3020, ptds, v7000),
      ENTRY(cudaMemcpy2DToArrayAsync, v3020, ptsz, v7000),
      ENTRY(cudaMemcpy2DFromArray, v3020, ptds, v7000),
      ENTRY(cudaMemcpy2DFromArrayAsync, v3020, ptsz, v7000),
      ENTRY(cudaMemcpy2DArrayToArray, v3020, ptds, v7000),
      ENTRY(cudaMemcpyToArray, v3020, ptds, v7000),
      ENTRY(cudaMemcpyToArrayAsync, v3020, ptsz, v7000),
      ENTRY(cudaMemcpyFromArray, v3020, ptds, v7000),
      ENTRY(cudaMemcpyFromArrayAsync, v3020, ptsz, v7000),
      ENTRY(cudaMemcpyArrayToArray, v3020, ptds, v7000),
      ENTRY(cudaMemcpy3D, v3020, ptds, v7000),
      ENTRY(cudaMemcpy3DAsync, v3020, ptsz, v7000),
      ENTRY(cudaMemcpyBatchAsync, v13000, ptsz, v13000),
      ENTRY(cudaMemcpy3DBatchAsync, v13000, ptsz, v13000),
  };
  std::map<std::string, int> seen;
  std::map<uint32_t, int> per_corr;
  bool cbids_ok = true;
  for (const ApiRec& a : g_api) {
    ++per_corr[a.corr];
    auto it = kCbids.find(a.func);
    if (it == kCbids.end()) continue;
    ++seen[a.func];
    if (a.cbid != it->second) {
      printf("cbid of %s: %d, want %d\n", a.func.c_str(), a.cbid, it->second);
      cbids_ok = false;
    }
  }
  bool pairs = true;
  for (auto& kv : per_corr) pairs &= kv.second == 2;
  Check(pairs, "every_call_enter_and_exit");
  for (const auto& kv : kCbids) {
    if (seen.count(kv.first) == 0) printf("not called: %s\n", kv.first.c_str());
  }
  Check(cbids_ok && seen.size() == kCbids.size(), "cbids_of_the_array_and_batch_functions");
  // Every op is correlated to a call of this program; array copies say which side is an array.
  bool correlated = true, arrays_marked = true;
  for (const OpRec& op : g_ops) {
    ApiRec call = Enter(op.corr);
    correlated &= !call.func.empty();
    if (op.kind != GPUSIM_OP_MEMCPY) continue;
    bool to = call.func.find("ToArray") != std::string::npos;
    bool from = call.func.find("FromArray") != std::string::npos;
    bool a2a = call.func.find("ArrayToArray") != std::string::npos;
    if (a2a) {
      arrays_marked &= op.copy_arrays == (GPUSIM_COPY_SRC_ARRAY | GPUSIM_COPY_DST_ARRAY);
    } else if (to) {
      arrays_marked &= op.copy_arrays == GPUSIM_COPY_DST_ARRAY;
    } else if (from) {
      arrays_marked &= op.copy_arrays == GPUSIM_COPY_SRC_ARRAY;
    }
  }
  Check(correlated, "every_op_correlated_to_its_call");
  Check(arrays_marked, "array_sides_marked");
  printf("failures %d\n", failures);
  return failures;
}
