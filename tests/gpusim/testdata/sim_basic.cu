// gpusim functional checks that need no timing: bytes really move through copies and sets,
// error codes, sticky last error, device properties, unsupported functions.
// Prints one "ok <check>" line per passed check, "FAIL <check>: ..." otherwise; exit code =
// number of failures. cudart_sim_test runs it against gpusim's libcudart.so.13.
#include <cuda_runtime.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

__device__ int g_table[8];

__global__ void noop_kernel(int* p) {
  if (p != nullptr) p[threadIdx.x] = 1;
}

static int failures = 0;

static void Check(bool ok, const char* what, const char* detail = "") {
  if (ok) {
    printf("ok %s\n", what);
  } else {
    printf("FAIL %s: %s\n", what, detail);
    ++failures;
  }
}

int main() {
  cudaDeviceProp prop;
  Check(cudaGetDeviceProperties(&prop, 0) == cudaSuccess &&
            strcmp(prop.name, "gpusim H100-class") == 0 && prop.major == 9,
        "device_properties", prop.name);
  int count = 0;
  const char* want_devices = getenv("GPUSIM_DEVICES");
  int want = want_devices != nullptr ? atoi(want_devices) : 1;
  Check(cudaGetDeviceCount(&count) == cudaSuccess && count == want, "device_count");
  Check(cudaSetDevice(count) == cudaErrorInvalidDevice, "set_invalid_device");
  cudaGetLastError();
  if (count > 1) {  // one kernel on the last device's legacy stream, then back to device 0
    cudaSetDevice(count - 1);
    noop_kernel<<<7, 32>>>(nullptr);
    int current = -1;
    cudaGetDevice(&current);
    Check(current == count - 1 && cudaDeviceSynchronize() == cudaSuccess, "other_device");
    cudaSetDevice(0);
  }

  // HtoD, memset, DtoD, DtoH: the values observed on the host are the ones moved.
  const int n = 1 << 16;
  std::vector<int> host(n), back(n, -1);
  for (int i = 0; i < n; ++i) host[i] = i * 3 + 1;
  int *d_a = nullptr, *d_b = nullptr;
  Check(cudaMalloc(&d_a, n * sizeof(int)) == cudaSuccess, "malloc_a");
  Check(cudaMalloc(&d_b, n * sizeof(int)) == cudaSuccess, "malloc_b");
  cudaMemcpy(d_a, host.data(), n * sizeof(int), cudaMemcpyHostToDevice);
  cudaMemcpy(d_b, d_a, n * sizeof(int), cudaMemcpyDeviceToDevice);
  cudaMemset(d_b, 0, 16 * sizeof(int));
  cudaMemcpy(back.data(), d_b, n * sizeof(int), cudaMemcpyDeviceToHost);
  bool same = true;
  for (int i = 0; i < n; ++i) same &= back[i] == (i < 16 ? 0 : i * 3 + 1);
  Check(same, "copy_and_set_roundtrip");

  // Async copies on a stream, cudaMemcpyDefault, 2D copies and sets.
  cudaStream_t s;
  cudaStreamCreate(&s);
  int* pinned = nullptr;
  cudaMallocHost(&pinned, n * sizeof(int));
  cudaMemsetAsync(d_a, 0x7f, n * sizeof(int), s);
  cudaMemcpyAsync(pinned, d_a, n * sizeof(int), cudaMemcpyDefault, s);
  cudaStreamSynchronize(s);
  Check(pinned[0] == 0x7f7f7f7f && pinned[n - 1] == 0x7f7f7f7f, "async_set_copy_default");

  // cudaHostGetFlags: the flags of pinned and registered memory; anything else is invalid.
  void* mapped = nullptr;
  unsigned int flags = 99;
  static int registered[256];
  cudaHostAlloc(&mapped, 4096, cudaHostAllocMapped | cudaHostAllocPortable);
  Check(cudaHostGetFlags(&flags, static_cast<char*>(mapped) + 100) == cudaSuccess &&
            flags == (cudaHostAllocMapped | cudaHostAllocPortable),
        "host_get_flags_alloc");
  cudaHostRegister(registered, sizeof(registered), cudaHostRegisterMapped);
  Check(cudaHostGetFlags(&flags, registered) == cudaSuccess && flags == cudaHostRegisterMapped,
        "host_get_flags_registered");
  Check(cudaHostGetFlags(&flags, d_a) == cudaErrorInvalidValue, "host_get_flags_device");
  cudaGetLastError();
  cudaHostUnregister(registered);
  cudaFreeHost(mapped);

  // Pageable host memory (CUDA's documented behaviour): an async HtoD copy has taken the bytes
  // when it returns, an async DtoH copy returns once the data is there.
  std::vector<int> pageable(1024, 11), pageable_back(1024, 0);
  cudaMemcpyAsync(d_a, pageable.data(), 1024 * sizeof(int), cudaMemcpyHostToDevice, s);
  for (int& v : pageable) v = 22;  // too late to change what was sent
  cudaMemcpyAsync(pageable_back.data(), d_a, 1024 * sizeof(int), cudaMemcpyDeviceToHost, s);
  Check(pageable_back[0] == 11 && pageable_back[1023] == 11, "pageable_async_semantics");

  char* pitched = nullptr;
  size_t pitch = 0;
  cudaMallocPitch(reinterpret_cast<void**>(&pitched), &pitch, 100, 4);
  char rows[4][100];
  for (int r = 0; r < 4; ++r) memset(rows[r], 'a' + r, 100);
  cudaMemcpy2D(pitched, pitch, rows, 100, 100, 4, cudaMemcpyHostToDevice);
  cudaMemset2D(pitched + 10, pitch, 'z', 5, 4);
  char out[4][100];
  cudaMemcpy2D(out, 100, pitched, pitch, 100, 4, cudaMemcpyDeviceToHost);
  Check(pitch >= 100 && out[2][0] == 'c' && out[3][99] == 'd' && out[1][12] == 'z' &&
            out[1][15] == 'b',
        "copy_2d");

  // __device__ symbol copies.
  int table[8] = {1, 2, 3, 4, 5, 6, 7, 8}, table_back[8] = {};
  cudaMemcpyToSymbol(g_table, table, sizeof(table));
  cudaMemcpyFromSymbol(table_back, g_table, 4 * sizeof(int), 4 * sizeof(int));
  Check(table_back[0] == 5 && table_back[3] == 8, "symbol_copies");

  // A kernel launch through <<<>>> succeeds and is ordered with the copies around it.
  noop_kernel<<<2, 32, 0, s>>>(d_a);
  Check(cudaGetLastError() == cudaSuccess, "launch_ok");
  Check(cudaStreamSynchronize(s) == cudaSuccess, "stream_sync");
  const char* fname = nullptr;
  Check(cudaFuncGetName(&fname, reinterpret_cast<const void*>(noop_kernel)) == cudaSuccess &&
            fname != nullptr && strstr(fname, "noop_kernel") != nullptr,
        "func_get_name", fname ? fname : "(null)");

  // Errors: invalid stream handle, bad free, sticky-per-thread last error.
  cudaStream_t bogus = reinterpret_cast<cudaStream_t>(0x12345678);
  cudaError_t e = cudaStreamSynchronize(bogus);
  Check(e == cudaErrorInvalidResourceHandle, "invalid_stream_sync", cudaGetErrorName(e));
  e = cudaMemcpyAsync(pinned, d_a, 4, cudaMemcpyDeviceToHost, bogus);
  Check(e == cudaErrorInvalidResourceHandle, "invalid_stream_copy", cudaGetErrorName(e));
  Check(cudaPeekAtLastError() == cudaErrorInvalidResourceHandle, "peek_last_error");
  Check(cudaGetLastError() == cudaErrorInvalidResourceHandle, "get_last_error");
  Check(cudaGetLastError() == cudaSuccess, "last_error_reset");
  int on_stack = 0;
  e = cudaFree(&on_stack);
  Check(e == cudaErrorInvalidValue, "bad_free", cudaGetErrorName(e));
  e = cudaFree(d_b);
  Check(e == cudaSuccess, "good_free", cudaGetErrorName(e));
  e = cudaFree(d_b);
  Check(e == cudaErrorInvalidValue, "double_free", cudaGetErrorName(e));
  Check(cudaFree(nullptr) == cudaSuccess, "free_null");
  noop_kernel<<<1, 2048, 0, s>>>(nullptr);
  e = cudaGetLastError();
  Check(e == cudaErrorInvalidConfiguration, "bad_block_size", cudaGetErrorName(e));
  cudaStreamDestroy(s);
  e = cudaStreamQuery(s);
  Check(e == cudaErrorInvalidResourceHandle, "destroyed_stream", cudaGetErrorName(e));
  Check(strcmp(cudaGetErrorString(cudaErrorInvalidValue), "invalid argument") == 0 &&
            strcmp(cudaGetErrorName(cudaErrorNotSupported), "cudaErrorNotSupported") == 0,
        "error_strings");
  cudaGetLastError();

  // Unsupported functions (here: IPC): cudaErrorNotSupported, reported once on stderr.
  cudaIpcMemHandle_t ipc;
  e = cudaIpcGetMemHandle(&ipc, d_a);
  Check(e == cudaErrorNotSupported, "unsupported_returns_801", cudaGetErrorName(e));
  e = cudaIpcGetMemHandle(&ipc, d_a);
  Check(e == cudaErrorNotSupported && cudaGetLastError() == cudaErrorNotSupported,
        "unsupported_sets_last_error");

  // A forked child cannot use the parent's device: stream operations fail, nothing hangs.
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    cudaError_t ce = cudaMemcpyAsync(pinned, d_a, 4, cudaMemcpyDeviceToHost, 0);
    _exit(ce == cudaErrorInvalidResourceHandle && cudaDeviceSynchronize() == cudaSuccess ? 0 : 1);
  }
  int status = -1;
  waitpid(pid, &status, 0);
  Check(WIFEXITED(status) && WEXITSTATUS(status) == 0, "fork_child_fails_fast");
  cudaGetLastError();

  size_t free_b = 0, total_b = 0;
  Check(cudaMemGetInfo(&free_b, &total_b) == cudaSuccess && total_b > free_b, "mem_get_info");
  cudaFree(d_a);
  cudaFreeHost(pinned);
  printf("failures %d\n", failures);
  return failures;
}
