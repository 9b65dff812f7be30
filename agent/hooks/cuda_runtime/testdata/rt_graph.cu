// A CUDA graph built by hand, as NVIDIA's simpleCudaGraphs sample builds one: memset and
// host-to-device copy nodes, two dependent kernels, a device-to-host copy and a host node;
// instantiated once, launched three times, its second kernel's grid changed with
// cudaGraphExecKernelNodeSetParams, launched once more. Exit code 0 when every call succeeded.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "agent/hooks/cuda_runtime/testdata/check.h"

__global__ void graph_fill_kernel(float* p, int n) {}
__global__ void graph_reduce_kernel(const float* p, float* out, int n) {}


static int host_runs = 0;
static void CUDART_CB HostNode(void* p) { ++*static_cast<int*>(p); }

int main() {
  const int n = 1 << 14;
  float *d = nullptr, *out = nullptr, *h = nullptr;
  CHECK(cudaMalloc(&d, n * sizeof(float)));
  CHECK(cudaMalloc(&out, sizeof(float)));
  CHECK(cudaMallocHost(&h, n * sizeof(float)));
  for (int i = 0; i < n; ++i) h[i] = 1.0f;
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

  cudaGraph_t g;
  CHECK(cudaGraphCreate(&g, 0));
  cudaGraphNode_t set, up, fill, reduce, down, host;
  cudaMemsetParams mp;
  memset(&mp, 0, sizeof(mp));
  mp.dst = out;
  mp.elementSize = 4;
  mp.width = 1;
  mp.height = 1;
  CHECK(cudaGraphAddMemsetNode(&set, g, nullptr, 0, &mp));
  cudaMemcpy3DParms cp;
  memset(&cp, 0, sizeof(cp));
  cp.srcPtr = make_cudaPitchedPtr(h, n * sizeof(float), n, 1);
  cp.dstPtr = make_cudaPitchedPtr(d, n * sizeof(float), n, 1);
  cp.extent = make_cudaExtent(n * sizeof(float), 1, 1);
  cp.kind = cudaMemcpyHostToDevice;
  CHECK(cudaGraphAddMemcpyNode(&up, g, nullptr, 0, &cp));
  int count = n;
  void* fill_args[] = {&d, &count};
  cudaKernelNodeParams kp;
  memset(&kp, 0, sizeof(kp));
  kp.func = reinterpret_cast<void*>(graph_fill_kernel);
  kp.gridDim = dim3(64);
  kp.blockDim = dim3(256);
  kp.kernelParams = fill_args;
  CHECK(cudaGraphAddKernelNode(&fill, g, &up, 1, &kp));
  void* reduce_args[] = {&d, &out, &count};
  kp.func = reinterpret_cast<void*>(graph_reduce_kernel);
  kp.gridDim = dim3(16);
  kp.blockDim = dim3(128);
  kp.kernelParams = reduce_args;
  cudaGraphNode_t deps[] = {fill, set};
  CHECK(cudaGraphAddKernelNode(&reduce, g, deps, 2, &kp));
  cp.srcPtr = make_cudaPitchedPtr(out, sizeof(float), 1, 1);
  cp.dstPtr = make_cudaPitchedPtr(h, sizeof(float), 1, 1);
  cp.extent = make_cudaExtent(sizeof(float), 1, 1);
  cp.kind = cudaMemcpyDeviceToHost;
  CHECK(cudaGraphAddMemcpyNode(&down, g, &reduce, 1, &cp));
  cudaHostNodeParams hp;
  hp.fn = HostNode;
  hp.userData = &host_runs;
  CHECK(cudaGraphAddHostNode(&host, g, &down, 1, &hp));

  cudaGraphExec_t exec;
  CHECK(cudaGraphInstantiate(&exec, g, 0));
  for (int i = 0; i < 3; ++i) CHECK(cudaGraphLaunch(exec, s));
  kp.gridDim = dim3(32);
  CHECK(cudaGraphExecKernelNodeSetParams(exec, reduce, &kp));
  CHECK(cudaGraphLaunch(exec, s));
  CHECK(cudaStreamSynchronize(s));
  CHECK(cudaGraphExecDestroy(exec));
  CHECK(cudaGraphDestroy(g));
  CHECK(cudaStreamDestroy(s));
  CHECK(cudaFreeHost(h));
  CHECK(cudaFree(out));
  CHECK(cudaFree(d));
  printf("host_runs=%d errors=%d\n", host_runs, errors);
  return errors == 0 ? 0 : 1;
}
