// CUPTI as a device-timing source: loading libcupti lazily, subscribing, turning activity
// records into kDeviceOp events, and giving each intercepted runtime call the correlation id
// CUPTI assigned to it.
//
// Lifecycle: StartCupti() runs once, on the application thread that made the first intercepted
// CUDA call (slow path: dlopen, subscribe, enable). After it succeeded:
//  * runtime-API callbacks (launch/memcpy/memset/graph-launch cbids) store the call's
//    correlation id in ThreadState::api_corr at API enter; the interposer reads it after the
//    real call returns. If the call did not come through an agent interposer (in_runtime == 0,
//    e.g. the agent was injected with CUDA_INJECTION64_PATH only), the callback records the host
//    event itself, so every launch appears exactly once.
//  * driver-API launch callbacks (cuLaunchKernel*) outside any runtime call record the launch
//    (NCCL's kernels, statically linked cudart) and SetLastDriverLaunchCorrelation().
//  * activity buffers are tool-owned (malloc'ed in the request callback) and converted on the
//    thread CUPTI delivers them on; a background thread forces a flush every 200 ms, and
//    AtShutdown flushes the rest.
//
// Thread safety: all functions may be called from any thread. Only ThreadState access and
// CuptiActive() are hot-path safe.
#ifndef PROFAGENT_AGENT_HOOKS_CUPTI_CUPTI_TRACER_H_
#define PROFAGENT_AGENT_HOOKS_CUPTI_CUPTI_TRACER_H_

#include <atomic>
#include <cstdint>
#include <string>

namespace profagent {
namespace cupti {

// Per-thread state shared by the runtime interposers and the CUPTI callbacks.
struct ThreadState {
  uint32_t api_corr;     // correlation id of the current runtime call (set at callback enter)
  uint16_t in_runtime;   // > 0 while an agent runtime interposer runs the real function
  uint16_t rt_cb_depth;  // > 0 between a runtime API callback's enter and exit
  uint32_t rt_cbid;      // callback id of the outermost runtime call (valid while rt_cb_depth > 0)
  uint64_t rt_t0;        // enter time (ticks) of a runtime call recorded from callbacks
  uint64_t drv_t0;       // enter time (ticks) of a driver launch recorded from callbacks
  // Whether the outermost runtime call, or the driver launch, began while recording: only the
  // kernels of such calls are waited for at a finish (WaitForInFlight).
  bool rt_recording;
  bool drv_recording;
};
extern thread_local ThreadState t_state __attribute__((tls_model("initial-exec")));

namespace internal {
extern std::atomic<bool> g_active;
}  // namespace internal

// True once StartCupti succeeded (and until StopCupti). One relaxed load.
inline bool CuptiActive() { return internal::g_active.load(std::memory_order_relaxed); }

// Loads libcupti and starts tracing. `explicit_path`: PROFAGENT_CUPTI_PATH ("" = search next to
// the libcudart that holds `cudart_symbol`, then the default library path). On failure returns
// false with a one-line `reason` ("CUPTI: cuptiSubscribe_v2 returned CUPTI_ERROR_UNKNOWN (no
// driver?)") and leaves nothing enabled. On success `reason` says what is in force. Slow path;
// call once (later calls return the first result).
bool StartCupti(const std::string& explicit_path, const void* cudart_symbol,
                std::string* reason);

// Capture bookkeeping (agent/core/capture.h) for a call that begins (`begin`) or ends a stream
// capture, with its result (a cudaError_t), whether an interposer or a CUPTI callback saw it: a
// begin that succeeded opens a capture; an end closes it unless the runtime says the capture
// goes on (ended from the wrong thread, or there was none).
void NoteCaptureCall(uint64_t stream, bool begin, int result);

// Has CUPTI deliver its buffered activity records now and converts them. Slow path. `forced`:
// every buffer, with the records of work still running incomplete (untimed, never delivered
// again): the end of the session only; otherwise the buffers whose records are all complete.
void FlushCupti(bool forced);

// Takes the calling thread's host stack for a launch about to be recorded from a callback (the
// stack, sampled as PROFAGENT_STACKS says, is emitted before the launch and attached to it).
// Registered by the runtime hooks, which own libunwind; null: no stacks.
using LaunchStackFn = void (*)(uint64_t t);
void SetLaunchStackCapture(LaunchStackFn fn);

// CUPTI's id of a stream (the streamId of its activity records): cudaStreamLegacy (0x1) and
// cudaStreamPerThread (0x2, the calling thread's) included. False when CUPTI is not running or
// does not know the stream.
bool StreamId(uint64_t handle, uint32_t* id);

// Set by the CUDA-runtime surface: what InitializeInjection calls to decide the timing mode
// (which in turn may call StartCupti). Without it InitializeInjection starts CUPTI directly.
using InjectionStarter = void (*)();
void SetInjectionStarter(InjectionStarter fn);
InjectionStarter GetInjectionStarter();

}  // namespace cupti
}  // namespace profagent

#endif  // PROFAGENT_AGENT_HOOKS_CUPTI_CUPTI_TRACER_H_
