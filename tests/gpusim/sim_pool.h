// Stream-ordered memory pools (cudaMemPool_t) of gpusim's libcudart.so.13: the engine behind
// cudaMallocAsync, cudaMallocFromPoolAsync, cudaFreeAsync and the cudaMemPool* functions
// (entry points in cudart_pools.cc).
//
// A pool owns blocks of host memory (device memory is host memory, as for cudaMalloc). Its
// reserved memory is the sum of its blocks; its used memory the sum of the outstanding
// allocations (each request rounded up to kPoolGranularity bytes). Both have high watermarks.
// - An allocation reuses a free block of the pool when the stream order allows it, else
//   reserves a new block: a block freed on the same stream (even if the stream has not reached
//   the free yet: later work on the stream runs after it), or a block whose free the device has
//   executed, when cudaMemPoolReuseAllowOpportunistic is set. A block is reused only for a
//   request of at least half its size. The allocator never inserts dependencies between streams
//   (cudaMemPoolReuseAllowInternalDependencies is stored and reported, not acted on; so is
//   cudaMemPoolReuseFollowEventDependencies).
// - cudaFreeAsync gives the allocation back at once (used memory drops); its block becomes
//   reusable by other streams, and releasable, when the stream executes the free.
// - After a stream, event or device synchronization (and cudaFree), every pool holding more
//   than its release threshold releases executed-free blocks until it holds at most the
//   threshold (default 0: everything idle goes back). cudaMemPoolTrimTo does the same with its
//   own bound. Blocks backing outstanding allocations or unexecuted frees are never released.
// - Pools have a location and allocation type: pinned device memory (the default pool of each
//   device; allocations are device memory of that device), pinned host memory (cudaMemLocation
//   Host, or HostNuma node 0: the simulated host has one NUMA node) and managed memory. Each
//   (type, location) has a default pool, created at first use, and a current pool (the default
//   until cudaDeviceSetMemPool / cudaMemSetMemPool).
// - Access: a device pool is read-write from its device and, per cudaMemPoolSetAccess, from
//   the others (stored and returned; the simulator does not enforce it).
//
// Thread safety: every function may be called from any thread; one mutex guards all pools. A
// pool handle is never freed: a destroyed pool leaves the live set, so later calls with its
// handle fail instead of crashing, and its outstanding allocations stay valid until freed.
#ifndef PROFAGENT_TESTS_GPUSIM_SIM_POOL_H_
#define PROFAGENT_TESTS_GPUSIM_SIM_POOL_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace gpusim {

struct Stream;
struct MemPool;  // a cudaMemPool_t

constexpr size_t kPoolGranularity = 256;

// The default / current pool of an allocation type and location; nullptr (cudaErrorInvalidValue)
// for a combination CUDA refuses or a device that does not exist.
MemPool* DefaultPool(cudaMemAllocationType type, const cudaMemLocation& location);
MemPool* CurrentPool(cudaMemAllocationType type, const cudaMemLocation& location);
// The current pool of `device` for pinned device memory (what cudaMallocAsync allocates from).
MemPool* CurrentDevicePool(int device);
// Makes `pool` the current pool of its own type and location; cudaErrorInvalidValue if it is
// not a live pool of that type and location.
cudaError_t SetCurrentPool(cudaMemAllocationType type, const cudaMemLocation& location,
                           MemPool* pool);

// cudaMemPoolCreate: validates `props` like the runtime (allocation type, location, handle
// types: IPC export is not simulated, so a non-zero handleTypes is cudaErrorNotSupported).
cudaError_t CreatePool(const cudaMemPoolProps& props, MemPool** out);
bool IsLivePool(const MemPool* pool);
// cudaMemPoolDestroy: cudaErrorInvalidValue for a default pool or a dead handle. Idle blocks
// are released now; the others when their allocation is freed and the free executed.
cudaError_t DestroyPool(MemPool* pool);

// cudaMallocFromPoolAsync on stream `s`: the new allocation is tracked (TrackAllocation, as
// device, host or managed memory per the pool) and returned in *ptr.
cudaError_t PoolAllocate(MemPool* pool, size_t size, Stream* s, void** ptr);
// Whether `ptr` is the start of an outstanding pool allocation.
bool IsPoolAllocation(const void* ptr);
// cudaFreeAsync: if `ptr` starts an outstanding pool allocation, gives it back, enqueues on `s`
// the op that lets its block be reused by other streams and released (`corr`: the API call's
// correlation id) and returns true; otherwise returns false and does nothing.
bool PoolFreeAsync(void* ptr, Stream* s, uint32_t corr);
// cudaFree (after its device synchronization): like PoolFreeAsync, the block idle at once.
bool PoolFreeNow(void* ptr);
// Run by a stream worker when it executes the free op of PoolFreeAsync (Op::pool_free_token).
void CompletePoolFree(void* ptr, uint64_t token);

// After a stream, event or device synchronization: pools above their release threshold release
// idle blocks.
void ReleaseAfterSynchronize();
// cudaMemPoolTrimTo.
void TrimPool(MemPool* pool, size_t min_bytes_to_keep);
// Bytes reserved by the pools of `device` but backing no allocation (cudaMemGetInfo counts them
// as used, as the device does).
size_t PoolIdleBytes(int device);

// cudaMemPoolSetAttribute / GetAttribute with the runtime's validation (value types: uint64_t
// for the threshold and the memory counters, int for the reuse flags; a high watermark can only
// be reset, to the current value, by setting 0).
cudaError_t SetPoolAttribute(MemPool* pool, cudaMemPoolAttr attr, const void* value);
cudaError_t GetPoolAttribute(MemPool* pool, cudaMemPoolAttr attr, void* value);
// cudaMemPoolSetAccess / GetAccess.
cudaError_t SetPoolAccess(MemPool* pool, const cudaMemAccessDesc* descs, size_t count);
cudaError_t GetPoolAccess(MemPool* pool, const cudaMemLocation& location,
                          cudaMemAccessFlags* flags);

// cudaDeviceReset: the device's pools lose every block (memory freed, allocations untracked);
// its created pools are destroyed, its default pools emptied and current again.
void ResetPools(int device);

}  // namespace gpusim

#endif  // PROFAGENT_TESTS_GPUSIM_SIM_POOL_H_
