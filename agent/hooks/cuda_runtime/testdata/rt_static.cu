// Stands in for a program with a statically linked CUDA runtime: every runtime call goes through
// a pointer taken from libcudart's own symbol table (dlsym on its handle), so no LD_PRELOAD
// interposer sees it. The agent can only learn of this work the way it learns of a static
// runtime's: through CUDA_INJECTION64_PATH (which a preloaded agent sets) and CUPTI callbacks.
// Copies and sets of every shape (1D, 2D, 3D, to a symbol) are recorded with their sizes, and a
// rejected launch with its shape. Last,
// one launch captured into a graph on a stream of its own, the graph launched twice; then an
// allocation on device 1 (run with GPUSIM_DEVICES=2).
// Exit code 0 when every call succeeded.
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <cstdio>

__global__ void static_kernel_a(int i) {}
__global__ void static_kernel_b(float* p) {}
__device__ int static_symbol[8];

template <typename F>
F Sym(void* h, const char* name) {
  return reinterpret_cast<F>(dlsym(h, name));
}

int main() {
  void* rt = dlopen("libcudart.so.13", RTLD_NOW | RTLD_NOLOAD);
  if (rt == nullptr) return 3;
  // The C entry points (cuda_runtime.h adds C++ template overloads of some names).
  auto malloc_ = Sym<cudaError_t (*)(void**, size_t)>(rt, "cudaMalloc");
  auto free_ = Sym<cudaError_t (*)(void*)>(rt, "cudaFree");
  auto launch = Sym<cudaError_t (*)(const void*, dim3, dim3, void**, size_t, cudaStream_t)>(
      rt, "cudaLaunchKernel");
  auto memset_ = Sym<cudaError_t (*)(void*, int, size_t, cudaStream_t)>(rt, "cudaMemsetAsync");
  auto memcpy_ =
      Sym<cudaError_t (*)(void*, const void*, size_t, cudaMemcpyKind)>(rt, "cudaMemcpy");
  auto sync = Sym<cudaError_t (*)()>(rt, "cudaDeviceSynchronize");
  auto stream_create =
      Sym<cudaError_t (*)(cudaStream_t*, unsigned)>(rt, "cudaStreamCreateWithFlags");
  auto begin_capture =
      Sym<cudaError_t (*)(cudaStream_t, cudaStreamCaptureMode)>(rt, "cudaStreamBeginCapture");
  auto end_capture = Sym<cudaError_t (*)(cudaStream_t, cudaGraph_t*)>(rt, "cudaStreamEndCapture");
  auto instantiate = Sym<cudaError_t (*)(cudaGraphExec_t*, cudaGraph_t, unsigned long long)>(
      rt, "cudaGraphInstantiate");
  auto graph_launch = Sym<cudaError_t (*)(cudaGraphExec_t, cudaStream_t)>(rt, "cudaGraphLaunch");
  auto memcpy2d = Sym<cudaError_t (*)(void*, size_t, const void*, size_t, size_t, size_t,
                                      cudaMemcpyKind, cudaStream_t)>(rt, "cudaMemcpy2DAsync");
  auto memset3d = Sym<cudaError_t (*)(cudaPitchedPtr, int, cudaExtent)>(rt, "cudaMemset3D");
  auto to_symbol = Sym<cudaError_t (*)(const void*, const void*, size_t, size_t, cudaMemcpyKind)>(
      rt, "cudaMemcpyToSymbol");
  if (!malloc_ || !free_ || !launch || !memset_ || !memcpy_ || !sync || !stream_create ||
      !begin_capture || !end_capture || !instantiate || !graph_launch || !memcpy2d || !memset3d ||
      !to_symbol) {
    return 4;
  }
  float* d = nullptr;
  int errors = malloc_(reinterpret_cast<void**>(&d), 4096) != cudaSuccess;
  for (int i = 0; i < 5; ++i) {
    void* args_a[] = {&i};
    errors += launch(reinterpret_cast<const void*>(static_kernel_a), dim3(4), dim3(64), args_a, 0,
                     nullptr) != cudaSuccess;
    void* args_b[] = {&d};
    errors += launch(reinterpret_cast<const void*>(static_kernel_b), dim3(2), dim3(32), args_b, 0,
                     nullptr) != cudaSuccess;
  }
  // A launch the runtime rejects (4096 threads per block): recorded with the shape it was given.
  void* args_r[] = {&d};
  errors += launch(reinterpret_cast<const void*>(static_kernel_b), dim3(3, 70000), dim3(4096),
                   args_r, 0, nullptr) != cudaErrorInvalidConfiguration;
  errors += memset_(d, 0, 4096, nullptr) != cudaSuccess;
  float h[16];
  errors += memcpy_(h, d, sizeof(h), cudaMemcpyDeviceToHost) != cudaSuccess;
  // 2D: 3 rows of 40 bytes (120); 3D: 64 x 4 x 2 bytes of a 256-byte pitch (512); symbol: 12.
  char rows[3 * 48] = {};
  errors += memcpy2d(d, 256, rows, 48, 40, 3, cudaMemcpyHostToDevice, nullptr) != cudaSuccess;
  errors += memset3d(make_cudaPitchedPtr(d, 256, 64, 4), 1, make_cudaExtent(64, 4, 2)) !=
            cudaSuccess;
  int three[3] = {1, 2, 3};
  errors += to_symbol(reinterpret_cast<const void*>(&static_symbol), three, sizeof(three), 0,
                      cudaMemcpyHostToDevice) != cudaSuccess;
  errors += sync() != cudaSuccess;
  cudaStream_t s = nullptr;
  errors += stream_create(&s, cudaStreamNonBlocking) != cudaSuccess;
  errors += begin_capture(s, cudaStreamCaptureModeGlobal) != cudaSuccess;
  void* args_c[] = {&d};
  errors += launch(reinterpret_cast<const void*>(static_kernel_b), dim3(8), dim3(32), args_c, 0,
                   s) != cudaSuccess;
  cudaGraph_t graph = nullptr;
  errors += end_capture(s, &graph) != cudaSuccess;
  cudaGraphExec_t exec = nullptr;
  errors += instantiate(&exec, graph, 0) != cudaSuccess;
  for (int i = 0; i < 2; ++i) errors += graph_launch(exec, s) != cudaSuccess;
  errors += sync() != cudaSuccess;
  // Graph upkeep (recorded from CUPTI's callbacks too): the exec updated to a clone, then both
  // destroyed.
  auto clone = Sym<cudaError_t (*)(cudaGraph_t*, cudaGraph_t)>(rt, "cudaGraphClone");
  auto update = Sym<cudaError_t (*)(cudaGraphExec_t, cudaGraph_t, cudaGraphExecUpdateResultInfo*)>(
      rt, "cudaGraphExecUpdate");
  auto exec_destroy = Sym<cudaError_t (*)(cudaGraphExec_t)>(rt, "cudaGraphExecDestroy");
  auto graph_destroy = Sym<cudaError_t (*)(cudaGraph_t)>(rt, "cudaGraphDestroy");
  cudaGraph_t copy = nullptr;
  errors += clone(&copy, graph) != cudaSuccess;
  cudaGraphExecUpdateResultInfo info;
  errors += update(exec, copy, &info) != cudaSuccess;
  errors += exec_destroy(exec) != cudaSuccess;
  errors += graph_destroy(copy) != cudaSuccess;
  errors += graph_destroy(graph) != cudaSuccess;
  printf("graph=%p copy=%p exec=%p\n", static_cast<void*>(graph), static_cast<void*>(copy),
         static_cast<void*>(exec));
  errors += free_(d) != cudaSuccess;
  // An allocation on a second device (GPUSIM_DEVICES=2), recorded with its device.
  auto set_device = Sym<cudaError_t (*)(int)>(rt, "cudaSetDevice");
  void* d1 = nullptr;
  errors += set_device == nullptr || set_device(1) != cudaSuccess;
  errors += malloc_(&d1, 8192) != cudaSuccess;
  errors += free_(d1) != cudaSuccess;
  printf("errors=%d\n", errors);
  return errors == 0 ? 0 : 1;
}
