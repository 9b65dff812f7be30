#include "tests/gpusim/sim_pool.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "tests/gpusim/sim_device.h"

namespace gpusim {
namespace {

// Locations a pool can have, as indices: devices 0..kMaxDevices-1, then the host, host NUMA
// node 0 and "no location" (managed pools only). Managed pools use the second half of the key
// range.
constexpr int kHostLocation = kMaxDevices;
constexpr int kHostNumaLocation = kMaxDevices + 1;
constexpr int kNoLocation = kMaxDevices + 2;
constexpr int kLocations = kMaxDevices + 3;
constexpr int kKeys = 2 * kLocations;

struct PoolBlock {
  enum State { kInUse, kFreePending, kIdle };
  void* ptr = nullptr;
  size_t size = 0;
  MemPool* pool = nullptr;
  State state = kInUse;
  size_t used_bytes = 0;           // the rounded request while in use
  const Stream* free_stream = nullptr;  // of the last free; nullptr after cudaFree
  uint64_t free_token = 0;         // of the pending free (unique in the process)
};

}  // namespace

struct MemPool {
  int key = -1;
  bool is_default = false;
  cudaMemPoolProps props = {};
  MemKind kind = MemKind::kDevice;  // of its allocations
  int device = -1;                  // its device, for device and managed pools on a device
  uint64_t release_threshold = 0;
  int reuse_follow_event_dependencies = 1;
  int reuse_allow_opportunistic = 1;
  int reuse_allow_internal_dependencies = 1;
  uint64_t reserved = 0, reserved_high = 0, used = 0, used_high = 0;
  cudaMemAccessFlags access[kMaxDevices] = {};
  std::vector<PoolBlock*> blocks;  // every reserved block
};

namespace {

struct PoolState {
  std::mutex mu;
  std::vector<MemPool*> pools;  // every pool ever created (never freed)
  std::unordered_set<const MemPool*> live;
  MemPool* defaults[kKeys] = {};
  MemPool* current[kKeys] = {};
  std::unordered_map<const void*, PoolBlock*> blocks;  // every reserved block, by address
  uint64_t next_token = 1;
};

PoolState& P() {
  static PoolState* state = new PoolState();  // never destroyed: workers may outlive exit
  return *state;
}

// The key of (type, location), or -1 where CUDA refuses the combination.
int LocationIndex(const cudaMemLocation& location, bool managed) {
  switch (location.type) {
    case cudaMemLocationTypeDevice:
      return location.id >= 0 && location.id < DeviceCount() ? location.id : -1;
    case cudaMemLocationTypeHost: return kHostLocation;
    case cudaMemLocationTypeHostNuma: return location.id == 0 ? kHostNumaLocation : -1;
    case cudaMemLocationTypeNone: return managed ? kNoLocation : -1;
    default: return -1;
  }
}

int Key(cudaMemAllocationType type, const cudaMemLocation& location) {
  if (type != cudaMemAllocationTypePinned && type != cudaMemAllocationTypeManaged) return -1;
  bool managed = type == cudaMemAllocationTypeManaged;
  int index = LocationIndex(location, managed);
  if (index < 0) return -1;
  return managed ? kLocations + index : index;
}

MemPool* NewPoolLocked(const cudaMemPoolProps& props, int key, bool is_default) {
  MemPool* pool = new MemPool();
  pool->key = key;
  pool->is_default = is_default;
  pool->props = props;
  int index = key % kLocations;
  bool managed = key >= kLocations;
  if (index < kMaxDevices) pool->device = index;
  if (managed) {
    pool->kind = MemKind::kManaged;
    for (cudaMemAccessFlags& a : pool->access) a = cudaMemAccessFlagsProtReadWrite;
  } else if (index < kMaxDevices) {
    pool->kind = MemKind::kDevice;
    pool->access[index] = cudaMemAccessFlagsProtReadWrite;
  } else {
    pool->kind = MemKind::kHost;  // pinned host memory, accessible from the host only
  }
  PoolState& st = P();
  st.pools.push_back(pool);
  st.live.insert(pool);
  return pool;
}

MemPool* DefaultPoolLocked(int key) {
  PoolState& st = P();
  if (st.defaults[key] == nullptr) {
    cudaMemPoolProps props = {};
    props.allocType = key >= kLocations ? cudaMemAllocationTypeManaged
                                        : cudaMemAllocationTypePinned;
    int index = key % kLocations;
    if (index < kMaxDevices) {
      props.location = {cudaMemLocationTypeDevice, index};
    } else if (index == kHostLocation) {
      props.location = {cudaMemLocationTypeHost, 0};
    } else if (index == kHostNumaLocation) {
      props.location = {cudaMemLocationTypeHostNuma, 0};
    } else {
      props.location = {cudaMemLocationTypeNone, 0};
    }
    st.defaults[key] = NewPoolLocked(props, key, /*is_default=*/true);
  }
  return st.defaults[key];
}

MemPool* CurrentPoolLocked(int key) {
  PoolState& st = P();
  return st.current[key] != nullptr ? st.current[key] : DefaultPoolLocked(key);
}

void Raise(uint64_t value, uint64_t* high) {
  if (value > *high) *high = value;
}

void ReleaseBlockLocked(PoolBlock* b) {
  MemPool* pool = b->pool;
  pool->reserved -= b->size;
  pool->blocks.erase(std::find(pool->blocks.begin(), pool->blocks.end(), b));
  P().blocks.erase(b->ptr);
  free(b->ptr);
  delete b;
}

// Releases idle blocks, largest first, as long as the pool keeps at least `keep` bytes
// reserved.
void ReleaseIdleLocked(MemPool* pool, uint64_t keep) {
  if (pool->reserved <= keep) return;
  std::vector<PoolBlock*> idle;
  for (PoolBlock* b : pool->blocks) {
    if (b->state == PoolBlock::kIdle) idle.push_back(b);
  }
  std::sort(idle.begin(), idle.end(),
            [](const PoolBlock* a, const PoolBlock* b) { return a->size > b->size; });
  for (PoolBlock* b : idle) {
    if (pool->reserved - b->size >= keep) ReleaseBlockLocked(b);
  }
}

size_t PoolIdleBytesLocked(int device) {
  size_t idle = 0;
  for (const MemPool* pool : P().pools) {
    if (pool->kind != MemKind::kDevice || pool->device != device) continue;
    for (const PoolBlock* b : pool->blocks) {
      if (b->state != PoolBlock::kInUse) idle += b->size;
    }
  }
  return idle;
}

// Whether a new block of `bytes` fits the pool's maximum size and its device's memory.
bool FitsLocked(const MemPool* pool, size_t bytes) {
  if (pool->props.maxSize != 0 && pool->reserved + bytes > pool->props.maxSize) return false;
  if (pool->kind == MemKind::kHost) return true;
  int device = pool->device >= 0 ? pool->device : CurrentDevice();
  size_t taken = DeviceBytesInUse(device) + PoolIdleBytesLocked(device);
  return taken <= kDeviceMemoryBytes && bytes <= kDeviceMemoryBytes - taken;
}

PoolBlock* FindReusableLocked(MemPool* pool, size_t bytes, const Stream* s) {
  PoolBlock* best = nullptr;
  for (PoolBlock* b : pool->blocks) {
    if (b->state == PoolBlock::kInUse || b->size < bytes || b->size / 2 > bytes) continue;
    bool ordered = b->state == PoolBlock::kFreePending
                       ? b->free_stream == s
                       : b->free_stream == s || b->free_stream == nullptr ||
                             pool->reuse_allow_opportunistic != 0;
    if (ordered && (best == nullptr || b->size < best->size)) best = b;
  }
  return best;
}

}  // namespace

MemPool* DefaultPool(cudaMemAllocationType type, const cudaMemLocation& location) {
  int key = Key(type, location);
  if (key < 0) return nullptr;
  std::lock_guard<std::mutex> lock(P().mu);
  return DefaultPoolLocked(key);
}

MemPool* CurrentPool(cudaMemAllocationType type, const cudaMemLocation& location) {
  int key = Key(type, location);
  if (key < 0) return nullptr;
  std::lock_guard<std::mutex> lock(P().mu);
  return CurrentPoolLocked(key);
}

MemPool* CurrentDevicePool(int device) {
  return CurrentPool(cudaMemAllocationTypePinned, {cudaMemLocationTypeDevice, device});
}

cudaError_t SetCurrentPool(cudaMemAllocationType type, const cudaMemLocation& location,
                           MemPool* pool) {
  int key = Key(type, location);
  PoolState& st = P();
  std::lock_guard<std::mutex> lock(st.mu);
  if (key < 0 || st.live.count(pool) == 0 || pool->key != key) return cudaErrorInvalidValue;
  st.current[key] = pool;
  return cudaSuccess;
}

cudaError_t CreatePool(const cudaMemPoolProps& props, MemPool** out) {
  int key = Key(props.allocType, props.location);
  if (key < 0) return cudaErrorInvalidValue;
  bool on_host = props.location.type == cudaMemLocationTypeHost ||
                 props.location.type == cudaMemLocationTypeHostNuma;
  if (props.handleTypes != cudaMemHandleTypeNone) {
    // Host pools are never IPC capable; the simulated devices export no handle type
    // (cudaDevAttrMemoryPoolSupportedHandleTypes is 0).
    return on_host ? cudaErrorInvalidValue : cudaErrorNotSupported;
  }
  if (props.usage != 0) return cudaErrorNotSupported;  // no hardware decompression engine
  std::lock_guard<std::mutex> lock(P().mu);
  *out = NewPoolLocked(props, key, /*is_default=*/false);
  return cudaSuccess;
}

bool IsLivePool(const MemPool* pool) {
  std::lock_guard<std::mutex> lock(P().mu);
  return P().live.count(pool) != 0;
}

cudaError_t DestroyPool(MemPool* pool) {
  PoolState& st = P();
  std::lock_guard<std::mutex> lock(st.mu);
  if (st.live.count(pool) == 0 || pool->is_default) return cudaErrorInvalidValue;
  st.live.erase(pool);
  if (st.current[pool->key] == pool) st.current[pool->key] = nullptr;
  ReleaseIdleLocked(pool, 0);
  return cudaSuccess;
}

cudaError_t PoolAllocate(MemPool* pool, size_t size, Stream* s, void** ptr) {
  PoolState& st = P();
  std::lock_guard<std::mutex> lock(st.mu);
  if (st.live.count(pool) == 0) return cudaErrorInvalidValue;
  size_t bytes = (std::max<size_t>(size, 1) + kPoolGranularity - 1) / kPoolGranularity *
                 kPoolGranularity;
  if (bytes < size) return cudaErrorMemoryAllocation;  // overflowed
  PoolBlock* b = FindReusableLocked(pool, bytes, s);
  if (b == nullptr) {
    if (!FitsLocked(pool, bytes)) {
      ReleaseIdleLocked(pool, 0);  // what the pool holds idle goes back before failing
      if (!FitsLocked(pool, bytes)) return cudaErrorMemoryAllocation;
    }
    void* mem = aligned_alloc(kPoolGranularity, bytes);
    if (mem == nullptr) return cudaErrorMemoryAllocation;
    memset(mem, 0, bytes);
    b = new PoolBlock();
    b->ptr = mem;
    b->size = bytes;
    b->pool = pool;
    pool->blocks.push_back(b);
    st.blocks[mem] = b;
    pool->reserved += bytes;
    Raise(pool->reserved, &pool->reserved_high);
  }
  b->state = PoolBlock::kInUse;
  b->used_bytes = bytes;
  b->free_stream = nullptr;
  b->free_token = 0;
  pool->used += bytes;
  Raise(pool->used, &pool->used_high);
  int device = pool->device >= 0 ? pool->device : CurrentDevice();
  TrackAllocation(b->ptr, size, pool->kind, device, /*pooled=*/true);
  *ptr = b->ptr;
  return cudaSuccess;
}

bool IsPoolAllocation(const void* ptr) {
  std::lock_guard<std::mutex> lock(P().mu);
  auto it = P().blocks.find(ptr);
  return it != P().blocks.end() && it->second->state == PoolBlock::kInUse;
}

namespace {

// Gives back the allocation at `ptr`; nullptr if it is not an outstanding pool allocation.
PoolBlock* GiveBackLocked(void* ptr) {
  auto it = P().blocks.find(ptr);
  if (it == P().blocks.end() || it->second->state != PoolBlock::kInUse) return nullptr;
  PoolBlock* b = it->second;
  UntrackAllocation(ptr, b->pool->kind != MemKind::kHost);
  b->pool->used -= b->used_bytes;
  b->used_bytes = 0;
  return b;
}

}  // namespace

bool PoolFreeAsync(void* ptr, Stream* s, uint32_t corr) {
  PoolState& st = P();
  std::lock_guard<std::mutex> lock(st.mu);
  PoolBlock* b = GiveBackLocked(ptr);
  if (b == nullptr) return false;
  b->state = PoolBlock::kFreePending;
  b->free_stream = s;
  b->free_token = st.next_token++;
  Op* op = new Op();
  op->action = Op::kFreeMemory;
  op->dst = ptr;
  op->pool_free_token = b->free_token;
  op->rec.correlation_id = corr;
  // Enqueued under the pool lock, so that a same-stream reuse is always behind the free. A
  // captured free becomes a free node that frees nothing: the block stays pending.
  Enqueue(s, op);
  return true;
}

bool PoolFreeNow(void* ptr) {
  std::lock_guard<std::mutex> lock(P().mu);
  PoolBlock* b = GiveBackLocked(ptr);
  if (b == nullptr) return false;
  b->state = PoolBlock::kIdle;
  b->free_stream = nullptr;
  if (P().live.count(b->pool) == 0) ReleaseBlockLocked(b);
  return true;
}

void CompletePoolFree(void* ptr, uint64_t token) {
  PoolState& st = P();
  std::lock_guard<std::mutex> lock(st.mu);
  auto it = st.blocks.find(ptr);
  if (it == st.blocks.end()) return;
  PoolBlock* b = it->second;
  // A block reused on the free's stream, or released by a device reset, has another token.
  if (b->state != PoolBlock::kFreePending || b->free_token != token) return;
  b->state = PoolBlock::kIdle;
  if (st.live.count(b->pool) == 0) ReleaseBlockLocked(b);  // its pool was destroyed
}

void ReleaseAfterSynchronize() {
  PoolState& st = P();
  std::lock_guard<std::mutex> lock(st.mu);
  for (MemPool* pool : st.pools) {
    if (pool->reserved > pool->release_threshold && st.live.count(pool) != 0) {
      ReleaseIdleLocked(pool, pool->release_threshold);
    }
  }
}

void TrimPool(MemPool* pool, size_t min_bytes_to_keep) {
  std::lock_guard<std::mutex> lock(P().mu);
  ReleaseIdleLocked(pool, min_bytes_to_keep);
}

size_t PoolIdleBytes(int device) {
  std::lock_guard<std::mutex> lock(P().mu);
  return PoolIdleBytesLocked(device);
}

cudaError_t SetPoolAttribute(MemPool* pool, cudaMemPoolAttr attr, const void* value) {
  std::lock_guard<std::mutex> lock(P().mu);
  if (P().live.count(pool) == 0 || value == nullptr) return cudaErrorInvalidValue;
  int flag = 0;
  uint64_t bytes = 0;
  memcpy(&flag, value, sizeof(flag));  // the reuse flags are ints
  switch (attr) {
    case cudaMemPoolReuseFollowEventDependencies:
      pool->reuse_follow_event_dependencies = flag != 0;
      return cudaSuccess;
    case cudaMemPoolReuseAllowOpportunistic:
      pool->reuse_allow_opportunistic = flag != 0;
      return cudaSuccess;
    case cudaMemPoolReuseAllowInternalDependencies:
      pool->reuse_allow_internal_dependencies = flag != 0;
      return cudaSuccess;
    default:
      break;
  }
  memcpy(&bytes, value, sizeof(bytes));  // the others are cuuint64_t
  switch (attr) {
    case cudaMemPoolAttrReleaseThreshold:
      pool->release_threshold = bytes;
      return cudaSuccess;
    case cudaMemPoolAttrReservedMemHigh:
      if (bytes != 0) return cudaErrorInvalidValue;
      pool->reserved_high = pool->reserved;
      return cudaSuccess;
    case cudaMemPoolAttrUsedMemHigh:
      if (bytes != 0) return cudaErrorInvalidValue;
      pool->used_high = pool->used;
      return cudaSuccess;
    default:
      return cudaErrorInvalidValue;  // the current sizes are read-only; unknown attributes
  }
}

cudaError_t GetPoolAttribute(MemPool* pool, cudaMemPoolAttr attr, void* value) {
  std::lock_guard<std::mutex> lock(P().mu);
  if (P().live.count(pool) == 0 || value == nullptr) return cudaErrorInvalidValue;
  int flag = -1;
  uint64_t bytes = 0;
  switch (attr) {
    case cudaMemPoolReuseFollowEventDependencies:
      flag = pool->reuse_follow_event_dependencies;
      break;
    case cudaMemPoolReuseAllowOpportunistic: flag = pool->reuse_allow_opportunistic; break;
    case cudaMemPoolReuseAllowInternalDependencies:
      flag = pool->reuse_allow_internal_dependencies;
      break;
    case cudaMemPoolAttrReleaseThreshold: bytes = pool->release_threshold; break;
    case cudaMemPoolAttrReservedMemCurrent: bytes = pool->reserved; break;
    case cudaMemPoolAttrReservedMemHigh: bytes = pool->reserved_high; break;
    case cudaMemPoolAttrUsedMemCurrent: bytes = pool->used; break;
    case cudaMemPoolAttrUsedMemHigh: bytes = pool->used_high; break;
    default: return cudaErrorInvalidValue;
  }
  if (flag >= 0) {
    memcpy(value, &flag, sizeof(flag));
  } else {
    memcpy(value, &bytes, sizeof(bytes));
  }
  return cudaSuccess;
}

cudaError_t SetPoolAccess(MemPool* pool, const cudaMemAccessDesc* descs, size_t count) {
  std::lock_guard<std::mutex> lock(P().mu);
  if (P().live.count(pool) == 0 || (count > 0 && descs == nullptr)) return cudaErrorInvalidValue;
  for (size_t i = 0; i < count; ++i) {  // all or nothing
    const cudaMemAccessDesc& d = descs[i];
    if (d.location.type != cudaMemLocationTypeDevice) return cudaErrorInvalidValue;
    if (d.location.id < 0 || d.location.id >= DeviceCount()) return cudaErrorInvalidDevice;
    if (d.flags != cudaMemAccessFlagsProtNone && d.flags != cudaMemAccessFlagsProtRead &&
        d.flags != cudaMemAccessFlagsProtReadWrite) {
      return cudaErrorInvalidValue;
    }
    // The device a pool's memory lives on keeps its read-write access.
    if (pool->kind == MemKind::kDevice && d.location.id == pool->device &&
        d.flags != cudaMemAccessFlagsProtReadWrite) {
      return cudaErrorInvalidValue;
    }
  }
  for (size_t i = 0; i < count; ++i) pool->access[descs[i].location.id] = descs[i].flags;
  return cudaSuccess;
}

cudaError_t GetPoolAccess(MemPool* pool, const cudaMemLocation& location,
                          cudaMemAccessFlags* flags) {
  std::lock_guard<std::mutex> lock(P().mu);
  if (P().live.count(pool) == 0 || flags == nullptr) return cudaErrorInvalidValue;
  switch (location.type) {
    case cudaMemLocationTypeDevice:
      if (location.id < 0 || location.id >= DeviceCount()) return cudaErrorInvalidDevice;
      *flags = pool->access[location.id];
      return cudaSuccess;
    case cudaMemLocationTypeHost:
    case cudaMemLocationTypeHostNuma:
      *flags = pool->kind == MemKind::kDevice ? cudaMemAccessFlagsProtNone
                                              : cudaMemAccessFlagsProtReadWrite;
      return cudaSuccess;
    default:
      return cudaErrorInvalidValue;
  }
}

void ResetPools(int device) {
  PoolState& st = P();
  std::lock_guard<std::mutex> lock(st.mu);
  for (MemPool* pool : st.pools) {
    if (pool->device != device) continue;
    while (!pool->blocks.empty()) {
      PoolBlock* b = pool->blocks.back();
      if (b->state == PoolBlock::kInUse) UntrackAllocation(b->ptr, true);
      ReleaseBlockLocked(b);
    }
    pool->used = pool->used_high = pool->reserved_high = 0;
    if (!pool->is_default) st.live.erase(pool);
    if (st.current[pool->key] == pool) st.current[pool->key] = nullptr;
  }
}

}  // namespace gpusim
