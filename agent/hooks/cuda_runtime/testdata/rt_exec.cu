// A program that replaces itself with exec: `rt_exec` launches 10 kernels, then execv()s itself
// as `rt_exec child`, which launches 4 and exits. Prints "child done"; exit code 0 when every
// call succeeded.
#include <cuda_runtime.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

__global__ void before_exec_kernel(int* p) {}
__global__ void after_exec_kernel(int* p) {}

int main(int argc, char** argv) {
  const bool child = argc > 1 && std::strcmp(argv[1], "child") == 0;
  int* d = nullptr;
  if (cudaMalloc(&d, 64) != cudaSuccess) return 1;
  for (int i = 0; i < (child ? 4 : 10); ++i) {
    if (child) {
      after_exec_kernel<<<1, 32>>>(d);
    } else {
      before_exec_kernel<<<1, 32>>>(d);
    }
  }
  if (cudaDeviceSynchronize() != cudaSuccess) return 1;
  if (child) {
    printf("child done\n");
    return 0;
  }
  fflush(stdout);
  char self[] = "/proc/self/exe";
  char arg0[] = "rt_exec";
  char arg1[] = "child";
  char* const args[] = {arg0, arg1, nullptr};
  execv(self, args);
  perror("execv");
  return 2;
}
