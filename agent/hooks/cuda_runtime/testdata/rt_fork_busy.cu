// fork() while GPU work is in flight, as a server that spawns helpers (or Python's
// multiprocessing) does mid-run: 20 rounds of 50 launches left running, a fork whose child exits
// at once through exit() (atexit handlers run), the parent waiting for it. The children make no
// CUDA call. Prints "children ok N"; exit code 0 when every child exited 0 and the work succeeded.
#include <cuda_runtime.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

__global__ void busy_kernel(float* p) {}

int main() {
  float* d = nullptr;
  if (cudaMalloc(&d, 1024) != cudaSuccess) return 1;
  int ok = 0;
  for (int round = 0; round < 20; ++round) {
    for (int i = 0; i < 50; ++i) busy_kernel<<<1, 32>>>(d);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) exit(0);
    int status = -1;
    if (waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0) ++ok;
  }
  const cudaError_t e = cudaDeviceSynchronize();
  printf("children ok %d\n", ok);
  return e == cudaSuccess && ok == 20 ? 0 : 1;
}
