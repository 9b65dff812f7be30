// A graph launched through the driver API, as cuda-python's driver bindings launch it (here
// through cudaGetDriverEntryPoint, no link to libcuda): a graph of two kernels captured with the
// runtime, launched 3 times with cuGraphLaunch on a created stream inside an NVTX step each,
// then once with cudaGraphLaunch. Prints errors=N (exit 1 when a call failed).
#include <cuda.h>
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#include <cstdio>

#include "agent/hooks/cuda_runtime/testdata/check.h"
#include "agent/hooks/cuda_runtime/testdata/driver.h"

__global__ void drv_graph_a(float* p) {}
__global__ void drv_graph_b(float* p) {}

int main() {
  auto graph_launch = Driver<decltype(&cuGraphLaunch)>("cuGraphLaunch");
  if (graph_launch == nullptr) {
    printf("missing driver entry point\n");
    return 1;
  }
  cudaStream_t s = nullptr;
  CHECK(cudaStreamCreate(&s));
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  drv_graph_a<<<2, 32, 0, s>>>(nullptr);
  drv_graph_b<<<4, 32, 0, s>>>(nullptr);
  CHECK(cudaStreamEndCapture(s, &graph));
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (int i = 0; i < 3; ++i) {
    nvtxRangePushA("step tokens=1");
    CU(graph_launch(reinterpret_cast<CUgraphExec>(exec), reinterpret_cast<CUstream>(s)));
    CHECK(cudaStreamSynchronize(s));
    nvtxRangePop();
  }
  CHECK(cudaGraphLaunch(exec, s));
  CHECK(cudaStreamSynchronize(s));
  CHECK(cudaGraphExecDestroy(exec));
  CHECK(cudaGraphDestroy(graph));
  CHECK(cudaStreamDestroy(s));
  printf("errors=%d\n", errors);
  return errors == 0 ? 0 : 1;
}
