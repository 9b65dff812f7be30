// gpusim timing scenario: every kernel has a unique name so cudart_sim_test can find it in the
// ground-truth log and check order, overlap, legacy-stream synchronization, host functions,
// cross-stream events, graph replay and GPUSIM_COSTS durations. Prints "elapsed_ms <v>" (event
// timing around p1_long), "phase1_synced_ns <t>" (host CLOCK_MONOTONIC when
// cudaDeviceSynchronize returned), "hostfn_ran <n>"; exit code 0 unless a CUDA call failed.
#include <cuda_runtime.h>

#include <time.h>

#include <cstdio>

__global__ void p1_warm() {}
__global__ void p1_long() {}
__global__ void p1_mid() {}
__global__ void p1_other() {}
__global__ void p2_long() {}
__global__ void p2_legacy() {}
__global__ void p2_nonblocking() {}
__global__ void p2_after() {}
__global__ void p3_first() {}
__global__ void p3_waiter() {}
__global__ void p3_after() {}
__global__ void g_first() {}
__global__ void g_second() {}
__global__ void g_forked() {}

static int errors = 0;
#define CHECK(call)                                                                  \
  do {                                                                               \
    cudaError_t e_ = (call);                                                         \
    if (e_ != cudaSuccess) {                                                         \
      printf("FAIL %s: %s\n", #call, cudaGetErrorName(e_));                          \
      ++errors;                                                                      \
    }                                                                                \
  } while (0)

static void CUDART_CB HostFn(void* arg) { ++*static_cast<int*>(arg); }

int main() {
  cudaStream_t s1, s2, s3;
  CHECK(cudaStreamCreate(&s1));
  CHECK(cudaStreamCreate(&s2));
  CHECK(cudaStreamCreateWithFlags(&s3, cudaStreamNonBlocking));
  cudaEvent_t ev0, ev1, ev2;
  CHECK(cudaEventCreate(&ev0));
  CHECK(cudaEventCreate(&ev1));
  CHECK(cudaEventCreateWithFlags(&ev2, cudaEventDisableTiming));

  // Phase 1: order within s1, overlap of s1 and s2, event timing. p1_warm keeps s1 busy so
  // that ev0, p1_long and ev1 follow each other without gaps on the device.
  p1_warm<<<1, 32, 0, s1>>>();
  CHECK(cudaEventRecord(ev0, s1));
  p1_long<<<1, 32, 0, s1>>>();
  CHECK(cudaEventRecord(ev1, s1));
  p1_mid<<<1024, 256, 0, s1>>>();
  p1_other<<<1, 32, 0, s2>>>();
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  printf("phase1_synced_ns %lld\n", now.tv_sec * 1000000000ll + now.tv_nsec);
  float ms = -1;
  CHECK(cudaEventElapsedTime(&ms, ev0, ev1));
  printf("elapsed_ms %.6f\n", ms);

  // Phase 2: the legacy default stream waits for s1 and holds back s2, not the non-blocking s3.
  p2_long<<<1, 32, 0, s1>>>();
  p2_legacy<<<1, 32>>>();
  p2_nonblocking<<<1, 32, 0, s3>>>();
  p2_after<<<1, 32, 0, s2>>>();
  CHECK(cudaDeviceSynchronize());

  // Phase 3: a host function in s1's order, s2 waits for an event recorded after it.
  int hostfn_ran = 0;
  p3_first<<<1, 32, 0, s1>>>();
  CHECK(cudaLaunchHostFunc(s1, HostFn, &hostfn_ran));
  CHECK(cudaEventRecord(ev2, s1));
  p3_after<<<1, 32, 0, s1>>>();  // s2 waits for ev2, not for this
  CHECK(cudaStreamWaitEvent(s2, ev2, 0));
  p3_waiter<<<1, 32, 0, s2>>>();
  CHECK(cudaStreamSynchronize(s2));
  printf("hostfn_ran %d\n", hostfn_ran);
  if (cudaEventElapsedTime(&ms, ev0, ev2) != cudaErrorInvalidResourceHandle) {
    printf("FAIL elapsed time on a DisableTiming event\n");
    ++errors;
  }
  cudaGetLastError();

  // Phase 4: capture two kernels and a memset, replay the graph twice.
  void* buf = nullptr;
  CHECK(cudaMalloc(&buf, 4096));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CHECK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));
  cudaStreamCaptureStatus status;
  CHECK(cudaStreamIsCapturing(s1, &status));
  g_first<<<2, 64, 0, s1>>>();
  CHECK(cudaMemsetAsync(buf, 1, 4096, s1));
  g_second<<<4, 64, 0, s1>>>();
  // Fork s2 into the capture and join it back (multi-stream capture, replayed in order).
  cudaEvent_t fork_ev, join_ev;
  CHECK(cudaEventCreateWithFlags(&fork_ev, cudaEventDisableTiming));
  CHECK(cudaEventCreateWithFlags(&join_ev, cudaEventDisableTiming));
  CHECK(cudaEventRecord(fork_ev, s1));
  CHECK(cudaStreamWaitEvent(s2, fork_ev, 0));
  g_forked<<<1, 32, 0, s2>>>();
  CHECK(cudaEventRecord(join_ev, s2));
  CHECK(cudaStreamWaitEvent(s1, join_ev, 0));
  CHECK(cudaStreamEndCapture(s1, &graph));
  cudaStreamCaptureStatus s2_status;
  CHECK(cudaStreamIsCapturing(s2, &s2_status));
  printf("s2_capturing_after_end %d\n", s2_status == cudaStreamCaptureStatusActive ? 1 : 0);
  printf("capturing %d\n", status == cudaStreamCaptureStatusActive ? 1 : 0);
  CHECK(cudaStreamSynchronize(s1));  // nothing ran during the capture
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  CHECK(cudaGraphLaunch(exec, s1));
  CHECK(cudaGraphLaunch(exec, s1));
  CHECK(cudaStreamSynchronize(s1));
  CHECK(cudaGraphExecDestroy(exec));
  CHECK(cudaGraphDestroy(graph));

  CHECK(cudaFree(buf));
  CHECK(cudaStreamDestroy(s1));
  CHECK(cudaStreamDestroy(s2));
  CHECK(cudaStreamDestroy(s3));
  printf("errors %d\n", errors);
  return errors;
}
