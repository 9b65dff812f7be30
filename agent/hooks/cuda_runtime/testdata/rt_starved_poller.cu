// The agent's CUDA-event poller starved of CPU, as on a machine whose cores the application's
// threads keep busy: the whole process pinned to one core where a thread spins, the thread
// named "profagent-ev" (the poller) at SCHED_IDLE. 20 rounds of 300 short kernels, each round
// synchronized: at most 300 operations in flight, 6000 in all, more than a device's first
// chunk of 1024 event pairs. With the argument `plain`, the same rounds without starving the
// poller, right at start-up (the first 20 ms, before the agent's clock is calibrated). Prints
// whether it found the poller; exit code 0 when every call succeeded.
#include <cuda_runtime.h>
#include <dirent.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

#include "agent/hooks/cuda_runtime/testdata/check.h"

__global__ void starved_kernel(float* p) {}

int main(int argc, char** argv) {
  const bool plain = argc > 1 && std::string(argv[1]) == "plain";
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s));
  starved_kernel<<<1, 32, 0, s>>>(nullptr);  // the agent's poller thread starts
  CHECK(cudaStreamSynchronize(s));
  std::atomic<bool> stop{false};
  std::thread spinner([&] {
    while (!plain && !stop.load(std::memory_order_relaxed)) {
    }
  });
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(0, &one);
  int found = 0;
  if (DIR* d = plain ? nullptr : opendir("/proc/self/task")) {
    while (dirent* e = readdir(d)) {
      const pid_t tid = pid_t(atoi(e->d_name));
      if (tid <= 0) continue;
      sched_setaffinity(tid, sizeof(one), &one);
      std::ifstream comm(std::string("/proc/self/task/") + e->d_name + "/comm");
      std::string name;
      std::getline(comm, name);
      sched_param param{};
      if (name == "profagent-ev" && sched_setscheduler(tid, SCHED_IDLE, &param) == 0) ++found;
    }
    closedir(d);
  }
  for (int round = 0; round < 20; ++round) {
    for (int i = 0; i < 300; ++i) starved_kernel<<<1, 32, 0, s>>>(nullptr);
    CHECK(cudaStreamSynchronize(s));
  }
  stop = true;
  spinner.join();
  CHECK(cudaStreamDestroy(s));
  printf("poller=%d errors=%d\n", found, errors);
  return errors == 0 ? 0 : 1;
}
