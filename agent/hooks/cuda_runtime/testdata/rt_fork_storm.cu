// fork() while another thread keeps the GPU and the agent busy (launches, NVTX steps, device
// synchronizations), the children leaving through exit() at once: a lock some agent thread held
// at the fork must not stop a child's exit. 60 children, each given 10 s before it counts as
// hung (and is killed). Prints "forks 60 hung N failed M"; exit code 0 when N and M are 0.
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <thread>

__global__ void storm_kernel(int* p, int i) {}

int main() {
  constexpr int kForks = 60;
  std::atomic<bool> stop{false};
  if (cudaFree(nullptr) != cudaSuccess) return 1;
  std::thread worker([&stop] {
    int* d = nullptr;
    cudaMalloc(&d, 64);
    for (int i = 0; !stop.load(); ++i) {
      nvtxRangePushA("step tokens=1");
      storm_kernel<<<1, 32>>>(d, i);
      nvtxRangePop();
      if (i % 64 == 0) cudaDeviceSynchronize();
    }
    cudaDeviceSynchronize();
    cudaFree(d);
  });
  int hung = 0, failed = 0;
  for (int f = 0; f < kForks; ++f) {
    pid_t pid = fork();
    if (pid == 0) exit(0);
    int status = 0;
    pid_t got = 0;
    for (int waited = 0; waited < 10000 && (got = waitpid(pid, &status, WNOHANG)) == 0;
         ++waited) {
      usleep(1000);
    }
    if (got == 0) {
      ++hung;
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
    } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      ++failed;
    }
    usleep(500);
  }
  stop.store(true);
  worker.join();
  printf("forks %d hung %d failed %d\n", kForks, hung, failed);
  return hung == 0 && failed == 0 ? 0 : 1;
}
