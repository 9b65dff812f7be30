// agent/core: process-wide state, the hot-path Emit(), thread registration, interning,
// start-up (constructor), fork and signal handling.
#include "agent/core/agent.h"

#include <alloca.h>
#include <cxxabi.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#include "agent/core/config.h"
#include "agent/core/internal.h"

namespace profagent {

thread_local int HookGuard::depth_ __attribute__((tls_model("initial-exec"))) = 0;

namespace internal {

Global& G() {
  static Global* g = new Global();  // never destroyed: hooks may run during exit
  return *g;
}

std::atomic<uint8_t> g_recording{kRecActive | kRecRange};
std::atomic<bool> g_finishing{false};
std::atomic<uint64_t> g_unrecorded_calls{0};
__thread Ring* t_ring __attribute__((tls_model("initial-exec"))) = nullptr;
__thread uint32_t t_corr_next __attribute__((tls_model("initial-exec"))) = 0;
__thread uint32_t t_corr_end __attribute__((tls_model("initial-exec"))) = 0;

void SetEnabled(bool on) {
  G().enabled.store(on, std::memory_order_release);
  if (on) g_recording.fetch_or(kRecEnabled, std::memory_order_relaxed);
  else g_recording.fetch_and(uint8_t(~kRecEnabled), std::memory_order_relaxed);
}

}  // namespace internal

using internal::G;
using internal::ThreadState;

namespace {

thread_local ThreadState* t_state __attribute__((tls_model("initial-exec"))) = nullptr;
thread_local uint32_t t_last_driver_corr __attribute__((tls_model("initial-exec"))) = 0;
struct DriverLaunches {
  static constexpr uint32_t kKept = 16;
  uint32_t n;
  uint64_t stream[kKept];
  uint32_t corr[kKept];
};
thread_local DriverLaunches t_driver_launches __attribute__((tls_model("initial-exec"))) = {};
thread_local bool t_registering __attribute__((tls_model("initial-exec"))) = false;

pthread_key_t g_exit_key;
std::atomic<uint32_t> g_corr_blocks{0};
constexpr uint32_t kCorrBlock = 4096;
// Agent-assigned correlation ids live in the upper half of the 32-bit space so they never meet
// CUPTI's (which count up from 1).
constexpr uint32_t kCorrBase = 0x80000000u;

std::atomic<bool> g_initialized{false};
std::atomic<bool> g_init_started{false};

std::atomic<void (*)()> g_thread_exit_fns[8];

// An alternate signal stack the agent gave the thread (GiveAltStack), so that its crash handler
// runs after a stack overflow too; nullptr when the thread had one of its own.
__thread void* t_altstack __attribute__((tls_model("initial-exec"))) = nullptr;
// (Pages are touched only when a handler runs on it; roomy for an application handler that
// asked for SA_ONSTACK without giving a stack of its own.)
constexpr size_t kAltStackBytes = 256 << 10;

void GiveAltStack() {
  stack_t cur;
  if (t_altstack != nullptr || sigaltstack(nullptr, &cur) != 0 || !(cur.ss_flags & SS_DISABLE)) {
    return;
  }
  void* mem = mmap(nullptr, kAltStackBytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (mem == MAP_FAILED) return;
  stack_t ss;
  ss.ss_sp = mem;
  ss.ss_size = kAltStackBytes;
  ss.ss_flags = 0;
  if (sigaltstack(&ss, nullptr) != 0) {
    munmap(mem, kAltStackBytes);
    return;
  }
  t_altstack = mem;
}

void TakeAltStack() {
  if (t_altstack == nullptr) return;
  stack_t cur;
  if (sigaltstack(nullptr, &cur) == 0 && cur.ss_sp == t_altstack) {
    if (cur.ss_flags & SS_ONSTACK) return;  // (exiting from a handler on it: keep it)
    stack_t off;
    off.ss_sp = nullptr;
    off.ss_size = 0;
    off.ss_flags = SS_DISABLE;
    sigaltstack(&off, nullptr);
  }
  munmap(t_altstack, kAltStackBytes);
  t_altstack = nullptr;
}

void OnThreadExit(void* p) {
  for (auto& f : g_thread_exit_fns) {
    if (auto fn = f.load(std::memory_order_acquire)) fn();
  }
  TakeAltStack();
  auto* ts = static_cast<ThreadState*>(p);
  if (ts != nullptr) ts->exited.store(true, std::memory_order_release);
  t_state = nullptr;
  internal::t_ring = nullptr;
}

void DetectRankFromEnv() {
  const internal::EnvRank r =
      internal::RankFromEnv([](const char* name) -> const char* { return getenv(name); });
  auto& g = G();
  if (r.rank >= 0) {
    g.rank = r.rank;
    g.rank_source = "env:" + r.source;
    g.rank_priority = 1;
  }
  if (r.local_rank >= 0) g.local_rank = r.local_rank;
  if (r.world_size > 0) g.world_size = r.world_size;
}

bool RankSelected(const Config& c, int rank) {
  if (c.ranks.empty() || rank < 0) return true;
  for (int r : c.ranks) {
    if (r == rank) return true;
  }
  return false;
}

// The signals whose default action ends the process on which the agent finishes the file first:
// stop requests (SIGTERM, SIGINT: a server being stopped) and crashes (SIGABRT: abort(), a failed
// assert, std::terminate after an uncaught exception; SIGSEGV, SIGBUS, SIGFPE, SIGILL), so the
// profile of a run that died keeps its last flush period and its device records.
// Also the other signals whose default action ends the process: a hangup, SIGPIPE (`prog |
// head`), SIGQUIT, a CPU-time limit, a watchdog's alarm, Slurm's --signal=USR1, seccomp's
// SIGSYS, a stray SIGTRAP. (SIGXFSZ is left alone: the writer itself may meet the file size
// limit, and blocks it.)
constexpr int kFinishSignals[] = {SIGTERM,   SIGINT,  SIGABRT, SIGSEGV, SIGBUS,  SIGFPE,
                                  SIGILL,    SIGHUP,  SIGQUIT, SIGPIPE, SIGXCPU, SIGALRM,
                                  SIGVTALRM, SIGUSR1, SIGUSR2, SIGSYS,  SIGTRAP};
struct sigaction g_old_action[NSIG];
bool g_yielded[NSIG];
// The first process-ending signal the agent finished the file for (its handler, or a signal the
// process sent itself at the default disposition): it decides how the process ends.
std::atomic<int> g_first_signal{0};

// A crash (a fault, or abort): its core should show where it happened, so its handler lets the
// re-raised signal arrive only on return. The other finish signals are requests from outside.
bool IsFault(int sig) {
  return sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE || sig == SIGILL || sig == SIGTRAP ||
         sig == SIGSYS || sig == SIGABRT;
}  // under the caller's serialization (MPI_Init is called once)

void OnFatalSignal(int sig) {
  // Async-signal-safe only: the interrupted thread may hold any lock (malloc's among them). The
  // writer thread finishes the file (last drain, footer); this handler waits for it, bounded
  // (under mpirun the grace before SIGKILL can be a few ms), then dies of the same signal.
  const int saved_errno = errno;
  struct sigaction cur;
  const bool direct = sigaction(sig, nullptr, &cur) == 0 && !(cur.sa_flags & SA_SIGINFO) &&
                      cur.sa_handler == OnFatalSignal;
  const bool fault = IsFault(sig);
  // The process was already ending (its own exit, _exit or exec under way, or an earlier signal
  // being handled, on this thread or another): without the agent it would be gone by now, so a
  // stop signal does not get to decide how it ends. The ending goes on (and finishes the file as
  // it would).
  int none = 0;
  const bool first = g_first_signal.compare_exchange_strong(none, sig);
  if (!fault && (!first || G().shutting_down.load(std::memory_order_acquire))) {
    errno = saved_errno;
    return;
  }
  internal::FinishFromSignal(sig, 2000);
  if (!direct) {
    // An application handler installed after ours called it as the previous handler: the file
    // is finished, and the application decides what happens next.
    errno = saved_errno;
    return;
  }
  sigaction(sig, &g_old_action[sig], nullptr);
  // Blocked until this handler returns, then the application's own disposition. (A fault
  // signal also comes back when the faulting instruction runs again, with that disposition.)
  raise(sig);
  // A stop request (not a fault, nor abort, whose core should show where they happened) is
  // delivered right here: another signal that came during the finish and waits, masked, must
  // not end the process first (a SIGINT would, being lower-numbered, on return).
  if (!fault) {
    sigset_t only;
    sigemptyset(&only);
    sigaddset(&only, sig);
    pthread_sigmask(SIG_UNBLOCK, &only, nullptr);
  }
  errno = saved_errno;
}

// Installed when the agent starts recording (its writer starts), not at load: an interpreter
// that starts meanwhile (Python sets its SIGINT handler and records every disposition at
// start-up) sees the dispositions it would see without the agent. Only over the default
// disposition: an application's handler (a crash reporter, a sanitizer's, Python's
// faulthandler) or an ignored signal is left alone.
void InstallSignalHandlers() {
  for (int sig : kFinishSignals) {
    struct sigaction cur;
    if (sigaction(sig, nullptr, &cur) != 0) continue;
    if ((cur.sa_flags & SA_SIGINFO) || cur.sa_handler != SIG_DFL) continue;
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = OnFatalSignal;
    sigemptyset(&sa.sa_mask);
    sigaddset(&sa.sa_mask, SIGTERM);  // one finish at a time: a second signal waits for it
    sigaddset(&sa.sa_mask, SIGINT);
    // On the thread's alternate stack when it has one (GiveAltStack): a stack overflow's
    // SIGSEGV still reaches the handler.
    sa.sa_flags = SA_RESTART | SA_ONSTACK;
    sigaction(sig, &sa, &g_old_action[sig]);
  }
}

}  // namespace

void YieldSignalHandlers() {
  for (int sig : kFinishSignals) {
    struct sigaction cur;
    g_yielded[sig] = false;
    if (sigaction(sig, nullptr, &cur) != 0 || (cur.sa_flags & SA_SIGINFO) ||
        cur.sa_handler != OnFatalSignal) {
      continue;
    }
    sigaction(sig, &g_old_action[sig], nullptr);
    g_yielded[sig] = true;
  }
}

void RetakeSignalHandlers() {
  bool any = false;
  for (int sig : kFinishSignals) any |= g_yielded[sig];
  if (any) InstallSignalHandlers();  // over the ones still at their default only
  for (int sig : kFinishSignals) g_yielded[sig] = false;
}

namespace {

// API names have a mutex of their own: an application thread's first call of an API registers
// its name, and must not wait while the writer holds G().mu.
std::mutex& ApiMu() {
  static auto* mu = new std::mutex();
  return *mu;
}

void AtForkPrepare() {
  ApiMu().lock();
  G().mu.lock();
}
void AtForkParent() {
  G().mu.unlock();
  ApiMu().unlock();
}
void AtForkChild() {
  // The child has one thread (this one); the writer and the other threads are gone. Rebuild the
  // core's state around fresh mutexes; the parent's rings are abandoned (their events belong to
  // the parent, which writes them).
  auto& g = G();
  new (&g.mu) std::mutex();
  new (&ApiMu()) std::mutex();
  t_state = nullptr;
  internal::t_ring = nullptr;
  // Recent messages' ids name strings of the parent's file (their text freed once written):
  // the child's file gets new ones.
  g.message_ids.clear();
  g.message_bytes = 0;
  internal::WriterAfterForkChild();
}

void AtExit() { internal::StopWriter("exit"); }

}  // namespace

namespace internal {
std::atomic<uint64_t> g_paused_at{0};
bool RankIsSelected(int rank) { return RankSelected(G().config, rank); }
}  // namespace internal

namespace {
// Recording was all on and `now` it is not (schedule or capture range): remember when.
void NotePause(uint8_t was, uint64_t now) {
  if (was == internal::kRecAll &&
      internal::g_recording.load(std::memory_order_relaxed) != internal::kRecAll) {
    internal::g_paused_at.store(now, std::memory_order_relaxed);
  }
}
}  // namespace

void SetScheduleActive(bool active) {
  G().schedule_active.store(active, std::memory_order_relaxed);
  if (active) {
    internal::g_recording.fetch_or(internal::kRecActive, std::memory_order_relaxed);
  } else {
    const uint64_t now = Now();
    NotePause(
        internal::g_recording.fetch_and(uint8_t(~internal::kRecActive), std::memory_order_relaxed),
        now);
  }
}

namespace {
std::atomic<uint64_t> g_range_changed{0};  // Now() of the capture range's last change
}  // namespace

void SetCaptureRangeActive(bool inside) {
  auto& g = G();
  if (!g.config.capture_profiler_api) return;
  const uint64_t now = Now();
  uint8_t was = inside ? internal::g_recording.fetch_or(internal::kRecRange)
                       : internal::g_recording.fetch_and(uint8_t(~internal::kRecRange));
  if (!inside) NotePause(was, now);
  if (((was & internal::kRecRange) != 0) != inside) {
    g_range_changed.store(now, std::memory_order_relaxed);
    Log(2, "capture range: %s", inside ? "cudaProfilerStart, recording" : "cudaProfilerStop, paused");
  }
}

bool InCaptureRange(uint64_t t0, bool whole) {
  if (!G().config.capture_profiler_api) return true;
  const bool inside = (internal::g_recording.load(std::memory_order_relaxed) &
                       internal::kRecRange) != 0;
  const uint64_t changed = g_range_changed.load(std::memory_order_relaxed);
  // Any change after t0 means the range was open for part of [t0, now].
  return whole ? inside && changed <= t0 : inside || changed >= t0;
}

namespace internal {

namespace {
int EnvInt(const char* (*get)(const char*), const char* name) {
  const char* v = get(name);
  if (v == nullptr || *v == '\0') return -1;
  char* end;
  long x = strtol(v, &end, 10);
  if (*end != '\0' || x < 0 || x > (1 << 30)) return -1;
  return int(x);
}
}  // namespace

EnvRank RankFromEnv(const char* (*get)(const char*)) {
  // A torchrun (torch.distributed.elastic) worker: RANK, LOCAL_RANK and WORLD_SIZE are its own,
  // whatever the launcher that started torchrun set (srun's SLURM_PROCID, PMI_RANK: the task's,
  // one per node). Else MPI's launchers, then RANK (deepspeed, lightning and other per-GPU
  // launchers under srun), then Slurm's task.
  const bool elastic = get("TORCHELASTIC_RUN_ID") != nullptr;
  static const char* const kElasticRank[] = {"RANK", nullptr};
  static const char* const kRank[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "RANK",
                                      "SLURM_PROCID", nullptr};
  static const char* const kElasticLocal[] = {"LOCAL_RANK", nullptr};
  static const char* const kLocal[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
                                       "LOCAL_RANK", "SLURM_LOCALID", nullptr};
  static const char* const kElasticSize[] = {"WORLD_SIZE", nullptr};
  static const char* const kSize[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "WORLD_SIZE",
                                      "SLURM_NTASKS", nullptr};
  EnvRank r;
  for (const char* const* n = elastic ? kElasticRank : kRank; *n != nullptr; ++n) {
    const int v = EnvInt(get, *n);
    if (v >= 0) {
      r.rank = v;
      r.source = *n;
      break;
    }
  }
  for (const char* const* n = elastic ? kElasticLocal : kLocal; *n != nullptr; ++n) {
    const int v = EnvInt(get, *n);
    if (v >= 0) {
      r.local_rank = v;
      break;
    }
  }
  for (const char* const* n = elastic ? kElasticSize : kSize; *n != nullptr; ++n) {
    const int v = EnvInt(get, *n);
    if (v > 0) {
      r.world_size = v;
      break;
    }
  }
  return r;
}

ThreadState* RegisterThisThread() {
  auto& g = G();
  if (!g.enabled.load(std::memory_order_acquire) || g.closing.load()) return nullptr;
  if (t_registering) return nullptr;
  t_registering = true;
  ThreadState* ts = nullptr;
  {
    std::lock_guard<std::mutex> lock(g.mu);
    if (g.closing.load()) {  // the final drain began meanwhile
      t_registering = false;
      return nullptr;
    }
    if (!g.free_threads.empty()) {
      ts = g.free_threads.back();
      g.free_threads.pop_back();
      ts->ring->ResetForReuse();
      ts->exited.store(false);
      ts->announced = false;
      ts->pending_stack = 0;
      ts->index = g.next_thread_index++;
      ts->drops_base = ts->ring->drops();
      ts->drops_written = 0;
    } else {
      ts = new ThreadState();
      ts->ring = new Ring(g.config.ring_slots);
      ts->index = g.next_thread_index++;
      static bool told = false;  // under g.mu
      if (!ts->ring->usable() && !told) {
        told = true;
        fprintf(stderr,
                "profagent: cannot allocate a ring of %u events (%llu MiB; PROFAGENT_RING_SIZE): "
                "the events of such threads are dropped (counted)\n",
                g.config.ring_slots,
                (unsigned long long)(uint64_t(g.config.ring_slots) * sizeof(RawEvent) >> 20));
      }
    }
    ts->tid = pid_t(syscall(SYS_gettid));
    memset(ts->name, 0, sizeof(ts->name));
    pthread_getname_np(pthread_self(), ts->name, sizeof(ts->name));
    g.threads.push_back(ts);
    StartWriterLocked();
    static bool signals_installed = false;  // under g.mu
    if (!signals_installed && g.writer_running.load()) {
      signals_installed = true;
      InstallSignalHandlers();
    }
  }
  pthread_setspecific(g_exit_key, ts);
  t_state = ts;
  t_ring = ts->ring;
  GiveAltStack();
  t_registering = false;
  return ts;
}

}  // namespace internal

namespace {

__attribute__((noinline)) ThreadState* SlowThreadState() {
  return internal::RegisterThisThread();
}

// Ring full (or a multi-slot event that does not fit). Waits for the writer under policy block
// or when `wait` is set; otherwise, or once the writer has stopped, counts a drop.
__attribute__((noinline)) bool PushSlow(ThreadState* ts, const RawEvent& e, const void* bytes,
                                        size_t n, uint16_t extra, bool wait = false) {
  auto& g = G();
  // Waiting needs a ring the event fits in (one whose slots were allocated), and a writer that
  // will still drain it (not after the final drain began).
  if ((wait || g.config.overflow == OverflowPolicy::kBlock) && ts->ring->usable() &&
      uint64_t(extra) + 1 <= ts->ring->capacity()) {
    for (int spins = 0; g.writer_running.load(std::memory_order_relaxed) &&
                        !g.closing.load(std::memory_order_relaxed);
         ++spins) {
      bool ok = extra == 0 ? ts->ring->TryPush(e) : ts->ring->TryPushWithBytes(e, bytes, n, extra);
      if (ok) return true;
      if (spins > 64) {
        internal::WakeWriter();
        sched_yield();
      }
    }
  }
  // Drop policy: before dropping, give the writer a moment, once per drain: on a node whose
  // cores are all busy (MPI ranks spinning in their progress loops) a ring fills within
  // milliseconds while the writer thread waits for a core; a few yields let it run.
  if (ts->ring->usable() && uint64_t(extra) + 1 <= ts->ring->capacity() &&
      g.writer_running.load(std::memory_order_relaxed) &&
      !g.closing.load(std::memory_order_relaxed)) {
    const uint64_t tail = ts->ring->ReadableBegin();
    if (tail != ts->yielded_at_tail) {
      ts->yielded_at_tail = tail;
      internal::WakeWriter();
      for (int k = 0; k < 8; ++k) {
        sched_yield();
        if (extra == 0 ? ts->ring->TryPush(e) : ts->ring->TryPushWithBytes(e, bytes, n, extra)) {
          return true;
        }
      }
    }
  }
  ts->ring->CountDrop();
  return false;
}

// Registers the thread on its first event; then pushes, waiting or dropping when full.
bool PushOrRegister(const RawEvent& e, bool wait) {
  ThreadState* ts = t_state;
  if (ts == nullptr) {
    ts = SlowThreadState();
    if (ts == nullptr) return false;
  }
  if (__builtin_expect(ts->ring->TryPush(e), 1)) return true;
  return PushSlow(ts, e, nullptr, 0, 0, wait);
}

}  // namespace

namespace internal {
bool EmitSlow(const RawEvent& e) { return PushOrRegister(e, /*wait=*/false); }
}  // namespace internal

bool EmitWait(const RawEvent& e) { return PushOrRegister(e, /*wait=*/true); }

void CountUpstreamDrops(uint64_t n) {
  if (n > 0) G().upstream_drops.fetch_add(n, std::memory_order_relaxed);
}

namespace {
bool PushWithBytes(const RawEvent& e, const void* data, size_t n, bool wait) {
  ThreadState* ts = t_state;
  if (__builtin_expect(ts == nullptr, 0)) {
    ts = SlowThreadState();
    if (ts == nullptr) return false;
  }
  if (n > kMaxExtraBytes) n = kMaxExtraBytes;
  uint16_t extra = uint16_t((n + sizeof(RawEvent) - 1) / sizeof(RawEvent));
  RawEvent head = e;
  head.extra = extra;
  if (__builtin_expect(ts->ring->TryPushWithBytes(head, data, n, extra), 1)) return true;
  return PushSlow(ts, head, data, n, extra, wait);
}
}  // namespace

bool EmitWithBytes(const RawEvent& e, const void* data, size_t n) {
  return PushWithBytes(e, data, n, /*wait=*/false);
}

bool EmitWaitWithBytes(const RawEvent& e, const void* data, size_t n) {
  return PushWithBytes(e, data, n, /*wait=*/true);
}

namespace internal {

uint32_t NextCorrelationIdSlow() {
  uint32_t block = g_corr_blocks.fetch_add(1, std::memory_order_relaxed);
  t_corr_next = kCorrBase + 1 + block * kCorrBlock;
  t_corr_end = t_corr_next + kCorrBlock;
  return t_corr_next++;
}

}  // namespace internal

uint32_t LastDriverLaunchCorrelation() { return t_last_driver_corr; }
void SetLastDriverLaunchCorrelation(uint32_t corr) {
  t_last_driver_corr = corr;
  if (corr == 0) t_driver_launches.n = 0;
}

void NoteDriverLaunch(uint64_t stream, uint32_t corr) {
  DriverLaunches& d = t_driver_launches;
  const uint32_t i = d.n++ % DriverLaunches::kKept;
  d.stream[i] = stream;
  d.corr[i] = corr;
}

uint32_t DriverLaunchOnStream(uint64_t stream) {
  const DriverLaunches& d = t_driver_launches;
  const uint32_t kept = d.n < DriverLaunches::kKept ? d.n : DriverLaunches::kKept;
  for (uint32_t k = 0; k < kept; ++k) {  // newest first
    const uint32_t i = (d.n - 1 - k) % DriverLaunches::kKept;
    if (d.stream[i] == stream) return d.corr[i];
  }
  return 0;
}

uint32_t InternString(const std::string& s) {
  auto& g = G();
  std::lock_guard<std::mutex> lock(g.mu);
  auto it = g.string_ids.find(s);
  if (it != g.string_ids.end()) return it->second;
  const uint32_t id = ++g.next_string_id;
  g.kept_strings.emplace_back(id, s);
  g.string_ids.emplace(s, id);
  return id;
}

// Text of the recent NVTX messages InternMessage remembers (copies in message_ids).
constexpr size_t kMessageCacheBytes = 4 << 20;

uint32_t InternMessage(const char* text, size_t len) {
  auto& g = G();
  std::string s(text, len);
  std::lock_guard<std::mutex> lock(g.mu);
  auto it = g.string_ids.find(s);  // also a kernel or registered name
  if (it != g.string_ids.end()) return it->second;
  it = g.message_ids.find(s);
  if (it != g.message_ids.end()) return it->second;
  if (g.message_bytes + len > kMessageCacheBytes) {
    g.message_ids.clear();
    g.message_bytes = 0;
  }
  const uint32_t id = ++g.next_string_id;
  g.new_messages.emplace_back(id, s);
  g.message_bytes += len + 64;  // (with the map's own cost per entry)
  g.message_ids.emplace(std::move(s), id);
  return id;
}

std::string Demangle(const std::string& name) {
  int status = 0;
  char* d = abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status);
  std::string out = status == 0 && d != nullptr ? std::string(d) : name;
  free(d);
  return out;
}

uint32_t InternKernelName(const std::string& name) {
  return name.empty() ? 0 : InternString(Demangle(name));
}

uint32_t CurrentThreadIndex() { return t_state != nullptr ? t_state->index : 0; }

uint32_t RegisterCurrentThread() {
  if (t_state == nullptr) SlowThreadState();
  return CurrentThreadIndex();
}

uint16_t RegisterApi(const char* name) {
  auto& g = G();
  std::lock_guard<std::mutex> lock(ApiMu());
  if (g.apis.empty()) g.apis.push_back("");
  for (size_t i = 1; i < g.apis.size(); ++i) {
    if (g.apis[i] == name) return uint16_t(i);
  }
  if (g.apis.size() >= 0xffff) return 0;
  g.apis.push_back(name);
  return uint16_t(g.apis.size() - 1);
}

const char* ApiName(uint16_t id) {
  auto& g = G();
  std::lock_guard<std::mutex> lock(ApiMu());
  return id < g.apis.size() ? g.apis[id].c_str() : "";
}

void RegisterFunctionName(const void* func, const char* mangled_name) {
  if (mangled_name == nullptr) return;
  auto& g = G();
  std::lock_guard<std::mutex> lock(g.mu);
  g.func_names[func] = mangled_name;
}

void SetFuncNameResolver(FuncNameResolver r) {
  auto& g = G();
  std::lock_guard<std::mutex> lock(g.mu);
  g.resolver = r;
}

void RegisterCollTables(int lib, const char* const* dtypes, int ndtypes,
                        const char* const* redops, int nredops) {
  if (lib < 0 || lib > 1) return;
  auto& g = G();
  std::lock_guard<std::mutex> lock(g.mu);
  g.coll_dtypes[lib] = dtypes;
  g.coll_ndtypes[lib] = ndtypes;
  g.coll_redops[lib] = redops;
  g.coll_nredops[lib] = nredops;
}

void SetRankInfo(int rank, int local_rank, int world_size, const char* source, int priority) {
  auto& g = G();
  bool deselect = false;
  {
    std::lock_guard<std::mutex> lock(g.mu);
    if (priority < g.rank_priority) return;
    g.rank = rank;
    if (local_rank >= 0) g.local_rank = local_rank;
    if (world_size > 0) g.world_size = world_size;
    g.rank_source = source != nullptr ? source : "";
    g.rank_priority = priority;
    g.process_info_dirty = true;
    deselect = !RankSelected(g.config, rank);
  }
  if (deselect) {
    Log(2, "rank %d is not in PROFAGENT_RANKS: not recording", rank);
    SetScheduleActive(false);
    internal::SetEnabled(false);
  }
  internal::WakeWriter();
}

void SetGpuTiming(int mode, const std::string& reason) {
  static const char* kNames[] = {"unknown", "cupti", "events", "host", "off"};
  auto& g = G();
  {
    std::lock_guard<std::mutex> lock(g.mu);
    g.gpu_mode = mode;
    g.gpu_reason = reason;
    g.process_info_dirty = true;
  }
  Log(1, "GPU timing: %s (%s)", mode >= 0 && mode <= 4 ? kNames[mode] : "?", reason.c_str());
}

void RegisterComm(uint64_t id, int lib, uint64_t handle, int rank, int size,
                  const std::string& unique_id, int device, uint64_t parent) {
  auto& g = G();
  std::lock_guard<std::mutex> lock(g.mu);
  g.comms.push_back({id, lib, handle, rank, size, unique_id, device, parent});
}

void RecordClockOffset(int64_t offset_ns, uint64_t error_ns, const char* method, uint32_t rounds) {
  auto& g = G();
  std::lock_guard<std::mutex> lock(g.mu);
  g.offsets.push_back({offset_ns, error_ns, MonotonicNs(), method ? method : "", rounds});
}

void RecordDeviceInfo(uint32_t device, const std::string& name, uint64_t total_mem,
                      uint32_t sm_count, const std::string& uuid) {
  auto& g = G();
  std::lock_guard<std::mutex> lock(g.mu);
  g.devices.push_back({device, name, total_mem, sm_count, uuid});
}

void RecordDeviceClockSync(uint64_t device_ns, uint64_t monotonic_ns, uint64_t uncertainty_ns) {
  auto& g = G();
  std::lock_guard<std::mutex> lock(g.mu);
  g.device_syncs.push_back({device_ns, monotonic_ns, uncertainty_ns});
}

void NameOsThread(uint32_t tid, const std::string& name) {
  auto& g = G();
  std::lock_guard<std::mutex> lock(g.mu);
  std::string& cur = g.thread_names[tid];
  if (cur == name) return;
  cur = name;
  g.thread_names_gen.fetch_add(1, std::memory_order_release);
}

void SetStreamLocator(StreamLocator locate) {
  auto& g = G();
  std::lock_guard<std::mutex> lock(g.mu);
  g.stream_locator = locate;
}

void NameStream(uint64_t handle, const std::string& name) {
  auto& g = G();
  StreamLocator locate;
  {
    std::lock_guard<std::mutex> lock(g.mu);
    locate = g.stream_locator;
  }
  uint32_t device = 0, device_stream = 0;
  const StreamPlace place =
      locate != nullptr ? locate(handle, &device, &device_stream) : StreamPlace::kUnknown;
  if (place == StreamPlace::kUnknown) return;
  // The writer's stream keys (StreamIndex): the legacy stream is 0, the per-thread one the
  // naming thread's.
  if (handle == kLegacyStreamHandle) handle = 0;
  if (handle == kPerThreadStreamHandle) handle = PerThreadStreamKey(uint32_t(syscall(SYS_gettid)));
  std::lock_guard<std::mutex> lock(g.mu);
  g.stream_names.push_back({device, device_stream, place == StreamPlace::kFileIndex, handle, name});
}

void AddNote(const char* level, const std::string& text) {
  auto& g = G();
  {
    std::lock_guard<std::mutex> lock(g.mu);
    g.notes.push_back({level ? level : "info", text});
  }
  int lv = (level && !strcmp(level, "error")) ? 0 : (level && !strcmp(level, "warning")) ? 1 : 2;
  Log(lv == 0 ? 1 : lv, "%s", text.c_str());
}

void Log(int level, const char* fmt, ...) {
  int configured = G().config.log_level;
  if (level > configured) return;
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  fprintf(stderr, "profagent: %s\n", buf);
}

bool StartDetachedThread(void (*fn)()) {
  pthread_attr_t attr;
  if (pthread_attr_init(&attr) != 0) return false;
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  // The agent's threads (the CUPTI flusher, the event poller) take no process-directed stop
  // signal: a handler running on one of them would hold up the very work the finish waits for.
  // Created with them blocked (the mask is inherited), the caller's mask restored after.
  sigset_t block, old;
  internal::BlockedInAgentThreads(&block);
  pthread_sigmask(SIG_BLOCK, &block, &old);
  pthread_t t;
  const int rc = pthread_create(
      &t, &attr,
      [](void* f) -> void* {
        reinterpret_cast<void (*)()>(f)();
        return nullptr;
      },
      reinterpret_cast<void*>(fn));
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  pthread_attr_destroy(&attr);
  return rc == 0;
}

namespace internal {
void BlockedInAgentThreads(sigset_t* set) {
  sigemptyset(set);
  for (int sig : kFinishSignals) {
    if (!IsFault(sig)) sigaddset(set, sig);
  }
  sigaddset(set, SIGPROF);
  sigaddset(set, SIGXFSZ);
}
}  // namespace internal

void SetSignalFlush(void (*request)(), bool (*done)()) {
  internal::g_signal_flush_done.store(done, std::memory_order_release);
  internal::g_signal_flush_request.store(request, std::memory_order_release);
}

void SetSignalRangeFlush(void (*flush)()) {
  internal::g_signal_range_flush.store(flush, std::memory_order_release);
}

namespace {
// Before the process ends without returning through exit (_exit, quick_exit, exec,
// MPI_Abort): the file finished as at exit. Not in a vfork child (posix_spawn), whose writer is
// the parent's; never waiting on a held core lock (_exit is called from signal handlers).
void FinishBefore(const char* why, int status, bool may_exit) {
  if (internal::WriterOwnedByThisProcess() && internal::CoreLocksAvailable(200)) {
    internal::FinishBeforeExit(why, status, may_exit);
  }
}
}  // namespace

void FinishProfileNow(const char* reason) { FinishBefore(reason, 0, false); }

// A signal this process sends itself (kill, raise, ...) that will end it by its default action
// with no handler of the agent's running first: the file is finished first, as the agent's
// handler would (FinishFromSignal: the writer's bounded finish, safe where the caller is itself
// a signal handler). Python exits this way after an unhandled KeyboardInterrupt (SIGINT set
// back to its default, then kill(getpid(), SIGINT)); crash handlers (Python's faulthandler, a
// crash reporter) restore the default disposition and raise the signal again; a program may
// SIGKILL itself. Async-signal-safe.
void BeforeSelfSignal(int sig) {
  if (!g_initialized.load(std::memory_order_acquire) || sig <= 0 || sig >= NSIG) return;
  if (G().shutting_down.load(std::memory_order_acquire)) return;  // ending already
  switch (sig) {  // the signals whose default action does not end the process
    case SIGCHLD:
    case SIGCONT:
    case SIGSTOP:
    case SIGTSTP:
    case SIGTTIN:
    case SIGTTOU:
    case SIGURG:
    case SIGWINCH:
      return;
    default:
      break;
  }
  if (sig != SIGKILL) {
    struct sigaction cur;  // a handler (the agent's own among them) or ignored: not the end
    if (sigaction(sig, nullptr, &cur) != 0 || (cur.sa_flags & SA_SIGINFO) ||
        cur.sa_handler != SIG_DFL) {
      return;
    }
    // Unblocked on the calling thread, a signal it sends its own process is delivered to it.
    // Blocked, the process may be taking it with sigwait (a server's signal thread): not the
    // end. A fault signal is the exception: a crash handler re-sending it from inside the
    // handler, where it is blocked until the handler returns, and the process then dies of it.
    sigset_t mask;
    if (!IsFault(sig) &&
        (pthread_sigmask(SIG_BLOCK, nullptr, &mask) != 0 || sigismember(&mask, sig))) {
      return;
    }
  }
  int none = 0;
  if (!g_first_signal.compare_exchange_strong(none, sig)) return;  // one is being handled
  internal::FinishFromSignal(sig, 2000);
}

void AtShutdown(void (*fn)()) {
  auto& g = G();
  std::lock_guard<std::mutex> lock(g.mu);
  g.shutdown_fns.push_back(fn);
}

bool AtThreadExit(void (*fn)()) {
  for (auto& f : g_thread_exit_fns) {
    void (*expected)() = nullptr;
    if (f.compare_exchange_strong(expected, fn, std::memory_order_acq_rel)) return true;
  }
  return false;
}

const Config& GetConfig() { return G().config; }

// Initializes the agent once (constructor of libprofagent.so, or InitializeInjection).
// Exposed for CUDA_INJECTION64_PATH and for tests.
std::string AgentLibraryPath() {
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&AgentLibraryPath), &info) == 0 ||
      info.dli_fname == nullptr || info.dli_fname[0] == '\0') {
    return "";
  }
  char self[PATH_MAX];
  if (realpath(info.dli_fname, self) == nullptr) return "";
  char exe[PATH_MAX];
  if (realpath("/proc/self/exe", exe) != nullptr && strcmp(exe, self) == 0) return "";
  return self;
}

// Why `dir` could not be used as the output directory, or "" when it looks usable: it, or its
// nearest existing ancestor, must be a directory this process can write and search.
static std::string OutputDirProblem(const std::string& dir) {
  std::string p = dir;
  while (!p.empty()) {
    struct stat st;
    if (stat(p.c_str(), &st) == 0) {
      if (!S_ISDIR(st.st_mode)) return p + " is not a directory";
      if (access(p.c_str(), W_OK | X_OK) != 0) return p + ": " + strerror(errno);
      return "";
    }
    if (errno != ENOENT) return p + ": " + strerror(errno);
    const size_t slash = p.find_last_of('/');
    if (slash == std::string::npos) return "";  // relative, nothing exists: the cwd's
    p.resize(slash == 0 ? 1 : slash);
    if (p == "/") return "";
  }
  return "";
}

extern "C" __attribute__((visibility("default"))) int profagent_init() {
  if (g_init_started.exchange(true)) return g_initialized.load() ? 1 : 0;
  auto& g = G();
  std::string error;
  Config c;
  if (!ParseConfig([](const char* n) -> const char* { return getenv(n); }, &c, &error)) {
    g.config.log_level = 1;
    fprintf(stderr, "profagent: %s; the agent is disabled\n", error.c_str());
    return 0;
  }
  // A relative output directory is the working directory's at start-up: a program that
  // changes directory later (a daemon's chdir("/")) still writes where it was asked to.
  if (!c.output_dir.empty() && c.output_dir[0] != '/') {
    char cwd[PATH_MAX];
    if (getcwd(cwd, sizeof(cwd)) != nullptr) c.output_dir = std::string(cwd) + "/" + c.output_dir;
  }
  g.config = c;
  if (!c.enabled) return 0;
  // The job: the first preloaded process of a process tree names it and its descendants
  // inherit it through the environment (fork, exec, a daemon's double fork whose parent is gone
  // by the time it starts), so the report can tell one job's files from another run's.
  const char* job = getenv("PROFAGENT_JOB");
  if (job != nullptr && job[0] != '\0' && strlen(job) <= 128) {
    g.job = job;
  } else {
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    char made[64];
    snprintf(made, sizeof(made), "%d.%lld%09ld", int(getpid()), (long long)now.tv_sec, now.tv_nsec);
    g.job = made;
    setenv("PROFAGENT_JOB", made, 1);
  }
  // An output directory that cannot be made (a file in the way, a read-only or unsearchable
  // ancestor): said now, once, before anything else is set up. It is created at the first
  // recorded event (a process that records nothing leaves no trace).
  if (std::string why = OutputDirProblem(c.output_dir); !why.empty()) {
    fprintf(stderr, "profagent: cannot use output directory %s (%s); the agent is disabled\n",
            c.output_dir.c_str(), why.c_str());
    g.config.enabled = false;
    return 0;
  }
  InitClock();
  DetectRankFromEnv();
  if (!RankSelected(c, g.rank)) {
    Log(2, "rank %d is not in PROFAGENT_RANKS: not recording", g.rank);
    return 0;
  }
  if (c.schedule_set) SetScheduleActive(c.sched_wait == 0 && c.sched_warmup == 0);
  // Outside the capture range until the application's first cudaProfilerStart.
  if (c.capture_profiler_api) internal::g_recording.fetch_and(uint8_t(~internal::kRecRange));
  pthread_key_create(&g_exit_key, OnThreadExit);
  pthread_atfork(AtForkPrepare, AtForkParent, AtForkChild);
  atexit(AtExit);
  GiveAltStack();  // the main thread's (the others get theirs when they first record)
  // The profile's descriptor goes above 512 (writer.cc HighFd): grow the descriptor table that
  // far now, while the process likely has one thread. Grown later, with threads running, the
  // kernel waits for an RCU grace period (6 to 27 ms measured), at the first flush or on a
  // signal path, where a SIGKILL a few ms after SIGTERM then finds an empty file.
  if (int fd = open("/dev/null", O_RDONLY | O_CLOEXEC); fd >= 0) {
    const int high = fcntl(fd, F_DUPFD_CLOEXEC, 512);
    if (high >= 0) close(high);
    close(fd);
  }
  internal::SetEnabled(true);
  g_initialized.store(true);
  Log(2, "recording to %s", c.output_dir.c_str());
  return 1;
}

}  // namespace profagent

// The next definitions of the process-ending calls the agent interposes, resolved when the
// agent loads: they are often called from signal handlers, where dlsym (the loader's lock,
// malloc and free of dlerror's message) is not safe. Looked up on first use only when called
// before the agent's constructor ran (another library's constructor).
namespace {
struct RealProcessCalls {
  void (*exit_)(int);
  void (*Exit_)(int);
  void (*quick_exit_)(int);
  int (*execve_)(const char*, char* const*, char* const*);
  int (*execv_)(const char*, char* const*);
  int (*execvp_)(const char*, char* const*);
  int (*execvpe_)(const char*, char* const*, char* const*);
  int (*fexecve_)(int, char* const*, char* const*);
  int (*kill_)(pid_t, int);
  int (*killpg_)(pid_t, int);
  int (*raise_)(int);
  int (*pthread_kill_)(pthread_t, int);
  int (*tgkill_)(pid_t, pid_t, int);
  int (*sigqueue_)(pid_t, int, const union sigval);
};
RealProcessCalls g_real_calls;

template <typename F>
F RealCall(F* slot, const char* name) {
  F f = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
  if (f == nullptr) {
    f = reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
    __atomic_store_n(slot, f, __ATOMIC_RELEASE);
  }
  return f;
}

__attribute__((constructor)) void ResolveRealProcessCalls() {
  RealProcessCalls& r = g_real_calls;
  RealCall(&r.exit_, "_exit");
  RealCall(&r.Exit_, "_Exit");
  RealCall(&r.quick_exit_, "quick_exit");
  RealCall(&r.execve_, "execve");
  RealCall(&r.execv_, "execv");
  RealCall(&r.execvp_, "execvp");
  RealCall(&r.execvpe_, "execvpe");
  RealCall(&r.fexecve_, "fexecve");
  RealCall(&r.kill_, "kill");
  RealCall(&r.killpg_, "killpg");
  RealCall(&r.raise_, "raise");
  RealCall(&r.pthread_kill_, "pthread_kill");
  RealCall(&r.tgkill_, "tgkill");
  RealCall(&r.sigqueue_, "sigqueue");
}
}  // namespace

// _exit() skips atexit handlers, so a process ending with it (e.g. a forked worker) would lose its
// last flush period: finish the file first. Not in a vfork child, which shares the parent's
// memory (the writer belongs to the parent then).
extern "C" __attribute__((visibility("default"), noreturn)) void _exit(int status) {
  // _exit is async-signal-safe and often called from handlers: never wait on a held mutex.
  profagent::FinishBefore("_exit", status, true);
  if (auto real = RealCall(&g_real_calls.exit_, "_exit")) real(status);
  syscall(SYS_exit_group, status);
  __builtin_unreachable();
}

// exec replaces the process image, and quick_exit/_Exit skip atexit handlers: finish the file
// first, as at exit (a successful exec starts the preloaded agent again, with a file of its
// own). Not in a vfork child (posix_spawn), whose writer is the parent's.
namespace {
using profagent::FinishBefore;

// Whether an exec of `path` can succeed as far as the file system says (an executable regular
// file). An exec that fails (a program not installed) returns, and the process goes on: its
// profile must not have been finished. Async-signal-safe (stat, access).
bool Executable(const char* path) {
  struct stat st;
  return path != nullptr && stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

// As execvp looks `file` up: itself when it holds a slash, else in each PATH directory (an
// empty entry is the working directory; no PATH: /bin:/usr/bin).
bool ExecutableInPath(const char* file) {
  if (file == nullptr || file[0] == '\0') return false;
  if (strchr(file, '/') != nullptr) return Executable(file);
  const char* dirs = getenv("PATH");
  if (dirs == nullptr) dirs = "/bin:/usr/bin";
  const size_t flen = strlen(file);
  char buf[PATH_MAX];
  for (const char* p = dirs;;) {
    const char* end = strchr(p, ':');
    const size_t len = end != nullptr ? size_t(end - p) : strlen(p);
    if (len + 1 + flen < sizeof(buf)) {
      size_t at = 0;
      if (len > 0) {
        memcpy(buf, p, len);
        buf[len] = '/';
        at = len + 1;
      }
      memcpy(buf + at, file, flen + 1);
      if (Executable(buf)) return true;
    }
    if (end == nullptr) return false;
    p = end + 1;
  }
}
}  // namespace

extern "C" __attribute__((visibility("default"))) int execve(const char* path, char* const argv[],
                                                           char* const envp[]) {
  if (Executable(path)) FinishBefore("exec", 0, false);
  auto real = RealCall(&g_real_calls.execve_, "execve");
  if (real == nullptr) return errno = ENOSYS, -1;
  return real(path, argv, envp);
}

extern "C" __attribute__((visibility("default"))) int execv(const char* path, char* const argv[]) {
  if (Executable(path)) FinishBefore("exec", 0, false);
  auto real = RealCall(&g_real_calls.execv_, "execv");
  if (real == nullptr) return errno = ENOSYS, -1;
  return real(path, argv);
}

extern "C" __attribute__((visibility("default"))) int execvp(const char* file, char* const argv[]) {
  if (ExecutableInPath(file)) FinishBefore("exec", 0, false);
  auto real = RealCall(&g_real_calls.execvp_, "execvp");
  if (real == nullptr) return errno = ENOSYS, -1;
  return real(file, argv);
}

extern "C" __attribute__((visibility("default"))) int execvpe(const char* file, char* const argv[],
                                                            char* const envp[]) {
  if (ExecutableInPath(file)) FinishBefore("exec", 0, false);
  auto real = RealCall(&g_real_calls.execvpe_, "execvpe");
  if (real == nullptr) return errno = ENOSYS, -1;
  return real(file, argv, envp);
}

extern "C" __attribute__((visibility("default"))) int fexecve(int fd, char* const argv[],
                                                            char* const envp[]) {
  FinishBefore("exec", 0, false);
  auto real = RealCall(&g_real_calls.fexecve_, "fexecve");
  if (real == nullptr) return errno = ENOSYS, -1;
  return real(fd, argv, envp);
}

// The list forms: glibc's execl/execlp/execle reach execve through an internal call no
// interposer sees, so they are taken here, their arguments gathered on the stack (no allocation:
// execle is async-signal-safe) and passed to the array forms above.
#define PROFAGENT_GATHER_ARGS(arg0, ap, argv)                    \
  size_t argc = 1;                                               \
  {                                                              \
    va_list count;                                               \
    va_copy(count, ap);                                          \
    while (va_arg(count, const char*) != nullptr) ++argc;        \
    va_end(count);                                               \
  }                                                              \
  char** argv = static_cast<char**>(alloca((argc + 1) * sizeof(char*))); \
  argv[0] = const_cast<char*>(arg0);                             \
  for (size_t i = 1; i <= argc; ++i) argv[i] = va_arg(ap, char*);

extern "C" __attribute__((visibility("default"))) int execl(const char* path, const char* arg, ...) {
  va_list ap;
  va_start(ap, arg);
  PROFAGENT_GATHER_ARGS(arg, ap, argv)
  va_end(ap);
  return execv(path, argv);
}

extern "C" __attribute__((visibility("default"))) int execlp(const char* file, const char* arg,
                                                           ...) {
  va_list ap;
  va_start(ap, arg);
  PROFAGENT_GATHER_ARGS(arg, ap, argv)
  va_end(ap);
  return execvp(file, argv);
}

extern "C" __attribute__((visibility("default"))) int execle(const char* path, const char* arg,
                                                           ...) {
  va_list ap;
  va_start(ap, arg);
  PROFAGENT_GATHER_ARGS(arg, ap, argv)
  char* const* envp = va_arg(ap, char* const*);  // after the list's terminating null pointer
  va_end(ap);
  return execve(path, argv, envp);
}
#undef PROFAGENT_GATHER_ARGS

extern "C" __attribute__((visibility("default"), noreturn)) void quick_exit(int status) {
  FinishBefore("quick_exit", status, true);
  auto real = RealCall(&g_real_calls.quick_exit_, "quick_exit");
  if (real != nullptr) real(status);
  syscall(SYS_exit_group, status);
  __builtin_unreachable();
}

extern "C" __attribute__((visibility("default"), noreturn)) void _Exit(int status) {
  FinishBefore("_exit", status, true);
  auto real = RealCall(&g_real_calls.Exit_, "_Exit");
  if (real != nullptr) real(status);
  syscall(SYS_exit_group, status);
  __builtin_unreachable();
}

// A process signalling itself (its own pid, its process group, or the calling thread; Linux
// never sends kill(-1, ...) to its caller) with a signal that ends it: BeforeSelfSignal first.
// Sent elsewhere (a launcher stopping its workers), untouched.
namespace {
bool IncludesSelf(pid_t pid) {
  return pid == 0 || pid == getpid() || (pid < -1 && -pid == getpgrp());
}
}  // namespace

extern "C" __attribute__((visibility("default"))) int kill(pid_t pid, int sig) {
  if (IncludesSelf(pid)) profagent::BeforeSelfSignal(sig);
  auto real = RealCall(&g_real_calls.kill_, "kill");
  if (real == nullptr) return int(syscall(SYS_kill, pid, sig));
  return real(pid, sig);
}

extern "C" __attribute__((visibility("default"))) int killpg(pid_t pgrp, int sig) {
  if (pgrp == 0 || pgrp == getpgrp()) profagent::BeforeSelfSignal(sig);
  auto real = RealCall(&g_real_calls.killpg_, "killpg");
  if (real == nullptr) return int(syscall(SYS_kill, -pgrp, sig));
  return real(pgrp, sig);
}

extern "C" __attribute__((visibility("default"))) int raise(int sig) {
  profagent::BeforeSelfSignal(sig);
  auto real = RealCall(&g_real_calls.raise_, "raise");
  if (real == nullptr) return int(syscall(SYS_tgkill, getpid(), syscall(SYS_gettid), sig));
  return real(sig);
}

extern "C" __attribute__((visibility("default"))) int pthread_kill(pthread_t thread, int sig) {
  if (pthread_equal(thread, pthread_self())) profagent::BeforeSelfSignal(sig);
  auto real = RealCall(&g_real_calls.pthread_kill_, "pthread_kill");
  if (real == nullptr) return ENOSYS;
  return real(thread, sig);
}

extern "C" __attribute__((visibility("default"))) int tgkill(pid_t tgid, pid_t tid, int sig) {
  if (tgid == getpid() && tid == pid_t(syscall(SYS_gettid))) profagent::BeforeSelfSignal(sig);
  auto real = RealCall(&g_real_calls.tgkill_, "tgkill");
  if (real == nullptr) return int(syscall(SYS_tgkill, tgid, tid, sig));
  return real(tgid, tid, sig);
}

extern "C" __attribute__((visibility("default"))) int sigqueue(pid_t pid, int sig,
                                                               const union sigval value) {
  if (pid == getpid()) profagent::BeforeSelfSignal(sig);
  auto real = RealCall(&g_real_calls.sigqueue_, "sigqueue");
  if (real == nullptr) return errno = ENOSYS, -1;
  return real(pid, sig, value);
}

// Stops recording: runs the shutdown hooks, drains every ring, writes the footer and closes the
// file. Later events are dropped silently. Used at exit and by tests.
extern "C" __attribute__((visibility("default"))) void profagent_shutdown(const char* reason) {
  profagent::internal::StopWriter(reason != nullptr ? reason : "shutdown");
}
