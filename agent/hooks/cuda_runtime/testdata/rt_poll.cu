// Busy polling, as engines and the CUDA samples' asyncAPI do: after each long kernel the host
// spins on cudaEventQuery (or cudaStreamQuery) until the work is done. Also: a poll run broken
// by a launch in the middle, a scheduler that polls the events of four requests in turn until
// each is done, and a worker thread that polls a few times and exits without ever seeing the
// work complete. Prints how many calls returned cudaErrorNotReady per kind, and
// exits with 0 when every call succeeded or was not ready.
#include <cuda_runtime.h>

#include <cstdio>
#include <thread>

#include "agent/hooks/cuda_runtime/testdata/check.h"

__global__ void long_kernel(float* p) {}
__global__ void short_kernel(float* p) {}
__global__ void worker_wait_kernel(float* p) {}  // long (50 ms in the test's costs)


// Polls until done; returns the number of not-ready answers.
template <typename Query>
long Spin(Query q) {
  long n = 0;
  for (;;) {
    cudaError_t r = q();
    if (r == cudaSuccess) return n;
    if (r != cudaErrorNotReady) {
      printf("FAIL poll: %s\n", cudaGetErrorName(r));
      ++errors;
      return n;
    }
    ++n;
  }
}

int main() {
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s));
  cudaEvent_t ev;
  CHECK(cudaEventCreate(&ev));
  long event_polls = 0, stream_polls = 0;
  long event_ok = 0;  // cudaEventQuery calls that returned cudaSuccess
  for (int i = 0; i < 10; ++i) {
    long_kernel<<<1 << 16, 1024, 0, s>>>(nullptr);
    CHECK(cudaEventRecord(ev, s));
    event_polls += Spin([&] { return cudaEventQuery(ev); });
    ++event_ok;
  }
  for (int i = 0; i < 10; ++i) {
    long_kernel<<<1 << 16, 1024, 0, s>>>(nullptr);
    stream_polls += Spin([&] { return cudaStreamQuery(s); });
  }
  // A run broken by a launch on another stream: the polls before and after it are apart.
  cudaStream_t other;
  CHECK(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking));
  long_kernel<<<1 << 16, 1024, 0, s>>>(nullptr);
  CHECK(cudaEventRecord(ev, s));
  for (int i = 0; i < 3; ++i) {  // on a loaded machine the kernel may be done already
    const cudaError_t r = cudaEventQuery(ev);
    event_polls += r == cudaErrorNotReady;
    event_ok += r == cudaSuccess;
  }
  short_kernel<<<1, 32, 0, other>>>(nullptr);
  event_polls += Spin([&] { return cudaEventQuery(ev); });
  ++event_ok;
  // A scheduler polling each request's event in turn (one kernel per request, on its stream).
  constexpr int kRequests = 4;
  cudaStream_t req_stream[kRequests];
  cudaEvent_t req_done[kRequests];
  bool done[kRequests] = {};
  for (int i = 0; i < kRequests; ++i) {
    CHECK(cudaStreamCreateWithFlags(&req_stream[i], cudaStreamNonBlocking));
    CHECK(cudaEventCreateWithFlags(&req_done[i], cudaEventDisableTiming));
    long_kernel<<<1 << 16, 1024, 0, req_stream[i]>>>(nullptr);
    CHECK(cudaEventRecord(req_done[i], req_stream[i]));
  }
  for (int left = kRequests; left > 0;) {
    for (int i = 0; i < kRequests; ++i) {
      if (done[i]) continue;
      const cudaError_t r = cudaEventQuery(req_done[i]);
      if (r == cudaErrorNotReady) {
        ++event_polls;
      } else {
        CHECK(r);
        done[i] = true;
        ++event_ok;
        --left;
      }
    }
  }
  for (int i = 0; i < kRequests; ++i) {
    CHECK(cudaEventDestroy(req_done[i]));
    CHECK(cudaStreamDestroy(req_stream[i]));
  }
  // A worker that gives up: its last run ends with the thread.
  long worker_polls = 0;
  worker_wait_kernel<<<1, 32, 0, s>>>(nullptr);
  CHECK(cudaEventRecord(ev, s));
  std::thread([&] {
    for (int i = 0; i < 5; ++i) worker_polls += cudaEventQuery(ev) == cudaErrorNotReady;
  }).join();
  CHECK(cudaStreamSynchronize(s));
  CHECK(cudaStreamSynchronize(other));  // or the short kernel may still be pending at exit
  CHECK(cudaStreamDestroy(other));
  CHECK(cudaStreamDestroy(s));
  CHECK(cudaEventDestroy(ev));
  printf("event_polls=%ld stream_polls=%ld worker_polls=%ld errors=%d event_ok=%ld\n", event_polls,
         stream_polls, worker_polls, errors, event_ok);
  return errors == 0 ? 0 : 1;
}
