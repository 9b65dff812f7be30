// Device timing with CUDA events (GPU timing mode "events"): a recycled pool of event pairs per
// device is recorded around each launch/copy/set on its stream; a poller thread (not the
// writer) resolves completed pairs with cudaEventQuery/cudaEventElapsedTime against a reference
// event whose host time is known, and emits kDeviceOp events (kFlagTimeNs).
//
// Hot path: EventTimerBegin/End pop/push lock-free queues and call the real cudaEventRecord;
// no lock, no allocation. The first use on a device creates its pool with 1024 pairs (slow, once
// per device; concurrent callers wait for it); the poller adds 1024 more whenever fewer than 256
// are free, up to 8192 (a host thousands of operations ahead of its device). When the pool is
// empty or the pending queue is full the operation is simply not timed (counted by cause in the
// shutdown note).
#ifndef PROFAGENT_AGENT_HOOKS_CUDA_RUNTIME_EVENT_TIMER_H_
#define PROFAGENT_AGENT_HOOKS_CUDA_RUNTIME_EVENT_TIMER_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "agent/hooks/cuda_runtime/event_interval.h"

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
  bool sync_call;       // the API call returns only after the operation completed (cudaMemcpy)
  uint64_t call_t0;     // raw ticks (clock.h) around the real API call
  uint64_t call_t1;
};

// EstimateInterval: see event_interval.h.

// Starts the poller thread. Slow path, once. Returns false with a reason if impossible. With
// `probe`, first asks the runtime for the current device and fails when it reports that there
// is no usable GPU (e.g. "cudaGetDevice returned cudaErrorInsufficientDriver"); the probe's own
// error is cleared. Never probe from inside the driver (InitializeInjection runs in cuInit).
bool StartEventTimer(bool probe, std::string* reason);

// Records the start event of a pair on `stream`, from the pool of the calling thread's current
// device (cudaGetDevice: also right when the application chose it through the driver API).
// Returns a ticket (>= 0), or -1 when this operation is not timed: while `stream` is being
// captured into a graph (the agent must not add nodes to the application's graph), when every
// event pair of the device is in flight, or when an event call fails.
//
// The application's last error (cudaGetLastError / cudaPeekAtLastError) is left as its own
// calls make it. With none pending, a failure of the agent's calls is cleared at once. With one
// pending (an error the application has not read, e.g. of an optional cudaSetDevice probe), the
// agent's calls still go ahead, since a successful call leaves a pending error as it is; a failure
// of theirs is left in place then (clearing it would clear the application's error too): it is on
// the application's own stream, where its call fails the same way right after (or, for the first
// use of a device, which creates its event pool, from a runtime that fails the application's
// calls too). When the pool cannot be made because there is no usable
// GPU (cudaErrorNoDevice, cudaErrorInsufficientDriver, ...), the mode becomes "host" with that
// reason (SetGpuTiming) instead of failing every operation. Hot path.
int32_t EventTimerBegin(cudaStream_t stream);
// As EventTimerBegin, for a stream of `device` (e.g. an NCCL communicator's), whatever the
// current device.
int32_t EventTimerBeginOnDevice(int device, cudaStream_t stream);
// The device of a ticket's pool.
int EventTimerDevice(int32_t ticket);
// Streams the application created, with the device current then: an operation on a stream is
// timed with the events of the stream's device, whatever device is current (an event records
// only on a stream of its own device).
void NoteStreamDevice(cudaStream_t stream, int device);
void ForgetStream(cudaStream_t stream);
// The device a created stream was noted with; -1 for the default streams (legacy, per-thread:
// the current device's) and streams the agent did not see made.
int CreatedStreamDevice(cudaStream_t stream);
// DeviceOpInfo.stream for `stream`: its handle's low 32 bits, which the writer maps to the file's
// stream index as it maps the host events' handles; the per-thread default stream
// (cudaStreamPerThread, one per thread) is keyed by the calling thread (writer.cc StreamIndex).
uint32_t StreamKey(cudaStream_t stream);
// cudaDeviceReset of `device` destroys its events, the pool's too. Before the reset: no new
// operation of the device is timed, and those in flight are resolved (the reset would
// synchronize anyway). After it: the pool is made again on the device's next operation.
void EventTimerBeforeReset(int device);
void EventTimerAfterReset(int device);
// Makes the current device's event pool now if it is not made yet (thousands of events and a
// reference synchronization: milliseconds). Called before the application records an event of
// its own, so that this cost does not fall inside the window the application times.
void EventTimerPrepare();

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
