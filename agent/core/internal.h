// Shared state of agent/core (not for hooks: they use agent.h).
#ifndef PROFAGENT_AGENT_CORE_INTERNAL_H_
#define PROFAGENT_AGENT_CORE_INTERNAL_H_

#include <signal.h>
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "agent/core/agent.h"
#include "agent/core/config.h"
#include "agent/core/ring.h"

namespace profagent {
namespace internal {

// One per application thread that emitted at least once. Owned by the registry; its ring is
// recycled after its thread exited and the writer drained it. A new thread taking a recycled
// ring gets a fresh index, so two threads never share one in the file.
struct ThreadState {
  Ring* ring = nullptr;
  uint32_t index = 0;            // small thread index (EventBatch.thread), stable per ThreadState
  pid_t tid = 0;
  std::atomic<bool> exited{false};
  uint64_t drops_written = 0;    // writer-side: last Drops value written
  uint64_t drops_base = 0;       // ring drops counted before this thread took the ring
  bool announced = false;        // writer-side: ThreadInfo written
  uint32_t names_seen = 0;       // writer-side: Global::thread_names_gen when last announced
  // Writer-side: the stack drained last, for the thread's next event (a pass may end between
  // a launch's stack and the launch itself).
  uint32_t pending_stack = 0;
  std::string written_name;      // writer-side: the name its last ThreadInfo carried
  char name[16] = {0};
  // Producer-side: the ring's read position when it last yielded to the writer on finding the
  // ring full (PushSlow); ~0 = never. One grace per writer drain, not one per dropped event.
  uint64_t yielded_at_tail = ~0ull;
};

// The process's rank from its launcher's environment (torchrun, Open MPI, PMI/PMIx, Slurm,
// deepspeed-style RANK/WORLD_SIZE); -1 / empty where none says. `get` is getenv (a test passes
// its own).
struct EnvRank {
  int rank = -1, local_rank = -1, world_size = -1;
  std::string source;  // the variable the rank came from
};
EnvRank RankFromEnv(const char* (*get)(const char*));

struct NoteItem {
  std::string level, text;
};

struct CommItem {
  uint64_t id;
  int lib;
  uint64_t handle;
  int rank, size;
  std::string unique_id;
  int device;
  uint64_t parent;
};

struct OffsetItem {
  int64_t offset_ns;
  uint64_t error_ns, local_ns;
  std::string method;
  uint32_t rounds;
};

struct DeviceSyncItem {
  uint64_t device_ns, mono_ns, uncertainty_ns;
};

struct StreamNameItem {
  uint32_t device;
  uint32_t device_stream;  // DeviceOp.stream, unless `file_index`
  bool file_index;         // the writer's stream index of `handle` is DeviceOp.stream
  uint64_t handle;         // cudaStreamPerThread already made the naming thread's key
  std::string name;
};

struct DeviceItem {
  uint32_t device;
  std::string name;
  uint64_t total_mem;
  uint32_t sm_count;
  std::string uuid;
};

// Everything guarded by Global::mu, except the atomics.
struct Global {
  std::mutex mu;
  Config config;
  std::atomic<bool> enabled{false};     // agent initialized and not disabled
  std::atomic<bool> schedule_active{true};
  std::atomic<bool> writer_running{false};
  // StopWriter has begun: it runs the shutdown hooks (a thread may still register then, e.g.
  // the one whose CUPTI flush delivers the last activity records), then sets `closing` and
  // drains the rings for the last time; no thread registers after that.
  std::atomic<bool> shutting_down{false};
  std::atomic<bool> closing{false};
  // The job this process belongs to (PROFAGENT_JOB, Header.job): set at init, then constant.
  std::string job;

  std::vector<ThreadState*> threads;    // live and exited-but-undrained
  std::vector<ThreadState*> free_threads;
  uint32_t next_thread_index = 1;

  // Strings, ids 1, 2, ... in order of interning (next_string_id: the last given).
  // `kept_strings`: names (kernels, domains, registered strings), kept for the process's life
  // (a fork child's file writes them all again); value -> id in `string_ids`.
  uint32_t next_string_id = 0;
  std::vector<std::pair<uint32_t, std::string>> kept_strings;
  std::unordered_map<std::string, uint32_t> string_ids;
  // NVTX messages (InternMessage): most are unique (a step's kv list), so they are not kept:
  // queued until the writer puts them in the file, then gone (no slot per message stays: a
  // server's unique messages grew a vector by 32 bytes a step, and its doublings paused the
  // writer for tens of ms). `message_ids` dedupes recent ones (a repeated range name keeps one
  // id) within kMessageCacheBytes of text, then starts over.
  std::deque<std::pair<uint32_t, std::string>> new_messages;
  std::unordered_map<std::string, uint32_t> message_ids;
  size_t message_bytes = 0;
  std::vector<std::string> apis;        // api id -> name (index 0 = "")
  std::unordered_map<const void*, std::string> func_names;
  FuncNameResolver resolver = nullptr;
  const char* const* coll_dtypes[2] = {nullptr, nullptr};
  int coll_ndtypes[2] = {0, 0};
  const char* const* coll_redops[2] = {nullptr, nullptr};
  int coll_nredops[2] = {0, 0};

  // Process facts (pending ones are written by the writer at its next pass).
  int rank = -1, local_rank = -1, world_size = -1, rank_priority = 0;
  std::string rank_source;
  bool process_info_dirty = false;
  int gpu_mode = 0;
  std::string gpu_reason;
  std::vector<NoteItem> notes;
  std::vector<CommItem> comms;
  std::vector<OffsetItem> offsets;
  std::vector<DeviceItem> devices;
  std::vector<DeviceSyncItem> device_syncs;
  std::vector<void (*)()> shutdown_fns;
  // Names the application gave OS threads (nvtxNameOsThread), by tid; bumped on each change.
  std::unordered_map<uint32_t, std::string> thread_names;
  std::atomic<uint32_t> thread_names_gen{0};
  // Streams named (NameStream), in order; the writer writes each once (StreamInfo).
  std::vector<StreamNameItem> stream_names;
  StreamLocator stream_locator = nullptr;

  // Flush handshake.
  std::atomic<uint64_t> flush_requested{0};
  std::atomic<uint64_t> flush_done{0};

  // CountUpstreamDrops (cumulative).
  std::atomic<uint64_t> upstream_drops{0};
};

Global& G();

// Turns the agent on/off (Global::enabled and the hooks' Recording() bit together).
void SetEnabled(bool on);

// Starts the writer thread if not running (called with G().mu held).
void StartWriterLocked();
// Stops the writer after a final drain; writes the footer. Idempotent.
void StopWriter(const char* reason);
// True when the core's mutexes can be taken within `timeout_ms` (false when the calling thread,
// interrupted by a signal, holds one: a flush from the handler would deadlock).
bool CoreLocksAvailable(int timeout_ms);
// Whether PROFAGENT_RANKS selects `rank` (every rank when unset; an unknown one, < 0, too).
bool RankIsSelected(int rank);
// True when this process started the writer (false in a vfork child sharing our memory).
bool WriterOwnedByThisProcess();
// Wakes the writer (flush request). Async-signal-safe.
void WakeWriter();
// Async-signal-safe (for a fatal signal's handler): asks the writer thread to finish the file
// now (last drain, footer naming `sig`) and waits up to `timeout_ms` for it. True when the file
// is finished (by the writer, or by a shutdown already under way on another thread).
bool FinishFromSignal(int sig, int timeout_ms);
// Before _exit, exec or quick_exit, which skip atexit: runs the shutdown hooks on the calling
// thread, then has the writer thread do the last drain and the footer (`reason`), and waits for
// it without allocating. Should the hooks hang (the caller, in a signal handler, interrupted
// itself inside malloc or a lock they need), the writer finishes the file without them after
// 5 s and, when `may_exit`, ends the process with `status`.
void FinishBeforeExit(const char* reason, int status, bool may_exit);
// The signals the agent's own threads block (stop requests, timers, SIGPROF, SIGXFSZ): a
// process-directed one then goes to an application thread.
void BlockedInAgentThreads(sigset_t* set);
// SetSignalFlush's functions (writer.cc; read by FinishAfterSignal).
extern std::atomic<void (*)()> g_signal_flush_request;
extern std::atomic<bool (*)()> g_signal_flush_done;
extern std::atomic<void (*)()> g_signal_range_flush;  // SetSignalRangeFlush's
// Child side of fork(): forget the parent's writer, rings and file.
void WriterAfterForkChild();
// Output file management.
std::string OutputPathFor(int rank, pid_t pid, bool with_pid);

// Registers the calling thread (slow path of Emit). Returns nullptr if the agent is off.
ThreadState* RegisterThisThread();

}  // namespace internal
}  // namespace profagent

#endif  // PROFAGENT_AGENT_CORE_INTERNAL_H_
