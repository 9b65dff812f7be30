// A periodic launch sequence, as an engine's layers make it: kernels p0..p7 launched in the
// same order, `iters` times (default 2000), on the legacy stream; one synchronize at the end.
// Used to check PROFAGENT_LAUNCH_API_SAMPLE: which launches get their API duration timed must
// not alias with the period. Exits 0 when every call succeeded.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

__global__ void p0() {}
__global__ void p1() {}
__global__ void p2() {}
__global__ void p3() {}
__global__ void p4() {}
__global__ void p5() {}
__global__ void p6() {}
__global__ void p7() {}

int main(int argc, char** argv) {
  int iters = argc > 1 ? atoi(argv[1]) : 2000;
  int errors = 0;
  for (int i = 0; i < iters; ++i) {
    p0<<<1, 32>>>();
    p1<<<1, 32>>>();
    p2<<<1, 32>>>();
    p3<<<1, 32>>>();
    p4<<<1, 32>>>();
    p5<<<1, 32>>>();
    p6<<<1, 32>>>();
    p7<<<1, 32>>>();
    errors += cudaGetLastError() != cudaSuccess;
  }
  errors += cudaDeviceSynchronize() != cudaSuccess;
  printf("launches=%d errors=%d\n", iters * 8, errors);
  return errors == 0 ? 0 : 1;
}
