// Multi-stream stream capture, as CUDA graphs with side streams are captured (PyTorch, vLLM):
// stream `main` begins the capture, a side stream joins it by waiting on an event recorded in
// `main` (fork), runs a kernel and a copy, and `main` waits on the side stream's event (join)
// before the capture ends; the graph is launched 3 times. Then a capture into an existing graph
// (cudaStreamBeginCaptureToGraph) on a third stream, launched twice. Finally, work on the side
// stream after the capture, which runs when enqueued. Exit code 0 when every call succeeded.
#include <cuda_runtime.h>

#include <cstdio>

#include "agent/hooks/cuda_runtime/testdata/check.h"

__global__ void fork_main_kernel(float* p) {}
__global__ void fork_side_kernel(float* p) {}
__global__ void to_graph_kernel(float* p) {}
__global__ void after_capture_kernel(float* p) {}

int main() {
  cudaStream_t main_s, side, third;
  CHECK(cudaStreamCreateWithFlags(&main_s, cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithFlags(&third, cudaStreamNonBlocking));
  cudaEvent_t fork_ev, join_ev;
  CHECK(cudaEventCreateWithFlags(&fork_ev, cudaEventDisableTiming));
  CHECK(cudaEventCreateWithFlags(&join_ev, cudaEventDisableTiming));
  float* dev = nullptr;
  CHECK(cudaMalloc(&dev, 1 << 16));

  CHECK(cudaStreamBeginCapture(main_s, cudaStreamCaptureModeGlobal));
  fork_main_kernel<<<4, 64, 0, main_s>>>(dev);
  CHECK(cudaEventRecord(fork_ev, main_s));
  CHECK(cudaStreamWaitEvent(side, fork_ev, 0));  // `side` joins the capture
  fork_side_kernel<<<8, 64, 0, side>>>(dev);
  CHECK(cudaMemcpyAsync(dev + 1024, dev, 4096, cudaMemcpyDeviceToDevice, side));
  CHECK(cudaEventRecord(join_ev, side));
  CHECK(cudaStreamWaitEvent(main_s, join_ev, 0));
  cudaGraph_t graph;
  CHECK(cudaStreamEndCapture(main_s, &graph));
  cudaGraphExec_t exec;
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (int i = 0; i < 3; ++i) CHECK(cudaGraphLaunch(exec, main_s));
  CHECK(cudaStreamSynchronize(main_s));

  cudaGraph_t graph2;
  CHECK(cudaGraphCreate(&graph2, 0));
  CHECK(cudaStreamBeginCaptureToGraph(third, graph2, nullptr, nullptr, 0,
                                      cudaStreamCaptureModeThreadLocal));
  to_graph_kernel<<<2, 32, 0, third>>>(dev);
  cudaGraph_t same;
  CHECK(cudaStreamEndCapture(third, &same));
  cudaGraphExec_t exec2;
  CHECK(cudaGraphInstantiate(&exec2, graph2, 0));
  for (int i = 0; i < 2; ++i) CHECK(cudaGraphLaunch(exec2, third));
  CHECK(cudaStreamSynchronize(third));

  after_capture_kernel<<<1, 32, 0, side>>>(dev);
  CHECK(cudaStreamSynchronize(side));
  CHECK(cudaGraphExecDestroy(exec));
  CHECK(cudaGraphExecDestroy(exec2));
  CHECK(cudaGraphDestroy(graph));
  CHECK(cudaGraphDestroy(graph2));
  CHECK(cudaFree(dev));
  printf("errors=%d\n", errors);
  return errors == 0 ? 0 : 1;
}
