// gpusim overhead benchmark: the host cost of a <<<>>> launch through gpusim's libcudart.so.13
// next to the simulated kernel time, without and with an observer installed (the observer is
// what the simulated CUPTI installs; here a no-op one found with dlsym, absent on NVIDIA's
// runtime).
//   LD_LIBRARY_PATH=<dir of gpusim libcudart.so.13> gpusim_bench [launches]
// Prints one line per mode: launches, host wall-clock ns per launch, host CPU ns per launch
// (the thread's CPU time: robust to a loaded machine, where the wall time includes waiting for
// a core), and the simulated device time per kernel (event elapsed time / launches). With the
// default cost model a <<<1,32>>> kernel lasts 2.125 us; when the host launches more slowly than
// that, the device time per kernel follows the launch rate (the stream runs dry between
// launches), as on a real GPU.
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <time.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

__global__ void empty_kernel() {}

typedef void (*ApiCb)(void*, int, int, int, const char*, const char*, uint32_t, const void*,
                      const void*);
typedef void (*OpCb)(void*, const void*);
typedef void (*SetObserverFn)(ApiCb, OpCb, void*);

static void NoopApi(void*, int, int, int, const char*, const char*, uint32_t, const void*,
                    const void*) {}
static void NoopOp(void*, const void*) {}

static uint64_t NowNs(clockid_t clock = CLOCK_MONOTONIC) {
  timespec ts;
  clock_gettime(clock, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + ts.tv_nsec;
}

static void Run(const char* mode, int launches) {
  cudaStream_t s;
  cudaStreamCreate(&s);
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  empty_kernel<<<1, 32, 0, s>>>();  // warm-up
  cudaStreamSynchronize(s);
  cudaEventRecord(start, s);
  uint64_t t0 = NowNs();
  uint64_t c0 = NowNs(CLOCK_THREAD_CPUTIME_ID);
  for (int i = 0; i < launches; ++i) empty_kernel<<<1, 32, 0, s>>>();
  uint64_t c1 = NowNs(CLOCK_THREAD_CPUTIME_ID);
  uint64_t t1 = NowNs();
  cudaEventRecord(stop, s);
  cudaEventSynchronize(stop);
  float device_ms = 0;
  cudaEventElapsedTime(&device_ms, start, stop);
  printf("%-14s launches %d host_ns_per_launch %.0f host_cpu_ns_per_launch %.0f "
         "device_us_per_kernel %.2f\n",
         mode, launches, static_cast<double>(t1 - t0) / launches,
         static_cast<double>(c1 - c0) / launches, device_ms * 1000.0 / launches);
  cudaStreamDestroy(s);
}

int main(int argc, char** argv) {
  int launches = argc > 1 ? atoi(argv[1]) : 100000;
  Run("no_observer", launches);
  SetObserverFn set = reinterpret_cast<SetObserverFn>(dlsym(RTLD_DEFAULT, "gpusim_set_observer"));
  if (set != nullptr) {
    set(NoopApi, NoopOp, nullptr);
    Run("noop_observer", launches);
    set(nullptr, nullptr, nullptr);
  }
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
