// A program with kernels that forks before its first CUDA call (a launcher forking its ranks):
// CUDA initializes lazily, so the child starts a device of its own and runs its kernel; the
// parent then does the same. Prints each side's launch and synchronization results.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>

__global__ void forked_kernel(int* p) {
  if (p != nullptr) *p = 1;
}

int Work(const char* who) {
  forked_kernel<<<1, 32>>>(nullptr);
  const cudaError_t launch = cudaGetLastError();
  const cudaError_t sync = cudaDeviceSynchronize();
  printf("%s: launch %s sync %s\n", who, cudaGetErrorName(launch), cudaGetErrorName(sync));
  fflush(stdout);
  return launch == cudaSuccess && sync == cudaSuccess ? 0 : 1;
}

int main() {
  fflush(stdout);
  const pid_t pid = fork();
  if (pid == 0) _exit(Work("child"));
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid) return 2;
  const int parent = Work("parent");
  return parent != 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0 ? 1 : 0;
}
