// Device timing with CUDA events (GPU timing mode "events"): a recycled pool of event pairs per
// device is recorded around each launch/copy/set on its stream; a poller thread (not the
// writer) resolves completed pairs with cudaEventQuery/cudaEventElapsedTime against a reference
// event whose host time is known, and emits kDeviceOp events (kFlagTimeNs).
//
// Hot path: EventTimerBegin/End pop/push lock-free queues and call the real cudaEventRecord;
// no lock, no allocation. When the pool is empty or the pending queue is full the operation is
// simply not timed (counted in the shutdown note). The first use on a device creates its pool
// (slow, once per device; concurrent callers meanwhile get "not timed").
#ifndef PROFAGENT_AGENT_HOOKS_CUDA_RUNTIME_EVENT_TIMER_H_
#define PROFAGENT_AGENT_HOOKS_CUDA_RUNTIME_EVENT_TIMER_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

namespace profagent {
namespace rt {

// What the poller needs to describe the device op once its time is known.
struct DeviceOpInfo {
  const void* func;     // kernel (host stub or cudaKernel_t) for the name, else null
  uint64_t bytes;
  uint64_t graph;       // graph exec for graph launches
  uint32_t corr;
  uint32_t grid_x;
  uint16_t grid_y, grid_z;
  uint32_t block;       // PackBlock
  uint32_t stream;      // low bits of the stream handle
  uint8_t kind;         // profagent.DeviceOpKind
  uint8_t copy_kind;
  uint8_t device;
};

// Starts the poller thread. Slow path, once. Returns false with a reason if impossible.
bool StartEventTimer(std::string* reason);

// Records the start event of a pair on `stream` of `device`. Returns a ticket (>= 0), or -1 when
// this operation is not timed. Hot path.
int32_t EventTimerBegin(int device, cudaStream_t stream);

// Records the stop event and queues the pair for the poller. `ok` false (the real call failed)
// returns the pair to the pool. Hot path.
void EventTimerEnd(int32_t ticket, cudaStream_t stream, const DeviceOpInfo& info, bool ok);

// Remembers a kernel's mangled name so the poller can name its device ops. Slow path.
// The first name noted wins; the returned pointer stays valid for the process lifetime.
void NoteKernelName(const void* func, const char* mangled);
const char* LookupKernelName(const void* func);

}  // namespace rt
}  // namespace profagent

#endif  // PROFAGENT_AGENT_HOOKS_CUDA_RUNTIME_EVENT_TIMER_H_
