// A program that leaves work running when it ends: 16 kernels of 2 ms queued on a stream, no
// synchronization after them, then the end the first argument names: "return" (from main, the
// atexit handlers run) or "_exit" (a forked worker's end: no atexit handlers). Prints
// "errors=N"; exit code 0 (3 for "_exit") when every call succeeded.
#include <cuda_runtime.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "agent/hooks/cuda_runtime/testdata/check.h"

__global__ void tail_first_kernel(float* p) {}
__global__ void tail_kernel(float* p) {}

int main(int argc, char** argv) {
  const bool quick = argc > 1 && strcmp(argv[1], "_exit") == 0;
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s));
  tail_first_kernel<<<1, 32, 0, s>>>(nullptr);
  CHECK(cudaStreamSynchronize(s));
  for (int i = 0; i < 16; ++i) tail_kernel<<<4, 64, 0, s>>>(nullptr);
  CHECK(cudaGetLastError());
  printf("errors=%d\n", errors);
  fflush(stdout);
  if (quick) _exit(errors == 0 ? 3 : 1);
  return errors == 0 ? 0 : 1;
}
