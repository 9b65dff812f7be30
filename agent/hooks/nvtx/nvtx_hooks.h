// The agent's NVTX surface: an NVTX v3 injection library.
//
// NVTX v3 (the header-only nvtx3/ of CUDA 13, torch.cuda.nvtx, the `nvtx` Python package) finds
// a tool only through NVTX_INJECTION64_PATH. This package's load-time constructor points that
// variable at the library that contains it (InstallEnv) unless it is already set, so a plain
// LD_PRELOAD of libprofagent.so covers every NVTX user. NVTX then dlopens the same file and calls
// InitializeInjectionNvtx2 once per NVTX instance in the process (each library compiled with the
// headers has its own); that fills the CORE and CORE2 (domain) handler tables.
//
// What is recorded (agent/core/event.h):
//  * push/pop and start/end ranges as complete kNvtxRange events (t0 = start, t1 = end), with
//    domain, message (registered strings by id in nvtx.name; other text, wide strings converted
//    to UTF-8, copied in `extra` slots, at most kMaxLongMessageBytes - 1 bytes), category, color,
//    payload (int/uint/float/double) and nesting depth (push/pop only, 0 = outermost);
//  * marks as kNvtxMark; ranges still open at shutdown as kNvtxPush (t1 = t0), emitted by
//    FlushOpenRanges (model::Shutdown calls it) from the shutting-down thread;
//  * every range end also goes to agent/model, which turns step/run messages into kStep/kRun.
// Ranges are tracked even while the schedule is inactive (Recording() false), so pairing stays
// right and steps keep being counted; only the emission is skipped.
//
// Hot-path contract of the handlers: no lock, no allocation, no logging, no exceptions escape;
// the first push on a thread allocates that thread's stack (once; a pthread key gives it back
// for reuse when the thread exits with no open range). All thread-local state is initial-exec:
// a thread_local with a constructor/destructor (local-dynamic TLS) in libprofagent.so made
// Bazel's gold linker hand the core's t_state a wrong GOT slot (verified; bfd links it right).
// Push/pop keep a per-thread stack of open ranges, kInlineDepth in place, grown on the heap (a
// slow path, once per new depth) up to kMaxDepth (deeper pushes are counted, not recorded, and
// their pops matched); start/end ranges live in a lock-free table of kStartSlots entries keyed
// by range id (they may end on another thread); a start that finds no free slot among its
// probes goes to a mutex-guarded overflow map (a server with thousands of requests in flight,
// each a start/end range), which ends look in only while it holds any. What could not be
// recorded is counted, and said in a note of the file at shutdown. Domain creation, string
// registration and naming are slow path (they intern strings).
#ifndef PROFAGENT_AGENT_HOOKS_NVTX_NVTX_HOOKS_H_
#define PROFAGENT_AGENT_HOOKS_NVTX_NVTX_HOOKS_H_

#include <cstddef>
#include <cstdint>

extern "C" {
// The NVTX injection entry point (NvtxInitializeInjectionNvtxFunc_t). Returns 1 when the
// handlers are installed, 0 when the agent is disabled (PROFAGENT_ENABLE=0) or the export table
// is unusable (NVTX then turns every call into a no-op).
__attribute__((visibility("default"))) int InitializeInjectionNvtx2(
    const void* (*get_export_table)(uint32_t export_table_id));
}

namespace profagent {
namespace nvtx {

constexpr int kInlineDepth = 32;           // open push/pop ranges per thread without a heap array
constexpr int kMaxDepth = 1024;            // open push/pop ranges per thread
constexpr size_t kMaxMessageBytes = 256;   // per message copied inline, NUL included
// A longer one (a large batch's kv list) is copied to the heap, up to what one event carries
// (kMaxExtraBytes, agent/core/agent.h).
constexpr size_t kMaxLongMessageBytes = 16384;
constexpr size_t kStartSlots = 1024;       // start/end ranges in the lock-free table
constexpr size_t kStartProbes = 8;         // slots tried per start

// Sets NVTX_INJECTION64_PATH to the absolute path of the shared object that contains this code,
// unless it is already set, PROFAGENT_ENABLE=0, or this code is linked into the executable
// itself. Called from this package's constructor; idempotent. Not thread-safe against a
// concurrent getenv (setenv), which is why it runs at load time.
void InstallEnv();

// Emits every range still open (all threads' stacks and the start/end table) as kNvtxPush.
// Slow path, for shutdown; ranges whose thread is still pushing/popping are read racily.
void FlushOpenRanges();

struct Stats {
  uint64_t depth_overflow = 0;   // pushes beyond kMaxDepth (not recorded)
  uint64_t start_table_full = 0; // starts that found no free slot (then in the overflow map)
  uint64_t start_lost = 0;       // starts that could not be kept at all (no memory)
  uint64_t unmatched_pops = 0;   // pops with no open range of that domain on the thread
  uint64_t unknown_ends = 0;     // ends of ids not in the table
  uint64_t inits = 0;            // InitializeInjectionNvtx2 calls that installed handlers
};
Stats GetStats();

}  // namespace nvtx
}  // namespace profagent

#endif  // PROFAGENT_AGENT_HOOKS_NVTX_NVTX_HOOKS_H_
