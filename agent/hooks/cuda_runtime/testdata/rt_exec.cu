// A program that replaces itself with exec: `rt_exec [execv|execl|execlp|execle]` launches 10
// kernels, then execs itself (by the function named, execv by default) as `rt_exec child`, which
// launches 4 and exits. `rt_exec missing` execs programs that do not exist, goes on and launches
// the 4 itself. Prints "child done"; exit code 0 when every call succeeded.
#include <cuda_runtime.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

extern char** environ;

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
  const char* how = argc > 1 ? argv[1] : "execv";
  if (std::strcmp(how, "missing") == 0) {
    // Programs that are not there: both execs fail and the process goes on, launching the
    // child's kernels itself.
    execl("/nonexistent/rt_exec_child", arg0, arg1, static_cast<char*>(nullptr));
    execlp("profagent-no-such-program", arg0, arg1, static_cast<char*>(nullptr));
    for (int i = 0; i < 4; ++i) after_exec_kernel<<<1, 32>>>(d);
    if (cudaDeviceSynchronize() != cudaSuccess) return 1;
    printf("child done\n");
    return 0;
  }
  if (std::strcmp(how, "execl") == 0) {
    execl(self, arg0, arg1, static_cast<char*>(nullptr));
  } else if (std::strcmp(how, "execlp") == 0) {
    execlp(self, arg0, arg1, static_cast<char*>(nullptr));
  } else if (std::strcmp(how, "execle") == 0) {
    execle(self, arg0, arg1, static_cast<char*>(nullptr), environ);
  } else {
    execv(self, args);
  }
  perror(how);
  return 2;
}
