// Stream-ordered memory pools, stream attributes, 3D copies and sets, and the hint and set-up
// entry points, used the way NVIDIA's samples use them (streamOrderedAllocation and its P2P
// variant, cudaMalloc3D + cudaMemcpy3D), checked against CUDA's documented behaviour. An
// observer (gpusim_internal.h) checks that every call is reported with its CUPTI cbid and its
// result, and that the 3D ops carry their call's correlation id. Run with GPUSIM_DEVICES=2 for
// the peer parts. Prints "ok <check>" / "FAIL <check>", "<key> <value>" lines the test reads and
// "failures N"; exit code = failures. Also built with --default-stream per-thread, where the
// calls go to the _ptds / _ptsz entry points.
#include <cuda_runtime.h>
#include <cupti_runtime_cbid.h>
#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "tests/gpusim/gpusim_internal.h"

__global__ void scale_kernel(const int* src, int* dst, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) dst[i] = 2 * src[i];
}

// The entry point a call compiles to, and its CUPTI cbid: the per-thread-default-stream twin in
// a --default-stream per-thread build.
#if defined(__CUDART_API_PER_THREAD_DEFAULT_STREAM)
#define ENTRY(name, version, suffix, pt_version) \
  { #name "_" #suffix, CUPTI_RUNTIME_TRACE_CBID_##name##_##suffix##_##pt_version }
#define CALL_NAME(name, suffix) #name "_" #suffix
#else
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
};
struct OpRec {
  int kind;
  uint32_t corr;
  uint64_t bytes;
  int copy_kind;
};
static std::mutex g_mu;
static std::vector<ApiRec> g_api;
static std::vector<OpRec> g_ops;

static void OnApi(void*, int domain, int is_exit, int cbid, const char* func, const char*,
                  uint32_t corr, const void*, const void* ret) {
  if (domain != GPUSIM_DOMAIN_RUNTIME) return;
  std::lock_guard<std::mutex> lock(g_mu);
  g_api.push_back(ApiRec{func != nullptr ? func : "", cbid, is_exit,
                         ret != nullptr ? *static_cast<const int*>(ret) : -1, corr});
}

static void OnOp(void*, const GpusimOpRecord* rec) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_ops.push_back(OpRec{rec->kind, rec->correlation_id, rec->bytes, rec->copy_kind});
}

// The function whose call has correlation id `corr`, or "".
static std::string CallOf(uint32_t corr) {
  for (const ApiRec& a : g_api) {
    if (a.corr == corr && a.is_exit == 0) return a.func;
  }
  return "";
}

static uint64_t PoolAttr(cudaMemPool_t pool, cudaMemPoolAttr attr) {
  uint64_t v = ~0ull;
  cudaMemPoolGetAttribute(pool, attr, &v);
  return v;
}

static cudaMemLocation Device(int id) {
  cudaMemLocation l;
  l.type = cudaMemLocationTypeDevice;
  l.id = id;
  return l;
}

// ---- Memory pools -----------------------------------------------------------------------------

static void Pools(int devices) {
  const size_t kBig = 1 << 20, kOdd = 300000, kOddRounded = 300032;  // 256-byte granularity
  int supported = 0;
  cudaDeviceGetAttribute(&supported, cudaDevAttrMemoryPoolsSupported, 0);
  Check(supported == 1, "pools_supported");
  cudaMemPool_t def = nullptr, cur = nullptr, none = nullptr;
  Check(cudaDeviceGetDefaultMemPool(&def, 0) == cudaSuccess && def != nullptr, "default_pool");
  Check(cudaDeviceGetMemPool(&cur, 0) == cudaSuccess && cur == def, "current_is_default");
  Check(cudaDeviceGetDefaultMemPool(&none, 99) == cudaErrorInvalidDevice, "bad_device");

  cudaMemPoolProps props;
  memset(&props, 0, sizeof(props));
  props.allocType = cudaMemAllocationTypePinned;
  props.location = Device(0);
  cudaMemPool_t pool = nullptr;
  Check(cudaMemPoolCreate(&pool, &props) == cudaSuccess && pool != def, "pool_create");
  uint64_t threshold = UINT64_MAX;
  Check(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold) ==
                cudaSuccess &&
            PoolAttr(pool, cudaMemPoolAttrReleaseThreshold) == UINT64_MAX,
        "release_threshold");
  int reuse = -1, off = 0, on = 1;
  cudaMemPoolGetAttribute(pool, cudaMemPoolReuseAllowOpportunistic, &reuse);
  Check(reuse == 1, "reuse_enabled_by_default");
  cudaMemPoolSetAttribute(pool, cudaMemPoolReuseAllowOpportunistic, &off);
  cudaMemPoolGetAttribute(pool, cudaMemPoolReuseAllowOpportunistic, &reuse);
  Check(reuse == 0, "reuse_flag_set");
  cudaMemPoolSetAttribute(pool, cudaMemPoolReuseAllowOpportunistic, &on);
  Check(cudaDeviceSetMemPool(0, pool) == cudaSuccess &&
            cudaDeviceGetMemPool(&cur, 0) == cudaSuccess && cur == pool,
        "set_current_pool");

  // Allocate on two streams (cudaMallocAsync from the current pool, cudaMallocFromPoolAsync),
  // use the memory, free it in stream order.
  cudaStream_t s1, s2;
  cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking);
  cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking);
  std::vector<int> host(kBig / sizeof(int)), back(kBig / sizeof(int), -1);
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<int>(i * 3 + 1);
  int *a = nullptr, *b = nullptr;
  char* c = nullptr;
  Check(cudaMallocAsync(&a, kBig, s1) == cudaSuccess && cudaMallocAsync(&b, kBig, s1) ==
                                                            cudaSuccess,
        "malloc_async");
  Check(cudaMallocFromPoolAsync(&c, kOdd, pool, s2) == cudaSuccess, "malloc_from_pool_async");
  cudaMemcpyAsync(a, host.data(), kBig, cudaMemcpyHostToDevice, s1);
  cudaMemcpyAsync(b, a, kBig, cudaMemcpyDeviceToDevice, s1);
  cudaMemsetAsync(c, 0x11, kOdd, s2);
  uint64_t used = PoolAttr(pool, cudaMemPoolAttrUsedMemCurrent);
  uint64_t reserved = PoolAttr(pool, cudaMemPoolAttrReservedMemCurrent);
  printf("pool_used_allocated %llu\n", static_cast<unsigned long long>(used));
  printf("pool_reserved_allocated %llu\n", static_cast<unsigned long long>(reserved));
  Check(used == 2 * kBig + kOddRounded && reserved == used, "used_and_reserved_count_allocations");
  cudaMemcpyAsync(back.data(), b, kBig, cudaMemcpyDeviceToHost, s1);  // pageable: returns done
  Check(back == host, "pool_memory_moves_bytes");
  cudaPointerAttributes attr;
  Check(cudaPointerGetAttributes(&attr, a) == cudaSuccess && attr.type == cudaMemoryTypeDevice &&
            attr.device == 0,
        "pool_pointer_is_device_memory");
  cudaFreeAsync(a, s1);
  cudaFreeAsync(b, s1);
  cudaFreeAsync(c, s2);
  Check(PoolAttr(pool, cudaMemPoolAttrUsedMemCurrent) == 0 &&
            PoolAttr(pool, cudaMemPoolAttrReservedMemCurrent) == reserved,
        "free_async_gives_back_keeps_reserved");
  Check(cudaFreeAsync(a, s1) == cudaErrorInvalidValue, "double_free_async_refused");
  cudaGetLastError();
  // The stream order allows s1 to reuse what it freed, whether or not it executed the free.
  int* again = nullptr;
  cudaMallocAsync(&again, kBig, s1);
  Check((again == a || again == b) && PoolAttr(pool, cudaMemPoolAttrReservedMemCurrent) ==
                                          reserved,
        "same_stream_reuse");
  cudaFreeAsync(again, s1);
  cudaStreamSynchronize(s1);
  cudaStreamSynchronize(s2);
  Check(PoolAttr(pool, cudaMemPoolAttrReservedMemCurrent) == reserved,
        "threshold_keeps_memory_after_sync");
  Check(PoolAttr(pool, cudaMemPoolAttrUsedMemHigh) == used &&
            PoolAttr(pool, cudaMemPoolAttrReservedMemHigh) == reserved,
        "high_watermarks");
  // s2's free has executed: another stream may reuse the block (opportunistic reuse).
  char* other = nullptr;
  cudaMallocAsync(&other, kOdd, s1);
  Check(other == c && PoolAttr(pool, cudaMemPoolAttrReservedMemCurrent) == reserved,
        "opportunistic_reuse_after_free_executed");
  cudaFreeAsync(other, s1);
  cudaStreamSynchronize(s1);
  uint64_t zero = 0, one = 1;
  Check(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &zero) == cudaSuccess &&
            PoolAttr(pool, cudaMemPoolAttrUsedMemHigh) == 0,
        "used_high_reset");
  Check(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &one) == cudaErrorInvalidValue,
        "high_reset_only_to_zero");
  Check(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &zero) ==
            cudaErrorInvalidValue,
        "current_is_read_only");
  cudaGetLastError();
  // Trim: idle blocks go back, the pool keeps at least the bytes asked for.
  Check(cudaMemPoolTrimTo(pool, kBig) == cudaSuccess &&
            PoolAttr(pool, cudaMemPoolAttrReservedMemCurrent) == kBig,
        "trim_keeps_min_bytes");
  Check(cudaMemPoolTrimTo(pool, 0) == cudaSuccess &&
            PoolAttr(pool, cudaMemPoolAttrReservedMemCurrent) == 0 &&
            PoolAttr(pool, cudaMemPoolAttrReservedMemHigh) == reserved,
        "trim_to_zero_keeps_high_watermark");

  // The default pool's release threshold is 0: idle memory goes back at the next sync.
  cudaDeviceSetMemPool(0, def);
  void* t = nullptr;
  cudaMallocAsync(&t, kBig, s1);
  cudaFreeAsync(t, s1);
  uint64_t before = PoolAttr(def, cudaMemPoolAttrReservedMemCurrent);
  cudaStreamSynchronize(s1);
  Check(before == kBig && PoolAttr(def, cudaMemPoolAttrReservedMemCurrent) == 0,
        "default_threshold_releases_at_sync");

  // Access: the owner keeps read-write; peers get what cudaMemPoolSetAccess gives.
  cudaMemLocation loc0 = Device(0);
  cudaMemAccessFlags flags = cudaMemAccessFlagsProtNone;
  Check(cudaMemPoolGetAccess(&flags, pool, &loc0) == cudaSuccess &&
            flags == cudaMemAccessFlagsProtReadWrite,
        "owner_has_access");
  cudaMemAccessDesc desc;
  memset(&desc, 0, sizeof(desc));
  desc.location = loc0;
  desc.flags = cudaMemAccessFlagsProtNone;
  Check(cudaMemPoolSetAccess(pool, &desc, 1) == cudaErrorInvalidValue, "owner_access_kept");
  cudaGetLastError();
  if (devices >= 2) {
    // Peer access as the runtime tracks it (the current device is 0).
    Check(cudaDeviceEnablePeerAccess(1, 0) == cudaSuccess, "peer_enable");
    Check(cudaDeviceEnablePeerAccess(1, 0) == cudaErrorPeerAccessAlreadyEnabled,
          "peer_enable_twice");
    Check(cudaDeviceEnablePeerAccess(0, 0) == cudaErrorInvalidDevice, "peer_enable_self");
    Check(cudaDeviceDisablePeerAccess(1) == cudaSuccess, "peer_disable");
    Check(cudaDeviceDisablePeerAccess(1) == cudaErrorPeerAccessNotEnabled, "peer_disable_twice");
    cudaGetLastError();
    cudaMemLocation loc1 = Device(1);
    cudaMemPoolGetAccess(&flags, def, &loc1);
    Check(flags == cudaMemAccessFlagsProtNone, "peer_no_access_by_default");
    desc.location = loc1;
    desc.flags = cudaMemAccessFlagsProtReadWrite;
    Check(cudaMemPoolSetAccess(def, &desc, 1) == cudaSuccess &&
              cudaMemPoolGetAccess(&flags, def, &loc1) == cudaSuccess &&
              flags == cudaMemAccessFlagsProtReadWrite,
          "peer_access_set");
    // streamOrderedAllocationP2P: allocated on device 0, read and freed from device 1.
    int* src0 = nullptr;
    cudaMallocAsync(&src0, kBig, s1);
    cudaMemcpyAsync(src0, host.data(), kBig, cudaMemcpyHostToDevice, s1);
    cudaEvent_t written;
    cudaEventCreate(&written);
    cudaEventRecord(written, s1);
    cudaSetDevice(1);
    cudaStream_t s_peer;
    cudaStreamCreateWithFlags(&s_peer, cudaStreamNonBlocking);
    int* dst1 = nullptr;
    cudaMallocAsync(&dst1, kBig, s_peer);
    cudaStreamWaitEvent(s_peer, written, 0);
    scale_kernel<<<static_cast<unsigned>(host.size() / 256), 256, 0, s_peer>>>(
        src0, dst1, static_cast<int>(host.size()));
    // Device code does not run on gpusim: a peer copy moves the bytes the check reads.
    cudaMemcpyPeerAsync(dst1, 1, src0, 0, kBig, s_peer);
    std::vector<int> peer_back(host.size(), -1);
    cudaMemcpyAsync(peer_back.data(), dst1, kBig, cudaMemcpyDeviceToHost, s_peer);
    cudaFreeAsync(src0, s_peer);
    cudaFreeAsync(dst1, s_peer);
    cudaStreamSynchronize(s_peer);
    Check(peer_back == host && cudaGetLastError() == cudaSuccess, "p2p_pool_memory");
    cudaMemPool_t def1 = nullptr;
    cudaDeviceGetMemPool(&def1, 1);
    Check(def1 != def && PoolAttr(def, cudaMemPoolAttrUsedMemCurrent) == 0 &&
              PoolAttr(def, cudaMemPoolAttrReservedMemCurrent) == 0 &&
              PoolAttr(def1, cudaMemPoolAttrReservedMemCurrent) == 0,
          "cross_device_free_released_at_sync");
    cudaStreamDestroy(s_peer);
    cudaEventDestroy(written);
    cudaSetDevice(0);
  }

  // Destroyed with an allocation outstanding: the allocation stays usable until freed.
  void* outstanding = nullptr;
  cudaMallocFromPoolAsync(&outstanding, 4096, pool, s1);
  cudaDeviceSetMemPool(0, pool);
  Check(cudaMemPoolDestroy(pool) == cudaSuccess, "destroy_pool");
  Check(cudaDeviceGetMemPool(&cur, 0) == cudaSuccess && cur == def,
        "destroyed_current_pool_reverts_to_default");
  Check(cudaMemsetAsync(outstanding, 1, 4096, s1) == cudaSuccess &&
            cudaFreeAsync(outstanding, s1) == cudaSuccess,
        "allocation_outlives_its_pool");
  uint64_t v = 0;
  Check(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &v) ==
            cudaErrorInvalidValue,
        "destroyed_pool_handle_invalid");
  Check(cudaMemPoolDestroy(def) == cudaErrorInvalidValue, "default_pool_not_destroyable");
  Check(cudaMallocFromPoolAsync(&outstanding, 16, nullptr, s1) == cudaErrorInvalidValue,
        "null_pool_refused");
  Check(cudaGetLastError() == cudaErrorInvalidValue, "pool_errors_set_last_error");
  props.location = Device(7);
  Check(cudaMemPoolCreate(&pool, &props) == cudaErrorInvalidValue, "pool_on_missing_device");
  props.location = Device(0);
  props.handleTypes = cudaMemHandleTypePosixFileDescriptor;
  Check(cudaMemPoolCreate(&pool, &props) == cudaErrorNotSupported, "ipc_pool_not_supported");
  cudaGetLastError();

  // A pool of pinned host memory (cudaMemGetDefaultMemPool with a host location).
  cudaMemLocation host_loc;
  host_loc.type = cudaMemLocationTypeHost;
  host_loc.id = 0;
  cudaMemPool_t host_pool = nullptr;
  Check(cudaMemGetDefaultMemPool(&host_pool, &host_loc, cudaMemAllocationTypePinned) ==
                cudaSuccess &&
            host_pool != def,
        "host_default_pool");
  void* hp = nullptr;
  Check(cudaMallocFromPoolAsync(&hp, 1000, host_pool, s1) == cudaSuccess &&
            cudaPointerGetAttributes(&attr, hp) == cudaSuccess &&
            attr.type == cudaMemoryTypeHost && cudaFreeAsync(hp, s1) == cudaSuccess,
        "host_pool_allocation");
  Check(cudaMemGetMemPool(&cur, &loc0, cudaMemAllocationTypePinned) == cudaSuccess && cur == def,
        "mem_get_mem_pool");
  cudaDeviceSynchronize();
  cudaStreamDestroy(s1);
  cudaStreamDestroy(s2);
}

// ---- Stream attributes ----------------------------------------------------------------------

static void StreamAttributes() {
  cudaStream_t s1, s2, sp;
  cudaStreamCreate(&s1);
  cudaStreamCreate(&s2);
  char* base = nullptr;
  cudaMalloc(&base, 1 << 20);
  cudaStreamAttrValue v;
  memset(&v, 0, sizeof(v));
  v.accessPolicyWindow.base_ptr = base;
  v.accessPolicyWindow.num_bytes = 1 << 20;
  v.accessPolicyWindow.hitRatio = 0.6f;
  v.accessPolicyWindow.hitProp = cudaAccessPropertyPersisting;
  v.accessPolicyWindow.missProp = cudaAccessPropertyStreaming;
  Check(cudaStreamSetAttribute(s1, cudaStreamAttributeAccessPolicyWindow, &v) == cudaSuccess,
        "set_access_policy_window");
  cudaStreamAttrValue got;
  memset(&got, 0xff, sizeof(got));
  auto same_window = [&](const cudaAccessPolicyWindow& w) {
    return w.base_ptr == base && w.num_bytes == (1u << 20) && w.hitRatio == 0.6f &&
           w.hitProp == cudaAccessPropertyPersisting && w.missProp == cudaAccessPropertyStreaming;
  };
  Check(cudaStreamGetAttribute(s1, cudaStreamAttributeAccessPolicyWindow, &got) == cudaSuccess &&
            same_window(got.accessPolicyWindow),
        "get_access_policy_window");
  Check(cudaStreamCopyAttributes(s2, s1) == cudaSuccess &&
            cudaStreamGetAttribute(s2, cudaStreamAttributeAccessPolicyWindow, &got) ==
                cudaSuccess &&
            same_window(got.accessPolicyWindow),
        "copy_attributes");
  v.syncPolicy = cudaSyncPolicyYield;
  Check(cudaStreamSetAttribute(s1, cudaStreamAttributeSynchronizationPolicy, &v) == cudaSuccess &&
            cudaStreamGetAttribute(s1, cudaStreamAttributeSynchronizationPolicy, &got) ==
                cudaSuccess &&
            got.syncPolicy == cudaSyncPolicyYield,
        "synchronization_policy");
  Check(cudaStreamGetAttribute(s1, cudaStreamAttributeMemSyncDomainMap, &got) == cudaSuccess &&
            got.memSyncDomainMap.default_ == 0 && got.memSyncDomainMap.remote == 1,
        "default_mem_sync_domain_map");
  v.memSyncDomain = cudaLaunchMemSyncDomainRemote;
  Check(cudaStreamSetAttribute(s1, cudaStreamAttributeMemSyncDomain, &v) == cudaSuccess &&
            cudaStreamGetAttribute(s1, cudaStreamAttributeMemSyncDomain, &got) == cudaSuccess &&
            got.memSyncDomain == cudaLaunchMemSyncDomainRemote,
        "mem_sync_domain");
  cudaStreamCreateWithPriority(&sp, cudaStreamNonBlocking, -3);
  int priority = 0;
  Check(cudaStreamGetAttribute(sp, cudaStreamAttributePriority, &got) == cudaSuccess &&
            got.priority == -3,
        "priority_read_back");
  v.priority = -1;
  Check(cudaStreamSetAttribute(sp, cudaStreamAttributePriority, &v) == cudaSuccess &&
            cudaStreamGetPriority(sp, &priority) == cudaSuccess && priority == -1,
        "priority_set");
  // Errors: ids not valid for streams, values CUDA refuses, bad handles.
  Check(cudaStreamSetAttribute(s1, cudaLaunchAttributeCooperative, &v) == cudaErrorInvalidValue,
        "launch_only_attribute_refused");
  v.accessPolicyWindow.missProp = cudaAccessPropertyPersisting;
  Check(cudaStreamSetAttribute(s1, cudaStreamAttributeAccessPolicyWindow, &v) ==
            cudaErrorInvalidValue,
        "persisting_miss_refused");
  v.accessPolicyWindow.missProp = cudaAccessPropertyNormal;
  v.accessPolicyWindow.hitRatio = 1.5f;
  Check(cudaStreamSetAttribute(s1, cudaStreamAttributeAccessPolicyWindow, &v) ==
            cudaErrorInvalidValue,
        "hit_ratio_above_one_refused");
  int max_window = 0;
  cudaDeviceGetAttribute(&max_window, cudaDevAttrMaxAccessPolicyWindowSize, 0);
  v.accessPolicyWindow.hitRatio = 1.0f;
  v.accessPolicyWindow.num_bytes = static_cast<size_t>(max_window) + 1;
  Check(max_window > 0 && cudaStreamSetAttribute(s1, cudaStreamAttributeAccessPolicyWindow,
                                                 &v) == cudaErrorInvalidValue,
        "window_above_device_max_refused");
  Check(cudaStreamGetAttribute(s1, cudaStreamAttributeAccessPolicyWindow, &got) == cudaSuccess &&
            same_window(got.accessPolicyWindow),
        "refused_sets_change_nothing");
  Check(cudaStreamGetAttribute(s1, cudaStreamAttributeAccessPolicyWindow, nullptr) ==
            cudaErrorInvalidValue,
        "null_value_refused");
  cudaStream_t bogus = reinterpret_cast<cudaStream_t>(0x1234);
  Check(cudaStreamGetAttribute(bogus, cudaStreamAttributePriority, &got) ==
            cudaErrorInvalidResourceHandle,
        "bad_stream_refused");
  Check(cudaGetLastError() == cudaErrorInvalidResourceHandle, "attribute_errors_set_last_error");
  cudaFree(base);
  cudaStreamDestroy(s1);
  cudaStreamDestroy(s2);
  cudaStreamDestroy(sp);
}

// ---- 3D copies and sets -----------------------------------------------------------------------

static void Copies3D(int devices) {
  const size_t W = 100, H = 7, D = 5;
  cudaExtent ext = make_cudaExtent(W, H, D);
  cudaPitchedPtr d1, d2;
  Check(cudaMalloc3D(&d1, ext) == cudaSuccess && d1.pitch >= W && d1.pitch % 512 == 0 &&
            d1.xsize == W && d1.ysize == H && cudaMalloc3D(&d2, ext) == cudaSuccess,
        "malloc3d_pitched");
  std::vector<unsigned char> src(W * H * D), dst(W * H * D, 0);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 7 + 3);
  cudaStream_t s;
  cudaStreamCreate(&s);
  // HtoD (synchronous, legacy stream); then on s: DtoD, a set of a sub-box, DtoH.
  cudaMemcpy3DParms p = {};
  p.srcPtr = make_cudaPitchedPtr(src.data(), W, W, H);
  p.dstPtr = d1;
  p.extent = ext;
  p.kind = cudaMemcpyHostToDevice;
  Check(cudaMemcpy3D(&p) == cudaSuccess, "memcpy3d_htod");
  cudaMemcpy3DParms q = {};
  q.srcPtr = d1;
  q.dstPtr = d2;
  q.extent = ext;
  q.kind = cudaMemcpyDeviceToDevice;
  Check(cudaMemcpy3DAsync(&q, s) == cudaSuccess, "memcpy3d_dtod_async");
  cudaPitchedPtr box = d2;  // the box of 20 x 3 x 2 bytes at (10, 2, 1)
  box.ptr = static_cast<char*>(d2.ptr) + (1 * d2.ysize + 2) * d2.pitch + 10;
  Check(cudaMemset3DAsync(box, 0x5a, make_cudaExtent(20, 3, 2), s) == cudaSuccess,
        "memset3d_async");
  cudaMemcpy3DParms r = {};
  r.srcPtr = d2;
  r.dstPtr = make_cudaPitchedPtr(dst.data(), W, W, H);
  r.extent = ext;
  r.kind = cudaMemcpyDeviceToHost;
  Check(cudaMemcpy3DAsync(&r, s) == cudaSuccess, "memcpy3d_dtoh_async");  // pageable: done
  bool same = true;
  for (size_t z = 0; z < D; ++z) {
    for (size_t y = 0; y < H; ++y) {
      for (size_t x = 0; x < W; ++x) {
        size_t i = (z * H + y) * W + x;
        bool in_box = x >= 10 && x < 30 && y >= 2 && y < 5 && z >= 1 && z < 3;
        same &= dst[i] == (in_box ? 0x5a : src[i]);
      }
    }
  }
  Check(same, "every_byte_3d_roundtrip");

  // A sub-box between positions, into host memory with its own pitch and slice gaps.
  const size_t kPitch = 64, kYsize = 6;
  std::vector<unsigned char> sub(kPitch * kYsize * 3, 0xee);
  cudaMemcpy3DParms t = {};
  t.srcPtr = d1;
  t.srcPos = make_cudaPos(5, 1, 2);
  t.dstPtr = make_cudaPitchedPtr(sub.data(), kPitch, 50, kYsize);
  t.dstPos = make_cudaPos(4, 1, 0);
  t.extent = make_cudaExtent(50, 4, 3);
  t.kind = cudaMemcpyDeviceToHost;
  Check(cudaMemcpy3D(&t) == cudaSuccess, "memcpy3d_sub_box");
  same = true;
  for (size_t z = 0; z < 3; ++z) {
    for (size_t y = 0; y < kYsize; ++y) {
      for (size_t x = 0; x < kPitch; ++x) {
        bool in = x >= 4 && x < 54 && y >= 1 && y < 5;
        unsigned char want = in ? src[((z + 2) * H + y) * W + (x - 4 + 5)] : 0xee;
        same &= sub[(z * kYsize + y) * kPitch + x] == want;
      }
    }
  }
  Check(same, "every_byte_sub_box_positions_pitches");

  // cudaMemset3D over the whole allocation; read back with one 1D copy of the pitched memory.
  Check(cudaMemset3D(d1, 0x33, ext) == cudaSuccess, "memset3d");
  std::vector<unsigned char> raw(d1.pitch * H * D, 0);
  cudaMemcpy(raw.data(), d1.ptr, raw.size(), cudaMemcpyDeviceToHost);
  same = true;
  for (size_t row = 0; row < H * D; ++row) {
    for (size_t x = 0; x < W; ++x) same &= raw[row * d1.pitch + x] == 0x33;
  }
  Check(same, "memset3d_every_row");

  // Captured, a 3D copy becomes a memcpy node with its 3D parameters; a launch copies the slices
  // (here the first three of d2 into d1).
  cudaMemcpy3DParms g = {};
  g.srcPtr = d2;
  g.dstPtr = d1;
  g.extent = make_cudaExtent(W, H, 3);
  g.kind = cudaMemcpyDeviceToDevice;
  cudaGraph_t graph = nullptr;
  cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
  cudaMemcpy3DAsync(&g, s);
  cudaStreamEndCapture(s, &graph);
  cudaGraphNode_t node = nullptr;
  size_t nodes = 1;
  cudaMemcpy3DParms node_params = {};
  Check(cudaGraphGetNodes(graph, &node, &nodes) == cudaSuccess && nodes == 1 &&
            cudaGraphMemcpyNodeGetParams(node, &node_params) == cudaSuccess &&
            node_params.extent.depth == 3 && node_params.extent.height == H &&
            node_params.srcPtr.ysize == H && node_params.dstPtr.pitch == d1.pitch,
        "captured_3d_copy_node");
  cudaGraphExec_t exec = nullptr;
  cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphLaunch(exec, s);
  cudaStreamSynchronize(s);
  cudaMemcpy(raw.data(), d1.ptr, raw.size(), cudaMemcpyDeviceToHost);
  same = true;
  for (size_t z = 0; z < D; ++z) {
    for (size_t y = 0; y < H; ++y) {
      for (size_t x = 0; x < W; ++x) {
        unsigned char want = z < 3 ? dst[(z * H + y) * W + x] : 0x33;
        same &= raw[(z * H + y) * d1.pitch + x] == want;
      }
    }
  }
  Check(same, "every_byte_3d_graph_launch");
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);

  // cudaMemcpy3DPeer to a cudaMalloc3D allocation of another device (or the same one).
  int peer = devices >= 2 ? 1 : 0;
  cudaPitchedPtr d3;
  cudaSetDevice(peer);
  cudaMalloc3D(&d3, make_cudaExtent(64, 2, 3));
  cudaSetDevice(0);
  cudaMemcpy3DPeerParms pp = {};
  pp.srcPtr = d2;
  pp.srcDevice = 0;
  pp.dstPtr = d3;
  pp.dstDevice = peer;
  pp.extent = make_cudaExtent(64, 2, 3);
  Check(cudaMemcpy3DPeer(&pp) == cudaSuccess, "memcpy3d_peer");
  std::vector<unsigned char> peer_back(64 * 2 * 3, 0);
  cudaMemcpy3DParms u = {};
  u.srcPtr = d3;
  u.dstPtr = make_cudaPitchedPtr(peer_back.data(), 64, 64, 2);
  u.extent = make_cudaExtent(64, 2, 3);
  u.kind = cudaMemcpyDefault;
  cudaMemcpy3D(&u);
  same = true;
  for (size_t z = 0; z < 3; ++z) {
    for (size_t y = 0; y < 2; ++y) {
      for (size_t x = 0; x < 64; ++x) {
        same &= peer_back[(z * 2 + y) * 64 + x] == dst[(z * H + y) * W + x];
      }
    }
  }
  Check(same, "every_byte_3d_peer");

  // Errors: an unknown CUDA array (arrays: sim_arrays), a bad kind, overlapping slices.
  cudaMemcpy3DParms arr = {};
  arr.srcArray = reinterpret_cast<cudaArray_t>(0x1000);
  arr.dstPtr = d1;
  arr.extent = make_cudaExtent(4, 4, 1);
  arr.kind = cudaMemcpyDeviceToDevice;
  Check(cudaMemcpy3D(&arr) == cudaErrorInvalidValue, "unknown_array_refused");
  q.kind = static_cast<cudaMemcpyKind>(7);
  Check(cudaMemcpy3DAsync(&q, s) == cudaErrorInvalidMemcpyDirection, "bad_kind");
  q.kind = cudaMemcpyDeviceToDevice;
  q.dstPtr.ysize = H - 1;
  Check(cudaMemcpy3DAsync(&q, s) == cudaErrorInvalidValue, "overlapping_slices_refused");
  cudaPitchedPtr null_ptr = d1;
  null_ptr.ptr = nullptr;
  Check(cudaMemset3D(null_ptr, 0, ext) == cudaErrorInvalidValue, "memset3d_null_refused");
  Check(cudaGetLastError() == cudaErrorInvalidValue, "copy3d_errors_set_last_error");
  cudaStreamSynchronize(s);
  cudaStreamDestroy(s);
  cudaFree(d1.ptr);
  cudaFree(d2.ptr);
  cudaSetDevice(peer);
  cudaFree(d3.ptr);
  cudaSetDevice(0);
}

// ---- Hints, driver entry points, occupancy ----------------------------------------------------

static void Hints() {
  int* managed = nullptr;
  cudaMallocManaged(&managed, 4096);
  Check(cudaMemPrefetchAsync(managed, 4096, Device(0), 0, 0) == cudaSuccess &&
            cudaMemAdvise(managed, 4096, cudaMemAdviseSetReadMostly, Device(0)) == cudaSuccess,
        "prefetch_and_advise");
  Check(cudaMemPrefetchAsync(managed, 4096, Device(9), 0, 0) == cudaErrorInvalidDevice,
        "prefetch_bad_device");
  Check(cudaMemPrefetchAsync(managed, 4096, Device(0), 0,
                             reinterpret_cast<cudaStream_t>(0x4321)) ==
            cudaErrorInvalidResourceHandle,
        "prefetch_bad_stream");
  Check(cudaGetLastError() == cudaErrorInvalidResourceHandle, "hint_errors_set_last_error");
  void* fn = reinterpret_cast<void*>(1);
  cudaDriverEntryPointQueryResult status = cudaDriverEntryPointSuccess;
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"  // still what many programs call
  // A driver function the simulator does not have (its memory functions are found: sim_vmm).
  Check(cudaGetDriverEntryPoint("cuGraphicsGLRegisterBuffer", &fn, cudaEnableDefault, &status) ==
                cudaErrorNotSupported &&
            fn == nullptr && status == cudaDriverEntryPointSymbolNotFound,
        "driver_entry_point_not_found");
#pragma GCC diagnostic pop
  status = cudaDriverEntryPointSuccess;
  Check(cudaGetDriverEntryPointByVersion("cuGraphicsGLRegisterBuffer", &fn, 12000,
                                         cudaEnableDefault, &status) == cudaErrorNotSupported &&
            status == cudaDriverEntryPointSymbolNotFound,
        "driver_entry_point_by_version_not_found");
  Check(cudaGetDriverEntryPointByVersion("cuMemAlloc", &fn, 99000, cudaEnableDefault,
                                         &status) == cudaErrorInvalidValue,
        "driver_entry_point_future_version");
  cudaGetLastError();
  size_t smem = 0;
  Check(cudaOccupancyAvailableDynamicSMemPerBlock(&smem, scale_kernel, 2, 256) == cudaSuccess,
        "available_dynamic_smem");
  printf("available_dynamic_smem_2_blocks %zu\n", smem);
  int blocks = 0;
  ::cudaOccupancyMaxActiveBlocksPerMultiprocessor(  // the C entry point, not the template
      &blocks, reinterpret_cast<const void*>(scale_kernel), 256, smem);
  Check(blocks >= 2, "available_smem_fits_the_blocks");
  cudaFuncAttributes fa;
  Check(cudaFuncSetAttribute(scale_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             100000) == cudaSuccess &&
            cudaFuncGetAttributes(&fa, scale_kernel) == cudaSuccess &&
            fa.maxDynamicSharedSizeBytes == 100000,
        "func_max_dynamic_smem");
  cudaChannelFormatDesc channel = cudaCreateChannelDesc(8, 8, 0, 0, cudaChannelFormatKindUnsigned);
  Check(channel.x == 8 && channel.y == 8 && channel.z == 0 &&
            channel.f == cudaChannelFormatKindUnsigned,
        "create_channel_desc");
  cudaFree(managed);
}

int main() {
  auto set_observer = reinterpret_cast<decltype(&gpusim_set_observer)>(
      dlsym(RTLD_DEFAULT, "gpusim_set_observer"));
  Check(set_observer != nullptr, "observer_symbol");
  if (failures != 0) return failures;
  set_observer(OnApi, OnOp, nullptr);
  int devices = 0;
  cudaGetDeviceCount(&devices);
  Pools(devices);
  StreamAttributes();
  Copies3D(devices);
  Hints();
  cudaDeviceSynchronize();
  set_observer(nullptr, nullptr, nullptr);

  // Every call reported at enter and exit with its CUPTI cbid; failures with their error.
  const std::map<std::string, int> kCbids = {
      {"cudaMemPoolCreate", CUPTI_RUNTIME_TRACE_CBID_cudaMemPoolCreate_v11020},
      {"cudaMemPoolDestroy", CUPTI_RUNTIME_TRACE_CBID_cudaMemPoolDestroy_v11020},
      {"cudaCreateChannelDesc", CUPTI_RUNTIME_TRACE_CBID_cudaCreateChannelDesc_v3020},
      {"cudaMemPoolSetAttribute", CUPTI_RUNTIME_TRACE_CBID_cudaMemPoolSetAttribute_v11020},
      {"cudaMemPoolGetAttribute", CUPTI_RUNTIME_TRACE_CBID_cudaMemPoolGetAttribute_v11020},
      {"cudaMemPoolTrimTo", CUPTI_RUNTIME_TRACE_CBID_cudaMemPoolTrimTo_v11020},
      {"cudaMemPoolSetAccess", CUPTI_RUNTIME_TRACE_CBID_cudaMemPoolSetAccess_v11020},
      {"cudaMemPoolGetAccess", CUPTI_RUNTIME_TRACE_CBID_cudaMemPoolGetAccess_v11020},
      {"cudaDeviceGetDefaultMemPool", CUPTI_RUNTIME_TRACE_CBID_cudaDeviceGetDefaultMemPool_v11020},
      {"cudaDeviceGetMemPool", CUPTI_RUNTIME_TRACE_CBID_cudaDeviceGetMemPool_v11020},
      {"cudaDeviceSetMemPool", CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSetMemPool_v11020},
      {"cudaMemGetDefaultMemPool", CUPTI_RUNTIME_TRACE_CBID_cudaMemGetDefaultMemPool_v13000},
      {"cudaMemGetMemPool", CUPTI_RUNTIME_TRACE_CBID_cudaMemGetMemPool_v13000},
      ENTRY(cudaMallocAsync, v11020, ptsz, v11020),
      ENTRY(cudaMallocFromPoolAsync, v11020, ptsz, v11020),
      ENTRY(cudaFreeAsync, v11020, ptsz, v11020),
      ENTRY(cudaStreamSetAttribute, v11000, ptsz, v11000),
      ENTRY(cudaStreamGetAttribute, v11000, ptsz, v11000),
      ENTRY(cudaStreamCopyAttributes, v11000, ptsz, v11000),
      {"cudaMalloc3D", CUPTI_RUNTIME_TRACE_CBID_cudaMalloc3D_v3020},
      ENTRY(cudaMemcpy3D, v3020, ptds, v7000),
      ENTRY(cudaMemcpy3DAsync, v3020, ptsz, v7000),
      ENTRY(cudaMemcpy3DPeer, v4000, ptds, v7000),
      ENTRY(cudaMemset3D, v3020, ptds, v7000),
      ENTRY(cudaMemset3DAsync, v3020, ptsz, v7000),
      ENTRY(cudaMemPrefetchAsync, v12020, ptsz, v12020),
      {"cudaMemAdvise", CUPTI_RUNTIME_TRACE_CBID_cudaMemAdvise_v12020},
      ENTRY(cudaGetDriverEntryPoint, v11030, ptsz, v11030),
      ENTRY(cudaGetDriverEntryPointByVersion, v12050, ptsz, v12050),
      {"cudaOccupancyAvailableDynamicSMemPerBlock",
       CUPTI_RUNTIME_TRACE_CBID_cudaOccupancyAvailableDynamicSMemPerBlock_v10200},
      {"cudaOccupancyMaxActiveBlocksPerMultiprocessor",
       CUPTI_RUNTIME_TRACE_CBID_cudaOccupancyMaxActiveBlocksPerMultiprocessor_v6050},
  };
  std::map<std::string, int> seen;
  std::map<uint32_t, int> per_corr;
  bool cbids_ok = true, all_have_cbids = true;
  for (const ApiRec& a : g_api) {
    ++per_corr[a.corr];
    all_have_cbids &= a.cbid != 0;
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
  Check(all_have_cbids, "every_call_has_a_cbid");
  Check(cbids_ok && seen.size() == kCbids.size(), "cbids_of_the_new_entry_points");
  bool failure_reported = false;
  for (const ApiRec& a : g_api) {
    failure_reported |= a.func == "cudaMemPoolDestroy" && a.is_exit == 1 &&
                        a.ret == cudaErrorInvalidValue;
  }
  Check(failure_reported, "failed_call_reports_its_error");
  // The 3D ops are correlated to the call that enqueued them.
  int copies3d = 0, sets3d = 0;
  for (const OpRec& op : g_ops) {
    std::string call = CallOf(op.corr);
    if (op.kind == GPUSIM_OP_MEMCPY && op.bytes == 100 * 7 * 5) {
      copies3d += call == (op.copy_kind == cudaMemcpyHostToDevice
                               ? CALL_NAME(cudaMemcpy3D, ptds)
                               : CALL_NAME(cudaMemcpy3DAsync, ptsz));
    } else if (op.kind == GPUSIM_OP_MEMSET && op.bytes == 20 * 3 * 2) {
      sets3d += call == CALL_NAME(cudaMemset3DAsync, ptsz);
    }
  }
  Check(copies3d == 3 && sets3d == 1, "3d_ops_correlated_to_their_call");
  printf("failures %d\n", failures);
  return failures;
}
