// A multi-stream capture (fork/join) seen by an agent injected as CUDA_INJECTION64_PATH makes it
// (as rt_inject: argv[1] dlopened privately, InitializeInjection called), so only through CUPTI
// callbacks: s0 begins a capture and records `fork`; s1 waits on it (joins the capture),
// launches a kernel and records `join`; s0 waits on that and launches one too; the capture
// ends; the graph runs 3 times. Then s1 launches one kernel of its own (not captured). Prints
// "errors=N"; exit code 0 when every call succeeded. argv[1] "-": no injection (the agent
// preloaded); argv[2]: how many kernels s1 launches in the capture (1).
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "agent/hooks/cuda_runtime/testdata/check.h"
#include "agent/hooks/cuda_runtime/testdata/inject.h"

__global__ void join_side_kernel(int i) {}
__global__ void join_main_kernel(int i) {}

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  // "-": no injection (the agent preloaded, or none); argv[2]: side kernels captured (1).
  if (std::string(argv[1]) != "-" && InjectAgent(argv[1]) != 1) return 3;
  const int side = argc > 2 ? std::atoi(argv[2]) : 1;
  cudaStream_t s0 = nullptr, s1 = nullptr;
  cudaEvent_t fork = nullptr, join = nullptr;
  CHECK(cudaStreamCreateWithFlags(&s0, cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
  CHECK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
  CHECK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  CHECK(cudaStreamBeginCapture(s0, cudaStreamCaptureModeThreadLocal));
  CHECK(cudaEventRecord(fork, s0));
  CHECK(cudaStreamWaitEvent(s1, fork, 0));
  for (int i = 0; i < side; ++i) join_side_kernel<<<2, 32, 0, s1>>>(1);
  CHECK(cudaEventRecord(join, s1));
  CHECK(cudaStreamWaitEvent(s0, join, 0));
  join_main_kernel<<<2, 32, 0, s0>>>(2);
  CHECK(cudaStreamEndCapture(s0, &graph));
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (int i = 0; i < 3; ++i) CHECK(cudaGraphLaunch(exec, s0));
  CHECK(cudaStreamSynchronize(s0));
  join_side_kernel<<<2, 32, 0, s1>>>(3);  // s1 left the capture with it: runs now
  CHECK(cudaStreamSynchronize(s1));
  CHECK(cudaGraphExecDestroy(exec));
  CHECK(cudaGraphDestroy(graph));
  printf("errors=%d\n", errors);
  return errors == 0 ? 0 : 1;
}
