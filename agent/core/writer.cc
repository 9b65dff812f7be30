// The writer thread: drains every thread's ring, resolves names, converts clocks, encodes the
// records of proto/profagent.proto by hand (wire.h) and writes them with large buffered writes.
//
// Field numbers below must match proto/profagent.proto; //tests/core:wire_roundtrip_test checks
// them through the generated parser.
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "agent/core/agent.h"
#include "agent/core/internal.h"
#include "agent/core/version.h"
#include "agent/core/wire.h"

namespace profagent {
namespace internal {
std::atomic<uint64_t> g_writer_cpu_ns{0};
std::atomic<void (*)()> g_signal_flush_request{nullptr};
std::atomic<bool (*)()> g_signal_flush_done{nullptr};
std::atomic<void (*)()> g_signal_range_flush{nullptr};

namespace {

using wire::WireBuf;

// Record field numbers.
enum : uint32_t {
  kRecHeader = 1,
  kRecString = 2,
  kRecBatch = 3,
  kRecDevice = 4,
  kRecClockSync = 5,
  kRecDrops = 6,
  kRecProcess = 7,
  kRecComm = 8,
  kRecStack = 9,
  kRecClockOffset = 10,
  kRecDeviceInfo = 11,
  kRecFooter = 12,
  kRecThread = 13,
  kRecNote = 14,
  kRecStreamInfo = 15,
};

constexpr size_t kWriteThreshold = 1 << 20;

struct WriterState {
  WriterState() { sem_init(&wake_sem, 0, 0); }
  // The writer sleeps on a semaphore: sem_post and the flags are async-signal-safe, so a signal
  // handler can wake it (FinishFromSignal).
  sem_t wake_sem;
  std::atomic<bool> wake{false};
  std::atomic<bool> stop{false};
  std::atomic<int> signal_stop{0};  // a fatal signal asked the writer to finish the file
  pthread_t thread{};
  bool thread_started = false;
  std::atomic<bool> stopped{false};  // the file is finished (footer written, closed)
  // Bumped by every write to the file: a waiter tells a slow writer from a stuck one by it.
  std::atomic<uint64_t> progress{0};
  // An exit hook (_exit, exec, quick_exit) is finishing the file (FinishBeforeExit): the writer
  // does the last drain and the footer itself, and watches the shutdown hooks meanwhile.
  std::atomic<bool> exit_armed{false};
  const char* exit_reason = "_exit";
  std::atomic<const char*> shutdown_reason{nullptr};  // StopWriter's or FinishBeforeExit's
  int exit_status = 0;
  bool exit_may_exit = false;  // the process may end if the hooks hang (not for exec)
  char exit_stalled_reason[96] = {};

  int fd = -1;
  dev_t file_dev = 0;  // identity of the file `fd` was opened on: an application that closes
  ino_t file_ino = 0;  // every descriptor may reopen the number for a file of its own
  bool file_failed = false;
  std::string path;
  bool path_has_rank = false;
  int path_rank = -1;

  WireBuf out;                // pending bytes for the file
  // Where each frame in `out` ends, and `records` then: a file that meets a size limit or a
  // full disk keeps the whole frames that fit and ends with a footer saying so.
  struct FrameEnd {
    size_t end;
    uint64_t records;
  };
  std::vector<FrameEnd> frame_ends;
  uint64_t records_flushed = 0;                       // records in frames written out
  uint64_t records_framed = 0;                        // records in frames (written or in `out`)
  uint64_t unframed_events = 0, unframed_device = 0;  // encoded, their frame still to come
  WireBuf rec, msg, sub, ev;  // scratch
  uint32_t strings_written = 0;
  std::unordered_map<const void*, uint32_t> func_ids;
  std::vector<uint32_t> api_ids;        // api id -> string id (0 = not interned yet)
  std::unordered_map<uint64_t, uint32_t> stream_idx;
  uint32_t coll_names[2][2][256] = {};  // [lib][dtype|redop][index] -> string id
  std::vector<uint32_t> coll_ops;         // api id -> string id of the op name
  pid_t owner_pid = 0;                    // process whose writer this is
  uint64_t last_stream = 0;
  uint32_t last_stream_idx = 0;
  pid_t drain_tid = 0;  // the thread whose ring DrainRing is encoding
  uint32_t drain_thread = 0;  // its index (EventBatch.thread)
  std::map<std::vector<uint64_t>, uint32_t> stack_ids;
  std::unordered_map<uint64_t, std::pair<uint32_t, uint64_t>> module_cache;  // ip page -> (module id, base)
  uint64_t records = 0;
  uint64_t upstream_drops_written = 0;
  uint64_t last_sync_ns = 0;
  uint32_t syncs = 0;  // periodic clock syncs so far (up to 4: their interval grows to 1 s)
  size_t notes_written = 0, comms_written = 0, offsets_written = 0, devices_written = 0;
  size_t device_syncs_written = 0;
  size_t stream_names_written = 0;
  std::unordered_map<const void*, uint32_t> unknown_funcs;  // resolver said no: fallback id
  std::vector<uint8_t> bytes_tmp;
};

WriterState* W() {
  static WriterState* w = new WriterState();
  return w;
}

void Frame(WriterState* w, uint32_t field, const WireBuf& body) {
  w->rec.Clear();
  w->rec.Msg(field, body);
  w->out.Varint(w->rec.size());
  w->out.Append(w->rec);
  if (field == kRecBatch) {
    w->records_framed += w->unframed_events;
    w->unframed_events = 0;
  } else if (field == kRecDevice) {
    w->records_framed += w->unframed_device;
    w->unframed_device = 0;
  }
  w->frame_ends.push_back({w->out.size(), w->records_framed});
}

void ClearOut(WriterState* w) {
  w->out.Clear();
  w->frame_ends.clear();
}

bool WriteAll(int fd, const char* p, size_t n) {
  while (n > 0) {
    W()->progress.fetch_add(1, std::memory_order_relaxed);
    ssize_t k = write(fd, p, n);
    if (k < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += k;
    n -= size_t(k);
  }
  return true;
}

// The profile's descriptor, moved above the numbers programs use most (closing stdio and a few
// files after fork is common), close-on-exec.
int HighFd(int fd) {
  const int high = fcntl(fd, F_DUPFD_CLOEXEC, 512);
  if (high < 0) return fd;
  close(fd);
  return high;
}

// Whether w->fd is still the profile (the application may have closed it, e.g. closing every
// descriptor before exec or daemonizing, and reused the number for a file of its own). If not,
// the profile is reopened by its path, and if that fails recording stops: the agent never
// writes into, or closes, a descriptor that is not its own.
bool OwnFile(WriterState* w) {
  struct stat st;
  if (fstat(w->fd, &st) == 0 && st.st_dev == w->file_dev && st.st_ino == w->file_ino) {
    if (st.st_nlink > 0) return true;
    // Unlinked (its directory removed, or the file deleted): what follows would be lost.
    Log(1,
        "%s was deleted during the run; recording stops (the %llu records written to it are lost)",
        w->path.c_str(), (unsigned long long)w->records);
    close(w->fd);
    w->fd = -1;
    w->file_failed = true;
    SetEnabled(false);
    return false;
  }
  int fd = open(w->path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd >= 0 && fstat(fd, &st) == 0 && st.st_dev == w->file_dev && st.st_ino == w->file_ino) {
    Log(1, "the application closed the descriptor of %s; reopened", w->path.c_str());
    w->fd = HighFd(fd);
    return true;
  }
  if (fd >= 0) close(fd);
  Log(1, "the application closed the descriptor of %s and it cannot be reopened; recording stops",
      w->path.c_str());
  w->fd = -1;
  w->file_failed = true;
  SetEnabled(false);
  return false;
}

// Room kept for the footer after the last whole frame when the file meets a limit.
constexpr size_t kFooterRoom = 1024;

// The file met a limit at `at` (its size) with `fits` more bytes possible: the whole frames of
// `out` that fit with a footer after them are written, then a footer whose reason says why the
// file ends there and whose drop count includes the records cut; recording stops.
void StopAtLimit(WriterState* w, uint64_t at, uint64_t fits, const std::string& why) {
  size_t cut = 0;
  uint64_t records = w->records_flushed;
  for (const WriterState::FrameEnd& f : w->frame_ends) {
    if (f.end + kFooterRoom > fits) break;
    cut = f.end;
    records = f.records;
  }
  if (at == 0 && cut == 0) {
    // Not even the header fits: a file holding a footer alone would be unreadable. None.
    Log(1, "%s: %s before the profile's header could be written; no file (recording stops)",
        w->path.c_str(), why.c_str());
    unlink(w->path.c_str());
    close(w->fd);
    w->fd = -1;
    w->file_failed = true;
    SetEnabled(false);
    ClearOut(w);
    return;
  }
  bool ok = cut == 0 || WriteAll(w->fd, w->out.data(), cut);
  auto& g = G();
  uint64_t dropped = g.upstream_drops.load(std::memory_order_relaxed) + (w->records - records);
  {
    std::lock_guard<std::mutex> lock(g.mu);
    for (ThreadState* ts : g.threads) dropped += ts->ring->drops();
    for (ThreadState* ts : g.free_threads) dropped += ts->ring->drops();
  }
  ClearOut(w);
  if (ok) {
    w->msg.Clear();
    w->msg.U64(1, records);
    w->msg.U64(2, dropped);
    w->msg.U64(3, MonotonicNs());
    w->msg.Str(4, why + "; recording stopped");
    w->msg.U64(5, g_unrecorded_calls.load(std::memory_order_relaxed));
    Frame(w, kRecFooter, w->msg);
    if (at + cut + w->out.size() <= at + fits) ok = WriteAll(w->fd, w->out.data(), w->out.size());
  }
  Log(1, "%s: %s; recording stops (%llu records in the file, %llu dropped, said in its footer%s)",
      w->path.c_str(), why.c_str(), (unsigned long long)records, (unsigned long long)dropped,
      ok ? "" : ": the footer could not be written");
  close(w->fd);
  w->fd = -1;
  w->file_failed = true;
  SetEnabled(false);
  ClearOut(w);
}

void FlushOut(WriterState* w) {
  if (w->fd < 0 || w->out.size() == 0) {
    if (w->fd < 0) ClearOut(w);
    return;
  }
  if (!OwnFile(w)) {
    ClearOut(w);
    return;
  }
  const off_t end = lseek(w->fd, 0, SEEK_END);
  const uint64_t at = end >= 0 ? uint64_t(end) : 0;
  // Past the file size limit (ulimit -f) a write raises SIGXFSZ, which would kill the
  // application: stop before it.
  struct rlimit fsize;
  if (end >= 0 && getrlimit(RLIMIT_FSIZE, &fsize) == 0 && fsize.rlim_cur != RLIM_INFINITY &&
      at + w->out.size() + kFooterRoom > uint64_t(fsize.rlim_cur)) {
    const uint64_t limit = uint64_t(fsize.rlim_cur);
    StopAtLimit(w, at, limit > at ? limit - at : 0,
                "the file size limit (ulimit -f: " + std::to_string(limit) + " bytes) was reached");
    return;
  }
  // The blocks for this write and a footer after it, reserved first (beyond the file's end:
  // its size does not change): on a full disk the frames that fit and a footer are written,
  // where the write would have failed partway. A file system without fallocate goes on as
  // before.
  if (end >= 0 &&
      fallocate(w->fd, FALLOC_FL_KEEP_SIZE, end, off_t(w->out.size() + kFooterRoom)) != 0 &&
      (errno == ENOSPC || errno == EDQUOT)) {
    const int err = errno;
    // The largest prefix of whole frames (plus the footer's room) the disk still takes.
    size_t lo = 0, hi = w->frame_ends.size();  // frames [0, lo) fit; [0, hi] may not
    while (lo < hi) {
      const size_t mid = (lo + hi + 1) / 2;
      if (fallocate(w->fd, FALLOC_FL_KEEP_SIZE, end,
                    off_t(w->frame_ends[mid - 1].end + kFooterRoom)) == 0) {
        lo = mid;
      } else {
        hi = mid - 1;
      }
    }
    const uint64_t fits = lo > 0 ? w->frame_ends[lo - 1].end + kFooterRoom
                          : fallocate(w->fd, FALLOC_FL_KEEP_SIZE, end, kFooterRoom) == 0
                              ? kFooterRoom
                              : 0;
    StopAtLimit(w, at, fits, std::string("the disk is full (") + strerror(err) + ")");
    return;
  }
  if (!WriteAll(w->fd, w->out.data(), w->out.size())) {
    Log(1, "write to %s failed (%s); recording stops", w->path.c_str(), strerror(errno));
    close(w->fd);
    w->fd = -1;
    w->file_failed = true;
    SetEnabled(false);
  }
  w->records_flushed = w->records_framed;
  ClearOut(w);
}

bool MkdirP(const std::string& dir) {
  std::string cur;
  for (size_t i = 0; i <= dir.size(); ++i) {
    if (i == dir.size() || dir[i] == '/') {
      if (!cur.empty() && mkdir(cur.c_str(), 0777) != 0 && errno != EEXIST) return false;
    }
    if (i < dir.size()) cur += dir[i];
  }
  struct stat st;
  return stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::string ReadFileString(const char* path, size_t max) {
  std::string s;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return s;
  char buf[4096];
  ssize_t k;
  while (s.size() < max && (k = read(fd, buf, sizeof(buf))) > 0) s.append(buf, size_t(k));
  close(fd);
  return s;
}

uint64_t Fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// What the header says of the process that takes system calls to learn: read before G().mu is
// taken (an application thread may be waiting for it).
struct HostFacts {
  std::string host, cmd, exe;
  uint64_t boot_id = 0;
};
HostFacts ReadHostFacts() {
  HostFacts f;
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  f.host = host;
  f.cmd = ReadFileString("/proc/self/cmdline", 8192);
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n > 0) f.exe.assign(exe, size_t(n));
  f.boot_id = Fnv1a(ReadFileString("/proc/sys/kernel/random/boot_id", 64));
  return f;
}

void EncodeHeader(WriterState* w, const HostFacts& facts) {
  auto& g = G();
  WireBuf& m = w->msg;
  m.Clear();
  m.U64(1, uint64_t(getpid()));
  m.U64(2, uint64_t(getppid()));
  m.Str(3, facts.host);
  m.S64(4, g.rank);
  m.S64(5, g.local_rank);
  m.S64(6, g.world_size);
  const std::string& cmd = facts.cmd;
  size_t i = 0;
  while (i < cmd.size()) {
    size_t j = cmd.find('\0', i);
    if (j == std::string::npos) j = cmd.size();
    m.StrAlways(7, cmd.substr(i, j - i));
    i = j + 1;
  }
  ClockSample s = SampleClocks();
  m.U64(8, s.real_ns);
  m.U64(9, s.mono_ns);
  m.Str(10, kAgentVersion);
  for (const auto& kv : ConfigToMap(g.config)) {
    w->sub.Clear();
    w->sub.Str(1, kv.first);
    w->sub.Str(2, kv.second);
    m.Msg(11, w->sub);
  }
  m.U64(12, uint64_t(g.gpu_mode));
  m.Str(13, g.gpu_reason);
  if (!facts.exe.empty()) m.Str(14, facts.exe);
  m.U64(15, facts.boot_id);
  m.Str(16, g.rank_source);
  m.U64(17, g.config.launch_api_sample);
  m.Str(18, g.job);
  Frame(w, kRecHeader, m);
}

void EncodeClockSync(WriterState* w) {
  ClockSample s = SampleClocks();
  w->msg.Clear();
  w->msg.U64(1, s.mono_ns);
  w->msg.U64(2, s.real_ns);
  w->msg.U64(3, s.ticks);
  w->msg.U64(5, s.uncertainty_ns);
  Frame(w, kRecClockSync, w->msg);
  w->last_sync_ns = s.mono_ns;
}

// Opens the output file (first pass with data) and encodes its header. Called without G().mu:
// the system calls (directory, file, /proc) run unlocked, so that an application thread that
// registers something meanwhile (its first call of an API) does not wait for them.
bool OpenFile(WriterState* w) {
  if (w->fd >= 0) return true;
  if (w->file_failed) return false;
  auto& g = G();
  std::string dir;
  int rank;
  {
    std::lock_guard<std::mutex> lock(g.mu);
    dir = g.config.output_dir;
    rank = g.rank;
  }
  // A rank PROFAGENT_RANKS leaves out, known by the first pass (learned after the first events,
  // before any file): no file (what was recorded before is discarded).
  if (!RankIsSelected(rank)) {
    w->file_failed = true;
    return false;
  }
  const HostFacts facts = ReadHostFacts();
  if (!MkdirP(dir)) {
    Log(1, "cannot create output directory %s (%s); the agent is disabled", dir.c_str(),
        strerror(errno));
    w->file_failed = true;
    SetEnabled(false);
    return false;
  }
  pid_t pid = getpid();
  for (int attempt = 0; attempt < 2; ++attempt) {
    std::string p = OutputPathFor(rank, pid, attempt == 1);
    int fd = open(p.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd >= 0) {
      fd = HighFd(fd);
      struct stat st;
      if (fstat(fd, &st) == 0) {
        w->file_dev = st.st_dev;
        w->file_ino = st.st_ino;
      }
      w->fd = fd;
      w->path = p;
      w->path_has_rank = rank >= 0;
      w->path_rank = rank;
      break;
    }
    if (errno != EEXIST) {
      Log(1, "cannot create %s (%s); the agent is disabled", p.c_str(), strerror(errno));
      w->file_failed = true;
      SetEnabled(false);
      return false;
    }
  }
  if (w->fd < 0) {
    Log(1, "cannot create a unique output file in %s; the agent is disabled", dir.c_str());
    w->file_failed = true;
    SetEnabled(false);
    return false;
  }
  static const char kPreamble[12] = {'P', 'R', 'O', 'F', 'A', 'G', 'N', 'T',
                                     char(kSchemaMajor & 0xff), char(kSchemaMajor >> 8),
                                     char(kSchemaMinor & 0xff), char(kSchemaMinor >> 8)};
  w->out.Raw(kPreamble, sizeof(kPreamble));
  std::lock_guard<std::mutex> lock(g.mu);
  EncodeHeader(w, facts);
  EncodeClockSync(w);
  g.process_info_dirty = false;
  return true;
}

// Renames pid<P>.pb to rank<R>.pb once the rank is known. Called with G().mu held.
void MaybeRenameLocked(WriterState* w) {
  auto& g = G();
  // Also again when the rank changed (a process driving several NCCL ranks takes its lowest).
  if (w->fd < 0 || g.rank < 0) return;
  if (!RankIsSelected(g.rank)) {
    // A rank learned after recording began (an NCCL-only job without launcher variables, an
    // MPI singleton) that PROFAGENT_RANKS leaves out: its file goes, as if it had never
    // recorded (before, it stayed and, its rank the lowest with steps, made the report's
    // figures). Recording stopped when the rank became known (SetRankInfo).
    struct stat st;
    if (fstat(w->fd, &st) == 0 && st.st_dev == w->file_dev && st.st_ino == w->file_ino) {
      unlink(w->path.c_str());
      close(w->fd);
    }
    Log(2, "rank %d is not in PROFAGENT_RANKS: %s removed", g.rank, w->path.c_str());
    w->fd = -1;
    w->file_failed = true;
    return;
  }
  if (w->path_has_rank && w->path_rank == g.rank) return;
  for (int attempt = 0; attempt < 2; ++attempt) {
    std::string p = OutputPathFor(g.rank, getpid(), attempt == 1);
    if (link(w->path.c_str(), p.c_str()) == 0) {
      unlink(w->path.c_str());
      w->path = p;
      w->path_has_rank = true;
      w->path_rank = g.rank;
      return;
    }
    if (errno != EEXIST) return;
  }
}

uint32_t StreamIndexSlow(WriterState* w, uint64_t handle);

void EncodePendingLocked(WriterState* w) {
  auto& g = G();
  // Strings first: every id used by a later record is defined before it.
  auto write_string = [w](uint32_t id, const std::string& text) {
    w->msg.Clear();
    w->msg.U64(1, id);
    w->msg.StrAlways(2, text);
    Frame(w, kRecString, w->msg);
  };
  for (; w->strings_written < g.kept_strings.size(); ++w->strings_written) {
    const auto& k = g.kept_strings[w->strings_written];
    write_string(k.first, k.second);
  }
  // NVTX messages: in the file now, the agent needs them no more. (A fork child's file never
  // uses the ids of those its parent wrote.)
  for (; !g.new_messages.empty(); g.new_messages.pop_front()) {
    write_string(g.new_messages.front().first, g.new_messages.front().second);
  }
  if (g.process_info_dirty) {
    g.process_info_dirty = false;
    w->msg.Clear();
    w->msg.S64(1, g.rank);
    w->msg.S64(2, g.local_rank);
    w->msg.S64(3, g.world_size);
    w->msg.Str(4, g.rank_source);
    w->msg.U64(5, uint64_t(g.gpu_mode));
    w->msg.Str(6, g.gpu_reason);
    Frame(w, kRecProcess, w->msg);
  }
  for (; w->notes_written < g.notes.size(); ++w->notes_written) {
    const NoteItem& n = g.notes[w->notes_written];
    w->msg.Clear();
    w->msg.Str(1, n.level);
    w->msg.Str(2, n.text);
    Frame(w, kRecNote, w->msg);
  }
  for (; w->comms_written < g.comms.size(); ++w->comms_written) {
    const CommItem& c = g.comms[w->comms_written];
    w->msg.Clear();
    w->msg.U64(1, c.id);
    w->msg.U64(2, uint64_t(c.lib));
    w->msg.U64(3, c.handle);
    w->msg.S64(4, c.rank);
    w->msg.S64(5, c.size);
    w->msg.Str(6, c.unique_id);
    w->msg.S64(7, c.device);
    w->msg.U64(8, c.parent);
    Frame(w, kRecComm, w->msg);
  }
  for (; w->offsets_written < g.offsets.size(); ++w->offsets_written) {
    const OffsetItem& o = g.offsets[w->offsets_written];
    w->msg.Clear();
    w->msg.S64(1, o.offset_ns);
    w->msg.U64(2, o.error_ns);
    w->msg.U64(3, o.local_ns);
    w->msg.Str(4, o.method);
    w->msg.U64(5, o.rounds);
    Frame(w, kRecClockOffset, w->msg);
  }
  for (; w->device_syncs_written < g.device_syncs.size(); ++w->device_syncs_written) {
    const DeviceSyncItem& d = g.device_syncs[w->device_syncs_written];
    w->msg.Clear();
    w->msg.U64(1, d.mono_ns);
    w->msg.U64(4, d.device_ns);
    w->msg.U64(5, d.uncertainty_ns);
    Frame(w, kRecClockSync, w->msg);
  }
  for (; w->stream_names_written < g.stream_names.size(); ++w->stream_names_written) {
    const StreamNameItem& n = g.stream_names[w->stream_names_written];
    w->msg.Clear();
    w->msg.U64(1, n.device);
    w->msg.U64(2, n.file_index ? StreamIndexSlow(w, uint32_t(n.handle)) : n.device_stream);
    w->msg.U64(3, n.handle);
    w->msg.Str(4, n.name);
    Frame(w, kRecStreamInfo, w->msg);
  }
  for (; w->devices_written < g.devices.size(); ++w->devices_written) {
    const DeviceItem& d = g.devices[w->devices_written];
    w->msg.Clear();
    w->msg.U64(1, d.device);
    w->msg.Str(2, d.name);
    w->msg.U64(3, d.total_mem);
    w->msg.U64(4, d.sm_count);
    w->msg.Str(5, d.uuid);
    Frame(w, kRecDeviceInfo, w->msg);
  }
}

// ---- Name resolution (writer thread only; may take G().mu briefly) -------------------------


uint32_t FuncNameId(WriterState* w, const void* func) {
  auto it = w->func_ids.find(func);
  if (it != w->func_ids.end()) return it->second;
  // Unknown ones are retried at most once per writer pass (a registration may come later).
  auto u = w->unknown_funcs.find(func);
  if (u != w->unknown_funcs.end()) return u->second;
  std::string name;
  FuncNameResolver resolver = nullptr;
  {
    auto& g = G();
    std::lock_guard<std::mutex> lock(g.mu);
    auto f = g.func_names.find(func);
    if (f != g.func_names.end()) name = f->second;
    resolver = g.resolver;
  }
  if (name.empty() && resolver != nullptr) {
    const char* r = resolver(func);
    if (r != nullptr) name = r;
  }
  if (name.empty()) {
    char buf[48];
    snprintf(buf, sizeof(buf), "kernel@%p", func);
    name = buf;
  } else {
    name = Demangle(name);
  }
  uint32_t id = InternString(name);
  // Only cache names that came from a registration; unknown ones may be registered later.
  if (name.compare(0, 7, "kernel@") != 0) {
    w->func_ids[func] = id;
  } else {
    w->unknown_funcs[func] = id;
  }
  return id;
}

uint32_t ApiStringId(WriterState* w, uint16_t api) {
  if (api == 0) return 0;
  if (api < w->api_ids.size() && w->api_ids[api] != 0) return w->api_ids[api];
  std::string name = ApiName(api);
  uint32_t id = name.empty() ? 0 : InternString(name);
  if (w->api_ids.size() <= api) w->api_ids.resize(api + 1, 0);
  w->api_ids[api] = id;
  return id;
}

// The file's index of a stream (1, 2, ... in order of first use), keyed by the handle's low 32
// bits: CUDA-event device ops carry only those (kFlagStreamHandle), and two live streams whose
// handles differ only above bit 31 would have to be 4 GiB apart.
uint32_t StreamIndex(WriterState* w, uint64_t handle) {
  handle = uint32_t(handle);
  // cudaStreamLegacy is the legacy default stream, as 0 is (outside _ptsz/_ptds calls, whose 0
  // the hooks made cudaStreamPerThread already).
  if (handle == kLegacyStreamHandle) handle = 0;
  // Host events on the per-thread default stream: the stream of the thread being drained.
  if (handle == kPerThreadStreamHandle) handle = PerThreadStreamKey(uint32_t(w->drain_tid));
  if (handle == w->last_stream && w->last_stream_idx != 0) return w->last_stream_idx;
  w->last_stream = handle;
  w->last_stream_idx = StreamIndexSlow(w, handle);
  return w->last_stream_idx;
}

uint32_t StreamIndexSlow(WriterState* w, uint64_t handle) {
  auto it = w->stream_idx.find(handle);
  if (it != w->stream_idx.end()) return it->second;
  uint32_t idx = uint32_t(w->stream_idx.size() + 1);
  w->stream_idx.emplace(handle, idx);
  return idx;
}

uint32_t CollNameSlow(int lib, int table, uint8_t idx) {
  const char* name = nullptr;
  {
    auto& g = G();
    std::lock_guard<std::mutex> lock(g.mu);
    if (lib >= 0 && lib <= 1) {
      if (table == 0 && g.coll_dtypes[lib] && idx < g.coll_ndtypes[lib]) name = g.coll_dtypes[lib][idx];
      if (table == 1 && g.coll_redops[lib] && idx < g.coll_nredops[lib]) name = g.coll_redops[lib][idx];
    }
  }
  return name ? InternString(name) : 0;
}

// Cached: collectives are frequent, the tables are static.
uint32_t CollName(WriterState* w, int lib, int table, uint8_t idx) {
  if (lib < 0 || lib > 1) return 0;
  uint32_t& slot = w->coll_names[lib][table][idx];
  if (slot == 0) slot = CollNameSlow(lib, table, idx);
  return slot;
}

uint32_t CollOpName(WriterState* w, uint16_t api) {
  if (api < w->coll_ops.size() && w->coll_ops[api] != 0) return w->coll_ops[api];
  std::string name = ApiName(api);
  if (name.compare(0, 4, "nccl") == 0) name = name.substr(4);
  else if (name.compare(0, 4, "MPI_") == 0) name = name.substr(4);
  uint32_t id = name.empty() ? 0 : InternString(name);
  if (w->coll_ops.size() <= api) w->coll_ops.resize(size_t(api) + 1, 0);
  w->coll_ops[api] = id;
  return id;
}

// The module name of a frame: dladdr names the main program by argv[0] (a bare name found in
// PATH, or relative to a directory the report may not run in): its absolute path instead.
const char* ModuleName(const char* dladdr_name) {
  if (program_invocation_name == nullptr || strcmp(dladdr_name, program_invocation_name) != 0) {
    return dladdr_name;
  }
  static const std::string* exe = [] {
    char buf[4096];
    const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
    return new std::string(n > 0 ? std::string(buf, size_t(n)) : std::string());
  }();
  return exe->empty() ? dladdr_name : exe->c_str();
}

uint32_t StackId(WriterState* w, const uint64_t* ips, size_t n) {
  std::vector<uint64_t> key(ips, ips + n);
  auto it = w->stack_ids.find(key);
  if (it != w->stack_ids.end()) return it->second;
  uint32_t id = uint32_t(w->stack_ids.size() + 1);
  w->stack_ids.emplace(std::move(key), id);
  WireBuf m, f;
  m.U64(1, id);
  for (size_t i = 0; i < n; ++i) {
    Dl_info info;
    memset(&info, 0, sizeof(info));
    f.Clear();
    if (dladdr(reinterpret_cast<void*>(ips[i]), &info) != 0 && info.dli_fname != nullptr) {
      f.U64(1, InternString(ModuleName(info.dli_fname)));
      f.U64(2, ips[i] - reinterpret_cast<uint64_t>(info.dli_fbase));
      if (info.dli_sname != nullptr) f.U64(3, InternString(Demangle(info.dli_sname)));
    } else {
      f.U64(2, ips[i]);
    }
    m.Msg(2, f);
  }
  // Strings used by the StackDef must precede it.
  {
    auto& g = G();
    std::lock_guard<std::mutex> lock(g.mu);
    EncodePendingLocked(w);
  }
  Frame(w, kRecStack, m);
  return id;
}

// ---- Batches ---------------------------------------------------------------------------

struct BatchBuilder {
  WireBuf events;
  uint64_t base_ns = 0;
  uint64_t prev_ns = 0;
  uint64_t corr_base = 0;
  uint64_t prev_corr = 0;
  bool any = false;
  // Sticky EV_LAUNCH fields (see proto: stream and api carry forward between launches).
  uint32_t launch_stream = 0;
  uint32_t launch_api = 0;
  // Launch shape per kernel name in this batch (see proto: an EV_LAUNCH without grid_x repeats
  // the previous shape of the same kernel).
  struct Shape {
    uint32_t grid[3], block[3], shmem;
    bool operator==(const Shape& o) const { return std::memcmp(this, &o, sizeof(Shape)) == 0; }
  };
  std::unordered_map<uint32_t, Shape> shapes;
  void Reset() {
    events.Clear();
    any = false;
    launch_stream = launch_api = 0;
    shapes.clear();
  }
};

bool HasCorr(EvType t) {
  return t == EvType::kLaunch || t == EvType::kMemcpy || t == EvType::kMemset ||
         t == EvType::kGraphLaunch;
}

// The text in an event's continuation slots (up to its NUL padding), interned.
uint32_t InternExtra(const uint8_t* extra, size_t extra_len) {
  const char* text = reinterpret_cast<const char*>(extra);
  return InternMessage(text, strnlen(text, extra_len));
}

void EncodeEvent(WriterState* w, BatchBuilder* b, const RawEvent& e, const uint8_t* extra,
                 size_t extra_len, uint32_t stack_id) {
  const bool ns = (e.flags & kFlagTimeNs) != 0;
  uint64_t t0 = ns ? e.t0 : TicksToNs(e.t0);
  uint64_t t1 = ns ? e.t1 : TicksToNs(e.t1);
  if (t1 < t0) t1 = t0;
  uint32_t corr = 0;
  switch (e.type) {
    case EvType::kLaunch:
    case EvType::kGraphLaunch: corr = e.launch.corr; break;
    case EvType::kMemcpy:
    case EvType::kMemset: corr = e.mem.corr; break;
    default: break;
  }
  if (!b->any) {
    b->any = true;
    b->base_ns = t0;
    b->prev_ns = t0;
    b->corr_base = corr != 0 ? corr - 1 : 0;
    b->prev_corr = b->corr_base;
  }
  WireBuf& m = b->events;
  const size_t start = m.BeginMsg(4);
  m.S64(1, int64_t(t0 - b->prev_ns));
  b->prev_ns = t0;
  if (e.type == EvType::kLaunch || e.type == EvType::kGraphLaunch) {
    // dur 0 means "end not read" for launches (Header.launch_api_sample): a measured one is >= 1.
    if (!(e.flags & kFlagNoEnd)) m.U64(2, t1 > t0 ? t1 - t0 : 1);
  } else {
    m.U64(2, t1 - t0);
  }
  m.U64(3, uint64_t(e.type));
  if (HasCorr(e.type)) {
    m.S64(5, int64_t(uint64_t(corr) - b->prev_corr - 1));
    b->prev_corr = corr;
  }
  m.S64(8, e.ret);
  uint32_t api_sid = ApiStringId(w, e.api);
  switch (e.type) {
    case EvType::kLaunch: {
      const LaunchPayload& l = e.launch;
      const uint32_t name = FuncNameId(w, l.func);
      m.U64(4, name);
      uint32_t s = StreamIndex(w, l.stream);
      if (s != b->launch_stream) {
        m.U64(7, s);
        b->launch_stream = s;
      }
      m.U64(10, l.device);  // host timing only (0, not written, otherwise)
      if (api_sid != b->launch_api) {
        m.U64(9, api_sid);
        b->launch_api = api_sid;
      }
      BatchBuilder::Shape shape{{l.grid_x, l.grid_y, l.grid_z},
                                {BlockX(l.block), BlockY(l.block), BlockZ(l.block)},
                                l.shmem};
      if (extra_len >= sizeof(LaunchShapeExtra)) {  // dimensions too large for the payload
        LaunchShapeExtra x;
        std::memcpy(&x, extra, sizeof(x));
        std::memcpy(shape.grid, x.grid, sizeof(x.grid));
        std::memcpy(shape.block, x.block, sizeof(x.block));
      }
      auto it = b->shapes.find(name);
      if (it != b->shapes.end() && it->second == shape) break;  // same shape as last time
      b->shapes[name] = shape;
      m.Tag(11, wire::kVarint);  // always present when the shape is given (even 0)
      m.Varint(shape.grid[0]);
      // y and z are stored minus 1 modulo 2^32 (1 costs nothing; 0, in a rejected launch, is
      // 0xffffffff, which the reader's + 1 turns back into 0).
      for (int k = 1; k < 3; ++k) m.U64(11 + k, uint32_t(shape.grid[k] - 1u));
      m.U64(14, shape.block[0]);
      for (int k = 1; k < 3; ++k) m.U64(14 + k, uint32_t(shape.block[k] - 1u));
      m.U64(17, l.shmem);
      break;
    }
    case EvType::kGraphLaunch:
      m.U64(4, api_sid);
      m.U64(7, StreamIndex(w, e.launch.stream));
      m.U64(10, e.launch.device);  // host timing only, as a kernel launch's
      m.U64(31, reinterpret_cast<uint64_t>(e.launch.func));
      break;
    case EvType::kMemcpy:
    case EvType::kMemset:
    case EvType::kAlloc:
    case EvType::kFree:
      m.U64(4, api_sid);
      if (e.type == EvType::kMemcpy || e.type == EvType::kMemset || e.mem.stream != 0) {
        m.U64(7, StreamIndex(w, e.mem.stream));
      }
      m.U64(10, e.mem.device);
      m.U64(18, e.mem.bytes);
      m.U64(19, e.mem.kind);
      m.U64(20, e.mem.ptr);
      break;
    case EvType::kNvtxRange:
    case EvType::kNvtxMark:
    case EvType::kNvtxPush: {
      const NvtxPayload& n = e.nvtx;
      uint32_t msg = n.name;
      if (msg == 0 && extra_len > 0) msg = InternExtra(extra, extra_len);
      m.U64(4, msg);
      m.U64(21, n.domain);
      m.U64(22, n.category);
      m.U64(23, n.color);
      if (e.flags & kFlagHasPayload) {
        if (e.flags & kFlagPayloadDouble) {
          m.Double(25, n.payload.f);
        } else {
          m.S64(24, n.payload.i);
        }
        m.Bool(26, true);
      }
      if (n.depth == kNvtxStartEnd) {
        m.Bool(37, true);
      } else {
        m.U64(27, n.depth);
      }
      if (n.start_thread != 0 && n.start_thread != w->drain_thread) m.U64(40, n.start_thread);
      break;
    }
    case EvType::kCollective: {
      const CollPayload& c = e.coll;
      m.U64(4, api_sid);
      WireBuf& s = w->sub;
      s.Clear();
      s.U64(1, c.lib);
      s.U64(2, CollOpName(w, e.api));
      s.U64(3, c.count);
      s.U64(4, c.bytes);
      s.U64(5, CollName(w, c.lib, 0, c.dtype));
      if (c.redop != 0xff) s.U64(6, CollName(w, c.lib, 1, c.redop));
      s.S64(7, c.peer);
      s.U64(8, c.comm);
      s.U64(9, c.seq);
      s.Bool(11, (e.flags & kFlagNonBlocking) != 0);
      // CollExtra continuation slot (event.h).
      if (extra != nullptr && extra_len >= sizeof(CollExtra)) {
        CollExtra x;
        memcpy(&x, extra, sizeof(x));
        s.U64(10, x.group);
        if (x.complete_ticks != 0) s.U64(12, TicksToNs(x.complete_ticks));
        if (x.wait_ticks != 0) s.U64(17, TicksToNs(x.wait_ticks));
        s.U64(13, x.recv_bytes);
        s.U64(14, x.corr);
        if (x.recv_from != 0) {  // optional: written even when 0 (rank 0)
          s.Tag(15, wire::kVarint);
          s.Varint(wire::ZigZag(int64_t(x.recv_from) - 1));
          s.U64(16, x.recv_seq);
        }
        if (x.stream != 0) m.U64(7, StreamIndex(w, x.stream));
        if (x.device >= 0) m.U64(10, uint32_t(x.device));
      }
      m.Msg(28, s);
      break;
    }
    case EvType::kStep:
    case EvType::kRun: {
      const StepPayload& st = e.step;
      WireBuf& s = w->sub;
      s.Clear();
      s.S64(1, st.tokens);
      s.S64(2, st.kv);
      s.S64(3, st.bsz);
      s.U64(4, st.phase);
      s.U64(5, st.label);
      s.Bool(6, st.warmup != 0);
      s.U64(7, st.index);
      static const char* kSrc[] = {"nvtx", "graph", "sync"};
      s.U64(8, InternString(kSrc[st.source < 3 ? st.source : 0]));
      s.U64(9, st.run);
      m.Msg(29, s);
      break;
    }
    case EvType::kGraphNode:
      // A new node's NVTX context (model::ThreadNvtxContext).
      if (extra_len > 0) m.U64(4, InternExtra(extra, extra_len));
      m.U64(38, e.gen.a);
      m.U64(39, e.gen.b);
      break;
    default: {  // kApi, kSync, kStream, kEvent, kGroup, kComm, kMarker
      const GenericPayload& gp = e.gen;
      m.U64(4, gp.name != 0 ? gp.name : api_sid);
      if (gp.name != 0) m.U64(9, api_sid);
      if (e.type == EvType::kSync || e.type == EvType::kApi) {
        if (gp.a != 0) m.U64(7, StreamIndex(w, gp.a));
      }
      m.U64(32, gp.a);
      m.U64(31, gp.b);
      if (e.type == EvType::kApi && gp.corr > 1) {  // a run of polls (event.h)
        m.U64(34, gp.corr);
        m.U64(35, TicksToNs(e.t0 + gp.c) - TicksToNs(e.t0));
      } else if (e.type == EvType::kApi && (e.flags & kFlagHasPayload)) {
        m.U64(36, gp.c);  // cudaGraphInstantiate*: the graph instantiated
      }
      break;
    }
  }
  if (stack_id != 0) m.U64(30, stack_id);
  if ((e.flags & kFlagCaptured) &&
      (e.type == EvType::kLaunch || e.type == EvType::kGraphLaunch ||
       e.type == EvType::kMemcpy || e.type == EvType::kMemset ||
       e.type == EvType::kCollective)) {
    m.Bool(33, true);
  }
  m.EndMsg(start);
  ++w->records;
  ++w->unframed_events;
}

struct DeviceBuilder {
  WireBuf ops;
  uint64_t base_ns = 0, prev_ns = 0, corr_base = 0, prev_corr = 0;
  bool any = false;
};

void EncodeDeviceOp(WriterState* w, DeviceBuilder* d, const RawEvent& e, const uint8_t* extra,
                    size_t extra_len) {
  const DevicePayload& p = e.dev;
  uint64_t t0 = (e.flags & kFlagTimeNs) ? e.t0 : TicksToNs(e.t0);
  uint64_t t1 = (e.flags & kFlagTimeNs) ? e.t1 : TicksToNs(e.t1);
  if (t1 < t0) t1 = t0;
  if (!d->any) {
    d->any = true;
    d->base_ns = d->prev_ns = t0;
    d->corr_base = d->prev_corr = p.corr != 0 ? p.corr - 1 : 0;
  }
  WireBuf& m = d->ops;
  const size_t start = m.BeginMsg(4);
  m.S64(1, int64_t(t0 - d->prev_ns));
  d->prev_ns = t0;
  m.U64(2, t1 - t0);
  m.U64(3, p.kind);
  m.U64(4, p.name);
  m.S64(5, int64_t(uint64_t(p.corr) - d->prev_corr - 1));
  d->prev_corr = p.corr;
  m.U64(6, (e.flags & kFlagStreamHandle) ? StreamIndex(w, p.stream) : p.stream);
  m.U64(9, p.graph);
  if (p.kind == 0) {  // kernel: bytes = shared memory
    m.U64(7, p.shmem);
    m.U64(10, p.grid_x);
    m.U64(11, p.grid_y);
    m.U64(12, p.grid_z);
    m.U64(13, BlockX(p.block));
    m.U64(14, BlockY(p.block));
    m.U64(15, BlockZ(p.block));
  } else {
    m.U64(7, p.bytes);
    m.U64(8, p.copy_kind);
  }
  if (extra_len >= sizeof(uint64_t)) {  // the graph node (event.h)
    uint64_t node;
    memcpy(&node, extra, sizeof(node));
    m.U64(18, node);
  }
  m.EndMsg(start);
  ++w->records;
  ++w->unframed_device;
}

void FinishDevice(WriterState* w, uint32_t device, DeviceBuilder* d) {
  if (!d->any) return;
  w->msg.Clear();
  w->msg.U64(1, device);
  w->msg.U64(2, d->base_ns);
  w->msg.U64(3, d->corr_base);
  w->msg.Append(d->ops);
  Frame(w, kRecDevice, w->msg);
  d->ops.Clear();
  d->any = false;
}

// Drains one ring. Returns the number of slots consumed.
uint64_t DrainRing(WriterState* w, ThreadState* ts, BatchBuilder* b,
                   std::map<uint32_t, DeviceBuilder>* devs) {
  Ring* r = ts->ring;
  w->drain_tid = ts->tid;
  w->drain_thread = ts->index;
  uint64_t begin = r->ReadableBegin();
  uint64_t end = r->ReadableEnd();
  uint64_t i = begin;
  uint32_t& pending_stack = ts->pending_stack;
  // Bound one pass so a hammering producer cannot starve the others.
  uint64_t limit = begin + r->capacity();
  if (end > limit) end = limit;
  // Slots are handed back as they are encoded, not at the end: encoding a full ring takes
  // milliseconds, during which a busy producer (an MPI ping-pong loop) would find no room.
  constexpr uint64_t kConsumeEvery = 1024;
  uint64_t consumed = begin;
  while (i < end) {
    if (i - consumed >= kConsumeEvery) {
      r->Consume(i);
      consumed = i;
    }
    const RawEvent& e = r->At(i);
    uint64_t need = 1 + uint64_t(e.extra);
    if (i + need > end) break;  // continuation slots not yet published (cannot happen: all-or-nothing)
    const uint8_t* extra = nullptr;
    size_t extra_len = 0;
    if (e.extra > 0) {
      w->bytes_tmp.resize(size_t(e.extra) * sizeof(RawEvent));
      for (uint16_t k = 0; k < e.extra; ++k) {
        memcpy(&w->bytes_tmp[size_t(k) * sizeof(RawEvent)], &r->At(i + 1 + k), sizeof(RawEvent));
      }
      extra = w->bytes_tmp.data();
      extra_len = w->bytes_tmp.size();
    }
    if (e.type == EvType::kDeviceOp) {
      EncodeDeviceOp(w, &(*devs)[e.dev.device], e, extra, extra_len);
    } else if (e.type == EvType::kStack) {
      size_t n = extra_len / sizeof(uint64_t);
      const uint64_t* ips = reinterpret_cast<const uint64_t*>(extra);
      while (n > 0 && ips[n - 1] == 0) --n;  // continuation padding
      pending_stack = n > 0 ? StackId(w, ips, n) : 0;
    } else if (static_cast<uint8_t>(e.type) < 64) {
      EncodeEvent(w, b, e, extra, extra_len, pending_stack);
      pending_stack = 0;
    }
    i += need;
  }
  r->Consume(i);
  return i - begin;
}

void Pass(WriterState* w, bool final_pass) {
  // A file finished early (a signal during a shutdown) gets nothing more; its shutdown path
  // passes here once more afterwards.
  if (w->stopped.load(std::memory_order_acquire)) return;
  auto& g = G();
  std::vector<ThreadState*> threads;
  {
    std::lock_guard<std::mutex> lock(g.mu);
    threads = g.threads;
  }
  const uint64_t upstream = g.upstream_drops.load(std::memory_order_relaxed);
  bool any_data = upstream != w->upstream_drops_written;
  for (ThreadState* ts : threads) {
    if (ts->ring->ReadableEnd() != ts->ring->ReadableBegin() ||
        ts->ring->drops() - ts->drops_base != ts->drops_written) {
      any_data = true;
      break;
    }
  }
  if (!any_data && w->fd < 0) return;  // nothing ever recorded: no file
  if (!OpenFile(w)) {
    // Disabled: discard what is queued so producers do not block.
    for (ThreadState* ts : threads) ts->ring->Consume(ts->ring->ReadableEnd());
    return;
  }
  {
    std::lock_guard<std::mutex> lock(g.mu);
    MaybeRenameLocked(w);
  }
  if (w->fd < 0) {  // its rank deselected (MaybeRenameLocked): discard what is queued
    for (ThreadState* ts : threads) ts->ring->Consume(ts->ring->ReadableEnd());
    return;
  }
  w->unknown_funcs.clear();
  BatchBuilder b;
  std::map<uint32_t, DeviceBuilder> devs;
  std::vector<ThreadState*> recycle;
  for (ThreadState* ts : threads) {
    bool exited = ts->exited.load(std::memory_order_acquire);
    for (int round = 0; round < 4; ++round) {
      b.Reset();
      uint64_t n = DrainRing(w, ts, &b, &devs);
      const uint32_t names_gen = g.thread_names_gen.load(std::memory_order_acquire);
      const bool name_check = !ts->announced || ts->names_seen != names_gen;
      std::string name;
      {
        std::lock_guard<std::mutex> lock(g.mu);
        EncodePendingLocked(w);  // strings the batch refers to come first
        if (name_check) {
          auto it = names_gen != 0 ? g.thread_names.find(uint32_t(ts->tid)) : g.thread_names.end();
          name = it != g.thread_names.end() ? it->second : std::string(ts->name);
        }
      }
      // ThreadInfo: at the thread's first batch, and again when NVTX renamed it.
      if (name_check && (!ts->announced || name != ts->written_name)) {
        ts->announced = true;
        ts->written_name = name;
        w->msg.Clear();
        w->msg.U64(1, ts->index);
        w->msg.U64(2, uint64_t(ts->tid));
        w->msg.Str(3, name);
        Frame(w, kRecThread, w->msg);
      }
      ts->names_seen = names_gen;
      if (b.any) {
        w->msg.Clear();
        w->msg.U64(1, ts->index);
        w->msg.U64(2, b.base_ns);
        w->msg.U64(3, b.corr_base);
        w->msg.Append(b.events);
        Frame(w, kRecBatch, w->msg);
      }
      for (auto& kv : devs) FinishDevice(w, kv.first, &kv.second);
      if (w->out.size() > kWriteThreshold) FlushOut(w);
      if (n < ts->ring->capacity()) break;
    }
    uint64_t drops = ts->ring->drops() - ts->drops_base;
    if (drops != ts->drops_written) {
      ts->drops_written = drops;
      w->msg.Clear();
      w->msg.U64(1, ts->index);
      w->msg.U64(2, drops);
      w->msg.Str(3, "ring full");
      Frame(w, kRecDrops, w->msg);
    }
    if (exited && ts->ring->ReadableEnd() == ts->ring->ReadableBegin()) recycle.push_back(ts);
  }
  if (upstream != w->upstream_drops_written) {
    // Thread 0 is no thread (indices start at 1): records lost upstream of the rings.
    w->upstream_drops_written = upstream;
    w->msg.Clear();
    w->msg.U64(1, 0);
    w->msg.U64(2, upstream);
    w->msg.Str(3, "CUPTI dropped activity records (buffer space)");
    Frame(w, kRecDrops, w->msg);
  }
  if (!recycle.empty()) {
    std::lock_guard<std::mutex> lock(g.mu);
    for (ThreadState* ts : recycle) {
      for (size_t i = 0; i < g.threads.size(); ++i) {
        if (g.threads[i] == ts) {
          g.threads.erase(g.threads.begin() + long(i));
          break;
        }
      }
      g.free_threads.push_back(ts);
    }
  }
  // The tick rate is re-measured over a longer stretch each time: every second, and sooner at
  // first (0.1, 0.2, 0.4, 0.8 s), when the rate measured over the first 20 ms has the largest
  // error (host times drifted by a few hundred ns against CUPTI's over the first second).
  uint64_t now = MonotonicNs();
  const uint64_t interval = std::min<uint64_t>(1000000000ull, 100000000ull << w->syncs);
  if (now - w->last_sync_ns > interval) {
    if (w->syncs < 4) ++w->syncs;
    RecalibrateClock();
    EncodeClockSync(w);
  }
  FlushOut(w);
}

void WriteFooter(WriterState* w, const char* reason) {
  if (w->fd < 0) return;
  auto& g = G();
  uint64_t dropped = g.upstream_drops.load(std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(g.mu);
    for (ThreadState* ts : g.threads) dropped += ts->ring->drops();
    for (ThreadState* ts : g.free_threads) dropped += ts->ring->drops();
    EncodePendingLocked(w);
  }
  EncodeClockSync(w);
  w->msg.Clear();
  w->msg.U64(1, w->records);
  w->msg.U64(2, dropped);
  w->msg.U64(3, MonotonicNs());
  w->msg.Str(4, reason);
  w->msg.U64(5, g_unrecorded_calls.load(std::memory_order_relaxed));
  Frame(w, kRecFooter, w->msg);
  FlushOut(w);
  if (dropped > 0) Log(1, "%llu records were dropped (rings full or CUPTI buffers); see %s",
                       (unsigned long long)dropped, w->path.c_str());
  Log(2, "wrote %llu records to %s", (unsigned long long)w->records, w->path.c_str());
}

// After the final drain: the footer, the file closed, the writer marked stopped.
void FinishFile(WriterState* w, const char* reason) {
  if (w->stopped.load(std::memory_order_acquire)) return;  // finished already (see Pass)
  G().writer_running.store(false);
  WriteFooter(w, reason);
  if (w->fd >= 0) {
    struct stat st;  // never close a descriptor the application reused
    if (fstat(w->fd, &st) == 0 && st.st_dev == w->file_dev && st.st_ino == w->file_ino) {
      close(w->fd);
    }
    w->fd = -1;
  }
  w->stopped.store(true, std::memory_order_release);
}

// On the writer thread, after a fatal signal (FinishFromSignal): the last drain, the footer, the
// file closed. The shutdown hooks (CUPTI's flush, ...) are not run: they may wait on locks the
// interrupted thread holds. A signal flush (SetSignalFlush: CUPTI's flusher thread delivering
// its buffers) is asked for and waited for up to kSignalFlushNs while the writer drains; one
// that does not come in time (stuck on such a lock) is given up. A shutdown already under way
// on another thread finishes the file itself (its StopWriter joins this thread).
constexpr uint64_t kSignalFlushNs = 300000000ull;

// A footer's reason for a signal: "signal 15 (SIGTERM)".
const char* SignalReason(int sig) {
  static char reasons[NSIG][32];  // filled on first use per signal (the writer thread only)
  if (sig <= 0 || sig >= NSIG) return "fatal signal";
  if (reasons[sig][0] == '\0') {
    const char* abbrev = sigabbrev_np(sig);
    snprintf(reasons[sig], sizeof(reasons[sig]), "signal %d (SIG%s)", sig,
             abbrev != nullptr ? abbrev : "?");
  }
  return reasons[sig];
}

bool FinishAfterSignal(WriterState* w, int sig) {
  auto& g = G();
  if (g.shutting_down.exchange(true)) return false;
  // No new host events (lock-free: the interrupted thread may hold any lock), before the flush:
  // threads still serving would otherwise record launches and steps whose device records come
  // after it (steps with no device work). Calls made from now on are counted in the footer
  // instead of lost in a ring no one drains.
  g_finishing.store(true, std::memory_order_relaxed);
  g_recording.fetch_and(uint8_t(~kRecEnabled), std::memory_order_relaxed);
  void (*request)() = g_signal_flush_request.load(std::memory_order_acquire);
  bool (*done)() = g_signal_flush_done.load(std::memory_order_acquire);
  if (request != nullptr && done != nullptr) {
    request();
    const uint64_t until = MonotonicNs() + kSignalFlushNs;
    while (!done() && MonotonicNs() < until) {
      Pass(w, false);  // the flush may wait for ring space
      struct timespec ts = {0, 100000};
      nanosleep(&ts, nullptr);
    }
  }
  // The ranges still open (a run around the whole serving loop): in the file, with their text.
  if (void (*flush)() = g_signal_range_flush.load(std::memory_order_acquire)) flush();
  {
    std::lock_guard<std::mutex> lock(g.mu);
    g.closing.store(true);
  }
  Pass(w, true);
  FinishFile(w, SignalReason(sig));
  return true;
}

// The file finished while shutdown hooks are still running or stuck elsewhere: no new thread
// registers (closing), the last drain, the footer.
void FinishWithoutHooks(WriterState* w, const char* reason) {
  G().closing.store(true);
  Pass(w, true);
  FinishFile(w, reason);
}

// How long the shutdown hooks of an exit hook may go without the file growing before the
// writer finishes the file without them.
constexpr uint64_t kExitHooksStallNs = 5000000000ull;

struct ExitWatch {
  uint64_t progress = ~0ull;
  uint64_t since_ns = 0;
};

// On the writer thread while an exit hook runs the shutdown hooks (FinishBeforeExit). A hook
// that makes no progress for kExitHooksStallNs is stuck: the thread calling _exit from a
// signal handler may have interrupted itself inside malloc or a CUPTI lock, which the hook then
// waits on forever. The writer finishes the file without it and, for an exit, ends the process
// with the status the application asked for, as _exit would have.
bool ExitHooksStalled(WriterState* w, ExitWatch* watch) {
  const uint64_t now = MonotonicNs();
  const uint64_t p = w->records;  // (events and device ops: the clock samples come regardless)
  if (p != watch->progress) {
    watch->progress = p;
    watch->since_ns = now;
    return false;
  }
  if (now - watch->since_ns < kExitHooksStallNs) return false;
  snprintf(w->exit_stalled_reason, sizeof(w->exit_stalled_reason),
           "%s (shutdown hooks stuck for 5 s: device records may be missing)", w->exit_reason);
  Log(1, "%s: the shutdown hooks made no progress for 5 s; file finished without them",
      w->exit_reason);
  FinishWithoutHooks(w, w->exit_stalled_reason);
  if (w->exit_may_exit) syscall(SYS_exit_group, w->exit_status);
  return true;
}

void* WriterMain(void*) {
  sigset_t set;  // (SIGXFSZ among them: FlushOut stops before the size limit; a race: EFBIG)
  BlockedInAgentThreads(&set);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  pthread_setname_np(pthread_self(), "profagent-wr");
  HookGuard guard;  // nothing the writer calls may record itself
  WriterState* w = W();
  auto& g = G();
  ExitWatch exit_watch;
  for (;;) {
    uint64_t req = g.flush_requested.load();
    if (!w->wake.exchange(false) && !w->stop.load() && w->signal_stop.load() <= 0) {
      timespec until;
      clock_gettime(CLOCK_MONOTONIC, &until);
      const uint64_t ns = uint64_t(until.tv_nsec) + uint64_t(g.config.flush_ms) * 1000000ull;
      until.tv_sec += time_t(ns / 1000000000ull);
      until.tv_nsec = long(ns % 1000000000ull);
      while (sem_clockwait(&w->wake_sem, CLOCK_MONOTONIC, &until) != 0 && errno == EINTR) {
      }
      while (sem_trywait(&w->wake_sem) == 0) {  // wake-ups posted meanwhile: one pass serves all
      }
      w->wake.store(false);
    }
    const bool stop = w->stop.load();
    if (const int sig = w->signal_stop.load(); sig > 0 && !stop) {
      // (-1: handled. When another thread is already finishing the file, the writer keeps
      // serving it, whose shutdown hooks may wait for ring space, until that thread stops it.)
      w->signal_stop.store(-1);
      if (FinishAfterSignal(w, sig)) break;
      // A shutdown (exit, exec, StopWriter) was under way and a fault came (a stop signal's
      // handler returns at once then, OnFatalSignal): it may be on the very thread running the
      // shutdown hooks, which cannot go on until the handler returns, and the handler waits for
      // the file. Finish it now, without them (their last device records are lost); the
      // handler then ends the process with the signal.
      snprintf(w->exit_stalled_reason, sizeof(w->exit_stalled_reason), "%s, then %s",
               w->shutdown_reason.load() != nullptr ? w->shutdown_reason.load() : "shutdown",
               SignalReason(sig));
      Log(1,
          "%s arrived while the profile was being finished: finished without the shutdown "
          "hooks",
          SignalReason(sig));
      FinishWithoutHooks(w, w->exit_stalled_reason);
      break;
    }
    if (w->exit_armed.load(std::memory_order_acquire)) {
      if (stop) {  // the exit hook's shutdown hooks returned: the last drain, here
        Pass(w, true);
        FinishFile(w, w->exit_reason);
        break;
      }
      if (ExitHooksStalled(w, &exit_watch)) break;
    }
    Pass(w, false);
    g.flush_done.store(req);
    if (stop) break;
  }
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  g_writer_cpu_ns.store(uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec));
  return nullptr;
}

}  // namespace

std::string OutputPathFor(int rank, pid_t pid, bool with_pid) {
  const std::string& dir = G().config.output_dir;
  if (rank >= 0) {
    return dir + "/rank" + std::to_string(rank) + (with_pid ? "." + std::to_string(pid) : "") + ".pb";
  }
  return dir + "/pid" + std::to_string(pid) + (with_pid ? "." + std::to_string(MonotonicNs() % 100000) : "") + ".pb";
}

void StartWriterLocked() {
  WriterState* w = W();
  auto& g = G();
  if (w->thread_started || g.closing.load()) return;
  w->thread_started = true;
  w->owner_pid = getpid();
  Ring::SetHighWaterHook(&WakeWriter);  // a filling ring is drained now, not at the next tick
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  if (pthread_create(&w->thread, &attr, WriterMain, nullptr) != 0) {
    w->thread_started = false;
    Log(1, "cannot start the writer thread; the agent is disabled");
    SetEnabled(false);
  } else {
    g.writer_running.store(true);
  }
  pthread_attr_destroy(&attr);
}

bool CoreLocksAvailable(int timeout_ms) {
  auto& g = G();
  const uint64_t deadline = MonotonicNs() + uint64_t(timeout_ms) * 1000000ull;
  for (;;) {
    if (g.mu.try_lock()) {
      g.mu.unlock();
      return true;
    }
    if (MonotonicNs() > deadline) return false;
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, nullptr);
  }
}

bool WriterOwnedByThisProcess() {
  WriterState* w = W();
  return w->thread_started && w->owner_pid == getpid();
}

void WakeWriter() {
  WriterState* w = W();
  w->wake.store(true);
  sem_post(&w->wake_sem);
}

bool FinishFromSignal(int sig, int timeout_ms) {
  WriterState* w = W();
  if (!w->thread_started || !WriterOwnedByThisProcess()) return false;
  int none = 0;
  w->signal_stop.compare_exchange_strong(none, sig);
  w->wake.store(true);
  sem_post(&w->wake_sem);
  for (int waited_us = 0; waited_us < timeout_ms * 1000; waited_us += 100) {
    if (w->stopped.load(std::memory_order_acquire)) return true;
    struct timespec ts = {0, 100000};
    nanosleep(&ts, nullptr);
  }
  return w->stopped.load(std::memory_order_acquire);
}

namespace {
// Both ends of a shutdown (StopWriter, FinishBeforeExit), once shutting_down is set: no new host
// events (threads still launching while the process exits would add launches whose device
// records come after the hooks' CUPTI flush), the shutdown hooks, then `closing`. Allocates
// nothing: FinishBeforeExit may run in a signal handler that interrupted malloc.
void RunShutdownHooks() {
  auto& g = G();
  g_finishing.store(true, std::memory_order_relaxed);
  g_recording.fetch_and(uint8_t(~kRecEnabled), std::memory_order_relaxed);
  void (*fns[32])() = {};
  size_t n = 0;
  {
    std::lock_guard<std::mutex> lock(g.mu);
    for (auto fn : g.shutdown_fns) {
      if (n < 32) fns[n++] = fn;
    }
  }
  for (size_t i = 0; i < n; ++i) fns[i]();
  std::lock_guard<std::mutex> lock(g.mu);  // no registration is half done
  g.closing.store(true);
}

// Waits, without allocating or locking, until the file is finished or the writer stops making
// progress for kExitHooksStallNs.
void WaitFileFinished(WriterState* w) {
  uint64_t last = w->progress.load(std::memory_order_relaxed);
  uint64_t since = MonotonicNs();
  while (!w->stopped.load(std::memory_order_acquire)) {
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, nullptr);
    const uint64_t p = w->progress.load(std::memory_order_relaxed);
    const uint64_t now = MonotonicNs();
    if (p != last) {
      last = p;
      since = now;
    } else if (now - since > kExitHooksStallNs) {
      return;
    }
  }
}
}  // namespace

void FinishBeforeExit(const char* reason, int status, bool may_exit) {
  auto& g = G();
  WriterState* w = W();
  if (!w->thread_started || !WriterOwnedByThisProcess()) return;
  if (pthread_equal(pthread_self(), w->thread)) return StopWriter(reason);
  if (g.shutting_down.exchange(true)) {
    // Another thread is finishing the file (exit, a signal): let it, within bounds.
    WaitFileFinished(w);
    return;
  }
  w->shutdown_reason.store(reason);
  w->exit_reason = reason;
  w->exit_status = status;
  w->exit_may_exit = may_exit;
  w->exit_armed.store(true, std::memory_order_release);
  // The shutdown hooks run here (the CUPTI flush must come from an application thread, and may
  // need the writer to drain meanwhile); nothing else on this thread allocates or joins.
  RunShutdownHooks();
  w->stop.store(true);
  sem_post(&w->wake_sem);
  WaitFileFinished(w);
}

void StopWriter(const char* reason) {
  auto& g = G();
  if (g.shutting_down.exchange(true)) return;
  W()->shutdown_reason.store(reason);
  RunShutdownHooks();  // (device records of what was recorded still arrive)
  WriterState* w = W();
  if (w->thread_started) {
    if (pthread_equal(pthread_self(), w->thread)) {
      Pass(w, true);
    } else {
      w->stop.store(true);
      sem_post(&w->wake_sem);
      pthread_join(w->thread, nullptr);
      Pass(w, true);
    }
  }
  FinishFile(w, reason);
}

void WriterAfterForkChild() {
  auto& g = G();
  // The parent's writer state is meaningless here: start over with a fresh one.
  WriterState* w = W();
  if (w->fd >= 0) {
    struct stat st;  // the parent's profile; never a descriptor the application reused
    if (fstat(w->fd, &st) == 0 && st.st_dev == w->file_dev && st.st_ino == w->file_ino) {
      close(w->fd);
    }
  }
  sem_init(&w->wake_sem, 0, 0);  // the parent's count means nothing here
  w->wake.store(false);
  w->stop.store(false);
  w->signal_stop.store(0);
  w->exit_armed.store(false);
  w->shutdown_reason.store(nullptr);
  w->thread_started = false;
  w->stopped.store(false);
  w->fd = -1;
  w->file_failed = false;
  w->path.clear();
  ClearOut(w);
  w->strings_written = 0;  // the child's file needs every string again
  w->records = 0;
  w->records_flushed = w->records_framed = w->unframed_events = w->unframed_device = 0;
  w->last_sync_ns = 0;
  w->syncs = 0;
  w->notes_written = w->comms_written = w->offsets_written = w->devices_written = 0;
  w->device_syncs_written = 0;
  w->stream_names_written = 0;
  w->unknown_funcs.clear();
  w->stack_ids.clear();
  w->func_ids.clear();
  w->api_ids.clear();
  w->stream_idx.clear();
  w->last_stream_idx = 0;
  memset(w->coll_names, 0, sizeof(w->coll_names));
  w->coll_ops.clear();
  w->owner_pid = 0;
  g.threads.clear();
  g.free_threads.clear();
  g.writer_running.store(false);
  g.shutting_down.store(false);
  g.closing.store(false);
  g.process_info_dirty = g.gpu_mode != 0;
}

}  // namespace internal

// CPU time the writer thread used, known after it stopped (benchmarks).
extern "C" __attribute__((visibility("default"))) uint64_t profagent_writer_cpu_ns() {
  return internal::g_writer_cpu_ns.load();
}

void Flush(int timeout_ms) {
  auto& g = internal::G();
  if (!g.writer_running.load()) return;
  uint64_t req = g.flush_requested.fetch_add(1) + 1;
  internal::WakeWriter();
  uint64_t deadline = MonotonicNs() + uint64_t(timeout_ms) * 1000000ull;
  while (g.flush_done.load() < req && MonotonicNs() < deadline) {
    internal::WakeWriter();
    usleep(200);
  }
}

}  // namespace profagent
