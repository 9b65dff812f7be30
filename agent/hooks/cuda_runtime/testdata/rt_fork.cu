// Fork scenario: the parent launches, forks a child that prints and exits with code 5, then the
// parent launches again and checks the child's status. Prints one line per process; exit code 0
// when everything went as expected.
#include <cuda_runtime.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>

__global__ void before_fork() {}
__global__ void after_fork() {}

int main() {
  before_fork<<<2, 32>>>();
  if (cudaDeviceSynchronize() != cudaSuccess) return 1;
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    // No CUDA in the child (a forked child cannot use its parent's CUDA context).
    printf("child pid ok\n");
    fflush(stdout);
    _exit(5);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  after_fork<<<3, 32>>>();
  cudaError_t e = cudaDeviceSynchronize();
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  printf("parent sync=%d child_exit=%d\n", int(e), code);
  return (e == cudaSuccess && code == 5) ? 0 : 1;
}
