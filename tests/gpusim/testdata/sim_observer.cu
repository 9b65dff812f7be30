// Checks gpusim's observer interface (gpusim_internal.h) the way the simulated CUPTI uses it:
// API callbacks at enter and exit with CUPTI runtime cbids and fresh correlation ids, op
// callbacks from stream workers carrying the correlation id of the enqueuing call, simulated
// driver calls, custom ops. Prints "ok <check>" / "FAIL <check>"; exit code = failures.
#include <cuda_runtime.h>
#include <cupti_runtime_cbid.h>
#include <dlfcn.h>
#include <generated_cuda_runtime_api_meta.h>
#include <time.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tests/gpusim/gpusim_internal.h"

__global__ void observed_kernel(float* p) {
  if (p != nullptr) p[0] = 1;
}

struct ApiRec {
  int domain, is_exit, cbid;
  std::string func, symbol;
  uint32_t corr;
  int ret;
  std::thread::id thread;
  unsigned grid_x;
};

struct OpRec {
  int kind;
  std::string name;
  uint32_t corr, stream_id;
  uint64_t queued, start, end;
};

static std::mutex g_mu;
static std::vector<ApiRec> g_api;
static std::vector<OpRec> g_ops;

static void OnApi(void*, int domain, int is_exit, int cbid, const char* func, const char* symbol,
                  uint32_t corr, const void* params, const void* ret) {
  ApiRec r{domain, is_exit, cbid, func ? func : "", symbol ? symbol : "", corr,
           ret ? *static_cast<const int*>(ret) : -1, std::this_thread::get_id(), 0};
  if ((cbid == CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000 ||
       cbid == CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000) &&
      params != nullptr) {
    r.grid_x = static_cast<const cudaLaunchKernel_v7000_params*>(params)->gridDim.x;
  }
  std::lock_guard<std::mutex> lock(g_mu);
  g_api.push_back(r);
}

static void OnOp(void*, const GpusimOpRecord* rec) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_ops.push_back(OpRec{rec->kind, rec->name ? rec->name : "", rec->correlation_id,
                        rec->stream_id, rec->queued_ns, rec->start_ns, rec->end_ns});
}

static void RunCustom(void* arg, GpusimOpRecord* rec) {
  *static_cast<int*>(arg) += 1;
  struct timespec ts = {0, 200000};  // the "collective" lasts 200 us
  nanosleep(&ts, nullptr);
  rec->end_ns = rec->start_ns + 150000;  // and reports its own end
}

static int g_freed = 0;
static void FreeCustom(void*) { ++g_freed; }

static int failures = 0;
static void Check(bool ok, const char* what) {
  printf("%s %s\n", ok ? "ok" : "FAIL", what);
  if (!ok) ++failures;
}

template <typename T>
static T Sym(const char* name) {
  return reinterpret_cast<T>(dlsym(RTLD_DEFAULT, name));
}

int main() {
  auto set_observer = Sym<decltype(&gpusim_set_observer)>("gpusim_set_observer");
  auto stream_id = Sym<decltype(&gpusim_stream_id)>("gpusim_stream_id");
  auto enqueue = Sym<decltype(&gpusim_stream_enqueue)>("gpusim_stream_enqueue");
  auto drv_begin = Sym<decltype(&gpusim_driver_call_begin)>("gpusim_driver_call_begin");
  auto drv_end = Sym<decltype(&gpusim_driver_call_end)>("gpusim_driver_call_end");
  auto drv_end_result =
      Sym<decltype(&gpusim_driver_call_end_result)>("gpusim_driver_call_end_result");
  auto now_ns = Sym<decltype(&gpusim_now_ns)>("gpusim_now_ns");
  Check(set_observer && stream_id && enqueue && drv_begin && drv_end && drv_end_result && now_ns,
        "internal_symbols_exported");
  if (failures) return failures;

  cudaStream_t s;
  cudaStreamCreate(&s);
  float* d = nullptr;
  cudaMalloc(&d, 1024);
  float host[256] = {};

  set_observer(OnApi, OnOp, nullptr);
  observed_kernel<<<3, 64, 0, s>>>(d);
  cudaMemcpyAsync(host, d, sizeof(host), cudaMemcpyDeviceToHost, s);
  void* args[] = {&d};
  cudaLaunchKernel(reinterpret_cast<const void*>(observed_kernel), dim3(5), dim3(32), args, 0, s);
  uint32_t drv_corr =
      drv_begin(17, "cuLaunchKernelEx", "ncclDevKernel_AllReduce_Sum_f32", nullptr);
  GpusimOpRecord tmpl = {};
  tmpl.kind = GPUSIM_OP_COLLECTIVE;
  tmpl.name = "AllReduce";
  tmpl.correlation_id = drv_corr;
  int runs = 0;
  int rc = enqueue(reinterpret_cast<gpusim_stream_t>(s), &tmpl, RunCustom, &runs, FreeCustom);
  drv_end(17, "cuLaunchKernelEx", "ncclDevKernel_AllReduce_Sum_f32", drv_corr, nullptr);
  // A driver call that fails: its CUresult (2, CUDA_ERROR_OUT_OF_MEMORY) reaches the exit.
  uint32_t failed_corr = drv_begin(549, "cuMemCreate", nullptr, nullptr);
  drv_end_result(549, "cuMemCreate", nullptr, failed_corr, nullptr, 2);
  cudaStreamSynchronize(s);
  set_observer(nullptr, nullptr, nullptr);
  observed_kernel<<<1, 32, 0, s>>>(d);  // not observed
  cudaStreamSynchronize(s);

  Check(rc == 0 && runs == 1 && g_freed == 1, "custom_op_ran_and_freed");
  Check(enqueue(reinterpret_cast<gpusim_stream_t>(0x999), &tmpl, RunCustom, &runs,
                FreeCustom) == cudaErrorInvalidResourceHandle,
        "custom_op_invalid_stream");

  // Enter/exit pairs: same correlation id, same thread, enter first, distinct ids per call.
  std::map<uint32_t, std::vector<const ApiRec*>> by_corr;
  for (const ApiRec& a : g_api) by_corr[a.corr].push_back(&a);
  bool pairs_ok = true;
  for (auto& kv : by_corr) {
    auto& v = kv.second;
    pairs_ok &= v.size() == 2 && v[0]->is_exit == 0 && v[1]->is_exit == 1 &&
                v[0]->cbid == v[1]->cbid && v[0]->thread == v[1]->thread && kv.first != 0;
  }
  Check(pairs_ok && !by_corr.empty(), "api_enter_exit_pairs");

  // Ops carry the correlation id of the call that enqueued them.
  int kernels = 0, copies = 0, customs = 0;
  bool kernel_ok = true, copy_ok = true, custom_ok = true;
  for (const OpRec& op : g_ops) {
    auto it = by_corr.find(op.corr);
    const ApiRec* api = it != by_corr.end() ? it->second[0] : nullptr;
    if (op.kind == GPUSIM_OP_KERNEL) {
      ++kernels;
      // The <<<>>> launch (grid 3) reports as CUDA 13's runtime does, cbid __cudaLaunchKernel;
      // the explicit cudaLaunchKernel (grid 5) as cudaLaunchKernel.
      const bool chevrons = api != nullptr && api->grid_x == 3;
      kernel_ok &= api != nullptr &&
                   api->cbid == (chevrons ? CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000
                                          : CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000) &&
                   api->func == (chevrons ? "__cudaLaunchKernel" : "cudaLaunchKernel") &&
                   api->symbol == "_Z15observed_kernelPf" &&
                   op.name == "observed_kernel(float*)" && api->domain == GPUSIM_DOMAIN_RUNTIME &&
                   (api->grid_x == 3 || api->grid_x == 5) && it->second[1]->ret == 0 &&
                   op.stream_id == stream_id(reinterpret_cast<gpusim_stream_t>(s));
    } else if (op.kind == GPUSIM_OP_MEMCPY) {
      ++copies;
      copy_ok &= api != nullptr && api->cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020;
    } else if (op.kind == GPUSIM_OP_COLLECTIVE) {
      ++customs;
      custom_ok &= api != nullptr && api->domain == GPUSIM_DOMAIN_DRIVER && api->cbid == 17 &&
                   api->symbol == "ncclDevKernel_AllReduce_Sum_f32" && op.name == "AllReduce" &&
                   op.end == op.start + 150000 && op.start >= op.queued;
    }
  }
  Check(kernels == 2 && kernel_ok, "kernel_ops_correlated_to_their_launch_cbid");
  Check(copies == 1 && copy_ok, "memcpy_op_correlated_to_cudaMemcpyAsync");
  Check(customs == 1 && custom_ok, "custom_op_correlated_to_driver_call");
  bool sync_seen = false;
  for (const ApiRec& a : g_api) {
    sync_seen |= a.cbid == CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020 &&
                 a.func == "cudaStreamSynchronize";
  }
  Check(sync_seen, "sync_call_reported");
  int driver_rets = 0;
  for (const ApiRec& a : g_api) {
    if (a.domain != GPUSIM_DOMAIN_DRIVER) continue;
    driver_rets += a.is_exit == 0          ? a.ret == -1  // no return value at enter
                   : a.corr == drv_corr    ? a.ret == 0
                   : a.corr == failed_corr ? a.ret == 2 && a.cbid == 549
                                           : 0;
  }
  Check(driver_rets == 4, "driver_call_return_values_at_exit");
  Check(stream_id(nullptr) == 0, "legacy_stream_id_is_0");
  cudaFree(d);
  cudaStreamDestroy(s);
  printf("failures %d\n", failures);
  return failures;
}
