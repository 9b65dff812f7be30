// gpusim under concurrent host threads: kThreads threads each launch kLaunches kernels and a
// copy round trip on a stream of their own (odd threads: a created stream, even threads: the
// per-thread default stream), then check their bytes. cudart_sim_test checks the ground truth:
// every op present once, ops of one stream in correlation order without overlap.
#include <cuda_runtime.h>

#include <cstdio>
#include <thread>
#include <vector>

constexpr int kThreads = 4;
constexpr int kLaunches = 200;
constexpr int kInts = 4096;

__global__ void worker_kernel(int* p) {
  if (p != nullptr) p[0] = 0;
}

static int Work(int t) {
  cudaStream_t s = cudaStreamPerThread;
  if (t % 2 == 1 && cudaStreamCreate(&s) != cudaSuccess) return 1;
  std::vector<int> in(kInts), out(kInts, -1);
  for (int i = 0; i < kInts; ++i) in[i] = t * 100000 + i;
  int* d = nullptr;
  if (cudaMalloc(&d, kInts * sizeof(int)) != cudaSuccess) return 1;
  cudaMemcpyAsync(d, in.data(), kInts * sizeof(int), cudaMemcpyHostToDevice, s);
  for (int i = 0; i < kLaunches; ++i) worker_kernel<<<4, 128, 0, s>>>(d);
  cudaMemcpyAsync(out.data(), d, kInts * sizeof(int), cudaMemcpyDeviceToHost, s);
  if (cudaStreamSynchronize(s) != cudaSuccess) return 1;
  int bad = 0;
  for (int i = 0; i < kInts; ++i) bad += out[i] != in[i];
  cudaFree(d);
  if (s != cudaStreamPerThread) cudaStreamDestroy(s);
  return bad != 0 || cudaGetLastError() != cudaSuccess;
}

int main() {
  std::vector<std::thread> threads;
  std::vector<int> failed(kThreads, 0);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t, &failed] { failed[t] = Work(t); });
  }
  for (auto& th : threads) th.join();
  int failures = 0;
  for (int f : failed) failures += f;
  printf("threads %d launches %d failures %d\n", kThreads, kLaunches, failures);
  return failures;
}
