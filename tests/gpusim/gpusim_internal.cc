// The gpusim_* functions of gpusim_internal.h, exported by libcudart.so.13 (version node
// GPUSIM_INTERNAL) for the simulated libcupti.so.13 and libnccl.so.2.
#include "tests/gpusim/gpusim_internal.h"

#include "tests/gpusim/sim_device.h"

namespace {
// Argument-less ApiInfo for driver calls: the callback gets the caller's cbid and name.
// `result`: the call's CUresult (exit only).
void DriverCallback(int is_exit, int cbid, const char* func_name, const char* symbol_name,
                    uint32_t corr, const void* params, int result) {
  const gpusim::Observer* obs = gpusim::CurrentObserver();
  if (obs == nullptr || obs->api_cb == nullptr) return;
  int ret = result;
  obs->api_cb(obs->user, GPUSIM_DOMAIN_DRIVER, is_exit, cbid, func_name, symbol_name, corr,
              params, is_exit ? &ret : nullptr);
}
}  // namespace

extern "C" {

void gpusim_set_observer(GpusimApiCallback api_cb, GpusimOpCallback op_cb, void* user) {
  gpusim::SetObserver(api_cb, op_cb, user);
}

uint32_t gpusim_next_correlation_id(void) { return gpusim::NextCorrelationId(); }

uint32_t gpusim_driver_call_begin(int cbid, const char* func_name, const char* symbol_name,
                                  const void* params) {
  uint32_t corr = gpusim::NextCorrelationId();
  DriverCallback(0, cbid, func_name, symbol_name, corr, params, 0);
  return corr;
}

void gpusim_driver_call_end(int cbid, const char* func_name, const char* symbol_name,
                            uint32_t correlation_id, const void* params) {
  DriverCallback(1, cbid, func_name, symbol_name, correlation_id, params, 0);
}

void gpusim_driver_call_end_result(int cbid, const char* func_name, const char* symbol_name,
                                   uint32_t correlation_id, const void* params, int result) {
  DriverCallback(1, cbid, func_name, symbol_name, correlation_id, params, result);
}

int gpusim_stream_enqueue(gpusim_stream_t stream, const GpusimOpRecord* tmpl,
                          void (*run)(void* arg, GpusimOpRecord* rec), void* arg,
                          void (*free_arg)(void* arg)) {
  return gpusim_stream_enqueue_graphable(stream, tmpl, run, arg, free_arg, nullptr);
}

int gpusim_stream_enqueue_graphable(gpusim_stream_t stream, const GpusimOpRecord* tmpl,
                                    void (*run)(void* arg, GpusimOpRecord* rec), void* arg,
                                    void (*free_arg)(void* arg),
                                    void* (*clone_arg)(void* arg)) {
  gpusim::Stream* s = gpusim::ResolveStream(reinterpret_cast<cudaStream_t>(stream), false);
  if (s == nullptr) return cudaErrorInvalidResourceHandle;
  if (tmpl == nullptr || run == nullptr) return cudaErrorInvalidValue;
  gpusim::Op* op = new gpusim::Op();
  op->action = gpusim::Op::kCustom;
  op->report = true;
  op->rec = *tmpl;
  op->rec.start_ns = op->rec.end_ns = 0;
  op->rec.queued_ns = gpusim::NowNs();
  op->run = run;
  op->arg = arg;
  op->free_arg = free_arg;
  op->clone_arg = clone_arg;
  gpusim::Enqueue(s, op);
  gpusim::FlushGraphNodeEvents();  // the node a capture made of it, inside the caller's call
  return cudaSuccess;
}

int gpusim_stream_capturing(gpusim_stream_t stream) {
  gpusim::Stream* s = gpusim::ResolveStream(reinterpret_cast<cudaStream_t>(stream), false);
  if (s == nullptr) return 0;
  std::lock_guard<std::mutex> lock(s->mu);
  return s->capture_graph != nullptr ? 1 : 0;
}

uint32_t gpusim_stream_id(gpusim_stream_t stream) {
  gpusim::Stream* s = gpusim::ResolveStream(reinterpret_cast<cudaStream_t>(stream), false);
  return s != nullptr ? s->id : 0xffffffffu;
}

uint64_t gpusim_now_ns(void) { return gpusim::NowNs(); }

void gpusim_truth_write(const char* json_object) { gpusim::TruthWrite(json_object); }

int gpusim_current_device(void) { return gpusim::CurrentDevice(); }

void gpusim_set_graph_observer(GpusimGraphNodeCallback cb, void* user) {
  gpusim::SetGraphObserver(cb, user);
}

uint64_t gpusim_graph_node_id(const void* node) { return gpusim::GraphNodeId(node); }

}  // extern "C"
