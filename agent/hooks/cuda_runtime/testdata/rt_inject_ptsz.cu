// Built with `nvcc --default-stream per-thread` and the agent injected (argv[1], as rt_inject):
// every call reaches the runtime's _ptsz entry points, stream 0 meaning the calling thread's
// per-thread default stream. The main thread captures its stream 0 (one kernel), while a second
// thread, inside that capture, sets memory on its own stream 0 (not captured); then the graph
// runs twice on stream 0. Prints "errors=N"; exit code 0 when every call succeeded.
#include <cuda_runtime.h>

#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>

#include "agent/hooks/cuda_runtime/testdata/check.h"
#include "agent/hooks/cuda_runtime/testdata/inject.h"

__global__ void ptsz_captured_kernel(int i) {}

int main(int argc, char** argv) {
  if (argc < 2 || InjectAgent(argv[1]) != 1) return 3;
  void* buf = nullptr;
  CHECK(cudaMalloc(&buf, 4096));
  std::mutex mu;
  std::condition_variable cv;
  int stage = 0;  // 1: the capture is open; 2: the other thread's set is done
  std::thread other([&] {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return stage == 1; });
    CHECK(cudaMemsetAsync(buf, 0, 4096, 0));  // its own stream 0: runs now
    CHECK(cudaStreamSynchronize(0));
    stage = 2;
    cv.notify_all();
  });
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  CHECK(cudaStreamBeginCapture(0, cudaStreamCaptureModeThreadLocal));
  ptsz_captured_kernel<<<2, 32>>>(1);
  {
    std::unique_lock<std::mutex> lock(mu);
    stage = 1;
    cv.notify_all();
    cv.wait(lock, [&] { return stage == 2; });
  }
  CHECK(cudaStreamEndCapture(0, &graph));
  other.join();
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (int i = 0; i < 2; ++i) CHECK(cudaGraphLaunch(exec, 0));
  CHECK(cudaStreamSynchronize(0));
  CHECK(cudaGraphExecDestroy(exec));
  CHECK(cudaGraphDestroy(graph));
  CHECK(cudaFree(buf));
  printf("errors=%d\n", errors);
  return errors == 0 ? 0 : 1;
}
