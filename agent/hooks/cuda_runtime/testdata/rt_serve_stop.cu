// A server stopped while its engine thread serves: the engine thread opens `run label=serve`,
// then serves steps (three 200 us kernels and a 0-byte copy of new prompt tokens, as a decode
// step with no prefill sends, then a synchronize), without end. Main waits for 10 steps, then
// stops the process:
//   sigterm: raise(SIGTERM) (the agent finishes the file, then the signal ends the process);
//   exit:    exit(0) (the run is still open on the engine thread);
//   throw:   an exception nobody catches (std::terminate, abort: SIGABRT);
//   segv:    a write through a null pointer (SIGSEGV);
//   sighup:  raise(SIGHUP) (a hangup: ends the process by default too);
//   overflow: unbounded recursion (a stack overflow: SIGSEGV on a stack with no room left);
//   exit_term: exit(0), and a SIGTERM 300 us later (a supervisor stopping the job), while the
//            agent is still finishing the file at exit.
// And the process signalling itself, its disposition the default again (no agent handler runs):
//   python_int: as Python after an unhandled KeyboardInterrupt: its SIGINT handler (set at
//            start) back to the default, then kill(getpid(), SIGINT);
//   selfkill: kill(getpid(), SIGKILL);
//   reraise: a crash handler (set at start, as glog's or faulthandler) catches a SIGSEGV, sets
//            the default back and raises it again (blocked until the handler returns);
//   sigwait: SIGTERM blocked in every thread and taken by a signal thread with sigwait, which
//            exits the process (0) in order: kill(getpid(), SIGTERM) does not end it.
// And for stop_bench: pause: main waits for a signal from outside while the engine serves.
// Prints "stopping after N steps" first.
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <thread>

__global__ void serve_step_kernel(float* p) {}

std::atomic<int> g_steps{0};

// Recurses until the stack runs out (each frame keeps a buffer the compiler cannot drop).
__attribute__((noinline)) int Deeper(int n) {
  volatile char frame[512];
  frame[0] = char(n);
  return Deeper(n + 1) + frame[0];
}

void OnInterrupt(int) {}

void ReraiseCrash(int sig) {
  signal(sig, SIG_DFL);
  raise(sig);
}

int main(int argc, char** argv) {
  const char* how = argc > 1 ? argv[1] : "sigterm";
  if (strcmp(how, "python_int") == 0) signal(SIGINT, OnInterrupt);
  if (strcmp(how, "reraise") == 0) {
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = ReraiseCrash;
    sigaction(SIGSEGV, &sa, nullptr);
  }
  if (strcmp(how, "sigwait") == 0) {
    sigset_t term;
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &term, nullptr);  // inherited by every thread created after
    std::thread([term] {
      int sig = 0;
      sigwait(&term, &sig);
      exit(0);
    }).detach();
  }
  std::thread([] {
    cudaStream_t s;
    if (cudaStreamCreate(&s) != cudaSuccess) return;
    int* ids = nullptr;
    int host_ids[4] = {};
    if (cudaMalloc(&ids, sizeof(host_ids)) != cudaSuccess) return;
    nvtxRangePushA("run label=serve");
    for (;;) {
      nvtxRangePushA("step phase=decode tokens=4 kv=100,200,300,400");
      for (int k = 0; k < 3; ++k) serve_step_kernel<<<1, 32, 0, s>>>(nullptr);
      cudaMemcpyAsync(ids, host_ids, 0, cudaMemcpyHostToDevice, s);  // no new prompt tokens
      cudaStreamSynchronize(s);
      nvtxRangePop();
      g_steps.fetch_add(1);
    }
  }).detach();
  while (g_steps.load() < 10) std::this_thread::yield();
  printf("stopping after %d steps\n", g_steps.load() >= 10 ? 10 : 0);
  fflush(stdout);
  if (strcmp(how, "exit") == 0) exit(0);
  if (strcmp(how, "exit_term") == 0) {
    std::thread([] {
      usleep(300);
      kill(getpid(), SIGTERM);
    }).detach();
    exit(0);
  }
  if (strcmp(how, "python_int") == 0) {
    signal(SIGINT, SIG_DFL);
    kill(getpid(), SIGINT);
  }
  if (strcmp(how, "selfkill") == 0) kill(getpid(), SIGKILL);
  if (strcmp(how, "pause") == 0) {
    for (;;) pause();
  }
  if (strcmp(how, "sigwait") == 0) {
    kill(getpid(), SIGTERM);
    for (;;) pause();
  }
  if (strcmp(how, "reraise") == 0) how = "segv";
  if (strcmp(how, "throw") == 0) throw std::runtime_error("engine failed");
  if (strcmp(how, "overflow") == 0) return Deeper(0);
  if (strcmp(how, "sighup") == 0) raise(SIGHUP);
  if (strcmp(how, "segv") == 0) {
    volatile int* volatile nowhere = nullptr;
    *nowhere = 1;
  }
  raise(SIGTERM);
  return 1;
}
