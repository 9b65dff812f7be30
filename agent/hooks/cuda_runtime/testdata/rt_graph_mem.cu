// Graph memory: a cudaMallocAsync / cudaFreeAsync pair captured into a graph (a graph memory
// allocation and free node: the graph allocates at each launch), beside an eager 1 MiB
// stream-ordered allocation and its free. Exit code 0 when every call succeeded.
#include <cstdio>

__global__ void use_kernel(float* p) {
  if (p != nullptr && threadIdx.x == 1024) p[0] = 1;
}

int main() {
  cudaStream_t s;
  if (cudaStreamCreate(&s) != cudaSuccess) return 1;
  float* eager = nullptr;
  int errors = cudaMallocAsync(&eager, 1 << 20, s) != cudaSuccess;
  cudaGraph_t g = nullptr;
  cudaGraphExec_t x = nullptr;
  errors += cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) != cudaSuccess;
  float* p = nullptr;
  errors += cudaMallocAsync(&p, 3 << 20, s) != cudaSuccess;
  use_kernel<<<1, 32, 0, s>>>(p);
  errors += cudaFreeAsync(p, s) != cudaSuccess;
  errors += cudaStreamEndCapture(s, &g) != cudaSuccess;
  errors += cudaGraphInstantiate(&x, g, 0) != cudaSuccess;
  for (int k = 0; k < 3; ++k) errors += cudaGraphLaunch(x, s) != cudaSuccess;
  errors += cudaFreeAsync(eager, s) != cudaSuccess;
  errors += cudaStreamSynchronize(s) != cudaSuccess;
  cudaGraphExecDestroy(x);
  cudaGraphDestroy(g);
  cudaStreamDestroy(s);
  printf("errors=%d\n", errors);
  return errors == 0 ? 0 : 1;
}
