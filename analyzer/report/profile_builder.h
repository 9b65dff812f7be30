// ProfileBuilder: writes profagent record files for tests and benchmarks, with the generated
// protobuf classes (the agent has its own hand-written encoder; this one is the reference).
//
// Callers give absolute times and correlation ids; the builder does the delta encodings of the
// schema (batch base_ns + Event.dt, corr_base + dcorr) and interns strings (a StringDef is
// written the first time a string is used). Host events are grouped per thread and device ops
// per device, flushed every `batch` events or on Flush()/Close().
//
// Not thread-safe; one builder per file. Test-only: errors abort via assert-like messages.
#ifndef PROFAGENT_ANALYZER_REPORT_PROFILE_BUILDER_H_
#define PROFAGENT_ANALYZER_REPORT_PROFILE_BUILDER_H_

#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "proto/profagent.pb.h"

namespace profagent {
namespace analyzer {

class ProfileBuilder {
 public:
  // Opens `path` and writes the preamble with the given schema version.
  explicit ProfileBuilder(const std::string& path, uint16_t major = 1, uint16_t minor = 0,
                          size_t batch = 256);
  ~ProfileBuilder();

  // Interns `s`, writing its StringDef on first use. "" is id 0.
  uint32_t Str(const std::string& s);
  // Writes any record as one frame (after flushing pending batches).
  void Write(const Record& r);
  void WriteHeader(int rank, int world, const std::string& host, GpuTimingMode timing);

  // A host event starting at absolute `start_ns` on `thread`; `corr` is used for the kinds that
  // carry one (reader.h KindHasCorr) and must increase per thread. `e.dt`/`e.dcorr` are set here.
  void Host(uint32_t thread, uint64_t start_ns, uint64_t corr, Event e);
  // Convenience builders (return the event for further fields).
  static Event Launch(uint32_t name, uint64_t dur);
  // An nvtxRangeStart/End range (no nesting depth: free to overlap others), lasting `dur`.
  static Event StartEndRange(uint32_t name, uint64_t dur);
  // A cudaGraphLaunch of exec `graph` (its call `name`), lasting `dur`.
  static Event GraphLaunch(uint32_t name, uint64_t dur, uint64_t graph);
  static Event Nvtx(uint32_t name, uint64_t dur, uint32_t depth);
  static Event Step(uint64_t dur, int64_t tokens, int64_t kv, uint32_t phase, bool warmup);

  // A device op starting at absolute `start_ns`; corr must increase per device.
  void Device(uint32_t device, uint64_t start_ns, uint64_t corr, DeviceOp op);

  void Flush();
  // Flushes and writes a Footer when `footer` is true (with `reason` and `dropped`); closes the
  // file.
  void Close(bool footer = true, const std::string& reason = "exit", uint64_t dropped = 0);
  uint64_t events() const { return events_; }

 private:
  struct HostBatch {
    EventBatch b;
    uint64_t last_t = 0, last_corr = 0;
    bool started = false;
  };
  struct DevBatch {
    DeviceBatch b;
    uint64_t last_t = 0, last_corr = 0;
    bool started = false;
  };
  void WriteFrame(const Record& r);
  void FlushHost(uint32_t thread);
  void FlushDevice(uint32_t device);

  FILE* f_;
  size_t batch_;
  std::unordered_map<std::string, uint32_t> strings_;
  std::map<uint32_t, HostBatch> host_;
  std::map<uint32_t, DevBatch> dev_;
  std::string buf_;
  uint64_t events_ = 0;
};

}  // namespace analyzer
}  // namespace profagent

#endif  // PROFAGENT_ANALYZER_REPORT_PROFILE_BUILDER_H_
