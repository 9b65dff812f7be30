// `profanalyze perfetto`: profagent record files -> a trace for ui.perfetto.dev.
//
// Output (Perfetto native protobuf, proto/perfetto_trace.proto, or Chrome trace JSON):
//   - one process per rank file, named "rank N (host)" (pid = the recorded pid, remapped to a
//     synthetic one when two files share a pid);
//   - one thread track per host thread: API calls, NVTX ranges (nested slices), NVTX marks;
//     under it a "steps" track (EV_STEP) and a "runs" track (EV_RUN);
//   - one track per GPU stream ("GPU d stream s"): kernels, copies, sets, collective kernels,
//     with annotations grid/block, bytes, correlation id; written in start order (a window of
//     4096 ops or 100 ms per stream sorts records that arrive out of order) and never
//     overlapping: an op that starts up to 1 us before the previous one ended (CUDA-event
//     rounding) starts at that end, one that truly overlaps goes to a child track "GPU d
//     stream s (overlapping k)";
//   - a flow from every launch (or copy) to its device op, matched by correlation id (also
//     from an NCCL call to the kernel the agent timed with CUDA events; under CUPTI the
//     call's own driver launch carries it);
//   - a kernel or graph launch whose return the agent did not read (schema 1.1: 1 in
//     Header.launch_api_sample launches is timed, the others have dur 0) is an instant at the
//     call, not a zero-length slice, annotated api_dur "not timed (1 in N sampled)", with its
//     flow; in files where every launch was timed (launch_api_sample 0 or 1), dur 0 is a
//     measured duration and stays a slice;
//   - a "GPU d memory" counter per device from EV_ALLOC/EV_FREE sizes (an allocation counts
//     from its call's start, a free from its call's end, on the device the allocation was
//     made on; a free without a size takes the size of the live allocation at that pointer;
//     pinned host memory is not counted).
// Names that arrive mangled ("_Z...") are shown demangled.
// Several files (a profile directory) share one timeline: each file's monotonic times are
// mapped to rank 0's monotonic clock with its ClockOffset record (rank0 = local + offset); a
// file without one is placed through its Header's realtime/monotonic pair (or shares the
// reference's clock when its boot id matches). A single file keeps its own times.
//
// Memory is bounded: input is streamed batch by batch (analyzer/reader.h) and output is
// written as it is produced; what is kept is per-track state (names, live allocations, a
// fixed-size reorder window for the memory counters), per worker.
// Files are converted in parallel (one worker per file, up to --threads): the next file due in
// the output is written straight into it, the others into part files appended in input order,
// so the trace is byte-identical whatever the thread count. Packets are not globally time-sorted:
// trace_processor sorts every packet of a file before import (its sorter only extracts early
// when the trace carries tracing-service flush markers, which ours never does), and timestamps
// are absolute, so no per-sequence monotonicity is needed. Each slice's begin and end are
// written back to back, which keeps equal-timestamp neighbours correctly nested under the
// stable sort (ends carry no name and close the innermost open slice) as long as a track's
// slices are written in start order and nest: device-op tracks are made so (above); host
// tracks hold what the agent recorded (NVTX start/end ranges may cross, see README).
//
// Thread safety: the functions are reentrant; each call owns its readers, workers and output.
#ifndef PROFAGENT_ANALYZER_PERFETTO_PERFETTO_H_
#define PROFAGENT_ANALYZER_PERFETTO_PERFETTO_H_

#include <cstdint>
#include <iosfwd>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace profagent {
namespace analyzer {

enum class TraceFormat { kPerfetto, kChromeJson };

struct ExportOptions {
  TraceFormat format = TraceFormat::kPerfetto;
  // Entries held to time-order memory counter updates that arrive out of order (threads'
  // batches interleave in the file). Bounded memory; a larger window tolerates more skew.
  size_t counter_window = 8192;
  // Worker threads for a multi-file export; 0 = one per core. Never more than the files.
  int threads = 0;
};

// What a quick pass over a file learned (header, rank, threads, clock offset).
struct FileMeta {
  std::string path;
  bool has_header = false;
  uint32_t pid = 0;
  std::string hostname;
  int32_t rank = -1;               // last ProcessInfo wins over the Header
  uint64_t start_realtime_ns = 0;
  uint64_t start_monotonic_ns = 0;
  uint64_t boot_id_hash = 0;
  uint32_t launch_api_sample = 0;  // 1 in N launches timed (schema 1.1); 0 or 1: all of them
  bool host_timing = false;        // GPU timing `host` (the last ProcessInfo wins): no device ops
  // GPU timing `cupti`: device ops name CUPTI's stream ids, not the file's stream indexes that
  // host events carry (so a launch's stream argument is `stream_index`, not its track's id).
  bool cupti_timing = false;
  bool has_clock_offset = false;   // the ClockOffset with the smallest error is kept
  int64_t clock_offset_ns = 0;
  uint64_t clock_error_ns = 0;
  std::string clock_method;
  struct Thread {
    uint32_t tid = 0;
    std::string name;
  };
  std::map<uint32_t, Thread> threads;  // by the agent's thread index
  std::map<uint32_t, std::string> devices;
  // Names the application gave streams (StreamInfo, the last one wins), by (device, stream as
  // device ops carry it).
  std::map<std::pair<uint32_t, uint32_t>, std::string> stream_names;
};

// Reads the metadata records of `path`, skipping event batches without parsing them. Errors
// (unreadable, bad preamble, corrupt frame length) name the file and byte offset.
absl::StatusOr<FileMeta> ScanFileMeta(const std::string& path);

// How one file was placed on the common timeline: common_ns = local_ns + offset_ns, exact
// within +-error_ns when method is a measured offset.
struct FileAlignment {
  std::string path;
  int32_t rank = -1;
  int64_t offset_ns = 0;
  uint64_t error_ns = 0;
  std::string method;  // "clock_offset:<how>", "reference", "boot_id", "realtime", "none"
};

// The offsets for a set of files (see the header comment). One file: offset 0 ("none").
std::vector<FileAlignment> ComputeAlignment(const std::vector<FileMeta>& files);

struct ExportStats {
  uint64_t host_events = 0;
  uint64_t device_ops = 0;
  uint64_t output_events = 0;  // packets (protobuf) or trace events (JSON)
  uint64_t output_bytes = 0;
  int threads = 0;  // workers used
  std::vector<FileAlignment> alignment;
  std::vector<std::string> warnings;  // e.g. truncated input files
};

// Converts `inputs` (rank files) into one trace at `out_path`. On error nothing is left at
// out_path, and the status message is one line naming the offending file.
absl::Status ExportTrace(const std::vector<std::string>& inputs, const std::string& out_path,
                         const ExportOptions& options, ExportStats* stats);

// FILE -> {FILE}; DIR -> its *.pb files (sorted).
absl::StatusOr<std::vector<std::string>> ResolveProfileInputs(const std::string& file_or_dir);
// rank0.pb -> rank0.pftrace (or .json); DIR -> DIR/trace.pftrace (or trace.json).
std::string DefaultTraceOutputPath(const std::string& file_or_dir, TraceFormat format);

// The whole subcommand: returns the exit code (0 ok, 2 bad input or usage), prints a summary
// to `out` and one-line errors to `err`. threads: as ExportOptions::threads.
int RunPerfettoCommand(const std::string& input, const std::string& output,
                       const std::string& format, std::ostream& out, std::ostream& err,
                       int threads = 0);

// Registers `perfetto FILE|DIR [-o OUT] [--format perfetto|json] [--threads N]`; the exit
// code goes to *exit_code when the subcommand runs.
void AddPerfettoCommand(CLI::App& app, int* exit_code);

}  // namespace analyzer
}  // namespace profagent

#endif  // PROFAGENT_ANALYZER_PERFETTO_PERFETTO_H_
