// A small CUPTI tool + workload in one program, run against gpusim's libcupti.so.13 by
// cupti_sim_test. It subscribes to runtime- and driver-API callbacks, enables activity records,
// runs kernels, copies and memsets on two streams (and, with "nccl", a one-rank ncclAllReduce),
// flushes, and prints one line per observation on stdout:
//   CB <enter|exit> <domain> <cbid> <corr> <function> <symbol|->
//   CORRDATA_BAD <n>                  (correlationData did not survive enter -> exit)
//   KERNEL <corr> <start> <end> <stream> <device> <context> <gx> <gy> <gz> <bx> <by> <bz> <name>
//   MEMCPY <corr> <start> <end> <stream> <bytes> <copyKind>
//   MEMSET <corr> <start> <end> <stream> <bytes>
//   API <kind> <cbid> <corr> <start> <end>
//   SYNC <type> <corr> <start> <end> <stream>
//   CLOCK <cuptiGetTimestamp> <CLOCK_MONOTONIC>   (pairs for clock mapping)
//   RESULT <what> <CUptiResult>
//   DROPPED <n>
// Modes (argv[1..]): "tscb" registers a CLOCK_MONOTONIC timestamp callback; "nccl" adds the
// collective; "fail" only reports what cuptiSubscribe / cuptiActivityEnable return; "twosubs"
// tries a second subscriber; "unsupported" calls an unimplemented CUPTI function twice;
// "forced" runs LongKernel twice on its own: a default flush while the first runs, a forced one
// while the second runs (each then synchronized), and a final forced flush.
#include <cuda_runtime.h>
#include <cupti.h>
#include <cupti_profiler_target.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

namespace {

uint64_t Mono() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + ts.tv_nsec;
}

uint64_t MonoCallback() { return Mono(); }

int g_corrdata_bad = 0;

void CUPTIAPI OnCallback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                         const void* data) {
  const auto* cb = static_cast<const CUpti_CallbackData*>(data);
  if (cb->callbackSite == CUPTI_API_ENTER) {
    *cb->correlationData = 0x5eed0000ull + cb->correlationId;
  } else if (*cb->correlationData != 0x5eed0000ull + cb->correlationId) {
    ++g_corrdata_bad;
  }
  printf("CB %s %d %u %u %s %s\n", cb->callbackSite == CUPTI_API_ENTER ? "enter" : "exit",
         int(domain), cbid, cb->correlationId, cb->functionName,
         cb->symbolName != nullptr ? cb->symbolName : "-");
}

void CUPTIAPI BufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *size = 16 * 1024;  // small on purpose: forces several buffers
  *buffer = static_cast<uint8_t*>(aligned_alloc(8, *size));
  *max_records = 0;
}

void CUPTIAPI BufferCompleted(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* rec = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
    switch (rec->kind) {
      case CUPTI_ACTIVITY_KIND_KERNEL:
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        auto* k = reinterpret_cast<CUpti_ActivityKernel10*>(rec);
        printf("KERNEL %u %llu %llu %u %u %u %d %d %d %d %d %d %s\n", k->correlationId,
               (unsigned long long)k->start, (unsigned long long)k->end, k->streamId,
               k->deviceId, k->contextId, k->gridX, k->gridY, k->gridZ, k->blockX, k->blockY,
               k->blockZ, k->name);
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        auto* m = reinterpret_cast<CUpti_ActivityMemcpy6*>(rec);
        printf("MEMCPY %u %llu %llu %u %llu %d\n", m->correlationId, (unsigned long long)m->start,
               (unsigned long long)m->end, m->streamId, (unsigned long long)m->bytes,
               int(m->copyKind));
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMSET: {
        auto* m = reinterpret_cast<CUpti_ActivityMemset4*>(rec);
        printf("MEMSET %u %llu %llu %u %llu\n", m->correlationId, (unsigned long long)m->start,
               (unsigned long long)m->end, m->streamId, (unsigned long long)m->bytes);
        break;
      }
      case CUPTI_ACTIVITY_KIND_RUNTIME:
      case CUPTI_ACTIVITY_KIND_DRIVER: {
        auto* a = reinterpret_cast<CUpti_ActivityAPI*>(rec);
        printf("API %s %u %u %llu %llu\n",
               rec->kind == CUPTI_ACTIVITY_KIND_RUNTIME ? "runtime" : "driver", a->cbid,
               a->correlationId, (unsigned long long)a->start, (unsigned long long)a->end);
        break;
      }
      case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
        auto* s = reinterpret_cast<CUpti_ActivitySynchronization2*>(rec);
        printf("SYNC %d %u %llu %llu %u\n", int(s->type), s->correlationId,
               (unsigned long long)s->start, (unsigned long long)s->end, s->streamId);
        break;
      }
      default:
        printf("OTHER %d\n", int(rec->kind));
    }
  }
  free(buffer);
}

__global__ void Scale(float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}

__global__ void Empty() {}
__global__ void LongKernel() {}  // its cost comes from GPUSIM_COSTS (mode "forced")

void PrintClock() {
  uint64_t t = 0;
  uint64_t m1 = Mono();
  cuptiGetTimestamp(&t);
  uint64_t m2 = Mono();
  printf("CLOCK %llu %llu\n", (unsigned long long)t, (unsigned long long)(m1 + (m2 - m1) / 2));
}

}  // namespace

int main(int argc, char** argv) {
  bool tscb = false, nccl = false, fail = false, twosubs = false, unsupported = false,
       forced = false;
  for (int i = 1; i < argc; ++i) {
    tscb |= strcmp(argv[i], "tscb") == 0;
    nccl |= strcmp(argv[i], "nccl") == 0;
    fail |= strcmp(argv[i], "fail") == 0;
    twosubs |= strcmp(argv[i], "twosubs") == 0;
    unsupported |= strcmp(argv[i], "unsupported") == 0;
    forced |= strcmp(argv[i], "forced") == 0;
  }
  setvbuf(stdout, nullptr, _IOLBF, 0);
  if (unsupported) {
    CUpti_Profiler_Initialize_Params p = {CUpti_Profiler_Initialize_Params_STRUCT_SIZE, nullptr};
    printf("RESULT profiler_init %d\n", int(cuptiProfilerInitialize(&p)));
    printf("RESULT profiler_init %d\n", int(cuptiProfilerInitialize(&p)));
    return 0;
  }
  if (tscb) printf("RESULT tscb %d\n", int(cuptiActivityRegisterTimestampCallback(&MonoCallback)));
  CUpti_SubscriberHandle sub = nullptr;
  CUptiResult r = cuptiSubscribe(&sub, reinterpret_cast<CUpti_CallbackFunc>(&OnCallback), nullptr);
  printf("RESULT subscribe %d\n", int(r));
  if (twosubs) {
    CUpti_SubscriberHandle sub2 = nullptr;
    printf("RESULT subscribe2 %d\n",
           int(cuptiSubscribe(&sub2, reinterpret_cast<CUpti_CallbackFunc>(&OnCallback), nullptr)));
  }
  printf("RESULT register %d\n", int(cuptiActivityRegisterCallbacks(&BufferRequested,
                                                                      &BufferCompleted)));
  CUptiResult e = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  printf("RESULT enable %d\n", int(e));
  if (fail) {
    uint64_t t = 0;
    printf("RESULT timestamp %d\n", int(cuptiGetTimestamp(&t)));
    const char* s = nullptr;
    cuptiGetResultString(r, &s);
    printf("RESULT string %s\n", s);
    return 0;
  }
  if (r != CUPTI_SUCCESS || e != CUPTI_SUCCESS) return 2;
  cuptiEnableDomain(1, sub, CUPTI_CB_DOMAIN_RUNTIME_API);
  cuptiEnableDomain(1, sub, CUPTI_CB_DOMAIN_DRIVER_API);
  cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY);
  cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET);
  cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME);
  cuptiActivityEnable(CUPTI_ACTIVITY_KIND_DRIVER);
  cuptiActivityEnable(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION);
  PrintClock();

  if (forced) {
    LongKernel<<<1, 1>>>();
    printf("RESULT flush0 %d\n", int(cuptiActivityFlushAll(0)));
    cudaDeviceSynchronize();
    LongKernel<<<2, 1>>>();
    printf("RESULT flushforced %d\n", int(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED)));
    cudaDeviceSynchronize();
    printf("RESULT flush %d\n", int(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED)));
    return 0;
  }
  const int n = 1 << 16;
  float* host = static_cast<float*>(malloc(n * sizeof(float)));
  for (int i = 0; i < n; ++i) host[i] = float(i);
  float* dev = nullptr;
  cudaMalloc(&dev, n * sizeof(float));
  cudaStream_t s1, s2;
  cudaStreamCreate(&s1);
  cudaStreamCreate(&s2);
  cudaMemcpyAsync(dev, host, n * sizeof(float), cudaMemcpyHostToDevice, s1);
  for (int i = 0; i < 20; ++i) {
    Scale<<<n / 256, 256, 0, s1>>>(dev, 2.0f, n);
    Empty<<<dim3(3, 2, 1), dim3(32, 4, 1), 128, s2>>>();
  }
  cudaMemsetAsync(dev, 0, 4096, s2);
  cudaStreamSynchronize(s1);
  cudaMemcpyAsync(host, dev, n * sizeof(float), cudaMemcpyDeviceToHost, s1);
  if (nccl) {
    ncclUniqueId id;
    ncclGetUniqueId(&id);
    ncclComm_t comm;
    printf("RESULT ncclinit %d\n", int(ncclCommInitRank(&comm, 1, id, 0)));
    printf("RESULT allreduce %d\n",
           int(ncclAllReduce(dev, dev, 1024, ncclFloat, ncclSum, comm, s1)));
  }
  cudaDeviceSynchronize();
  PrintClock();
  printf("RESULT flush %d\n", int(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED)));
  size_t dropped = 0;
  cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped);
  printf("DROPPED %zu\n", dropped);
  printf("CORRDATA_BAD %d\n", g_corrdata_bad);
  cuptiUnsubscribe(sub);
  return 0;
}
