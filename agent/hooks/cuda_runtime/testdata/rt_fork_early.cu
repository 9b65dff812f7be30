// fork() in the process's first milliseconds, while the agent's writer may be calibrating its
// clock (PROFAGENT_FLUSH_MS=5 makes it convert early): 10 launches, 6 ms, fork; the child
// tries a launch (which fails: CUDA after fork) and exits. The parent waits up to 5 s for it, then
// kills it. Prints the child's exit status (0: it exited; 9: it hung and was killed). Exit code 0
// when it exited.
#include <cuda_runtime.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

__global__ void early_fork_kernel(float* p) {}

int main() {
  for (int i = 0; i < 10; ++i) early_fork_kernel<<<1, 32>>>(nullptr);
  cudaDeviceSynchronize();
  usleep(6000);
  pid_t child = fork();
  if (child == 0) {
    // CUDA is unusable in a child of a process that initialized it: the calls fail, and are
    // recorded (something for the child's file to convert at exit).
    early_fork_kernel<<<1, 32>>>(nullptr);
    cudaDeviceSynchronize();
    exit(0);
  }
  int status = 0;
  for (int i = 0; i < 500; ++i) {
    if (waitpid(child, &status, WNOHANG) == child) {
      printf("child=%d\n", WIFEXITED(status) ? WEXITSTATUS(status) : 128);
      return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
    }
    usleep(10000);
  }
  kill(child, SIGKILL);
  waitpid(child, &status, 0);
  printf("child=9\n");
  return 1;
}
