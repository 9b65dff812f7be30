#include "analyzer/report/analysis.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <queue>
#include <regex>
#include <set>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "agent/core/bounded_regex.h"
#include "analyzer/reader.h"
#include "analyzer/report/distribution.h"
#include "analyzer/report/elf_symbols.h"
#include "analyzer/report/interval_union.h"
#include "analyzer/report/range_store.h"
#include "analyzer/report/rules.h"

namespace profagent {
namespace analyzer {
namespace {

constexpr size_t kTopGaps = 10;
constexpr uint32_t kMaxStringId = 1u << 24;  // larger ids are treated as corrupt
// The agent numbers strings 1, 2, 3, ... and writes them in that order, so an id far beyond the
// definitions seen so far is corrupt as well: ids are accepted up to twice their number plus
// this slack. Keeps the per-id tables proportional to the file (one hostile id near
// kMaxStringId cost a gigabyte).
constexpr uint64_t kStringIdSlack = 1u << 16;

// ---------------------------------------------------------------------------------------------
// Small helpers.

double Round6(double x) { return std::round(x * 1e6) / 1e6; }
double NsToMs(double ns) { return ns / 1e6; }

// a - b, saturated to the int64_t range (times are unsigned; corrupt ones can be anything).
int64_t SignedDiff(uint64_t a, uint64_t b) {
  if (a >= b) return a - b > uint64_t(INT64_MAX) ? INT64_MAX : int64_t(a - b);
  return b - a > uint64_t(INT64_MAX) ? INT64_MIN : -int64_t(b - a);
}

// a + b, saturated to the int64_t range.
int64_t SaturatedAdd(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) return b > 0 ? INT64_MAX : INT64_MIN;
  return r;
}

Json Num(double x) {
  if (!std::isfinite(x)) return nullptr;
  return Round6(x);
}

// A value that may be far below 1 (a tiny message's GB/s): 6 significant digits, not 6 decimals.
Json NumSig(double x) {
  if (!std::isfinite(x)) return nullptr;
  if (x == 0) return 0.0;
  const double scale = std::pow(10.0, 5 - std::floor(std::log10(std::fabs(x))));
  return std::round(x * scale) / scale;
}

// A latency block (SUMMARY_FORMAT.md "LAT"); samples are in ns, `scale` converts.
Json LatJson(const Distribution& d, double scale) {
  Json j;
  j["count"] = d.count();
  if (d.count() == 0) {
    for (const char* k : {"mean", "std", "min", "p50", "p90", "p99", "max"}) j[k] = nullptr;
    return j;
  }
  j["mean"] = Num(d.Mean() * scale);
  j["std"] = Num(d.Std() * scale);
  j["min"] = Num(d.min() * scale);
  j["p50"] = Num(d.Percentile(50) * scale);
  j["p90"] = Num(d.Percentile(90) * scale);
  j["p99"] = Num(d.Percentile(99) * scale);
  j["max"] = Num(d.max() * scale);
  return j;
}

const char* TimingName(int mode) {
  switch (mode) {
    case GPU_TIMING_CUPTI: return "cupti";
    case GPU_TIMING_EVENTS: return "events";
    case GPU_TIMING_HOST: return "host";
    case GPU_TIMING_OFF: return "off";
    default: return "unknown";
  }
}

// The string id of the API an event called: `api` when set, else `name`, which holds the API's
// own name for every call but a kernel launch (the kernel's) and NVTX and step events (the
// message); 0 when unknown. A cudaMemcpyAsync is not a cudaMemcpy, a cudaHostAlloc not a
// cudaMalloc, an NCCL or MPI call its own API.
uint32_t ApiNameId(const EventView& e) {
  if (e.api != 0) return e.api;
  switch (e.kind) {
    case EV_GRAPH_LAUNCH:
    case EV_MEMCPY:
    case EV_MEMSET:
    case EV_ALLOC:
    case EV_FREE:
    case EV_STREAM:
    case EV_EVENT:
    case EV_API:
    case EV_SYNC:
    case EV_COLLECTIVE:
    case EV_GROUP:
    case EV_COMM:
      return e.name;
    default:
      return 0;
  }
}

const char* KindApiName(int kind) {
  switch (kind) {
    case EV_LAUNCH: return "cudaLaunchKernel";
    case EV_MEMCPY: return "cudaMemcpy";
    case EV_MEMSET: return "cudaMemset";
    case EV_ALLOC: return "cudaMalloc";
    case EV_FREE: return "cudaFree";
    case EV_SYNC: return "cudaSynchronize";
    case EV_GRAPH_LAUNCH: return "cudaGraphLaunch";
    case EV_COLLECTIVE: return "collective";
    case EV_STREAM: return "stream";
    case EV_EVENT: return "event";
    case EV_GROUP: return "ncclGroup";
    case EV_COMM: return "comm";
    default: return "api";
  }
}

std::string SizeClass(uint64_t bytes) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  auto label = [](uint64_t v) {
    int u = 0;
    while (v >= 1024 && u < 4) {
      v /= 1024;
      ++u;
    }
    return absl::StrCat(v, kUnits[u]);
  };
  if (bytes < 1024) return "0B-1KiB";
  uint64_t lo = 1024;
  while (lo * 4 <= bytes && lo < (1ull << 50)) lo *= 4;
  return absl::StrCat(label(lo), "-", label(lo * 4));
}

// The lower bound in bytes of a SizeClass label ("4KiB-16KiB": 4096); "in graph" (size unknown)
// sorts after every size.
uint64_t SizeClassLow(const std::string& label) {
  static const std::pair<const char*, int> kUnits[] = {
      {"TiB", 40}, {"GiB", 30}, {"MiB", 20}, {"KiB", 10}, {"B", 0}};
  const size_t dash = label.find('-');
  if (dash == std::string::npos) return UINT64_MAX;
  const std::string low = label.substr(0, dash);
  for (const auto& [unit, shift] : kUnits) {
    if (absl::EndsWith(low, unit)) {
      uint64_t v = 0;
      if (!absl::SimpleAtoi(low.substr(0, low.size() - strlen(unit)), &v)) return UINT64_MAX;
      return v << shift;
    }
  }
  return UINT64_MAX;
}

// An op's name lowered, without its library prefix, underscores, or the `I` of a nonblocking
// MPI collective (MPI_Iallreduce is an allreduce): "allreduce", "reducescatterblock", "send".
std::string LowerOp(const std::string& op) {
  std::string s = absl::AsciiStrToLower(op);
  for (const char* p : {"mpi_", "nccl"}) {
    if (s.compare(0, strlen(p), p) == 0) s = s.substr(strlen(p));
  }
  s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
  static const char* const kNonblocking[] = {
      "iallreduce", "iallgather", "iallgatherv",    "ialltoall",
      "ialltoallv", "ialltoallw", "ireducescatter", "ireducescatterblock",
      "ibcast",     "ireduce",    "igather",        "igatherv",
      "iscatter",   "iscatterv",  "iscan",          "iexscan",
      "ibarrier"};
  for (const char* n : kNonblocking) {
    if (s == n) return s.substr(1);
  }
  return s;
}

// The size nccl-tests reports for a call (its algbw is size / time): the whole buffer that is
// reduced, gathered, scattered or exchanged. `bytes` follows the agent's conventions
// (profagent.proto's Collective): per rank for a reduce-scatter's block (NCCL, MPI's
// Reduce_scatter_block) and per peer for an all-to-all, so those are scaled by the ranks.
uint64_t CollSize(const std::string& lop, bool mpi, uint64_t bytes, uint64_t recv_bytes, int n) {
  if (lop == "allgather" || lop == "allgatherv") {
    return recv_bytes > 0 ? recv_bytes : bytes * uint64_t(n);
  }
  // Gather and Scatter: `bytes` is one rank's block; nccl-tests' size is the root's whole buffer.
  if (lop == "reducescatterblock" || (lop == "reducescatter" && !mpi) || lop == "alltoall" ||
      lop == "gather" || lop == "scatter") {
    return bytes * uint64_t(n);
  }
  return bytes;
}

// The sequence number of a call the agent could not number (comm_table.h's NextPeerSeq).
constexpr uint64_t kNoSeq = 0xffffffffu;
constexpr int32_t kNcclInProgress = 7;  // ncclResult_t ncclInProgress

// Point-to-point calls (`lop` a LowerOp name with "send" or "recv") are numbered per ordered
// pair of communicator ranks: (src + 1) << 32 | (dst + 1), sends going from `rank` to `peer`,
// receives from `peer` to `rank`. 0 for a collective or an unknown peer.
bool IsSend(const std::string& lop) { return lop.find("send") != std::string::npos; }
bool IsP2p(const std::string& lop) {
  return IsSend(lop) || lop.find("recv") != std::string::npos;
}
uint64_t PairKey(const std::string& lop, int32_t rank, int32_t peer) {
  if (!IsP2p(lop) || peer < 0) return 0;
  const uint64_t me = uint32_t(rank) + 1ull, other = uint32_t(peer) + 1ull;
  return IsSend(lop) ? (me << 32 | other) : (other << 32 | me);
}

// `s`: LowerOp's name.
double BusFactor(const std::string& s, int n) {
  // nccl-tests: allreduce 2(n-1)/n; allgather, reducescatter, alltoall, gather, scatter
  // (n-1)/n (the root's whole buffer crosses the root's link but its own block); the rest 1.
  const bool spread = s == "allgather" || s == "allgatherv" || s == "reducescatter" ||
                      s == "reducescatterblock" || s == "alltoall" || s == "alltoallv" ||
                      s == "alltoallw" || s == "gather" || s == "scatter";
  if (n <= 1) return s == "allreduce" || spread ? 0 : 1;
  if (s == "allreduce") return 2.0 * (n - 1) / n;
  if (spread) return double(n - 1) / n;
  return 1.0;
}

// MPI one-sided communication (LowerOp names): the call returns before its transfer completes
// (at a later fence, unlock or flush), so its time gives no bandwidth.
bool OneSided(const std::string& lop) {
  static const char* const kOps[] = {
      "put",        "rput",           "get",           "rget",          "accumulate", "raccumulate",
      "fetchandop", "compareandswap", "getaccumulate", "rgetaccumulate"};
  for (const char* o : kOps) {
    if (lop == o) return true;
  }
  return false;
}

// A field of ops.csv: quoted when it holds `,`, `"` or a newline.
std::string CsvField(absl::string_view s) {
  if (s.find_first_of(",\"\n") == absl::string_view::npos) return std::string(s);
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out.push_back('"');
    out.push_back(c);
  }
  out.push_back('"');
  return out;
}

constexpr char kCsvHeader[] =
    "rank,index,name,bucket,kind,grid,block,stream,launch_ns,api_dur_ns,start_ns,end_ns,"
    "dur_ns,launch_to_start_ns,step,nvtx_path,device\n";

constexpr char kDigitPairs[] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

void Put8Digits(char* q, uint32_t v) {
  const uint32_t hi = v / 10000, lo = v % 10000;
  memcpy(q, kDigitPairs + (hi / 100) * 2, 2);
  memcpy(q + 2, kDigitPairs + (hi % 100) * 2, 2);
  memcpy(q + 4, kDigitPairs + (lo / 100) * 2, 2);
  memcpy(q + 6, kDigitPairs + (lo % 100) * 2, 2);
}

int DecimalDigits(uint64_t v) {
  static constexpr uint64_t kPow10[20] = {
      1ull, 10ull, 100ull, 1000ull, 10000ull, 100000ull, 1000000ull, 10000000ull, 100000000ull,
      1000000000ull, 10000000000ull, 100000000000ull, 1000000000000ull, 10000000000000ull,
      100000000000000ull, 1000000000000000ull, 10000000000000000ull, 100000000000000000ull,
      1000000000000000000ull, 10000000000000000000ull};
  const uint64_t x = v | 1;
  const int t = (64 - __builtin_clzll(x)) * 1233 >> 12;  // floor(log10) or one more
  return t - (x < kPow10[t]) + 1;
}

// Writes `v` in decimal at p; returns the end. Digits are stored straight into the output,
// backwards (staging them in a local buffer and copying it stalled on store forwarding), eight
// per 64-bit division, the rest in 32-bit arithmetic.
char* PutU64(char* p, uint64_t v) {
  if (v < 100) {  // most fields of a row (grid and block dims, stream, device) are this small
    if (v < 10) {
      *p = char('0' + v);
      return p + 1;
    }
    memcpy(p, kDigitPairs + v * 2, 2);
    return p + 2;
  }
  char* const end = p + DecimalDigits(v);
  char* q = end;
  while (v >= 100000000) {
    q -= 8;
    Put8Digits(q, uint32_t(v % 100000000));
    v /= 100000000;
  }
  uint32_t w = uint32_t(v);
  while (w >= 100) {
    q -= 2;
    memcpy(q, kDigitPairs + (w % 100) * 2, 2);
    w /= 100;
  }
  if (w >= 10) {
    memcpy(q - 2, kDigitPairs + w * 2, 2);
  } else {
    q[-1] = char('0' + w);
  }
  return end;
}

char* PutI64(char* p, int64_t v) {
  if (v >= 0) return PutU64(p, uint64_t(v));
  *p++ = '-';
  return PutU64(p, ~uint64_t(v) + 1);
}

char* PutStr(char* p, absl::string_view s) {
  memcpy(p, s.data(), s.size());
  return p + s.size();
}

// ops.csv output: rows are formatted by hand (PutU64, ...) straight into a large buffer written
// with write(2); per-field StrAppend/CsvField calls were most of the report's time with ops.csv.
class CsvOut {
 public:
  ~CsvOut() { Close(); }
  bool Open(const std::string& path) {
    fd_ = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) return false;
    cap_ = kCap;
    buf_.reset(new char[cap_]);
    p_ = buf_.get();
    return true;
  }
  bool is_open() const { return fd_ >= 0; }
  // Flushes and closes; false if any write failed.
  bool Close() {
    if (fd_ < 0) return ok_;
    Flush();
    ok_ &= close(fd_) == 0;
    fd_ = -1;
    buf_.reset();
    return ok_;
  }
  // Room for at least n bytes at the returned pointer; Commit(end) after writing them.
  char* Reserve(size_t n) {
    if (size_t(buf_.get() + cap_ - p_) < n) {
      Flush();
      if (n > cap_) {  // a row longer than the buffer (huge names): grow to it
        cap_ = n;
        buf_.reset(new char[cap_]);
        p_ = buf_.get();
      }
    }
    return p_;
  }
  void Commit(char* end) { p_ = end; }

 private:
  static constexpr size_t kCap = 4 << 20;
  void Flush() {
    const char* d = buf_.get();
    size_t n = size_t(p_ - d);
    while (n > 0 && ok_) {
      const ssize_t w = write(fd_, d, n);
      if (w < 0 && errno == EINTR) continue;
      ok_ = w > 0;
      if (w > 0) {
        d += w;
        n -= size_t(w);
      }
    }
    p_ = buf_.get();
  }
  int fd_ = -1;
  bool ok_ = true;
  size_t cap_ = 0;
  std::unique_ptr<char[]> buf_;
  char* p_ = nullptr;
};

// ---------------------------------------------------------------------------------------------
// Step messages (NVTX convention).

struct StepFields {
  int64_t tokens = -1, kv = -1, bsz = -1;
  std::string phase, label;
  bool warmup = false;
};

// Values are non-negative (ParseStepFields); sums are exact (128 bits), "sum" saturates.
int64_t ReduceKv(std::vector<int64_t>& v, const std::string& how) {
  if (v.empty()) return -1;
  if (how == "max") return *std::max_element(v.begin(), v.end());
  unsigned __int128 sum = 0;
  for (int64_t x : v) sum += uint64_t(x);
  if (how == "sum") return sum > uint64_t(INT64_MAX) ? INT64_MAX : int64_t(sum);
  if (how == "p50" || how == "p90") {
    std::sort(v.begin(), v.end());
    double p = how == "p50" ? 50 : 90;
    size_t rank = size_t(std::ceil(p * double(v.size()) / 100.0));
    if (rank < 1) rank = 1;
    return v[std::min(rank, v.size()) - 1];
  }
  const unsigned __int128 n = v.size();
  return int64_t((sum * 2 + n) / (2 * n));  // mean, rounded half up (at most the max value)
}

bool IsKvReduce(const std::string& how) {
  return how == "mean" || how == "max" || how == "p50" || how == "p90" || how == "sum";
}

StepFields ParseStepFields(const std::string& msg, const std::string& kv_reduce) {
  StepFields f;
  for (absl::string_view w : absl::StrSplit(msg, absl::ByAnyChar(" \t"), absl::SkipEmpty())) {
    size_t eq = w.find('=');
    if (eq == absl::string_view::npos) continue;
    absl::string_view k = w.substr(0, eq), v = w.substr(eq + 1);
    int64_t x;
    if (k == "tokens") {
      if (absl::SimpleAtoi(v, &x) && x >= 0) f.tokens = x;
    } else if (k == "bsz") {
      if (absl::SimpleAtoi(v, &x) && x >= 0) f.bsz = x;
    } else if (k == "kv") {
      std::vector<int64_t> vals;
      bool ok = true;
      for (absl::string_view p : absl::StrSplit(v, ',')) {
        if (!absl::SimpleAtoi(p, &x) || x < 0) {
          ok = false;
          break;
        }
        vals.push_back(x);
      }
      if (ok) f.kv = ReduceKv(vals, kv_reduce);
    } else if (k == "phase") {
      f.phase = std::string(v);
    } else if (k == "label") {
      f.label = std::string(v);
    } else if (k == "warmup") {
      f.warmup = v == "1";  // as the agent's parse (step_parser.cc): `warmup=1` only
    }
  }
  return f;
}

// ---------------------------------------------------------------------------------------------
// Shared, immutable analysis context.

struct Context {
  ReportOptions opt;
  BucketRules rules;
  std::regex step_re, run_re;
  std::vector<std::string> buckets;                 // registry: index -> name
  std::unordered_map<std::string, int> bucket_index;
  int others = 0, gemm = -1;

  int Bucket(const std::string& name) const {
    auto it = bucket_index.find(name);
    return it == bucket_index.end() ? -1 : it->second;
  }
};

// ---------------------------------------------------------------------------------------------
// Per-file records.

// A range on a thread's sweep stack in pass 2 (see FileAnalysis::Advance): the range, where it
// sits in its thread's sorted order, and what nesting gives it.
struct OpenRange {
  StoredRange r;
  uint32_t index;           // position in the thread's start order (RangeStore)
  int32_t mapped_anc = -1;  // stack position of the nearest engine-mapped ancestor, -1 = none
  int16_t model = -1;       // bucket of the nearest model-mapped range (self or ancestor)
  int16_t engine = -1;      // engine bucket of this range itself
  int32_t path = -1;        // ops.csv path id (paths_), -1 = not built yet
  int64_t excl = 0;         // engine-mapped: own time minus mapped descendants' so far
};

struct StepRec {
  uint64_t start, end;
  uint32_t thread = 0;      // the host thread that marked it
  int64_t tokens = -1, kv = -1, bsz = -1;
  std::string phase;
  bool warmup = false;
  bool excluded = false;
  bool by_rule = false;     // from PROFAGENT_STEP_RULE (graph launches, syncs), not NVTX
  int run = 0;              // 1-based index into runs, 0 = none
  uint64_t agent_run = 0;   // the agent's index of the run it was in (StepInfo.run), 0 = none
  uint64_t busy_ns = 0;  // GPU busy within the step's window
  // Device time of the step's ops per model bucket (index into Context::buckets, ns): diff
  // tests each bucket's average over the steps (stats.step_buckets_model_ms_samples).
  std::vector<std::pair<uint32_t, uint64_t>> model_ns;
};

void AddBucketNs(std::vector<std::pair<uint32_t, uint64_t>>* v, uint32_t bucket, uint64_t ns) {
  for (auto& p : *v) {
    if (p.first == bucket) {
      p.second += ns;
      return;
    }
  }
  v->emplace_back(bucket, ns);
}

struct RunRec {
  uint64_t start, end;
  std::string label;
  bool warmup = false;
  uint32_t thread = 0;
  uint64_t agent_index = 0;  // the agent's run number (StepInfo.index), 0 = not the agent's
  // Still open when the file ended (a server stopped by a signal): from its NVTX range's start
  // to the file's last host event (set by Finish1).
  bool open = false;
};

struct PendingLaunch {
  uint64_t start, end;
  uint32_t name, thread, stack, stream;
  int32_t path;   // ops.csv NVTX path id (paths_), -1 = none or not needed
  int32_t step;   // ops.csv: the step containing the launch (index into steps_), -1 = none
  int16_t nvtx_model;  // bucket of the innermost model-mapped NVTX range, -1 = none
  bool graph;
  bool timed;  // the call's end was read (see LaunchTimed)
  bool coll = false;       // an NCCL call whose kernel the agent timed with CUDA events
  // A batch copy (cudaMemcpyBatchAsync, cudaMemcpy3DBatchAsync): one call, a device op per copy
  // under CUPTI. Kept for all of them like a graph launch, but no graph.
  bool multi = false;
  // A copy or set of 0 bytes: the runtime enqueues nothing (no device record is expected).
  bool empty = false;
  uint64_t first_start = UINT64_MAX;  // a graph launch: its earliest node's start so far
  bool call_start = true;  // `start` is the launching call's (ops.csv launch_ns)
  uint32_t grid[3] = {0, 0, 0}, block[3] = {0, 0, 0};
};

// Host API time of one API: calls, calls whose duration was measured, their total ns. Kernel and
// graph launches are timed on 1 in N calls (Header.launch_api_sample): the rest have no end.
struct ApiAcc {
  uint64_t count = 0, timed = 0, ns = 0;
};

// False for a kernel/graph launch whose end the agent did not read (dur 0 in the file: a timed
// launch has dur >= 1, see proto/profagent.proto).
inline bool LaunchTimed(int kind, uint64_t start_ns, uint64_t end_ns) {
  return !((kind == EV_LAUNCH || kind == EV_GRAPH_LAUNCH) && end_ns == start_ns);
}

// Size class of the collectives counted from NCCL kernels run by CUDA graphs (size unknown).
constexpr char kGraphSizeClass[] = "in graph";

// The collective an NCCL kernel implements, from its name (mangled or not):
// "ncclDevKernel_AllReduce_Sum_f32_RING_LL" -> "AllReduce", "ncclDevKernel_SendRecv" ->
// "SendRecv", NCCL <= 2.18's "ncclKernel_AllGather_RING_LL_Sum_int8_t" -> "AllGather"; "" when
// the name is not an NCCL kernel's.
std::string NcclKernelOp(absl::string_view name) {
  for (absl::string_view prefix : {"ncclDevKernel_", "ncclKernel_"}) {
    size_t at = name.find(prefix);
    if (at == absl::string_view::npos) continue;
    absl::string_view rest = name.substr(at + prefix.size());
    size_t end = rest.find_first_of("_(");
    return std::string(rest.substr(0, end));
  }
  return std::string();
}

struct PendingOp {
  uint64_t start, end;
  uint32_t name, stream, copy_kind, device;
  int kind;
  uint32_t grid[3], block[3];
  bool coll = false;  // the kernel of an NCCL call (its launch event may never come: events mode)
  uint64_t graph_node = 0;  // the graph node that ran it (OpView.graph_node), 0 = none
};

struct KernelAgg {
  Distribution d;
};

// Calls of one library/op/size class. An NCCL call only enqueues its kernel: its time is the
// kernel's device time when the kernel is known (joined by correlation id), else the host call.
struct CollAgg {
  uint64_t count = 0, bytes = 0, time_ns = 0;  // time_ns: host call durations
  // Calls without a transfer time: MPI_I* calls whose completion no MPI_Wait*/Test* reported,
  // NCCL calls whose kernel never ran (or was not recorded) under device timing.
  uint64_t untimed = 0;
  uint64_t dev_count = 0, dev_ns = 0;          // calls timed on the device, their device time
  // Their durations for bandwidth: as dev_ns, except that a point-to-point call of an NCCL group
  // takes its fused kernel's whole time (its transfer runs the whole kernel, alongside the
  // group's other transfers, as nccl-tests' sendrecv_perf times it), not its share.
  uint64_t dev_span_ns = 0;
  uint64_t dev_host_ns = 0;                    // the host time of those calls
  // Sum over calls of size x bus factor (nccl-tests' busbw = algbw x factor): a row can mix
  // communicators of several sizes (tensor-parallel groups and the world).
  double bus_bytes = 0;
  // Host time, with the device time instead for the calls that have one.
  uint64_t best_ns() const { return time_ns - dev_host_ns + dev_ns; }
  uint64_t span_ns() const { return time_ns - dev_host_ns + dev_span_ns; }
};

// An NCCL call waiting for its kernel's device op (see Host2, OnOp).
struct CollWait {
  size_t arrival;   // index into arrivals_, SIZE_MAX = none
  CollAgg* agg;     // in colls_ (std::map: stable)
  uint64_t host_ns;
  uint32_t sharers;  // calls of an NCCL group that share this call's fused kernel (>= 1)
  bool p2p;          // a send or receive (see CollAgg::dev_span_ns)
};

struct Arrival {
  uint32_t uid;  // index into FileAnalysis::comm_uids_
  // Point-to-point calls are numbered per ordered pair of ranks (the n-th send from A to B is
  // B's n-th receive from A): (src + 1) << 32 | (dst + 1), communicator ranks. 0: a collective,
  // numbered on the communicator.
  uint64_t pair;
  uint64_t seq;
  int64_t at;  // rank-0 clock
  int lib;     // CollLibrary
  int32_t device;  // the communicator's CUDA device, -1 = none (MPI) or unknown
  // 1 / the calls sharing one fused kernel (an NCCL group): they all arrive at that kernel, so
  // each call's wait counts for its share of the group's.
  double weight = 1.0;
  // How long the call lasted (host call, MPI request to its completion, or NCCL kernel): a rank
  // waits for a later one at most that long (a small MPI_Send returns at once, eagerly, however
  // late its receiver is). INT64_MAX: unknown.
  int64_t dur = INT64_MAX;
  // Nonblocking MPI requests finished by one MPI_Wait*/Test* share its start as their arrival
  // (non-zero, the file's clock): the rank waits once for all of them, so its wait in that call
  // is the longest of theirs, not their sum. 0: a call of its own.
  int64_t wait_group = 0;
};

// A communicator of the file (CommDef).
struct CommInfo {
  std::string unique_id;
  int size;
  int32_t device;
  int32_t rank;  // this process's rank in it
};

struct MemDev {
  uint64_t cur = 0, peak = 0, peak_at = 0, allocs = 0, frees = 0, alloc_bytes = 0;
};

// An allocation or free waiting to be applied in time order. The file holds each thread's events
// in order, but threads' batches interleave (the writer drains one thread's ring at a time), so a
// worker's free can come after another thread's later allocation: applied in file order, the
// peak would count both. Events wait in a heap until kReorderNs older than the newest seen (or
// the heap holds kMaxPending): far more than a writer pass.
struct MemEvent {
  uint64_t t, ptr, bytes;
  uint32_t device;
  bool alloc;
  bool operator>(const MemEvent& o) const {
    return t != o.t ? t > o.t : alloc > o.alloc;  // at one instant, frees first
  }
};
class MemTimeline {
 public:
  static constexpr uint64_t kReorderNs = 10'000'000'000ull;
  static constexpr size_t kMaxPending = 1 << 20;

  explicit MemTimeline(std::map<uint32_t, MemDev>* devs) : devs_(devs) {}
  void Add(const MemEvent& m) {
    pending_.push(m);
    newest_ = std::max(newest_, m.t);
    while (!pending_.empty() &&
           (pending_.top().t + kReorderNs < newest_ || pending_.size() > kMaxPending)) {
      Apply(pending_.top());
      pending_.pop();
    }
  }
  void Finish() {
    for (; !pending_.empty(); pending_.pop()) Apply(pending_.top());
  }

 private:
  void Apply(const MemEvent& e) {
    if (e.alloc) {
      MemDev& m = (*devs_)[e.device];
      ++m.allocs;
      m.alloc_bytes += e.bytes;
      m.cur += e.bytes;
      Live& l = live_[e.ptr];
      l.bytes += e.bytes;
      l.device = e.device;
      if (m.cur > m.peak) {
        m.peak = m.cur;
        m.peak_at = e.t;
      }
    } else {
      // Freed from the device it was allocated on, whichever device was current at the free.
      auto it = live_.find(e.ptr);
      uint64_t b = e.bytes;
      uint32_t device = e.device;
      if (it != live_.end()) {
        b = it->second.bytes;
        device = it->second.device;
        live_.erase(it);
      } else if (b == 0) {
        // Nothing the profile saw allocated (a driver-API allocation under CUDA-event or host
        // timing, which record runtime calls only): no free of recorded memory.
        return;
      }
      MemDev& m = (*devs_)[device];
      ++m.frees;
      m.cur = m.cur >= b ? m.cur - b : 0;
    }
  }

  struct Live {
    uint64_t bytes = 0;
    uint32_t device = 0;
  };
  absl::flat_hash_map<uint64_t, Live> live_;  // by MemoryKey
  std::map<uint32_t, MemDev>* devs_;
  std::priority_queue<MemEvent, std::vector<MemEvent>, std::greater<MemEvent>> pending_;
  uint64_t newest_ = 0;
};

struct Gap {
  uint64_t at, gap;
  uint32_t device;
  std::string next_kernel;
  std::vector<std::string> stack;
};

struct BucketAcc {  // per run slot
  std::vector<uint64_t> model_ns, engine_ns;
};

// Launches / device ops waiting for their correlation partner. Ids are nearly sequential and
// most entries wait briefly, so a direct-mapped ring (slot = id mod size) serves nearly every
// lookup without hashing; an entry displaced by a newer id (a graph launch kept for all its
// kernels, a launch whose op never comes) moves to a hash map.
template <typename T>
class CorrTable {
 public:
  T* Find(uint64_t corr) {
    if (ring_.empty()) return nullptr;  // nothing put yet
    Slot& s = ring_[corr & kMask];
    if (s.used && s.corr == corr) return &s.value;
    if (overflow_.empty()) return nullptr;
    auto it = overflow_.find(corr);
    return it == overflow_.end() ? nullptr : &it->second;
  }
  // Inserts or replaces.
  void Put(uint64_t corr, const T& value) {
    if (ring_.empty()) ring_.resize(kMask + 1);
    Slot& s = ring_[corr & kMask];
    if (s.used && s.corr != corr) overflow_.insert_or_assign(s.corr, s.value);
    if (!overflow_.empty()) overflow_.erase(corr);
    s.used = true;
    s.corr = corr;
    s.value = value;
  }
  void Erase(uint64_t corr) {  // corr is in the table
    Slot& s = ring_[corr & kMask];
    if (s.used && s.corr == corr) {
      s.used = false;
    } else {
      overflow_.erase(corr);
    }
  }
  template <typename F>
  void ForEach(F f) const {
    for (const Slot& s : ring_) {
      if (s.used) f(s.corr, s.value);
    }
    for (const auto& p : overflow_) f(p.first, p.second);
  }
  void Clear() {
    std::vector<Slot>().swap(ring_);
    overflow_.clear();
  }

 private:
  static constexpr uint64_t kMask = 4095;
  struct Slot {
    uint64_t corr = 0;
    bool used = false;
    T value;
  };
  std::vector<Slot> ring_;  // allocated at the first Put
  absl::flat_hash_map<uint64_t, T> overflow_;
};

class FileAnalysis : public ViewVisitor {
 public:
  FileAnalysis(const Context* ctx, std::string path, int index)
      : ctx_(ctx),
        path_(std::move(path)),
        index_(index),
        step_pattern_(ctx->opt.step_pattern),
        run_pattern_(ctx->opt.run_pattern),
        kv_reduce_(ctx->opt.kv_reduce),
        step_re_(&ctx->step_re),
        run_re_(&ctx->run_re),
        ranges_(ctx->opt.range_budget) {}

  absl::Status Pass1();
  absl::Status Pass2(const std::string& csv_part);

  // --- results (read after the passes) ---
  const Context* ctx_;
  std::string path_;
  int index_;
  FileSummary fsum_;
  std::string footer_reason_;  // Footer.reason, "" = no footer (yet)
  Header header_;
  // What NVTX steps and runs are re-derived with: the report's --step-pattern, --run-pattern and
  // --kv-reduce when given, else what the agent recorded with (PROFAGENT_STEP_PATTERN, ... in
  // the header), so re-deriving never counts ranges the user told the agent are not steps.
  std::string step_pattern_, run_pattern_, kv_reduce_;
  const std::regex* step_re_;
  const std::regex* run_re_;
  std::regex own_step_re_, own_run_re_;
  // The ranks this file's communicators over `world` ranks give it (a process driving several).
  void WorldRanks(int world, std::set<int>* out) const {
    for (const auto& c : comms_) {
      if (c.second.size == world && c.second.rank >= 0) out->insert(c.second.rank);
    }
  }
  // The size of each communicator this file's calls name, by unique id (0 = unknown).
  void CommSizes(std::unordered_map<std::string, int>* out) const {
    for (const auto& c : comms_) {
      int& n = (*out)[c.second.unique_id];
      n = std::max(n, c.second.size);
    }
  }
  int rank_ = -1, world_ = 0;
  bool rank_guessed_ = false;
  uint64_t bad_string_ids_ = 0;
  uint64_t strings_defined_ = 0;
  int timing_ = 0;
  std::string timing_reason_;
  int64_t clock_offset_ = 0;
  uint64_t clock_offset_error_ = 0;
  bool has_offset_ = false;
  std::map<uint32_t, uint64_t> drops_;
  std::vector<std::string> notes_;
  std::vector<std::string> warnings_;
  uint64_t t0_ = UINT64_MAX, t1_ = 0;
  std::vector<StoredRange> open_ranges_;  // NVTX ranges still open at the file's end (pass 1)
  uint64_t device_ops_pass1_ = 0;
  // Kernel launches seen in pass 1, and those whose API duration was timed (their total ns), in
  // all and per kernel name: with host timing, an untimed launch's time is estimated as the mean
  // of its kernel's timed launches, or of all timed launches when none of its own was timed.
  uint64_t launches_ = 0, launches_timed_ = 0, launches_timed_ns_ = 0;
  absl::flat_hash_map<uint32_t, std::pair<uint64_t, uint64_t>> timed_by_name_;  // count, ns
  bool nvtx_steps_used_ = false;

  std::vector<StepRec> steps_;
  std::vector<RunRec> runs_;
  std::vector<BucketAcc> run_buckets_;  // [0] = outside any run, [i] = run i
  // Key: (name string id << 17) | (outside << 16) | bucket; name id 0 = unnamed (copies): named
  // by the bucket. outside: the op is outside the file's measured steps (see Emit).
  absl::flat_hash_map<uint64_t, KernelAgg> kernels_;
  uint64_t device_total_ns_ = 0;  // the measured ops' device time
  uint64_t outside_ops_ = 0, outside_ns_ = 0;
  // The file's measured steps (non-warm-up, not excluded), first start to last end; empty
  // (t0 > t1) when it has none.
  uint64_t measured_t0_ = UINT64_MAX, measured_t1_ = 0;
  std::map<std::string, CollAgg> colls_;  // key: lib\0op\0class
  std::vector<Arrival> arrivals_;
  std::vector<std::string> comm_uids_;
  absl::flat_hash_map<std::string, uint32_t> comm_uid_index_;
  uint64_t coll_calls_ = 0, coll_ns_ = 0;  // coll_ns_: host, device for calls that have it
  std::map<uint32_t, MemDev> mem_;
  MemTimeline mem_timeline_{&mem_};
  Distribution gaps_, launch_to_start_;
  std::vector<Gap> top_gaps_;
  // Key: API name string id, or (1 << 32 | kind) for calls without a name.
  absl::flat_hash_map<uint64_t, ApiAcc> api_;
  uint64_t busy_ns_ = 0;
  uint64_t unmatched_ops_ = 0, unmatched_launches_ = 0;
  uint64_t failed_launches_ = 0;  // launches, copies, sets whose call returned an error
  uint64_t failed_colls_ = 0;     // collective / point-to-point calls that returned an error
  uint64_t failed_comms_ = 0;     // communicator creations, splits, shrinks that did
  uint64_t host_timed_nccl_ = 0;  // NCCL calls without a device arrival (host timing)
  // Work enqueued during CUDA graph capture (Event.captured): it ran only at graph launches.
  uint64_t captured_launches_ = 0;
  std::map<std::string, uint64_t> captured_colls_;  // op -> NCCL calls captured into graphs
  // Executions of captured NCCL calls found at graph launches and matched across ranks (their
  // kernels' starts are arrivals), and those that could not be (see InGraphArrivals).
  uint64_t in_graph_matched_ = 0, in_graph_unmatched_ = 0;
  const std::string& StrPublic(uint32_t id) const { return Str(id); }

 private:
  // Pass 2's sweep of one thread's ranges: the chain of ranges open at the last time asked.
  // Engine exclusive times are accounted when a range leaves the stack; after a restart (time
  // went backwards on the thread) ranges already accounted are not accounted again.
  struct Sweep {
    std::unique_ptr<RangeStore::Cursor> cursor;
    std::vector<OpenRange> stack;
    uint64_t last_t = 0;
    uint32_t next_index = 0;
    uint32_t high_water = 0;                     // ranges [0, high_water) were seen before
    absl::flat_hash_set<uint32_t> unaccounted;  // of those, the ones never accounted
  };
  void OnRecord(const Record& r) override;
  void OnEvent(const EventView& e) override;
  void OnOp(const OpView& op) override;
  void OnHeader(const Header& h);
  void OnString(uint32_t id, const std::string& value);
  void OnOther(const Record& r);

  const std::string& Str(uint32_t id) const {
    static const std::string kEmpty;
    return id < strings_.size() ? strings_[id] : kEmpty;
  }
  void Host1(const EventView& e);
  void Host2(const EventView& e);
  // The index in comm_uids_ of communicator unique id `uid` (added at first sight).
  uint32_t UidIndex(const std::string& uid);
  void Finish1();
  void Finish2();
  // The model bucket of a kernel name by the kernel rules (-1: none); `*yields`: the rule
  // yields to an enclosing NVTX range (`bucket?`).
  int KernelBucket(uint32_t name, bool* yields = nullptr);
  static constexpr int16_t kYieldsBit = 0x4000;  // in kernel_bucket_: a yielding rule's
  int ApiEngineBucket(uint32_t name);
  // A free the agent recorded for memory a cudaDeviceReset released (its API is the reset's).
  bool ImpliedFree(const EventView& e) const {
    return e.kind == EV_FREE && reset_api_ != 0 && ApiNameId(e) == reset_api_;
  }
  uint32_t reset_api_ = 0;  // string id of "cudaDeviceReset", 0 = none yet
  Sweep& SweepOf(uint32_t thread);
  void Advance(Sweep* w, uint64_t t);
  void Pop(Sweep* w);
  void Account(Sweep* w, const OpenRange& o);
  void DropEnded(Sweep* w, uint64_t t, bool before);
  void NestRange(Sweep* w, const StoredRange& r, uint32_t index);
  const OpenRange* Innermost(uint32_t thread, uint64_t t);
  int32_t PathOf(Sweep* w, size_t pos);
  void FinishSweeps();
  void Emit(const PendingOp& op, const PendingLaunch* l);
  PendingLaunch LaunchOf(const EventView& e);  // thread, step, NVTX path of a launching call
  void JoinLaunch(uint64_t corr, const PendingLaunch& l);
  // The innermost step whose window holds `t` (-1: none). Steps may nest (a speculative
  // decoding draft step inside its verify step): a time after the latest-starting step's end
  // belongs to the step enclosing that one, if it still runs.
  int StepOf(uint64_t t) const;
  // StepOf(t) for times that come nearly in order: `*hint` (the step found last time, then the
  // next one) is tried before a binary search.
  int StepOfNear(uint64_t t, size_t* hint);
  // The step of `thread` whose window holds `t` when steps come from several threads (e.g. one
  // per GPU worker, overlapping in time) and `thread` marked some; else StepOf(t).
  int StepOfThread(uint64_t t, uint32_t thread) const;
  // From step i (the latest-starting step of its list at or before t) up its enclosing steps
  // (`parent`) to the first that holds t.
  int Holding(int i, uint64_t t, const std::vector<int>& parent) const;
  KernelAgg& Kernel(uint64_t key);
  const std::string& CsvName(uint32_t name_id, int bucket);
  // Whether the API named by string id `api` is a batch copy (cudaMemcpyBatchAsync, ...).
  bool IsBatchCopy(uint32_t api);
  std::vector<int8_t> batch_apis_;  // by string id: -1 not looked at yet, else IsBatchCopy

  int pass_ = 1;
  std::vector<std::string> strings_;
  std::vector<int8_t> frame_kind_;   // per string id: -1 unknown, 0 none, 1 step, 2 run
  // NVTX messages that match both the step and the run pattern (taken as steps): a few, and
  // how many.
  std::vector<std::string> both_patterns_;
  size_t both_patterns_count_ = 0;
  std::vector<int16_t> kernel_bucket_;  // per string id: -2 unknown
  std::vector<int16_t> api_bucket_;     // per string id: -2 unknown
  std::vector<StepRec> agent_steps_, nvtx_steps_;
  // Indices into steps_ by marking thread, in start order; empty when one thread marked them all.
  absl::flat_hash_map<uint32_t, std::vector<int>> steps_by_thread_;
  // Per step, the step enclosing it when it started (-1: none), among all steps and among its
  // own thread's steps.
  std::vector<int> step_parent_, step_parent_thread_;
  std::vector<RunRec> agent_runs_, nvtx_runs_;
  // NVTX ranges and engine-mapped API calls, in file order (pass 1), read back per thread in
  // start order by the sweeps of pass 2; memory bounded (range_store.h).
  RangeStore ranges_;
  std::unordered_map<uint32_t, Sweep> sweeps_;  // node-based: pointers stay valid
  uint32_t cached_thread_ = UINT32_MAX;
  Sweep* cached_sweep_ = nullptr;
  std::vector<int16_t> model_cache_, engine_cache_;  // per NVTX name: -2 unknown
  // ops.csv NVTX paths, interned by (parent path id, name): ids index paths_ and csv_paths_
  // (the same, CSV-escaped).
  std::vector<std::string> paths_, csv_paths_;
  absl::flat_hash_map<std::pair<int32_t, uint32_t>, int32_t> path_index_;
  // Graph nodes (EV_GRAPH_NODE) by id: the NVTX context of the call that made the node (a copy
  // has its original's), which the ops a graph launch runs take instead of the launch's.
  // Collected in pass 1 (a copy may be written before its original: another thread's batch),
  // resolved when pass 2 begins.
  struct NodeContext {
    int16_t model = -1;  // as OpenRange.model
    int32_t path = -1;   // ops.csv path id, -1 = none or not needed
  };
  absl::flat_hash_map<uint64_t, NodeContext> graph_nodes_;
  absl::flat_hash_map<uint64_t, uint32_t> node_made_;    // new node -> its context string id
  absl::flat_hash_map<uint64_t, uint64_t> node_source_;  // copy -> the node it copies
  void ResolveGraphNodes();
  NodeContext ContextOf(uint32_t context);
  // ops.csv path of a graph's op: the launch's path, "(graph)", the node's if it has one (by
  // id pair; -1: none).
  absl::flat_hash_map<std::pair<int32_t, int32_t>, int32_t> graph_paths_;
  absl::flat_hash_map<std::string, int32_t> node_path_index_;  // a node's path -> path id
  int32_t GraphPath(int32_t launch_path, int32_t node_path);
  // Path labels of step/run ranges (their first word), keyed from kFrameLabelKey up.
  static constexpr uint32_t kFrameLabelKey = 1u << 31;
  absl::flat_hash_map<std::string, uint32_t> frame_label_;
  std::unordered_map<uint64_t, CommInfo> comms_;  // by CommDef id
  std::unordered_map<uint32_t, std::vector<std::string>> stacks_;
  size_t step_hint_ = 0, launch_step_hint_ = 0;  // StepOfNear's, for device ops and launches
  // Pass 2 looks up kernels_ per device op: a small direct-mapped cache of (key, entry) in front.
  struct KernelSlot {
    uint64_t key = 0;
    KernelAgg* agg = nullptr;
  };
  std::array<KernelSlot, 64> kernel_cache_;
  // Host API time while pass 2 runs, folded into api_ at its end: per API name string id, and
  // per kind for calls without a name.
  std::vector<ApiAcc> api_by_name_;
  std::array<ApiAcc, 32> api_by_kind_{};
  CorrTable<PendingLaunch> pending_launch_;
  // Device ops waiting beside pending_op_'s: the other ops of an id (a graph launch's nodes)
  // and ops without one (id 0).
  absl::flat_hash_map<uint64_t, std::vector<PendingOp>> pending_more_;
  uint64_t last_coll_launch_ = 0;  // correlation id of the last NCCL call joined as a launch
  CorrTable<PendingOp> pending_op_;
  // NCCL calls captured into CUDA graphs, found again at the graphs' launches: a captured call
  // runs nothing when called, its kernel runs at each launch of the graph made from the capture
  // (CUPTI reports it with the launch's correlation id). Per rank, the j-th NCCL kernel (by
  // start) of the k-th launch of the captured graph (through any exec instantiated from it or
  // updated to it with cudaGraphExecUpdate) is the j-th kernel-making call captured into it (the
  // calls of one NCCL group make one kernel); across ranks, that is the k-th execution of the
  // captured call, named by its communicator and its ordinal among the calls captured on it (per
  // pair of ranks for point-to-point), which every rank capturing the same graphs shares, whether
  // it updated its exec or instantiated a new one, and whatever handles its driver reused.
  struct CapturedCall {
    uint32_t uid;   // comm_uids_ index of "<communicator unique id>#graph<ordinal>"
    uint64_t pair;  // as Arrival.pair
    int32_t device;
    uint32_t group;  // NCCL group number, 0 = none
    // The call's row of the collectives table (colls_ key) and size, for its executions: a
    // matched kernel leaves the "in graph" row for its calls' rows.
    std::string row;
    uint64_t bytes;
    double bus_bytes;  // bytes x bus factor
    bool p2p;
  };
  using CallList = std::shared_ptr<std::vector<CapturedCall>>;
  struct GraphRun {  // a launch of an exec that has captured calls
    CallList calls;
    uint64_t exec = 0, ordinal = 0;
  };
  void GraphApi(const EventView& e);
  void InGraphArrivals();
  void OpenRunsOfSteps();
  int8_t FrameKind(uint32_t name);
  void MoveToCallRows(std::map<std::string, CollAgg>::iterator in_graph,
                      const std::vector<CapturedCall>& calls, size_t first, size_t last,
                      uint64_t dur);
  std::vector<int8_t> graph_api_;  // per API name string id: -1 unknown, 0 other, 1..4 (GraphApi)
  absl::flat_hash_map<uint32_t, CallList> capturing_;    // stream index -> its open capture
  uint32_t last_capture_ = 0;                            // stream of the capture begun last
  absl::flat_hash_map<uint64_t, CallList> graph_calls_;  // cudaGraph_t -> calls captured into it
  absl::flat_hash_map<uint64_t, CallList> exec_calls_;   // cudaGraphExec_t -> the same
  // Launches so far of each capture's graph, by its call list (held, so the key stays unique).
  absl::flat_hash_map<const std::vector<CapturedCall>*, std::pair<CallList, uint64_t>>
      list_launches_;
  absl::flat_hash_map<uint64_t, GraphRun> graph_runs_;  // by the launch's correlation id
  // In-graph NCCL kernels (start, end) by their launch's correlation id.
  struct GraphKernel {
    uint64_t start, end;
    std::map<std::string, CollAgg>::iterator row;  // its "in graph" row of colls_
  };
  absl::flat_hash_map<uint64_t, std::vector<GraphKernel>> graph_kernels_;
  // (uid, pair, the member's rank) -> next: each rank's k-th capture of a call meets the others'
  // (one file can hold several ranks of a communicator: ncclCommInitAll, a thread per GPU).
  std::map<std::tuple<std::string, uint64_t, int>, uint64_t> captured_ordinal_;
  // The last device ops a launch took from pending_op_ (their record came first): the NCCL call
  // that made the launch is recorded when it returns, after the launch, and finds its kernel
  // here.
  struct TakenOp {
    uint64_t corr = 0;
    PendingOp op;
  };
  std::array<TakenOp, 512> taken_ops_{};
  size_t taken_next_ = 0;
  const PendingOp* TakenOpFor(uint64_t corr) const {
    for (const TakenOp& t : taken_ops_) {
      if (t.corr == corr) return &t.op;
    }
    return nullptr;
  }
  // NCCL calls waiting for their kernel, by the launch's correlation id: several for one fused
  // kernel (the members of an ncclGroupStart..End on one stream, e.g. a Send/Recv pair).
  absl::flat_hash_map<uint64_t, std::vector<CollWait>> coll_by_corr_;
  // Pass 1: NCCL group members per fused kernel (correlation id), when more than one call.
  absl::flat_hash_map<uint64_t, uint32_t> group_kernel_calls_;
  void CollKernel(const CollWait& w, const PendingOp& op);
  // GPU busy time and idle gaps: unions of the device ops' intervals, which arrive only nearly
  // in start order (interval_union.h). Globally (busy time, clipped to each step's window) and
  // per device (gaps, each named after the op that ends it).
  struct GapTag {
    uint32_t name_id;
    int32_t bucket;
    uint64_t stack;
  };
  struct DeviceBusy {
    IntervalUnion<GapTag> ops{kUnionHorizonNs};
    uint64_t last_end = 0;
  };
  static constexpr uint64_t kUnionHorizonNs = 1'000'000'000;
  static constexpr uint64_t kMinEventGapNs = 1000;  // see OnDeviceBusy
  IntervalUnion<char> busy_union_{kUnionHorizonNs};
  std::map<uint32_t, DeviceBusy> device_busy_;  // node-based: pointers stay valid
  DeviceBusy* last_busy_ = nullptr;  // device_busy_[last_busy_device_]
  uint32_t last_busy_device_ = 0;
  // Per step (in start order): the latest end among it and the steps before it, so that the
  // steps a busy stretch overlaps are found by a short backward scan.
  std::vector<uint64_t> step_end_prefix_;
  void OnBusy(uint64_t start, uint64_t end);
  // Steps from several threads (steps_by_thread_): a step's GPU busy time is the union of the
  // ops its own thread launched, clipped to its window, not every thread's work then.
  struct ThreadBusy {
    IntervalUnion<char> ops{kUnionHorizonNs};
    std::vector<uint64_t> end_prefix;  // as step_end_prefix_, over the thread's steps
  };
  std::unordered_map<uint32_t, ThreadBusy> thread_busy_;  // node-based: pointers stay valid
  uint32_t busy_thread_ = 0;                               // ThreadBusyOf's last answer
  ThreadBusy* busy_thread_state_ = nullptr;
  void OnThreadBusy(uint32_t thread, ThreadBusy* tb, uint64_t start, uint64_t end);
  template <typename Index>
  void ClipToSteps(size_t n, Index index, std::vector<uint64_t>* prefix, uint64_t start,
                   uint64_t end);
  ThreadBusy* ThreadBusyOf(uint32_t thread);  // nullptr: the thread marked no steps
  void OnDeviceBusy(uint32_t device, DeviceBusy* d, uint64_t start, uint64_t end,
                    const GapTag& tag);
  void FlushBusy();
  bool host_mode_ = false;
  CsvOut csv_;
  // ops.csv name fields, escaped once: per string id (kernel names), per bucket (unnamed ops).
  std::vector<std::string> csv_names_, csv_buckets_;
  std::vector<bool> csv_name_done_;
  uint64_t op_index_ = 0;
  // ops.csv rows in execution order (device start, then arrival). Device records reach the file
  // up to a writer pass apart (the CUDA-event poller's and a synchronizing thread's rings, 20 ms;
  // CUPTI's buffers of several streams or devices, its 200 ms flush): a row is written once
  // kCsvReorderNs of device time has been seen past its start, so rows no more out of order than
  // that come out in order. Memory: the rows of that much device time, in one arena.
  static constexpr uint64_t kCsvReorderNs = 250000000ull;
  struct PendingRow {
    uint64_t start, seq;
    size_t off, len;  // the row from its name on, in the arena
  };
  // Rows that came in start order queue in csv_fifo_ (sorted as they came: O(1)); a row that
  // starts before the last queued one goes to csv_heap_ (a min-heap by start, then arrival).
  std::deque<PendingRow> csv_fifo_;
  std::vector<PendingRow> csv_heap_;
  std::unique_ptr<char[]> csv_arena_;  // (not a string: no zero fill of each row's room)
  size_t csv_arena_size_ = 0, csv_arena_cap_ = 0, csv_dead_ = 0, csv_row_at_ = 0;
  uint64_t csv_seq_ = 0, csv_max_start_ = 0;
  // Room for a row of at most `n` bytes at the arena's end; CsvRow(start, len) after writing it.
  char* CsvRowSpace(size_t n) {
    if (csv_arena_size_ + n > csv_arena_cap_) {
      const size_t cap = std::max(csv_arena_cap_ * 2, csv_arena_size_ + n + (1u << 16));
      std::unique_ptr<char[]> grown(new char[cap]);
      if (csv_arena_size_ > 0) std::memcpy(grown.get(), csv_arena_.get(), csv_arena_size_);
      csv_arena_ = std::move(grown);
      csv_arena_cap_ = cap;
    }
    csv_row_at_ = csv_arena_size_;
    return csv_arena_.get() + csv_row_at_;
  }
  void CsvRow(uint64_t start, size_t len);
  const PendingRow* CsvOldest() const;  // the next row in order, or null
  void CsvWriteOldest();
  void CsvCompact();
  void CsvDrain() {
    while (!csv_fifo_.empty() || !csv_heap_.empty()) CsvWriteOldest();
  }
};

// ----- pass 1 --------------------------------------------------------------------------------

absl::Status FileAnalysis::Pass1() {
  pass_ = 1;
  absl::Status s = ScanFile(path_, this, &fsum_);
  if (!s.ok()) return s;
  if (fsum_.truncated) warnings_.push_back(fsum_.warning);
  device_ops_pass1_ = fsum_.device_ops;
  Finish1();
  return absl::OkStatus();
}

void FileAnalysis::OnRecord(const Record& r) {
  if (pass_ != 1) return;
  switch (r.kind_case()) {
    case Record::kHeader:
      OnHeader(r.header());
      break;
    case Record::kString:
      OnString(r.string().id(), r.string().value());
      break;
    default:
      OnOther(r);
      break;
  }
}

void FileAnalysis::OnHeader(const Header& h) {
  header_ = h;
  rank_ = h.rank();
  world_ = h.world_size();
  timing_ = h.gpu_timing();
  timing_reason_ = h.gpu_timing_reason();
  const ReportOptions& opt = ctx_->opt;
  auto config = [&](const char* key) -> const std::string* {
    auto it = h.config().find(key);
    return it != h.config().end() && !it->second.empty() ? &it->second : nullptr;
  };
  if (!opt.patterns_explicit) {
    std::string why;
    for (auto [key, pattern, re, own] :
         {std::make_tuple("PROFAGENT_STEP_PATTERN", &step_pattern_, &step_re_, &own_step_re_),
          std::make_tuple("PROFAGENT_RUN_PATTERN", &run_pattern_, &run_re_, &own_run_re_)}) {
      const std::string* recorded = config(key);
      if (recorded == nullptr || *recorded == *pattern) continue;
      if (CompileBounded(*recorded, std::regex::ECMAScript, own, &why)) {
        *pattern = *recorded;
        *re = own;
      } else {  // the agent accepted it, so only a hand-made header gets here
        warnings_.push_back(absl::StrCat(path_, ": ", key, " `", recorded->substr(0, 64),
                                         "` recorded by the agent is not usable (", why,
                                         "): re-derived steps use `", *pattern, "`"));
      }
    }
  }
  if (!opt.kv_reduce_explicit) {
    const std::string* recorded = config("PROFAGENT_KV_REDUCE");
    if (recorded != nullptr && IsKvReduce(*recorded)) kv_reduce_ = *recorded;
  }
}

void FileAnalysis::OnString(uint32_t id, const std::string& value) {
  // Corrupt or hostile: ids are small and dense in real files (kStringIdSlack).
  if (id > kMaxStringId || id > 2 * strings_defined_ + kStringIdSlack) {
    ++bad_string_ids_;
    return;
  }
  ++strings_defined_;
  if (id >= strings_.size()) strings_.resize(id + 1);
  strings_[id] = value;
  if (value == "cudaDeviceReset") reset_api_ = id;
}

void FileAnalysis::OnOther(const Record& r) {
  switch (r.kind_case()) {
    case Record::kProcess: {
      const ProcessInfo& p = r.process();
      if (p.rank() >= 0) rank_ = p.rank();
      if (p.world_size() > 0) world_ = p.world_size();
      if (p.gpu_timing() != GPU_TIMING_UNKNOWN) {
        timing_ = p.gpu_timing();
        timing_reason_ = p.gpu_timing_reason();
      }
      break;
    }
    case Record::kClockOffset:
      // The measurement with the smallest error bound (as the Perfetto export takes it).
      if (!has_offset_ || r.clock_offset().error_ns() < clock_offset_error_) {
        clock_offset_ = r.clock_offset().offset_ns();
        clock_offset_error_ = r.clock_offset().error_ns();
      }
      has_offset_ = true;
      break;
    case Record::kDrops: {
      uint64_t& d = drops_[r.drops().thread()];
      d = std::max<uint64_t>(d, r.drops().count());
      break;
    }
    case Record::kComm:
      comms_[r.comm().id()] = {r.comm().unique_id(), r.comm().size(), r.comm().device(),
                               r.comm().rank()};
      break;
    case Record::kStack: {
      std::vector<std::string>& frames = stacks_[r.stack().id()];
      frames.clear();
      for (const Frame& f : r.stack().frames()) {
        std::string sym = Str(f.symbol());
        // Not an exported symbol (the agent's dladdr saw none): the module's symbol table.
        if (sym.empty() && !Str(f.module()).empty())
          sym = ElfFunctionAt(Str(f.module()), f.offset());
        if (sym.empty()) {
          sym = absl::StrCat(Str(f.module()).empty() ? "?" : Str(f.module()), "+0x",
                             absl::Hex(f.offset()));
        }
        frames.push_back(std::move(sym));
      }
      break;
    }
    case Record::kFooter:
      footer_reason_ = r.footer().reason();
      // A crash the agent finished the file at (abort, a fault): the run did not end normally.
      // Another signal that ends a process (a hangup, SIGPIPE, a CPU-time limit, a timer) is
      // said too; SIGTERM and SIGINT are how servers are stopped.
      if (absl::StartsWith(footer_reason_, "signal ") || footer_reason_ == "fatal signal") {
        bool crash = footer_reason_ == "fatal signal";
        for (const char* s : {"(SIGABRT)", "(SIGSEGV)", "(SIGBUS)", "(SIGFPE)", "(SIGILL)",
                              "(SIGTRAP)", "(SIGSYS)"}) {
          crash |= absl::StrContains(footer_reason_, s);
        }
        if (crash) {
          warnings_.push_back(absl::StrCat(path_, ": the process crashed (", footer_reason_,
                                           "): its profile ends there"));
        } else if (!absl::StrContains(footer_reason_, "(SIGTERM)") &&
                   !absl::StrContains(footer_reason_, "(SIGINT)")) {
          warnings_.push_back(absl::StrCat(path_, ": the process was ended by ", footer_reason_,
                                           ": its profile ends there"));
        }
      }
      if (absl::EndsWith(footer_reason_, "; recording stopped")) {
        // The agent met a limit (file size, full disk) and ended the file early itself.
        warnings_.push_back(absl::StrCat(path_, ": ", footer_reason_, " at ", r.footer().records(),
                                         " records; ", r.footer().dropped(),
                                         " were dropped then, and nothing after was recorded"));
      }
      if (absl::StartsWith(footer_reason_, "MPI_Abort")) {
        warnings_.push_back(absl::StrCat(path_, ": the process called ", footer_reason_,
                                         ", which ended the job: its profile ends there"));
      }
      if (r.footer().dropped() > 0) drops_[UINT32_MAX] = r.footer().dropped();
      if (r.footer().unrecorded_calls() > 0) {
        warnings_.push_back(absl::StrCat(path_, ": ", r.footer().unrecorded_calls(),
                                         " calls made while the profile was being "
                                         "finished (",
                                         r.footer().reason(),
                                         ") were not recorded: threads still working then "
                                         "(their work is missing)"));
      }
      break;
    case Record::kNote:
      if (r.note().level() == "warning" || r.note().level() == "error") {
        notes_.push_back(absl::StrCat(r.note().level(), ": ", r.note().text()));
      }
      break;
    default:
      break;
  }
}

void FileAnalysis::OnEvent(const EventView& e) {
  if (pass_ == 1) {
    Host1(e);
  } else {
    Host2(e);
  }
}

int FileAnalysis::ApiEngineBucket(uint32_t name) {
  if (name >= strings_.size()) return -1;  // undefined string: no rule can match
  if (name >= api_bucket_.size()) api_bucket_.resize(name + 1, -2);
  int16_t& b = api_bucket_[name];
  if (b == -2) {
    std::string bucket = ctx_->rules.Match(RuleScope::kEngine, RuleTarget::kApi, Str(name));
    b = int16_t(bucket.empty() ? -1 : ctx_->Bucket(bucket));
  }
  return b;
}

// What an NVTX message is for the step model (cached per string id): 1 a step, 2 a run, 0 other.
int8_t FileAnalysis::FrameKind(uint32_t name) {
  if (name >= frame_kind_.size()) frame_kind_.resize(name + 1, -1);
  int8_t& fk = frame_kind_[name];
  if (fk < 0) {
    const std::string& msg = Str(name);
    const bool step = SearchPrefix(msg, *step_re_), run = SearchPrefix(msg, *run_re_);
    fk = step ? 1 : run ? 2 : 0;
    if (step && run && both_patterns_count_++ < 3) both_patterns_.push_back(msg.substr(0, 64));
  }
  return fk;
}

void FileAnalysis::Host1(const EventView& e) {
  if (e.kind == EV_GRAPH_NODE) {  // bookkeeping, recorded outside the schedule too: no span
    if (e.graph_node == 0) return;
    if (e.source_graph_node != 0) {
      node_source_[e.graph_node] = e.source_graph_node;
    } else {
      node_made_[e.graph_node] = e.name;
    }
    return;
  }
  t0_ = std::min(t0_, e.start_ns);
  t1_ = std::max(t1_, e.end_ns);
  if (e.kind == EV_COLLECTIVE && !e.captured) {
    // The members of an NCCL group that share one fused kernel (same correlation id).
    Collective c;
    if (c.ParseFromArray(e.coll.data(), int(e.coll.size())) && c.lib() == LIB_NCCL &&
        c.group() != 0 && c.corr() != 0) {
      ++group_kernel_calls_[c.corr()];
    }
  }
  if (e.kind == EV_COMM && e.ret != 0) {
    // ncclInProgress is a non-blocking NCCL communicator's success.
    const uint32_t api = ApiNameId(e);
    const bool nccl = api != 0 && api < strings_.size() && absl::StartsWith(Str(api), "nccl");
    if (!(nccl && e.ret == kNcclInProgress)) ++failed_comms_;
  }
  if (e.kind == EV_LAUNCH || (e.kind == EV_GRAPH_LAUNCH && !e.captured)) {
    ++launches_;
    if (LaunchTimed(e.kind, e.start_ns, e.end_ns)) {
      ++launches_timed_;
      launches_timed_ns_ += e.end_ns - e.start_ns;
      auto& own = timed_by_name_[e.name];
      ++own.first;
      own.second += e.end_ns - e.start_ns;
    }
  }
  switch (e.kind) {
    case EV_STEP:
    case EV_RUN: {
      StepInfo si;
      si.ParseFromArray(e.step.data(), int(e.step.size()));
      if (e.kind == EV_STEP) {
        StepRec s;
        s.start = e.start_ns;
        s.end = e.end_ns;
        s.tokens = si.tokens();
        s.kv = si.kv();
        s.bsz = si.bsz();
        s.phase = Str(si.phase());
        s.warmup = si.warmup();
        s.thread = e.thread;
        s.agent_run = si.run();
        const std::string& source = Str(si.source());
        s.by_rule = source == "graph" || source == "sync";
        agent_steps_.push_back(std::move(s));
      } else {
        RunRec r{e.start_ns, e.end_ns, Str(si.label()), si.warmup(), e.thread, si.index()};
        agent_runs_.push_back(std::move(r));
      }
      return;
    }
    case EV_NVTX_RANGE: {
      uint32_t name = e.name;
      if (name >= strings_.size()) name = 0;  // undefined string: an unnamed range
      const int8_t fk = FrameKind(name);
      const std::string& msg = Str(name);
      // A start/end range ended on another thread (a host callback ending a request's range)
      // encloses the work of the thread that started it.
      const uint32_t owner = e.start_thread != 0 ? e.start_thread : e.thread;
      StoredRange r{e.start_ns, e.end_ns, owner, name, fk != 0, false};
      ranges_.Add(r);
      if (fk == 0) return;
      StepFields f = ParseStepFields(msg, kv_reduce_);
      if (fk == 1) {
        StepRec s;
        s.start = e.start_ns;
        s.end = e.end_ns;
        s.tokens = f.tokens;
        s.kv = f.kv;
        s.bsz = f.bsz;
        s.phase = f.phase;
        s.warmup = f.warmup;
        s.thread = e.thread;
        nvtx_steps_.push_back(std::move(s));
      } else {
        nvtx_runs_.push_back(RunRec{e.start_ns, e.end_ns, f.label, f.warmup, e.thread});
      }
      return;
    }
    case EV_NVTX_PUSH: {
      // A range still open when the file ended (the agent writes them at exit, _exit, exec). A
      // run among them (a server exiting from its serving loop) is a run up to the end of the
      // file; an open step has no end: none. Every one encloses the work after its start in
      // ops.csv's NVTX path, up to the file's end (added at Finish1, when that is known).
      if (e.name < strings_.size()) {
        open_ranges_.push_back(StoredRange{e.start_ns, e.start_ns,
                                           e.start_thread != 0 ? e.start_thread : e.thread, e.name,
                                           FrameKind(e.name) != 0, false});
      }
      if (e.name >= strings_.size() || FrameKind(e.name) != 2) return;
      StepFields f = ParseStepFields(Str(e.name), kv_reduce_);
      RunRec r{e.start_ns, e.start_ns, f.label, f.warmup,
               e.start_thread != 0 ? e.start_thread : e.thread};
      r.open = true;
      agent_runs_.push_back(r);
      nvtx_runs_.push_back(std::move(r));
      return;
    }
    // Calls that `engine api` rules can map (RULES.md): by API name (`name` holds it but for
    // launches, whose `name` is the kernel).
    case EV_LAUNCH:
    case EV_GRAPH_LAUNCH:
    case EV_MEMCPY:
    case EV_MEMSET:
    case EV_ALLOC:
    case EV_FREE:
    case EV_STREAM:
    case EV_EVENT:
    case EV_API:
    case EV_SYNC:
    case EV_COLLECTIVE:
    case EV_GROUP:
    case EV_COMM: {
      const uint32_t api = ApiNameId(e);
      if (api != 0 && !ImpliedFree(e) && ApiEngineBucket(api) >= 0) {
        StoredRange r{e.start_ns, e.end_ns, e.thread, api, false, true};
        ranges_.Add(r);
      }
      return;
    }
    default:
      return;
  }
}

// Steps of a run the agent numbered (StepInfo.run) whose record never came, in a file that lost
// no record: that run was still open when the file ended at a signal or a crash, when the agent
// does not touch NVTX state (so its range is not in the file either). It is a run from its
// first step to the file's last host event, its label unknown, flagged open.
void FileAnalysis::OpenRunsOfSteps() {
  for (const auto& d : drops_) {
    if (d.second > 0) return;  // the record may have been dropped (see Finish1)
  }
  absl::flat_hash_set<uint64_t> recorded;
  for (const RunRec& r : runs_) recorded.insert(r.agent_index);
  std::map<uint64_t, RunRec> unseen;  // by the agent's run number
  for (const StepRec& st : steps_) {
    if (st.agent_run == 0 || recorded.contains(st.agent_run)) continue;
    // Inside a run written as still open (EV_NVTX_PUSH, at exit): that one.
    const bool covered = std::any_of(runs_.begin(), runs_.end(), [&](const RunRec& r) {
      return r.open && r.start <= st.start && st.start <= r.end;
    });
    if (covered) continue;
    RunRec made{st.start, std::max(st.start, t1_), "", false, st.thread, st.agent_run};
    made.open = true;
    auto it = unseen.try_emplace(st.agent_run, made).first;
    it->second.start = std::min(it->second.start, st.start);
  }
  for (auto& kv : unseen) {
    warnings_.push_back(absl::StrCat(
        path_, ": run ", kv.first, " was still open when the profile ended (",
        footer_reason_.empty() ? "no footer" : footer_reason_,
        "): its NVTX range was not recorded, so its label is unknown; reported from its first "
        "step to the profile's last host event (runs[].open)"));
    runs_.push_back(std::move(kv.second));
  }
}

void FileAnalysis::Finish1() {
  const ReportOptions& opt = ctx_->opt;
  // Steps from PROFAGENT_STEP_RULE and from NVTX overlap: the application's own NVTX steps win.
  const size_t by_rule = size_t(std::count_if(agent_steps_.begin(), agent_steps_.end(),
                                              [](const StepRec& s) { return s.by_rule; }));
  if (by_rule > 0 && by_rule < agent_steps_.size()) {
    agent_steps_.erase(std::remove_if(agent_steps_.begin(), agent_steps_.end(),
                                      [](const StepRec& s) { return s.by_rule; }),
                       agent_steps_.end());
    warnings_.push_back(absl::StrCat(path_, ": ", by_rule,
                                     " steps from PROFAGENT_STEP_RULE left out: the application "
                                     "marks its own steps with NVTX"));
  }
  nvtx_steps_used_ = opt.patterns_explicit || agent_steps_.empty() ||
                     (opt.kv_reduce_explicit && !nvtx_steps_.empty());
  steps_ = std::move(nvtx_steps_used_ ? nvtx_steps_ : agent_steps_);
  runs_ = std::move(nvtx_steps_used_ ? nvtx_runs_ : agent_runs_);
  for (RunRec& r : runs_) {
    if (!r.open) continue;
    r.end = std::max(r.start, t1_);
    warnings_.push_back(absl::StrCat(path_, ": run '", r.label.empty() ? "run" : r.label,
                                     "' was still open when the profile ended: reported up to "
                                     "the profile's last host event (runs[].open)"));
  }
  if (!nvtx_steps_used_) OpenRunsOfSteps();
  agent_steps_.clear();
  nvtx_steps_.clear();
  agent_runs_.clear();
  nvtx_runs_.clear();
  auto by_start = [](const auto& a, const auto& b) {
    return a.start != b.start ? a.start < b.start : a.end > b.end;
  };
  std::sort(steps_.begin(), steps_.end(), by_start);
  std::sort(runs_.begin(), runs_.end(), by_start);
  for (size_t i = 0; i < runs_.size(); ++i) {
    if (int(i) < opt.warmup_runs) runs_[i].warmup = true;
  }
  // A run inside a warm-up run of its thread (`run warmup=1` around the warm-up's own `run`
  // ranges) is warm-up too: steps count toward their innermost run. Sorted by start, a run is
  // inside one when an earlier warm-up run of its thread ends at or after its end.
  if (std::any_of(runs_.begin(), runs_.end(), [](const RunRec& r) { return r.warmup; })) {
    absl::flat_hash_map<uint32_t, uint64_t> warm_until;
    for (RunRec& r : runs_) {
      auto it = warm_until.find(r.thread);
      if (it != warm_until.end() && r.end <= it->second) r.warmup = true;
      if (r.warmup) {
        uint64_t& until = warm_until[r.thread];
        until = std::max(until, r.end);
      }
    }
  }
  if (both_patterns_count_ > 0 && !steps_.empty()) {
    warnings_.push_back(absl::StrCat(
        path_, ": ", both_patterns_count_,
        " NVTX message(s) match both the step and the run pattern, taken as steps (e.g. `",
        absl::StrJoin(both_patterns_, "`, `"), "`)"));
  }
  // A step's run: the innermost run whose window holds the step's start (else its end, below),
  // marked by the step's own thread if that thread marked runs (threads that serve requests
  // concurrently each mark their own runs and steps), else by any thread (runs marked by a driver
  // thread).
  absl::flat_hash_map<uint32_t, std::vector<int>> runs_by_thread;
  for (size_t i = 0; i < runs_.size(); ++i) runs_by_thread[runs_[i].thread].push_back(int(i));
  auto innermost = [&](const std::vector<int>* own, uint64_t t) {
    const size_t n = own != nullptr ? own->size() : runs_.size();
    auto at = [&](size_t i) -> const RunRec& { return runs_[own != nullptr ? (*own)[i] : i]; };
    size_t lo = 0, hi = n;  // first run starting after t
    while (lo < hi) {
      const size_t mid = (lo + hi) / 2;
      if (at(mid).start <= t) lo = mid + 1;
      else hi = mid;
    }
    // Walk back to the latest-starting run that still holds t (bounded: runs rarely nest deep).
    for (size_t i = lo, steps = 0; i > 0 && steps < 64; --i, ++steps) {
      if (t <= at(i - 1).end) return own != nullptr ? (*own)[i - 1] + 1 : int(i);
    }
    return 0;
  };
  for (StepRec& s : steps_) {
    auto own = runs_by_thread.find(s.thread);
    const std::vector<int>* runs = own != runs_by_thread.end() ? &own->second : nullptr;
    s.run = innermost(runs, s.start);
    // A step that does not end in that run (or starts in none) was opened ahead of its run, on
    // another thread (a scheduler one step ahead of the executor that ends it, as a start/end
    // range belongs to the thread that ends it): the run holding its end.
    if (s.run == 0 || runs_[s.run - 1].end < s.end) {
      const int at_end = innermost(runs, s.end);
      if (at_end != 0) s.run = at_end;
    }
    s.excluded = s.warmup || (s.run > 0 && runs_[s.run - 1].warmup);
  }
  // A step the agent saw in a run whose record is not in the file, when records were dropped
  // (a run still open at exit, or outside the capture range, has no record either): that run may
  // have been a warm-up one, so the step is in no aggregate.
  bool dropped = false;
  for (const auto& d : drops_) dropped |= d.second > 0;
  if (!nvtx_steps_used_ && dropped) {
    absl::flat_hash_set<uint64_t> recorded;
    for (const RunRec& r : runs_) recorded.insert(r.agent_index);
    size_t lost = 0;
    for (StepRec& s : steps_) {
      if (s.agent_run == 0 || recorded.contains(s.agent_run)) continue;
      if (s.run > 0 && runs_[s.run - 1].open) continue;  // an open run has no record
      s.excluded = true;
      ++lost;
    }
    if (lost > 0) {
      warnings_.push_back(absl::StrCat(path_, ": ", lost,
                                       " step(s) of runs whose records were dropped left out "
                                       "of every aggregate (they may be warm-up steps)"));
    }
  }
  steps_by_thread_.clear();
  for (size_t i = 0; i < steps_.size(); ++i) steps_by_thread_[steps_[i].thread].push_back(int(i));
  // Enclosing steps: over a list in start order, a stack of the steps still open.
  auto link = [this](const std::vector<int>& order, std::vector<int>* parent) {
    std::vector<int> open;
    for (int i : order) {
      while (!open.empty() && steps_[open.back()].end <= steps_[i].start) open.pop_back();
      (*parent)[i] = open.empty() ? -1 : open.back();
      open.push_back(i);
    }
  };
  step_parent_.assign(steps_.size(), -1);
  step_parent_thread_.assign(steps_.size(), -1);
  {
    std::vector<int> all(steps_.size());
    for (size_t i = 0; i < all.size(); ++i) all[i] = int(i);
    link(all, &step_parent_);
  }
  for (const auto& kv : steps_by_thread_) link(kv.second, &step_parent_thread_);
  if (steps_by_thread_.size() < 2) steps_by_thread_.clear();
  for (const StepRec& st : steps_) {
    if (st.warmup || st.excluded) continue;
    measured_t0_ = std::min(measured_t0_, st.start);
    measured_t1_ = std::max(measured_t1_, st.end);
  }
  const size_t nb = ctx_->buckets.size();
  run_buckets_.assign(runs_.size() + 1, BucketAcc{std::vector<uint64_t>(nb, 0),
                                                  std::vector<uint64_t>(nb, 0)});

  // Ranges still open when the file ended last until its last host event.
  for (StoredRange& r : open_ranges_) {
    r.end = std::max(r.start, t1_);
    ranges_.Add(r);
  }
  std::vector<StoredRange>().swap(open_ranges_);
  // Nesting, model/engine buckets and engine exclusive times come from pass 2's sweeps.
  ranges_.Finish();
}

int FileAnalysis::StepOfNear(uint64_t t, size_t* hint) {
  const size_t n = steps_.size();
  // True when steps_[i] is the last step starting at or before t (what StepOf looks at).
  auto last_before = [&](size_t i) {
    return i < n && steps_[i].start <= t && (i + 1 == n || steps_[i + 1].start > t);
  };
  size_t i = *hint;
  if (!last_before(i)) {
    if (last_before(i + 1)) {
      ++i;
    } else {
      auto it = std::upper_bound(steps_.begin(), steps_.end(), t,
                                 [](uint64_t x, const StepRec& s) { return x < s.start; });
      if (it == steps_.begin()) return -1;
      i = size_t(it - steps_.begin()) - 1;
    }
  }
  *hint = i;
  return Holding(int(i), t, step_parent_);
}

int FileAnalysis::Holding(int i, uint64_t t, const std::vector<int>& parent) const {
  // Bounded: steps rarely nest more than a few deep (a chain of partly overlapping steps could
  // make it long).
  for (int hops = 0; i >= 0 && hops < 64; ++hops) {
    const StepRec& s = steps_[size_t(i)];
    if (t < s.end || t == s.start) {
      // Steps that overlap without nesting (a scheduler thread opens the next step before the
      // executor ends this one): t is the oldest open one's. A step that encloses i is i's
      // parent in the other sense (nesting): the innermost holds t.
      for (int p = parent[size_t(i)]; p >= 0 && ++hops < 64; p = parent[size_t(p)]) {
        const StepRec& ps = steps_[size_t(p)];
        if (ps.end >= steps_[size_t(i)].end || t >= ps.end) break;
        i = p;
      }
      return i;
    }
    i = parent[size_t(i)];
  }
  return -1;
}

KernelAgg& FileAnalysis::Kernel(uint64_t key) {
  KernelSlot& c = kernel_cache_[(key * 0x9E3779B97F4A7C15ull) >> 58];
  if (c.agg != nullptr && c.key == key) return *c.agg;
  const size_t before = kernels_.size();
  KernelAgg* agg = &kernels_[key];
  if (kernels_.size() != before) kernel_cache_.fill(KernelSlot());  // a rehash moves entries
  c = KernelSlot{key, agg};
  return *agg;
}

int FileAnalysis::StepOfThread(uint64_t t, uint32_t thread) const {
  auto own = steps_by_thread_.find(thread);
  if (own == steps_by_thread_.end()) return StepOf(t);
  const std::vector<int>& v = own->second;
  auto it = std::upper_bound(v.begin(), v.end(), t,
                             [this](uint64_t x, int i) { return x < steps_[i].start; });
  if (it == v.begin()) return -1;
  return Holding(*(it - 1), t, step_parent_thread_);
}

int FileAnalysis::StepOf(uint64_t t) const {
  auto it = std::upper_bound(steps_.begin(), steps_.end(), t,
                             [](uint64_t x, const StepRec& s) { return x < s.start; });
  if (it == steps_.begin()) return -1;
  return Holding(int(it - steps_.begin()) - 1, t, step_parent_);
}

// ----- pass 2 --------------------------------------------------------------------------------

absl::Status FileAnalysis::Pass2(const std::string& csv_part) {
  pass_ = 2;
  host_mode_ = device_ops_pass1_ == 0;
  if (!csv_part.empty()) {
    if (!csv_.Open(csv_part)) {
      return absl::InternalError(absl::StrCat(csv_part, ": cannot write: ", strerror(errno)));
    }
    // Every part has the header; the merge keeps the first part's only.
    csv_.Commit(PutStr(csv_.Reserve(sizeof(kCsvHeader)), kCsvHeader));
  }
  ResolveGraphNodes();
  FileSummary again;
  absl::Status s = ScanFile(path_, this, &again);
  if (s.ok()) {
    FinishSweeps();
    Finish2();
  }
  if (csv_.is_open()) CsvDrain();  // (the rows still held for ordering)
  std::vector<PendingRow>().swap(csv_heap_);
  std::deque<PendingRow>().swap(csv_fifo_);
  csv_arena_.reset();
  csv_arena_size_ = csv_arena_cap_ = 0;
  // What the merge does not need goes now (files are merged after every thread finished).
  sweeps_.clear();
  ranges_.Clear();
  cached_sweep_ = nullptr;
  std::vector<std::string>().swap(paths_);
  std::vector<std::string>().swap(csv_paths_);
  path_index_.clear();
  graph_paths_.clear();
  node_path_index_.clear();
  stacks_.clear();
  if (csv_.is_open() && !csv_.Close() && s.ok()) {
    s = absl::InternalError(absl::StrCat(csv_part, ": write failed: ", strerror(errno)));
  }
  return s;
}

int FileAnalysis::KernelBucket(uint32_t name, bool* yields) {
  if (yields != nullptr) *yields = false;
  if (name >= strings_.size()) return -1;  // undefined string: no rule can match
  if (name >= kernel_bucket_.size()) kernel_bucket_.resize(name + 1, -2);
  int16_t& b = kernel_bucket_[name];
  if (b == -2) {
    bool y = false;
    std::string bucket = ctx_->rules.Match(RuleScope::kModel, RuleTarget::kKernel, Str(name), &y);
    b = int16_t(bucket.empty() ? -1 : ctx_->Bucket(bucket));
    if (y && b >= 0) b = int16_t(b | kYieldsBit);
  }
  if (b >= 0 && (b & kYieldsBit) != 0) {
    if (yields != nullptr) *yields = true;
    return b & ~kYieldsBit;
  }
  return b;
}

FileAnalysis::Sweep& FileAnalysis::SweepOf(uint32_t thread) {
  if (thread == cached_thread_ && cached_sweep_ != nullptr) return *cached_sweep_;
  Sweep& w = sweeps_[thread];
  if (w.cursor == nullptr) w.cursor = ranges_.Open(thread);
  cached_thread_ = thread;
  cached_sweep_ = &w;
  return w;
}

// Takes the next range of the thread's start order: pops what ended before it, then gives it
// its parent (the stack top), model and engine buckets, and takes its time off the nearest
// engine-mapped ancestor. API calls mapped by engine rules are leaves: accounted at once, never
// on the stack (they are nobody's parent).
void FileAnalysis::NestRange(Sweep* w, const StoredRange& r, uint32_t index) {
  while (!w->stack.empty() && w->stack.back().r.end <= r.start &&
         !(w->stack.back().r.start == r.start)) {
    Pop(w);
  }
  DropEnded(w, r.start, /*before=*/true);
  const OpenRange* p = w->stack.empty() ? nullptr : &w->stack.back();
  OpenRange o;
  o.r = r;
  o.index = index;
  int16_t self_model = -1;
  if (!r.api && !r.frame) {
    if (r.name >= model_cache_.size()) {
      model_cache_.resize(r.name + 1, -2);
      engine_cache_.resize(r.name + 1, -2);
    }
    if (model_cache_[r.name] == -2) {
      std::string b = ctx_->rules.Match(RuleScope::kModel, RuleTarget::kNvtx, Str(r.name));
      model_cache_[r.name] = int16_t(b.empty() ? -1 : ctx_->Bucket(b));
      b = ctx_->rules.Match(RuleScope::kEngine, RuleTarget::kNvtx, Str(r.name));
      engine_cache_[r.name] = int16_t(b.empty() ? -1 : ctx_->Bucket(b));
    }
    self_model = model_cache_[r.name];
    o.engine = engine_cache_[r.name];
  } else if (r.api) {
    o.engine = int16_t(ApiEngineBucket(r.name));
  }
  o.model = self_model >= 0 ? self_model : (p != nullptr ? p->model : int16_t(-1));
  if (p != nullptr) {
    o.mapped_anc = p->engine >= 0 ? int32_t(w->stack.size() - 1) : p->mapped_anc;
  }
  if (o.engine >= 0) {
    // Two's complement wrap-around rather than overflow on corrupt times (no UB).
    const uint64_t d = r.end - r.start;
    o.excl = int64_t(d);
    if (o.mapped_anc >= 0) {
      int64_t& anc = w->stack[o.mapped_anc].excl;
      anc = int64_t(uint64_t(anc) - d);
    }
  }
  if (!r.api) {
    w->stack.push_back(o);
    return;
  }
  w->stack.push_back(o);  // accounted like a range that ends at once
  Pop(w);
}

// Removes the stack top, accounted.
void FileAnalysis::Pop(Sweep* w) {
  Account(w, w->stack.back());
  w->stack.pop_back();
}

// A range leaves the stack: an engine-mapped range's exclusive time goes to the step containing
// its start (unless it was accounted before a restart).
void FileAnalysis::Account(Sweep* w, const OpenRange& o) {
  bool account = o.index >= w->high_water || w->unaccounted.erase(o.index) > 0;
  if (account && o.engine >= 0 && o.excl > 0) {
    int k = StepOfThread(o.r.start, o.r.thread);
    if (k >= 0 && !steps_[k].warmup) {
      run_buckets_[steps_[k].run].engine_ns[o.engine] += uint64_t(o.excl);
    }
  }
}

void FileAnalysis::Advance(Sweep* w, uint64_t t) {
  if (t < w->last_t) {  // time went backwards on this thread: restart the sweep
    for (const OpenRange& o : w->stack) {
      if (o.index >= w->high_water) w->unaccounted.insert(o.index);
    }
    w->high_water = std::max(w->high_water, w->next_index);
    w->stack.clear();
    w->cursor->Rewind();
    w->next_index = 0;
  }
  w->last_t = t;
  while (const StoredRange* r = w->cursor->Peek()) {
    if (r->start > t) break;
    const StoredRange copy = *r;
    w->cursor->Advance();
    NestRange(w, copy, w->next_index++);
  }
  // Push/pop ranges nest, so popping ended ones leaves the enclosing chain; start/end ranges
  // may overlap without nesting, and one may end below a range still open.
  while (!w->stack.empty() && w->stack.back().r.end < t) Pop(w);
  DropEnded(w, t, /*before=*/false);
}

// Removes the ranges below the stack top that ended before `t` (`before`: at or before it, as
// NestRange pops), accounted as Pop does; the ranges above take the removed one's
// engine-mapped ancestor and rebuild their paths (which named it).
void FileAnalysis::DropEnded(Sweep* w, uint64_t t, bool before) {
  for (size_t i = w->stack.size(); i-- > 0;) {
    const OpenRange& o = w->stack[i];
    const bool ended = before ? o.r.end <= t && o.r.start != t : o.r.end < t;
    if (!ended) continue;
    if (i + 1 == w->stack.size()) {
      Pop(w);
      continue;
    }
    Account(w, o);
    const int32_t anc = o.mapped_anc;
    for (size_t j = i + 1; j < w->stack.size(); ++j) {
      OpenRange& above = w->stack[j];
      if (above.mapped_anc == int32_t(i)) {
        above.mapped_anc = anc;
      } else if (above.mapped_anc > int32_t(i)) {
        --above.mapped_anc;
      }
      above.path = -1;
    }
    w->stack.erase(w->stack.begin() + ptrdiff_t(i));
  }
}

const OpenRange* FileAnalysis::Innermost(uint32_t thread, uint64_t t) {
  Sweep& w = SweepOf(thread);
  Advance(&w, t);
  return w.stack.empty() ? nullptr : &w.stack.back();
}

// The ops.csv path of the range at stack position `pos`: its ancestors' names and its own,
// joined with '/', interned.
//
// A step or run range appears by its message's first word ("step", "run"): a path names where
// in the code an op was launched, not the step's data (its kv list, its tokens): the ops.csv
// column `step` says which step. So the number of distinct paths stays bounded.
int32_t FileAnalysis::PathOf(Sweep* w, size_t pos) {
  OpenRange& o = w->stack[pos];
  if (o.path >= 0) return o.path;
  const int32_t parent = pos > 0 ? PathOf(w, pos - 1) : -1;
  const std::string& full = Str(o.r.name);
  absl::string_view label = full;
  uint32_t label_key = o.r.name;
  if (o.r.frame) {
    label = label.substr(0, label.find_first_of(" \t"));
    label_key = kFrameLabelKey;  // a frame's label depends only on its first word...
    auto f = frame_label_.find(label);
    if (f == frame_label_.end()) {
      f = frame_label_.emplace(std::string(label), uint32_t(frame_label_.size())).first;
    }
    label_key += f->second;      // ...interned here
  }
  // A range with no message (nvtxRangeStartEx with a color only) is "nvtx range", as Perfetto
  // names its slice (before, an empty segment: "run/").
  if (label.empty()) label = "nvtx range";
  auto key = std::make_pair(parent, label_key);
  auto it = path_index_.find(key);
  if (it == path_index_.end()) {
    std::string p = parent >= 0 ? absl::StrCat(paths_[parent], "/", label) : std::string(label);
    if (p.empty()) p = "?";
    it = path_index_.emplace(key, int32_t(paths_.size())).first;
    csv_paths_.push_back(CsvField(p));
    paths_.push_back(std::move(p));
  }
  o.path = it->second;
  return o.path;
}

// After pass 2: every range not reached by a query is nested and accounted too.
void FileAnalysis::FinishSweeps() {
  for (uint32_t thread : ranges_.Threads()) {
    Sweep& w = SweepOf(thread);
    Advance(&w, UINT64_MAX);
    while (!w.stack.empty()) Pop(&w);
  }
}

bool FileAnalysis::IsBatchCopy(uint32_t api) {
  if (api >= strings_.size()) return false;  // undefined string
  if (api >= batch_apis_.size()) batch_apis_.resize(size_t(api) + 1, -1);
  int8_t& known = batch_apis_[api];
  if (known < 0) known = absl::StrContains(Str(api), "BatchAsync") ? 1 : 0;
  return known == 1;
}

const std::string& FileAnalysis::CsvName(uint32_t name_id, int bucket) {
  if (name_id == 0) {  // unnamed (copies): named by the bucket
    if (csv_buckets_.empty()) {
      for (const std::string& b : ctx_->buckets) csv_buckets_.push_back(CsvField(b));
    }
    return csv_buckets_[bucket];
  }
  if (name_id >= strings_.size()) {  // an undefined string: empty, and no cache entry for it
    static const std::string kEmpty;
    return kEmpty;
  }
  if (name_id >= csv_names_.size()) {
    csv_names_.resize(name_id + 1);
    csv_name_done_.resize(name_id + 1, false);
  }
  if (!csv_name_done_[name_id]) {
    csv_names_[name_id] = CsvField(Str(name_id));
    csv_name_done_[name_id] = true;
  }
  return csv_names_[name_id];
}

void FileAnalysis::Host2(const EventView& e) {
  const int kind = e.kind;
  if (kind == EV_GRAPH_NODE) return;  // pass 1 took it
  if (kind == EV_API) GraphApi(e);
  if (kind == EV_GRAPH_LAUNCH && !e.captured && e.ret == 0 && e.corr != 0 && !host_mode_) {
    auto x = exec_calls_.find(e.graph);
    if (x != exec_calls_.end()) {
      auto& launches = list_launches_[x->second.get()];
      if (launches.first == nullptr) launches.first = x->second;
      graph_runs_[e.corr] = GraphRun{x->second, e.graph, launches.second++};
    }
  }
  switch (kind) {
    case EV_LAUNCH:
    case EV_GRAPH_LAUNCH:
    case EV_MEMCPY:
    case EV_MEMSET: {
      // Captured into a graph: nothing ran; the graph launch's device ops stand for it.
      if (e.captured) {
        ++captured_launches_;
        break;
      }
      // A call that failed (e.g. too many threads per block) enqueued nothing.
      if (e.ret != 0) {
        ++failed_launches_;
        break;
      }
      PendingLaunch l = LaunchOf(e);
      l.graph = kind == EV_GRAPH_LAUNCH;
      l.multi = kind == EV_MEMCPY && IsBatchCopy(e.name);
      l.empty = (kind == EV_MEMCPY || kind == EV_MEMSET) && e.bytes == 0;
      l.timed = LaunchTimed(kind, e.start_ns, e.end_ns);
      std::copy(e.grid, e.grid + 3, l.grid);  // ScanFile already undid the value-1 encoding
      std::copy(e.block, e.block + 3, l.block);
      if (host_mode_) {
        // A graph launch is one op, named by its call, as under CUDA-event timing.
        if (kind == EV_LAUNCH || kind == EV_GRAPH_LAUNCH ||
            ((kind == EV_MEMCPY || kind == EV_MEMSET) && !l.empty)) {
          uint64_t end = e.end_ns;
          if (!l.timed && launches_timed_ > 0) {
            auto own = timed_by_name_.find(e.name);
            end += own != timed_by_name_.end() ? own->second.second / own->second.first
                                               : launches_timed_ns_ / launches_timed_;
          }
          PendingOp op{e.start_ns,
                       end,
                       e.name,
                       e.stream,
                       e.copy_kind,
                       e.device,
                       kind == EV_LAUNCH         ? DOP_KERNEL
                       : kind == EV_GRAPH_LAUNCH ? DOP_OTHER
                       : kind == EV_MEMCPY       ? DOP_MEMCPY
                                                 : DOP_MEMSET};
          std::copy(l.grid, l.grid + 3, op.grid);
          std::copy(l.block, l.block + 3, op.block);
          Emit(op, &l);  // host timing: the launch is the op
        }
      } else {
        JoinLaunch(e.corr, l);
      }
      break;
    }
    case EV_ALLOC:
    case EV_FREE: {
      // Device memory only (pinned and registered host memory is the host's), and only what a
      // call did allocate or free: a failed call changed nothing.
      // Memory is held from the allocating call's start until the freeing call returns (a
      // cudaFree waits for the device first: what another thread allocates meanwhile adds up),
      // as Perfetto's counter draws it.
      if (e.ret != 0 || e.copy_kind == MEM_HOST_PINNED) break;
      mem_timeline_.Add(MemEvent{kind == EV_ALLOC ? e.start_ns : e.end_ns, MemoryKey(e), e.bytes,
                                 e.device, kind == EV_ALLOC});
      break;
    }
    case EV_COLLECTIVE: {
      Collective c;
      c.ParseFromArray(e.coll.data(), int(e.coll.size()));  // checked by ScanFile
      auto cit = comms_.find(c.comm());
      int n = cit != comms_.end() && cit->second.size > 0 ? cit->second.size
                                                             : std::max(world_, 1);
      // A call that returned an error transferred nothing (NCCL: enqueued nothing). Success is
      // 0 in both libraries; ncclInProgress (7), a non-blocking communicator's, is success.
      if (e.ret != 0 && !(c.lib() == LIB_NCCL && e.ret == kNcclInProgress)) {
        ++failed_colls_;
        break;
      }
      std::string op = Str(c.op());
      // ncclBcast is ncclBroadcast in place: one row, as nccl-tests' broadcast_perf has.
      if (c.lib() == LIB_NCCL && op == "Bcast") op = "Broadcast";
      if (e.captured) {
        // Not a call: it runs at each launch of the graph, where its kernel is counted (OnOp)
        // and, when its capture and graph are known, matched across ranks (InGraphArrivals).
        ++captured_colls_[op];
        if (c.lib() != LIB_NCCL || cit == comms_.end() || cit->second.unique_id.empty()) break;
        auto open = capturing_.find(e.stream);
        if (open == capturing_.end()) open = capturing_.find(last_capture_);  // a side stream
        if (open == capturing_.end()) break;
        const uint64_t pair = PairKey(LowerOp(op), cit->second.rank, c.peer());
        const std::string& comm_uid = cit->second.unique_id;
        const uint64_t ordinal = captured_ordinal_[{comm_uid, pair, cit->second.rank}]++;
        const std::string lop = LowerOp(op);
        const uint64_t bytes = CollSize(lop, false, c.bytes(), c.recv_bytes(), n);
        open->second->push_back(CapturedCall{
            UidIndex(absl::StrCat(comm_uid, "#graph", ordinal)), pair, cit->second.device,
            uint32_t(c.group()),
            absl::StrCat("nccl", std::string(1, '\0'), op, std::string(1, '\0'), SizeClass(bytes)),
            bytes, double(bytes) * BusFactor(lop, n), IsP2p(lop)});
        break;
      }
      // CUDA-event timing: the agent timed the call's kernel itself (an agent correlation id;
      // no launch event has it), so the call stands for the launch: its time and API duration
      // (a grouped call's kernel is launched by ncclGroupEnd: only its thread, step and NVTX
      // path), as a CUPTI-timed NCCL kernel gets from the launch inside the call. The calls of
      // a group share one id: the first one (written first, at ncclGroupEnd) joins it.
      if (c.lib() == LIB_NCCL && c.corr() >= kAgentCorrBase && c.corr() != last_coll_launch_ &&
          !host_mode_) {
        last_coll_launch_ = c.corr();
        PendingLaunch l = LaunchOf(e);
        l.name = 0;  // the device op's name ("ncclSendRecv" for a group) decides its bucket
        l.graph = false;
        l.coll = true;
        l.timed = c.group() == 0;
        l.call_start = c.group() == 0;
        JoinLaunch(c.corr(), l);
      }
      std::string lop = LowerOp(op);
      const uint64_t bytes = CollSize(lop, c.lib() == LIB_MPI, c.bytes(), c.recv_bytes(), n);
      std::string key = absl::StrCat(c.lib() == LIB_MPI ? "mpi" : "nccl", std::string(1, '\0'),
                                     op, std::string(1, '\0'), SizeClass(bytes));
      CollAgg& a = colls_[key];
      ++a.count;
      a.bytes += bytes;
      // A nonblocking MPI call lasts from its posting to the MPI_Wait*/Test* that saw it
      // complete (the posting call alone says nothing of the transfer).
      uint64_t host_ns = e.end_ns - e.start_ns;
      if (c.nonblocking()) {
        host_ns = c.complete_ns() >= e.end_ns ? c.complete_ns() - e.start_ns : 0;
        if (c.complete_ns() < e.end_ns) ++a.untimed;
      }
      a.time_ns += host_ns;
      // Unknown for a nonblocking call never seen complete; an NCCL call's is its kernel's
      // (CollKernel), not its enqueue's.
      const bool unknown_dur =
          c.lib() == LIB_NCCL || (c.nonblocking() && c.complete_ns() < e.end_ns);
      int64_t call_dur = unknown_dur ? INT64_MAX : int64_t(host_ns);
      // A nonblocking MPI call's rank arrives when it first waits on (or tests) the request:
      // it posts early and computes meanwhile, and MPI progresses the transfer only inside its
      // calls. It waits at most from then to the completion. Without a wait time (files before
      // 1.2, Fortran, a request never waited on), its posting.
      int64_t arrive_ns = int64_t(e.start_ns), wait_group = 0;
      if (c.nonblocking() && c.lib() == LIB_MPI && c.wait_ns() > e.start_ns) {
        arrive_ns = wait_group = int64_t(c.wait_ns());
        if (!unknown_dur) {
          call_dur = c.complete_ns() > c.wait_ns() ? int64_t(c.complete_ns() - c.wait_ns()) : 0;
        }
      }
      a.bus_bytes += double(bytes) * BusFactor(lop, n);
      ++coll_calls_;
      coll_ns_ += host_ns;
      uint32_t sharers = 1;
      if (c.lib() == LIB_NCCL && c.group() != 0 && c.corr() != 0) {
        auto g = group_kernel_calls_.find(c.corr());
        if (g != group_kernel_calls_.end()) sharers = std::max<uint32_t>(1, g->second);
      }
      const bool p2p = IsP2p(lop);
      CollWait w{SIZE_MAX, &a, host_ns, sharers, p2p};
      if (cit != comms_.end() && !cit->second.unique_id.empty()) {
        const uint32_t uid = UidIndex(cit->second.unique_id);
        // Local clock here; mapped to rank 0's clock (ClockOffset) when ranks are merged.
        // An NCCL call only enqueues: its rank "arrives" when its stream reaches the
        // collective's kernel, i.e. at the kernel's device start (joined by correlation id).
        // Send-like calls (send, isend, ssend, sendrecv, ...) go from this rank to `peer`,
        // receives from `peer` to this rank. A rank's transfer to itself waits for no one.
        const uint64_t pair = PairKey(lop, cit->second.rank, c.peer());
        // Unmatched: a point-to-point call without a number (an MPI_ANY_SOURCE receive, a
        // transfer with MPI_PROC_NULL) or a rank's transfer to itself, which waits for no one.
        const bool numbered = c.seq() != kNoSeq && (!p2p || c.peer() >= 0);
        // Host timing sees no NCCL kernel: an enqueue time is no arrival (the rank arrives when
        // its stream reaches the kernel), so such calls are left out of the waits.
        const bool no_arrival = c.lib() == LIB_NCCL && host_mode_;
        if (no_arrival && numbered) ++host_timed_nccl_;
        if (numbered && !no_arrival && (!p2p || c.peer() != cit->second.rank)) {
          arrivals_.push_back(Arrival{uid, pair, c.seq(), arrive_ns, int(c.lib()),
                                      c.lib() == LIB_NCCL ? cit->second.device : -1, 1.0 / sharers,
                                      call_dur, wait_group});
          w.arrival = arrivals_.size() - 1;
        }
        // An MPI_Sendrecv is also a receive: it meets the source's matching send. One call
        // waits once for both: each side counts for half its wait.
        if (c.has_recv_peer() && c.recv_peer() >= 0 && c.recv_seq() != kNoSeq &&
            c.recv_peer() != cit->second.rank) {
          const uint64_t me = uint32_t(cit->second.rank) + 1ull;
          const uint64_t src = uint32_t(c.recv_peer()) + 1ull;
          const bool both = w.arrival != SIZE_MAX;
          if (both) arrivals_[w.arrival].weight = 0.5;
          arrivals_.push_back(Arrival{uid, src << 32 | me, c.recv_seq(), arrive_ns, int(c.lib()),
                                      -1, both ? 0.5 : 1.0, call_dur, wait_group});
        }
      }
      if (c.lib() == LIB_NCCL && c.corr() != 0) {
        if (PendingOp* d = pending_op_.Find(c.corr())) {
          CollKernel(w, *d);
          d->coll = true;
        } else if (const PendingOp* t = TakenOpFor(c.corr())) {
          CollKernel(w, *t);
        } else {
          coll_by_corr_[c.corr()].push_back(w);
        }
      }
      break;
    }
    default:
      break;
  }
  // Host API time by API name. The frees a cudaDeviceReset implies (the memory it released)
  // are not calls: the reset is recorded as one of its own.
  if (kind != EV_NVTX_RANGE && kind != EV_NVTX_MARK && kind != EV_NVTX_PUSH && kind != EV_STEP &&
      kind != EV_RUN && kind != EV_MARKER && !ImpliedFree(e)) {
    const uint32_t api = ApiNameId(e);
    ApiAcc* acc;
    if (api != 0 && api < strings_.size()) {
      if (api >= api_by_name_.size()) api_by_name_.resize(strings_.size());
      acc = &api_by_name_[api];
    } else if (api == 0 && uint32_t(kind) < api_by_kind_.size()) {
      acc = &api_by_kind_[kind];
    } else {
      acc = &api_[api != 0 ? uint64_t(api) : ((1ull << 32) | uint32_t(kind))];
    }
    // A run of polls (EventView.calls) counts every call, and the time inside them.
    acc->count += e.calls;
    if (LaunchTimed(kind, e.start_ns, e.end_ns)) {
      acc->timed += e.calls;
      acc->ns += e.calls > 1 ? e.busy_ns : e.end_ns - e.start_ns;
    }
  }
}

void FileAnalysis::OnOp(const OpView& d) {
  if (pass_ == 1) {
    t0_ = std::min(t0_, d.start_ns);
    t1_ = std::max(t1_, d.end_ns);
    return;
  }
  PendingOp op{d.start_ns, d.end_ns, d.name, d.stream, d.copy_kind, d.device, d.kind,
               {d.grid[0], d.grid[1], d.grid[2]}, {d.block[0], d.block[1], d.block[2]}};
  op.graph_node = d.graph_node;
  if (!coll_by_corr_.empty()) {
    auto c = coll_by_corr_.find(d.corr);
    if (c != coll_by_corr_.end()) {
      for (const CollWait& w : c->second) CollKernel(w, op);
      op.coll = true;
      coll_by_corr_.erase(c);
    }
  }
  if (!op.coll && d.graph != 0 && d.kind == DOP_KERNEL) {
    // An NCCL kernel run by a graph launch: a collective captured into the graph (no call
    // record of its own). Counted by its kernel's name and device time; its size is unknown.
    std::string coll_op = NcclKernelOp(Str(d.name));
    if (!coll_op.empty()) {
      auto row = colls_.try_emplace(absl::StrCat("nccl", std::string(1, '\0'), coll_op,
                                                 std::string(1, '\0'), kGraphSizeClass))
                     .first;
      CollAgg& a = row->second;
      const uint64_t dur = d.end_ns > d.start_ns ? d.end_ns - d.start_ns : 0;
      ++a.count;
      a.time_ns += dur;
      ++a.dev_count;
      a.dev_ns += dur;
      a.dev_span_ns += dur;
      a.dev_host_ns += dur;
      // Per rank too (collectives.per_rank), whose waits count in-graph executions.
      ++coll_calls_;
      coll_ns_ += dur;
      op.coll = true;
      if (d.corr != 0) graph_kernels_[d.corr].push_back(GraphKernel{d.start_ns, d.end_ns, row});
    }
  }
  if (PendingLaunch* l = pending_launch_.Find(d.corr)) {
    Emit(op, l);
    if (l->graph || l->multi) {
      l->first_start = std::min(l->first_start, op.start);
    } else {
      pending_launch_.Erase(d.corr);
    }
  } else if (d.corr == 0 || pending_op_.Find(d.corr) != nullptr) {
    // Several ops of one id before their launch (a graph launch's nodes): all wait.
    pending_more_[d.corr].push_back(op);
  } else {
    pending_op_.Put(d.corr, op);
  }
}

// An NCCL call's kernel: its device start is the rank's arrival, its device time the call's.
void FileAnalysis::CollKernel(const CollWait& w, const PendingOp& op) {
  // A fused kernel's time is shared equally by the group's calls that launched it.
  const uint64_t full = op.end > op.start ? op.end - op.start : 0;
  const uint64_t dur = full / w.sharers;
  if (w.arrival != SIZE_MAX) {
    arrivals_[w.arrival].at = int64_t(op.start);
    arrivals_[w.arrival].dur = int64_t(full);
  }
  ++w.agg->dev_count;
  w.agg->dev_ns += dur;
  w.agg->dev_span_ns += w.p2p ? full : dur;
  w.agg->dev_host_ns += w.host_ns;
  coll_ns_ = coll_ns_ - w.host_ns + dur;
}

PendingLaunch FileAnalysis::LaunchOf(const EventView& e) {
  PendingLaunch l;
  l.start = e.start_ns;
  l.end = e.end_ns;
  l.name = e.name;
  l.thread = e.thread;
  l.stack = e.stack;
  l.stream = e.stream;
  l.graph = false;
  l.timed = true;
  const OpenRange* in = Innermost(e.thread, e.start_ns);
  l.path =
      in != nullptr && csv_.is_open() ? PathOf(cached_sweep_, cached_sweep_->stack.size() - 1) : -1;
  l.nvtx_model = in != nullptr ? in->model : int16_t(-1);
  l.step = !steps_by_thread_.empty() ? StepOfThread(e.start_ns, e.thread)
           : csv_.is_open()          ? StepOfNear(e.start_ns, &launch_step_hint_)
                                     : -1;
  return l;
}

// A launch meets its device op by correlation id, whichever comes first in the file; a graph
// launch stays for the graph's other nodes.
void FileAnalysis::JoinLaunch(uint64_t corr, const PendingLaunch& l) {
  if (PendingOp* op = pending_op_.Find(corr)) {
    Emit(*op, &l);
    taken_ops_[taken_next_++ % taken_ops_.size()] = TakenOp{corr, *op};
    uint64_t first_start = op->start;
    pending_op_.Erase(corr);
    if (!pending_more_.empty()) {
      auto more = pending_more_.find(corr);
      if (more != pending_more_.end()) {
        for (const PendingOp& m : more->second) {
          Emit(m, &l);
          first_start = std::min(first_start, m.start);
        }
        pending_more_.erase(more);
      }
    }
    if (l.graph || l.multi) {
      PendingLaunch g = l;
      g.first_start = first_start;
      pending_launch_.Put(corr, g);
    }
  } else {
    pending_launch_.Put(corr, l);
  }
}

namespace {
// The heap's order: the row that starts first (then the one that came first) on top.
struct LaterRow {
  template <typename Row>
  bool operator()(const Row& a, const Row& b) const {
    return a.start != b.start ? a.start > b.start : a.seq > b.seq;
  }
};
}  // namespace

void FileAnalysis::CsvRow(uint64_t start, size_t len) {
  const PendingRow row{start, csv_seq_++, csv_row_at_, len};
  csv_arena_size_ = csv_row_at_ + len;  // (the rest of the room given back)
  if (csv_fifo_.empty() || csv_fifo_.back().start <= start) {
    csv_fifo_.push_back(row);
  } else {
    csv_heap_.push_back(row);
    std::push_heap(csv_heap_.begin(), csv_heap_.end(), LaterRow());
  }
  csv_max_start_ = std::max(csv_max_start_, start);
  while (const PendingRow* oldest = CsvOldest()) {
    if (oldest->start + kCsvReorderNs > csv_max_start_) break;
    CsvWriteOldest();
  }
}

const FileAnalysis::PendingRow* FileAnalysis::CsvOldest() const {
  if (csv_heap_.empty()) return csv_fifo_.empty() ? nullptr : &csv_fifo_.front();
  if (csv_fifo_.empty() || LaterRow()(csv_fifo_.front(), csv_heap_.front())) {
    return &csv_heap_.front();
  }
  return &csv_fifo_.front();
}

void FileAnalysis::CsvWriteOldest() {
  PendingRow r;
  if (csv_fifo_.empty() || CsvOldest() != &csv_fifo_.front()) {  // the heap's
    std::pop_heap(csv_heap_.begin(), csv_heap_.end(), LaterRow());
    r = csv_heap_.back();
    csv_heap_.pop_back();
  } else {
    r = csv_fifo_.front();
    csv_fifo_.pop_front();
  }
  char* p = csv_.Reserve(48 + r.len);
  p = PutI64(p, rank_);
  *p++ = ',';
  p = PutU64(p, op_index_++);
  *p++ = ',';
  std::memcpy(p, csv_arena_.get() + r.off, r.len);
  csv_.Commit(p + r.len);
  csv_dead_ += r.len;
  if (csv_fifo_.empty() && csv_heap_.empty()) {
    csv_arena_size_ = csv_dead_ = 0;
  } else if (csv_dead_ > (1u << 20) && csv_dead_ * 2 > csv_arena_size_) {
    CsvCompact();
  }
}

// Written rows' bytes are reclaimed when they are most of the arena: the rows still held move
// to the front (each byte moves a bounded number of times).
void FileAnalysis::CsvCompact() {
  std::unique_ptr<char[]> kept(new char[csv_arena_cap_]);
  size_t at = 0;
  auto keep = [&](PendingRow& h) {
    std::memcpy(kept.get() + at, csv_arena_.get() + h.off, h.len);
    h.off = at;
    at += h.len;
  };
  for (PendingRow& h : csv_fifo_) keep(h);
  for (PendingRow& h : csv_heap_) keep(h);
  csv_arena_ = std::move(kept);
  csv_arena_size_ = at;
  csv_dead_ = 0;
}

void FileAnalysis::Emit(const PendingOp& op, const PendingLaunch* l) {
  const uint64_t dur = op.end > op.start ? op.end - op.start : 0;
  // An op a graph launch ran: the call that made its node (captured, or added by hand) says
  // where in the code it comes from, as a launch does for its kernel.
  const NodeContext* node = nullptr;
  if (op.graph_node != 0 && l != nullptr && l->graph && !graph_nodes_.empty()) {
    auto it = graph_nodes_.find(op.graph_node);
    if (it != graph_nodes_.end()) node = &it->second;
  }
  int bucket;
  if (op.kind == DOP_MEMCPY || op.kind == DOP_MEMSET) {
    bucket = ctx_->Bucket(MemcpyBucket(op.kind == DOP_MEMSET, op.copy_kind));
  } else {
    // The kernel's name decides: the launch's, else (no name, or one no rule knows: a driver
    // launch recorded without its kernel) the device op's. A GEMM or an unknown kernel goes to
    // the innermost NVTX projection range.
    bool yields = false;
    bucket = l != nullptr && l->name != 0 && !l->graph ? KernelBucket(l->name, &yields) : -1;
    if (bucket < 0 && op.name != 0) bucket = KernelBucket(op.name, &yields);
    if (bucket < 0 || bucket == ctx_->gemm || yields) {
      const int nvtx = node != nullptr && node->model >= 0  ? node->model
                       : l != nullptr && l->nvtx_model >= 0 ? l->nvtx_model
                                                            : -1;
      bucket = nvtx >= 0 ? nvtx : yields ? bucket : ctx_->others;
    }
  }
  // An unnamed op is named by its launch; a copy or set a graph ran, by its bucket (the graph
  // launch's name is the whole graph's, as under CUDA-event timing).
  const bool by_launch = l != nullptr && (!l->graph || op.kind == DOP_OTHER);
  uint32_t name_id = op.name != 0 ? op.name : by_launch ? l->name : 0;
  const std::string& bname = ctx_->buckets[bucket];

  // Steps and GPU busy time (union of op intervals). With steps from several threads, an op
  // belongs to a step of the thread that launched it.
  int s = steps_by_thread_.empty() || l == nullptr ? StepOfNear(op.start, &step_hint_)
                                                   : StepOfThread(op.start, l->thread);
  // An op that starts in no step window belongs to the step that launched it (async
  // scheduling: the step's range ended before the GPU reached its work).
  if (s < 0 && l != nullptr) {
    s = csv_.is_open() || !steps_by_thread_.empty() ? l->step : StepOf(l->start);
  }
  // The kernel table, as every aggregate, covers the measured steps when the file has some: an
  // op of a warm-up step, or of no step before the first measured one or after the last
  // (start-up, weight loading, teardown), is counted apart.
  const bool outside =
      measured_t0_ <= measured_t1_ && (s >= 0 ? steps_[s].excluded || steps_[s].warmup
                                              : op.start < measured_t0_ || op.start > measured_t1_);
  KernelAgg& k = Kernel((uint64_t(name_id) << 17) | (uint64_t(outside) << 16) | uint64_t(bucket));
  k.d.Add(double(dur));
  if (outside) {
    ++outside_ops_;
    outside_ns_ += dur;
  } else {
    device_total_ns_ += dur;
  }
  if (s >= 0) {
    StepRec& st = steps_[s];
    // Per run slot, warm-up steps of warm-up runs included (the run's own table); the global
    // table sums the slots of non-warm-up runs only.
    if (!st.warmup) {
      run_buckets_[st.run].model_ns[bucket] += dur;
      AddBucketNs(&st.model_ns, uint32_t(bucket), dur);
    }
  }
  busy_union_.Add(op.start, op.end, 0,
                  [this](uint64_t a, uint64_t b, char) { OnBusy(a, b); });
  if (!steps_by_thread_.empty() && l != nullptr) {
    if (ThreadBusy* tb = ThreadBusyOf(l->thread)) {
      const uint32_t thread = l->thread;
      tb->ops.Add(op.start, op.end, 0, [this, thread, tb](uint64_t a, uint64_t b, char) {
        OnThreadBusy(thread, tb, a, b);
      });
    }
  }
  const uint32_t device = op.device;
  if (last_busy_ == nullptr || last_busy_device_ != device) {
    last_busy_ = &device_busy_[device];
    last_busy_device_ = device;
  }
  DeviceBusy& db = *last_busy_;
  db.ops.Add(op.start, op.end, GapTag{name_id, int32_t(bucket), l != nullptr ? l->stack : 0},
             [this, device, &db](uint64_t a, uint64_t b, const GapTag& t) {
               OnDeviceBusy(device, &db, a, b, t);
             });
  int64_t l2s = 0;
  // From the launch call's return: only launches whose end was read.
  const bool l2s_known = l != nullptr && !host_mode_ && l->timed;
  if (l2s_known) {
    l2s = SignedDiff(op.start, l->end);
    // A graph launch counts once, from its earliest node (Finish2): its later nodes start as
    // late as the graph's earlier work takes, which is no launch latency.
    if (l2s >= 0 && !l->graph && !l->multi) launch_to_start_.Add(double(l2s));
  }
  if (csv_.is_open()) {
    const std::string& csv_name = CsvName(name_id, bucket);
    const std::string* csv_path = nullptr;
    if (l != nullptr && l->graph) {  // a graph's op, even one whose node has no path
      csv_path = &csv_paths_[GraphPath(l->path, node != nullptr ? node->path : -1)];
    } else if (l != nullptr && l->path >= 0) {
      csv_path = &csv_paths_[l->path];
    }
    // 16 fields of at most 20 digits (or 3 x 11 for grid/block) besides the strings; the row
    // from its name on (rank and index are written with it, in start order: CsvRow).
    const size_t room =
        512 + csv_name.size() + bname.size() + (csv_path != nullptr ? csv_path->size() : 0);
    char* const row_begin = CsvRowSpace(room);
    char* p = row_begin;
    p = PutStr(p, csv_name);
    *p++ = ',';
    p = PutStr(p, bname);
    p = PutStr(p, op.kind == DOP_KERNEL   ? ",kernel,"
                  : op.kind == DOP_MEMCPY ? ",memcpy,"
                  : op.kind == DOP_MEMSET ? ",memset,"
                                          : ",other,");
    const uint32_t* grid = op.grid;
    const uint32_t* block = op.block;
    if (grid[0] == 0 && l != nullptr) {
      grid = l->grid;
      block = l->block;
    }
    if (grid[0] != 0) {
      for (const uint32_t* dim : {grid, block}) {
        p = PutU64(p, dim[0]);
        *p++ = 'x';
        p = PutU64(p, std::max(dim[1], 1u));
        *p++ = 'x';
        p = PutU64(p, std::max(dim[2], 1u));
        *p++ = ',';
      }
    } else {
      p = PutStr(p, ",,");
    }
    p = PutU64(p, op.stream);
    *p++ = ',';
    if (l != nullptr) {
      if (l->call_start) p = PutU64(p, l->start - t0_);
      *p++ = ',';
      if (l->timed) p = PutU64(p, l->end - l->start);  // else empty: not timed
      *p++ = ',';
    } else if (host_mode_) {
      p = PutU64(p, op.start - t0_);
      *p++ = ',';
      p = PutU64(p, dur);
      *p++ = ',';
    } else {
      p = PutStr(p, ",,");
    }
    if (host_mode_) {
      p = PutStr(p, ",,,,");
    } else {
      p = PutU64(p, op.start - t0_);
      *p++ = ',';
      p = PutU64(p, op.end - t0_);
      *p++ = ',';
      p = PutU64(p, dur);
      *p++ = ',';
      if (l2s_known) p = PutI64(p, l2s);
      *p++ = ',';
    }
    if (l != nullptr && l->step >= 0) p = PutU64(p, uint64_t(l->step));
    *p++ = ',';
    if (csv_path != nullptr) p = PutStr(p, *csv_path);
    *p++ = ',';
    p = PutU64(p, op.device);
    *p++ = '\n';
    CsvRow(op.start, size_t(p - row_begin));
  }
}

// A stretch [start, end) during which some device of this rank was busy: the rank's busy
// time, and each step's, clipped to the step's window.
void FileAnalysis::OnBusy(uint64_t start, uint64_t end) {
  busy_ns_ += end - start;
  if (steps_.empty() || !steps_by_thread_.empty()) return;  // per thread: OnThreadBusy
  ClipToSteps(steps_.size(), [](size_t i) { return i; }, &step_end_prefix_, start, end);
}

// Adds the busy stretch [start, end) to the steps steps_[index(i)], i < n (in start order),
// clipped to each; `prefix[i]` is the latest end among the first i + 1 (made here once).
template <typename Index>
void FileAnalysis::ClipToSteps(size_t n, Index index, std::vector<uint64_t>* prefix,
                               uint64_t start, uint64_t end) {
  if (prefix->size() != n) {
    prefix->resize(n);
    uint64_t m = 0;
    for (size_t i = 0; i < n; ++i) (*prefix)[i] = m = std::max(m, steps_[index(i)].end);
  }
  // The steps starting before `end`, back to the last that may reach `start` (no step before
  // it ends after `start`).
  size_t lo = 0, hi = n;
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    if (steps_[index(mid)].start < end) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  for (size_t i = lo; i-- > 0 && (*prefix)[i] > start;) {
    StepRec& st = steps_[index(i)];
    const uint64_t a = std::max(start, st.start), b = std::min(end, st.end);
    if (b > a) st.busy_ns += b - a;
  }
}

FileAnalysis::ThreadBusy* FileAnalysis::ThreadBusyOf(uint32_t thread) {
  if (thread == busy_thread_ && busy_thread_state_ != nullptr) return busy_thread_state_;
  auto it = thread_busy_.find(thread);
  if (it == thread_busy_.end()) {
    if (steps_by_thread_.count(thread) == 0) return nullptr;
    it = thread_busy_.emplace(thread, ThreadBusy{}).first;
  }
  busy_thread_ = thread;
  busy_thread_state_ = &it->second;
  return busy_thread_state_;
}

// A stretch during which ops launched by `thread` ran: its steps' busy time, clipped to each.
void FileAnalysis::OnThreadBusy(uint32_t thread, ThreadBusy* tb, uint64_t start, uint64_t end) {
  auto own = steps_by_thread_.find(thread);
  if (own == steps_by_thread_.end()) return;
  const std::vector<int>& v = own->second;
  ClipToSteps(v.size(), [&v](size_t i) { return size_t(v[i]); }, &tb->end_prefix, start, end);
}

// A busy stretch of `device`: the idle gap before it (after the previous one) is a gap.
void FileAnalysis::OnDeviceBusy(uint32_t device, DeviceBusy* d, uint64_t start, uint64_t end,
                                const GapTag& tag) {
  // CUDA events resolve about 0.5 us (and an op's start and the previous end come from
  // separately rounded readings): under CUDA-event timing a shorter gap is not measured.
  const uint64_t min_gap = timing_ == GPU_TIMING_EVENTS ? kMinEventGapNs : 0;
  if (d->last_end != 0 && start > d->last_end + min_gap) {
    const uint64_t gap = start - d->last_end;
    gaps_.Add(double(gap));
    if (top_gaps_.size() < kTopGaps || gap > top_gaps_.back().gap) {
      const std::string& name = tag.name_id != 0 ? Str(tag.name_id) : ctx_->buckets[tag.bucket];
      Gap g{start, gap, device, name, {}};
      if (tag.stack != 0) {
        auto it = stacks_.find(tag.stack);
        if (it != stacks_.end()) g.stack = it->second;
      }
      top_gaps_.push_back(std::move(g));
      std::sort(top_gaps_.begin(), top_gaps_.end(), [](const Gap& a, const Gap& b) {
        return a.gap != b.gap ? a.gap > b.gap : a.at < b.at;
      });
      if (top_gaps_.size() > kTopGaps) top_gaps_.pop_back();
    }
  }
  d->last_end = std::max(d->last_end, end);
}

void FileAnalysis::FlushBusy() {
  busy_union_.Flush([this](uint64_t a, uint64_t b, char) { OnBusy(a, b); });
  for (auto& kv : thread_busy_) {
    const uint32_t thread = kv.first;
    ThreadBusy* tb = &kv.second;
    tb->ops.Flush(
        [this, thread, tb](uint64_t a, uint64_t b, char) { OnThreadBusy(thread, tb, a, b); });
  }
  for (auto& kv : device_busy_) {
    const uint32_t device = kv.first;
    DeviceBusy* d = &kv.second;
    d->ops.Flush([this, device, d](uint64_t a, uint64_t b, const GapTag& t) {
      OnDeviceBusy(device, d, a, b, t);
    });
  }
}

uint32_t FileAnalysis::UidIndex(const std::string& uid) {
  auto u = comm_uid_index_.find(uid);
  if (u == comm_uid_index_.end()) {
    u = comm_uid_index_.emplace(uid, uint32_t(comm_uids_.size())).first;
    comm_uids_.push_back(uid);
  }
  return u->second;
}

// Graph nodes (EV_GRAPH_NODE): each node, through the copies, to the context its original was
// made in. A copy of a node the file does not have (or a chain longer than any real one) has
// none: its ops keep their launch's.
void FileAnalysis::ResolveGraphNodes() {
  if (node_made_.empty()) {
    absl::flat_hash_map<uint64_t, uint64_t>().swap(node_source_);
    return;
  }
  absl::flat_hash_map<uint32_t, NodeContext> by_context;
  auto context = [&](uint32_t c) {
    auto it = by_context.find(c);
    if (it == by_context.end()) it = by_context.emplace(c, ContextOf(c)).first;
    return it->second;
  };
  for (const auto& m : node_made_) graph_nodes_[m.first] = context(m.second);
  for (const auto& c : node_source_) {
    uint64_t at = c.second;
    for (int hops = 0; hops < 64; ++hops) {
      auto made = node_made_.find(at);
      if (made != node_made_.end()) {
        graph_nodes_[c.first] = context(made->second);
        break;
      }
      auto next = node_source_.find(at);
      if (next == node_source_.end()) break;
      at = next->second;
    }
  }
  absl::flat_hash_map<uint64_t, uint32_t>().swap(node_made_);
  absl::flat_hash_map<uint64_t, uint64_t>().swap(node_source_);
}

// A node's NVTX context (Event.name of EV_GRAPH_NODE: range messages, outermost first, joined
// by '\x1f'): the model bucket of its innermost model-mapped range, and its ops.csv path, step
// and run ranges left out (the ops are in the steps that launch them, not the one that
// captured them).
FileAnalysis::NodeContext FileAnalysis::ContextOf(uint32_t context) {
  NodeContext c;
  if (context == 0 || context >= strings_.size()) return c;
  std::vector<absl::string_view> segments = absl::StrSplit(Str(context), '\x1f');
  std::string path;
  for (absl::string_view seg : segments) {
    const std::string msg(seg);
    if (SearchPrefix(msg, *step_re_) || SearchPrefix(msg, *run_re_)) continue;
    const std::string b = ctx_->rules.Match(RuleScope::kModel, RuleTarget::kNvtx, msg);
    if (!b.empty() && ctx_->Bucket(b) >= 0) c.model = int16_t(ctx_->Bucket(b));  // innermost
    absl::StrAppend(&path, path.empty() ? "" : "/", msg.empty() ? "?" : msg);
  }
  if (csv_.is_open() && !path.empty()) {
    auto it = node_path_index_.find(path);
    if (it == node_path_index_.end()) {
      it = node_path_index_.emplace(path, int32_t(paths_.size())).first;
      csv_paths_.push_back(CsvField(path));
      paths_.push_back(std::move(path));
    }
    c.path = it->second;
  }
  return c;
}

int32_t FileAnalysis::GraphPath(int32_t launch_path, int32_t node_path) {
  auto it = graph_paths_.find({launch_path, node_path});
  if (it != graph_paths_.end()) return it->second;
  std::string p = launch_path >= 0 ? absl::StrCat(paths_[launch_path], "/(graph)") : "(graph)";
  if (node_path >= 0) absl::StrAppend(&p, "/", paths_[node_path]);
  const int32_t id = int32_t(paths_.size());
  csv_paths_.push_back(CsvField(p));
  paths_.push_back(std::move(p));
  graph_paths_.emplace(std::make_pair(launch_path, node_path), id);
  return id;
}

// Stream capture and instantiation (event.h / profagent.proto, Event.source_graph): which
// calls were captured into which graph, and which exec runs it.
void FileAnalysis::GraphApi(const EventView& e) {
  const uint32_t api = ApiNameId(e);
  if (api == 0 || api >= strings_.size()) return;
  if (api >= graph_api_.size()) graph_api_.resize(api + 1, -1);
  int8_t& kind = graph_api_[api];
  if (kind < 0) {
    const std::string& n = Str(api);
    kind = absl::StartsWith(n, "cudaStreamBeginCapture") ? 1
           : absl::StartsWith(n, "cudaStreamEndCapture") ? 2
           : absl::StartsWith(n, "cudaGraphInstantiate") ? 3
           : absl::StartsWith(n, "cudaGraphExecUpdate")  ? 3  // the exec runs the new graph now
           : absl::StartsWith(n, "cudaGraphClone")       ? 4
                                                         : 0;
  }
  switch (kind) {
    case 1:
      if (e.ret == 0 && e.stream != 0) {
        capturing_[e.stream] = std::make_shared<std::vector<CapturedCall>>();
        last_capture_ = e.stream;
      }
      break;
    case 2: {
      auto open = capturing_.find(e.stream);
      if (open == capturing_.end()) break;
      if (e.ret == 0 && e.graph != 0 && !open->second->empty()) {
        graph_calls_[e.graph] = open->second;
      }
      capturing_.erase(open);
      if (last_capture_ == e.stream) {
        last_capture_ = capturing_.empty() ? 0 : capturing_.begin()->first;
      }
      break;
    }
    case 3: {
      if (e.ret != 0 || e.graph == 0) break;
      auto g = graph_calls_.find(e.source_graph);
      if (g != graph_calls_.end()) {
        exec_calls_[e.graph] = g->second;
      } else {
        exec_calls_.erase(e.graph);  // a reused exec handle: another graph now
      }
      break;
    }
    case 4: {  // a clone has the calls captured into its original
      if (e.ret != 0 || e.graph == 0) break;
      auto g = graph_calls_.find(e.source_graph);
      if (g != graph_calls_.end()) {
        CallList calls = g->second;
        graph_calls_[e.graph] = calls;
      } else {
        graph_calls_.erase(e.graph);
      }
      break;
    }
    default:
      break;
  }
}

// A graph-run NCCL kernel matched to the captured calls [first, last) that made it: counted in
// their rows of the collectives table, with their sizes, instead of the "in graph" row (OnOp),
// its device time shared as an eager group's fused kernel's is (CollKernel).
void FileAnalysis::MoveToCallRows(std::map<std::string, CollAgg>::iterator in_graph,
                                  const std::vector<CapturedCall>& calls, size_t first,
                                  size_t last, uint64_t dur) {
  CollAgg& g = in_graph->second;
  --g.count;
  g.time_ns -= dur;
  --g.dev_count;
  g.dev_ns -= dur;
  g.dev_span_ns -= dur;
  g.dev_host_ns -= dur;
  if (g.count == 0) colls_.erase(in_graph);  // (no other kernel refers to it then)
  const uint64_t sharers = last - first, share = dur / sharers;
  coll_calls_ += sharers - 1;
  for (size_t i = first; i < last; ++i) {
    const CapturedCall& c = calls[i];
    CollAgg& a = colls_[c.row];
    ++a.count;
    a.bytes += c.bytes;
    a.bus_bytes += c.bus_bytes;
    a.time_ns += share;
    ++a.dev_count;
    a.dev_ns += share;
    a.dev_span_ns += c.p2p ? dur : share;
    a.dev_host_ns += share;
  }
}

// Arrivals of the captured NCCL calls at each graph launch (see CapturedCall).
void FileAnalysis::InGraphArrivals() {
  for (auto& kv : graph_kernels_) {
    auto run = graph_runs_.find(kv.first);
    std::vector<GraphKernel>& kernels = kv.second;
    if (run == graph_runs_.end()) {
      in_graph_unmatched_ += kernels.size();
      continue;
    }
    // Kernel-making slots: consecutive calls of one NCCL group share a kernel.
    const std::vector<CapturedCall>& calls = *run->second.calls;
    std::vector<std::pair<size_t, size_t>> slots;  // [first, last) call of each kernel
    for (size_t i = 0; i < calls.size(); ++i) {
      if (i > 0 && calls[i].group != 0 && calls[i].group == calls[i - 1].group) {
        slots.back().second = i + 1;
      } else {
        slots.emplace_back(i, i + 1);
      }
    }
    if (slots.size() != kernels.size()) {
      in_graph_unmatched_ += kernels.size();
      continue;
    }
    std::sort(kernels.begin(), kernels.end(), [](const GraphKernel& a, const GraphKernel& b) {
      return a.start != b.start ? a.start < b.start : a.end < b.end;
    });
    for (size_t j = 0; j < slots.size(); ++j) {
      const uint64_t start = kernels[j].start, end = kernels[j].end;
      const uint64_t dur = end > start ? end - start : 0;
      const uint64_t sharers = slots[j].second - slots[j].first;
      const double weight = 1.0 / double(sharers);
      MoveToCallRows(kernels[j].row, calls, slots[j].first, slots[j].second, dur);
      for (size_t i = slots[j].first; i < slots[j].second; ++i) {
        const CapturedCall& c = calls[i];
        // A rank's transfer to itself waits for no one.
        if (c.pair != 0 && (c.pair >> 32) == (c.pair & 0xffffffffu)) continue;
        arrivals_.push_back(Arrival{c.uid, c.pair, run->second.ordinal, int64_t(start),
                                    int(LIB_NCCL), c.device, weight, int64_t(dur)});
      }
      ++in_graph_matched_;
    }
  }
  absl::flat_hash_map<uint64_t, std::vector<GraphKernel>>().swap(graph_kernels_);
  absl::flat_hash_map<uint64_t, GraphRun>().swap(graph_runs_);
}

void FileAnalysis::Finish2() {
  // Device ops whose launch never appeared, in start order.
  std::vector<std::pair<uint64_t, PendingOp>> rest;
  pending_op_.ForEach([&](uint64_t corr, const PendingOp& op) { rest.emplace_back(corr, op); });
  for (const auto& kv : pending_more_) {
    for (const PendingOp& op : kv.second) rest.emplace_back(kv.first, op);
  }
  absl::flat_hash_map<uint64_t, std::vector<PendingOp>>().swap(pending_more_);
  // By start, then correlation id: a deterministic order for ties.
  std::sort(rest.begin(), rest.end(), [](const auto& a, const auto& b) {
    return a.second.start != b.second.start ? a.second.start < b.second.start
                                            : a.first < b.first;
  });
  for (const auto& p : rest) {
    Emit(p.second, nullptr);
    // An NCCL kernel timed by CUDA events has its call, not a launch event.
    if (!p.second.coll) ++unmatched_ops_;
  }
  pending_launch_.ForEach([&](uint64_t, const PendingLaunch& l) {
    const bool kept = l.graph || (l.multi && l.first_start != UINT64_MAX);
    if (!kept && !l.coll && !l.empty) ++unmatched_launches_;  // (a kernel-less call: below)
    if ((l.graph || l.multi) && l.timed && l.first_start != UINT64_MAX && l.first_start >= l.end) {
      launch_to_start_.Add(double(l.first_start - l.end));
    }
  });
  // NCCL calls whose kernel never ran (a hung collective its communicator's abort cancelled) or
  // was never recorded: with device timing, their host enqueue is no transfer time and no
  // arrival. Untimed, like an MPI request that never completed.
  // A file recorded under device timing with no device record at all (its process killed
  // before CUPTI delivered them) is read in host mode, but its NCCL calls are still untimed:
  // their enqueue is no transfer time.
  const bool device_timing = timing_ == GPU_TIMING_CUPTI || timing_ == GPU_TIMING_EVENTS;
  if ((!host_mode_ || device_timing) && !coll_by_corr_.empty()) {
    std::vector<bool> drop(arrivals_.size(), false);
    for (const auto& kv : coll_by_corr_) {
      for (const CollWait& w : kv.second) {
        ++w.agg->untimed;
        w.agg->time_ns -= w.host_ns;
        coll_ns_ -= w.host_ns;
        if (w.arrival != SIZE_MAX) drop[w.arrival] = true;
      }
    }
    size_t kept = 0;
    for (size_t i = 0; i < arrivals_.size(); ++i) {
      if (!drop[i]) arrivals_[kept++] = arrivals_[i];
    }
    arrivals_.resize(kept);
  }
  absl::flat_hash_map<uint64_t, std::vector<CollWait>>().swap(coll_by_corr_);
  InGraphArrivals();
  pending_op_.Clear();
  pending_launch_.Clear();
  absl::flat_hash_map<uint64_t, uint32_t>().swap(group_kernel_calls_);
  mem_timeline_.Finish();
  FlushBusy();
  for (size_t i = 0; i < api_by_name_.size(); ++i) {
    if (api_by_name_[i].count > 0) api_[i] = api_by_name_[i];
  }
  for (size_t k = 0; k < api_by_kind_.size(); ++k) {
    if (api_by_kind_[k].count > 0) api_[(1ull << 32) | k] = api_by_kind_[k];
  }
  std::vector<ApiAcc>().swap(api_by_name_);
  if (host_mode_ && launches_ > 0) {  // a CPU-only (e.g. MPI) process launched nothing
    warnings_.push_back(absl::StrCat(
        path_, ": no device activity records (GPU timing mode ", TimingName(timing_),
        "): kernel times are host launch API times",
        launches_timed_ == 0          ? absl::StrCat(" (none of the ", launches_,
                                                     " launches was timed (PROFAGENT_LAUNCH_API_SAMPLE): "
                                                              "their times read 0)")
        : launches_timed_ < launches_ ? absl::StrCat(" (", launches_timed_, " of ", launches_,
                                                     " launches timed; the others count as "
                                                     "their kernel's timed mean)")
                                      : std::string()));
  }
  if (host_mode_ && launches_ == 0 && !steps_.empty() &&
      (timing_ == GPU_TIMING_HOST || timing_ == GPU_TIMING_EVENTS)) {
    // Steps but no CUDA work at all, where only the interposers see calls.
    warnings_.push_back(absl::StrCat(
        path_, ": ", steps_.size(),
        " steps but no kernel launch or device op recorded (GPU timing ", TimingName(timing_),
        timing_reason_.empty() ? "" : ": ", timing_reason_,
        "); if the program did launch work, its calls went through a library handle of their "
        "own (ctypes, dlsym) or a runtime the agent was not preloaded into, which only CUPTI "
        "timing sees"));
  }
  if (unmatched_ops_ > 0) {
    warnings_.push_back(absl::StrCat(path_, ": ", unmatched_ops_,
                                     " device ops without a matching launch (correlation id)"));
  }
  if (failed_colls_ > 0) {
    warnings_.push_back(absl::StrCat(path_, ": ", failed_colls_,
                                     " MPI or NCCL calls failed (their call returned an error; "
                                     "not counted as collectives or transfers)"));
  }
  if (host_timed_nccl_ > 0) {
    warnings_.push_back(absl::StrCat(
        path_, ": ", host_timed_nccl_,
        " NCCL calls timed on the host only (no device activity records): when the rank "
        "reached each collective is unknown, so they are left out of the waits and stragglers"));
  }
  if (failed_comms_ > 0) {
    warnings_.push_back(absl::StrCat(path_, ": ", failed_comms_,
                                     " communicator creations, splits or shrinks failed (their "
                                     "call returned an error; no communicator was made)"));
  }
  if (failed_launches_ > 0) {
    warnings_.push_back(absl::StrCat(path_, ": ", failed_launches_,
                                     " launches, copies or sets failed (their call returned an "
                                     "error; nothing ran)"));
  }
  if (unmatched_launches_ > 0 && !host_mode_) {
    warnings_.push_back(absl::StrCat(path_, ": ", unmatched_launches_,
                                     " launches without device activity"));
  }
}

// ---------------------------------------------------------------------------------------------
// Merging the files into summary.json.

struct StepSet {
  Distribution lat;       // ns
  Distribution busy;      // ns
  uint64_t steps = 0;
  int64_t tokens = 0;
  uint64_t total_ns = 0;  // sum of the step wall times (engine `others` = this - mapped time)
  std::vector<double> samples_ms;
  std::vector<int64_t> samples_tokens;  // per step, in step order (0 when it has none)
  // Per step, in step order: its KV length when a KV bin takes it (a decode step, or one with
  // no phase, that has a KV length), else -1.
  std::vector<int64_t> samples_kv;
  bool any_kv = false;
  std::vector<std::pair<uint64_t, uint64_t>> windows;  // [start, end) of each step
};

// Whether the KV-length bins take a step (decode_length_buckets).
// Decode steps (phase `decode` in any case: SGLang writes DECODE) and steps without a phase.
bool DecodePhase(const std::string& phase) {
  return phase.empty() || absl::EqualsIgnoreCase(phase, "decode");
}
bool KvBinned(const StepRec& s) { return s.kv >= 0 && DecodePhase(s.phase); }

// Wall time the steps cover: the union of their windows. The sum of step wall times for steps
// one after another; less when they overlap (threads serving concurrently) or nest (a draft
// step inside its verify step), where the sum would count the same time twice.
uint64_t WallNs(const StepSet& s) {
  std::vector<std::pair<uint64_t, uint64_t>> w = s.windows;
  std::sort(w.begin(), w.end());
  uint64_t total = 0, cur_start = 0, cur_end = 0;
  bool open = false;
  for (const auto& x : w) {
    if (open && x.first <= cur_end) {
      cur_end = std::max(cur_end, x.second);
      continue;
    }
    if (open) total += cur_end - cur_start;
    cur_start = x.first;
    cur_end = x.second;
    open = true;
  }
  if (open) total += cur_end - cur_start;
  return total;
}

void AddStep(StepSet* s, const StepRec& st) {
  uint64_t d = st.end - st.start;
  s->lat.Add(double(d));
  s->busy.Add(double(st.busy_ns));
  ++s->steps;
  if (st.tokens > 0) s->tokens = SaturatedAdd(s->tokens, st.tokens);
  s->total_ns += d;
  s->samples_ms.push_back(Round6(NsToMs(double(d))));
  s->samples_tokens.push_back(st.tokens > 0 ? st.tokens : 0);
  s->samples_kv.push_back(KvBinned(st) ? st.kv : -1);
  s->any_kv |= KvBinned(st);
  s->windows.emplace_back(st.start, st.end);
}

Json StatsJson(const StepSet& s, bool with_samples) {
  Json j;
  j["steps"] = s.steps;
  j["tokens"] = s.tokens;
  const uint64_t wall_ns = WallNs(s);
  j["total_time_ms"] = Num(NsToMs(double(wall_ns)));
  j["tokens_per_s"] = wall_ns > 0 && s.tokens > 0
                          ? Num(double(s.tokens) / (double(wall_ns) / 1e9))
                          : Json(nullptr);
  j["step_latency_ms"] = LatJson(s.lat, 1e-6);
  if (with_samples) {
    j["step_latency_ms_samples"] = s.samples_ms;
    j["step_tokens_samples"] = s.samples_tokens;
    // (Only when a step has one: diff tests each KV bin's metrics over its steps.)
    if (s.any_kv) {
      Json kv = Json::array();
      for (int64_t x : s.samples_kv) kv.push_back(x >= 0 ? Json(x) : Json(nullptr));
      j["step_kv_samples"] = std::move(kv);
    }
  }
  j["gpu_busy_ms_per_step"] = s.busy.count() > 0 ? Num(NsToMs(s.busy.Mean())) : Json(nullptr);
  return j;
}

Json BucketsJson(const Context& ctx, const std::vector<uint64_t>& ns, uint64_t steps,
                 bool engine) {
  std::map<std::string, uint64_t> folded;
  for (size_t i = 0; i < ns.size(); ++i) {
    if (ns[i] == 0) continue;
    const std::string& b = ctx.buckets[i];
    bool canon = engine ? IsCanonicalEngineBucket(b) : IsCanonicalModelBucket(b);
    folded[canon ? b : std::string(kOthersBucket)] += ns[i];
  }
  std::vector<std::pair<std::string, uint64_t>> v(folded.begin(), folded.end());
  std::stable_sort(v.begin(), v.end(), [engine](const auto& a, const auto& b) {
    int ra = CanonicalRank(a.first, engine), rb = CanonicalRank(b.first, engine);
    return ra != rb ? ra < rb : a.first < b.first;
  });
  uint64_t total = 0;
  for (const auto& p : v) total += p.second;
  Json j = Json::object();
  for (const auto& p : v) {
    Json e;
    e["ms"] = steps > 0 ? Num(NsToMs(double(p.second)) / double(steps)) : Json(nullptr);
    e["share"] = total > 0 ? Num(double(p.second) / double(total)) : Json(nullptr);
    j[p.first] = e;
  }
  return j;
}

// Each measured step's device time per model bucket (ms, the steps of step_latency_ms_samples
// in order, buckets folded as in buckets_model_avg_ms), for diff's test of the bucket averages.
// Over 4096 steps, every k-th step only (evenly spread), so the summary stays small.
Json StepBucketSamples(const Context& ctx, const std::vector<const StepRec*>& steps) {
  constexpr size_t kMaxSamples = 4096;
  const size_t stride = (steps.size() + kMaxSamples - 1) / kMaxSamples;
  std::vector<const StepRec*> picked;
  for (size_t i = 0; i < steps.size(); i += std::max<size_t>(stride, 1)) picked.push_back(steps[i]);
  std::map<std::string, std::vector<double>> by_name;
  for (size_t i = 0; i < picked.size(); ++i) {
    for (const auto& [bucket, ns] : picked[i]->model_ns) {
      const std::string& b = ctx.buckets[bucket];
      std::vector<double>& v = by_name[IsCanonicalModelBucket(b) ? b : std::string(kOthersBucket)];
      v.resize(picked.size(), 0.0);
      v[i] += NsToMs(double(ns));
    }
  }
  Json j = Json::object();
  for (auto& [name, v] : by_name) {
    Json arr = Json::array();
    for (double x : v) arr.push_back(Num(x));
    j[name] = std::move(arr);
  }
  return j;
}

Json KvBinsJson(const ReportOptions& opt, const std::vector<const StepRec*>& steps) {
  const auto& edges = opt.kv_edges;
  std::vector<StepSet> bins(edges.size());
  for (const StepRec* s : steps) {
    if (!KvBinned(*s)) continue;
    auto it = std::upper_bound(edges.begin(), edges.end(), s->kv);
    if (it == edges.begin()) continue;
    AddStep(&bins[size_t(it - edges.begin()) - 1], *s);
  }
  Json arr = Json::array();
  for (size_t i = 0; i < edges.size(); ++i) {
    Json b;
    b["lo"] = edges[i];
    b["hi"] = i + 1 < edges.size() ? Json(edges[i + 1]) : Json(nullptr);
    b["steps"] = bins[i].steps;
    b["tokens"] = bins[i].tokens;
    b["latency_ms"] = LatJson(bins[i].lat, 1e-6);
    const uint64_t wall_ns = WallNs(bins[i]);
    b["tokens_per_s"] = wall_ns > 0 && bins[i].tokens > 0
                            ? Num(double(bins[i].tokens) / (double(wall_ns) / 1e9))
                            : Json(nullptr);
    arr.push_back(b);
  }
  return arr;
}

// Engine buckets of a set of steps: mapped exclusive times plus `others` = wall - mapped.
std::vector<uint64_t> EngineWithOthers(const Context& ctx, std::vector<uint64_t> ns,
                                       uint64_t wall_ns) {
  uint64_t mapped = 0;
  for (uint64_t x : ns) mapped += x;
  if (wall_ns > mapped) ns[ctx.others] += wall_ns - mapped;
  return ns;
}

Json MeanStd(const std::vector<double>& v) {
  Json j;
  if (v.empty()) {
    j["mean"] = nullptr;
    j["std"] = nullptr;
    return j;
  }
  double m = 0;
  for (double x : v) m += x;
  m /= double(v.size());
  double var = 0;
  for (double x : v) var += (x - m) * (x - m);
  j["mean"] = Num(m);
  j["std"] = Num(v.size() > 1 ? std::sqrt(var / double(v.size() - 1)) : 0.0);
  return j;
}

// Copies the rest of `in` to `out`: in the kernel when it can (copy_file_range), else through
// user space (another filesystem, an old kernel).
bool CopyRest(int in, int out) {
  for (;;) {
    const ssize_t n = copy_file_range(in, nullptr, out, nullptr, size_t(1) << 30, 0);
    if (n == 0) return true;
    if (n < 0 && errno != EINTR) break;
  }
  if (errno != EXDEV && errno != ENOSYS && errno != EINVAL && errno != EOPNOTSUPP) return false;
  std::vector<char> buf(1 << 20);
  for (;;) {
    const ssize_t n = read(in, buf.data(), buf.size());
    if (n == 0) return true;
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    for (ssize_t done = 0; done < n;) {
      const ssize_t w = write(out, buf.data() + done, size_t(n - done));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return false;
      done += w;
    }
  }
}

// Appends the ops.csv parts of sel[1..] to `first` (sel[0]'s), each without its header line.
absl::Status AppendParts(const std::string& first, const std::vector<FileAnalysis*>& sel,
                         const std::vector<std::string>& parts) {
  // Not O_APPEND, which copy_file_range refuses.
  const int out = open(first.c_str(), O_WRONLY | O_CLOEXEC);
  bool ok = out >= 0 && lseek(out, 0, SEEK_END) >= 0;
  for (size_t i = 1; i < sel.size() && ok; ++i) {
    const int in = open(parts[sel[i]->index_].c_str(), O_RDONLY | O_CLOEXEC);
    ok = in >= 0 && lseek(in, off_t(sizeof(kCsvHeader) - 1), SEEK_SET) >= 0 && CopyRest(in, out);
    if (in >= 0) close(in);
  }
  if (out >= 0) ok &= close(out) == 0;
  if (!ok) {
    return absl::InternalError(
        absl::StrCat(first, ": cannot merge the ops.csv parts: ", strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<int>> ParseRankList(const std::string& s) {
  // As the agent's PROFAGENT_RANKS: a range spans at most kMaxRankSpan ranks (a typo such as
  // 0-2000000000 must not allocate gigabytes).
  constexpr int64_t kMaxRankSpan = 100000;
  std::vector<int> out;
  if (s == "all") return out;  // (the default: every rank)
  for (absl::string_view part : absl::StrSplit(s, ',')) {
    std::vector<std::string> ab = absl::StrSplit(part, '-');
    int a, b;
    if (ab.size() == 1 && absl::SimpleAtoi(ab[0], &a) && a >= 0) {
      out.push_back(a);
    } else if (ab.size() == 2 && absl::SimpleAtoi(ab[0], &a) && absl::SimpleAtoi(ab[1], &b) &&
               a >= 0 && b >= a && int64_t{b} - a < kMaxRankSpan &&
               out.size() + size_t(b - a) < size_t(kMaxRankSpan)) {
      for (int64_t i = a; i <= b; ++i) out.push_back(int(i));
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "bad rank list `", s, "` (e.g. 0,2-3; at most ", kMaxRankSpan, " ranks)"));
    }
  }
  if (out.empty()) return absl::InvalidArgumentError("empty rank list");
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

absl::StatusOr<std::vector<int64_t>> ParseKvEdges(const std::string& s) {
  std::vector<int64_t> out;
  for (absl::string_view part : absl::StrSplit(s, ',')) {
    int64_t v;
    if (!absl::SimpleAtoi(part, &v) || v < 0 || (!out.empty() && v <= out.back())) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad KV bin edges `", s, "` (increasing non-negative integers)"));
    }
    out.push_back(v);
  }
  if (out.empty()) return absl::InvalidArgumentError("empty KV bin edges");
  return out;
}

absl::StatusOr<Json> BuildSummary(const std::vector<std::string>& files,
                                  const ReportOptions& options, const std::string& ops_csv_path) {
  if (files.empty()) return absl::InvalidArgumentError("no profile files");
  Context ctx;
  ctx.opt = options;
  ctx.rules = BucketRules::Defaults();
  if (!options.rules_file.empty()) {
    absl::Status s = ctx.rules.LoadFile(options.rules_file);
    if (!s.ok()) return s;
  }
  std::string why;
  if (!CompileBounded(options.step_pattern, std::regex::ECMAScript, &ctx.step_re, &why) ||
      !CompileBounded(options.run_pattern, std::regex::ECMAScript, &ctx.run_re, &why)) {
    return absl::InvalidArgumentError(absl::StrCat("bad step/run pattern: ", why));
  }
  ctx.buckets = ctx.rules.AllBuckets();
  for (size_t i = 0; i < ctx.buckets.size(); ++i) ctx.bucket_index[ctx.buckets[i]] = int(i);
  ctx.others = ctx.Bucket(kOthersBucket);
  ctx.gemm = ctx.Bucket(kGemmBucket);

  // Both passes, one thread per file.
  std::vector<std::unique_ptr<FileAnalysis>> fa;
  for (size_t i = 0; i < files.size(); ++i) {
    fa.push_back(std::make_unique<FileAnalysis>(&ctx, files[i], int(i)));
  }
  std::vector<absl::Status> status(files.size());
  std::vector<std::string> parts(files.size());
  if (!ops_csv_path.empty()) {
    for (size_t i = 0; i < files.size(); ++i) parts[i] = absl::StrCat(ops_csv_path, ".part", i);
  }
  std::set<int> wanted(options.ranks.begin(), options.ranks.end());
  std::atomic<size_t> next{0};
  auto worker = [&]() {
    for (;;) {
      size_t i = next.fetch_add(1);
      if (i >= fa.size()) return;
      status[i] = fa[i]->Pass1();
      if (!status[i].ok()) continue;
      if (fa[i]->rank_ < 0) {  // no rank in the header nor in a ProcessInfo: the file index
        fa[i]->rank_ = int(i);
        fa[i]->rank_guessed_ = true;
      }
      if (!wanted.empty() && wanted.count(fa[i]->rank_) == 0) continue;
      status[i] = fa[i]->Pass2(parts[i]);
    }
  };
  int nthreads = options.threads > 0 ? options.threads
                                     : std::max(1u, std::thread::hardware_concurrency());
  nthreads = std::min<int>(nthreads, int(files.size()));
  std::vector<std::thread> threads;
  for (int t = 0; t < nthreads; ++t) threads.emplace_back(worker);
  for (auto& t : threads) t.join();
  auto cleanup = [&]() {
    for (const auto& p : parts) {
      if (!p.empty()) remove(p.c_str());
    }
  };
  for (const auto& s : status) {
    if (!s.ok()) {
      cleanup();
      return s;
    }
  }
  // Selected files, ordered by rank then file name.
  std::vector<FileAnalysis*> sel;
  for (auto& f : fa) {
    if (wanted.empty() || wanted.count(f->rank_) > 0) sel.push_back(f.get());
  }
  for (int r : wanted) {
    bool found = false;
    for (auto* f : sel) found |= f->rank_ == r;
    if (!found) {
      cleanup();
      return absl::NotFoundError(absl::StrCat(
          "rank ", r, " was requested (--ranks) but no file holds it (", files.size(),
          " files, first ", files[0], ")"));
    }
  }
  // Two files of one process (the same pid, host, boot and start: a copy, a symlink, a file
  // saved twice) would count its work twice: the one with more records is kept.
  std::vector<std::string> copy_warnings;
  {
    std::map<std::tuple<uint32_t, std::string, uint64_t, uint64_t, uint64_t>, FileAnalysis*> seen;
    std::vector<FileAnalysis*> kept;
    for (FileAnalysis* f : sel) {
      const Header& h = f->header_;
      if (h.start_monotonic_ns() == 0) {  // no start recorded (not an agent's file): no identity
        kept.push_back(f);
        continue;
      }
      auto [it, fresh] =
          seen.emplace(std::make_tuple(h.pid(), h.hostname(), h.boot_id_hash(),
                                       h.start_monotonic_ns(), h.start_realtime_ns()),
                       f);
      if (fresh) {
        kept.push_back(f);
        continue;
      }
      FileAnalysis* other = it->second;
      FileAnalysis* drop = f->fsum_.frames > other->fsum_.frames ? other : f;
      FileAnalysis* keep = drop == f ? other : f;
      if (drop == other) {
        std::replace(kept.begin(), kept.end(), other, f);
        it->second = f;
      }
      copy_warnings.push_back(absl::StrCat(drop->path_, ": the same process as ", keep->path_,
                                           " (a copy of it?): left out"));
    }
    sel = std::move(kept);  // (ops.csv appends the parts of `sel` only)
  }
  std::stable_sort(sel.begin(), sel.end(), [](const FileAnalysis* a, const FileAnalysis* b) {
    return a->rank_ < b->rank_;
  });

  // ops.csv: the parts in rank order. The first part becomes ops.csv (renamed, not copied); the
  // others are appended after their header, in the kernel when it can (copy_file_range).
  if (!ops_csv_path.empty()) {
    const std::string& first = parts[sel[0]->index_];
    absl::Status s = AppendParts(first, sel, parts);
    if (s.ok() && rename(first.c_str(), ops_csv_path.c_str()) != 0) {
      s = absl::InternalError(absl::StrCat(ops_csv_path, ": cannot write: ", strerror(errno)));
    }
    cleanup();
    if (!s.ok()) return s;
  }

  // ----- meta -----
  Json meta;
  std::set<int> ranks;
  std::set<std::string> hosts, versions, timings;
  int world = 0;
  uint64_t drops_total = 0;
  std::vector<std::string> warnings = copy_warnings;
  Json jfiles = Json::array();
  for (auto* f : sel) {
    ranks.insert(f->rank_);
    hosts.insert(f->header_.hostname());
    versions.insert(f->header_.agent_version());
    timings.insert(TimingName(f->timing_));
    world = std::max(world, f->world_);
    uint64_t drops = 0;
    for (const auto& d : f->drops_) {
      if (d.first != UINT32_MAX) drops += d.second;
    }
    auto footer = f->drops_.find(UINT32_MAX);
    if (footer != f->drops_.end()) drops = std::max(drops, footer->second);
    drops_total += drops;
    Json jf;
    jf["path"] = f->path_;
    jf["rank"] = f->rank_;
    jf["host"] = f->header_.hostname();
    jf["pid"] = f->header_.pid();
    jf["records"] = f->fsum_.frames;
    jf["host_events"] = f->fsum_.host_events;
    jf["device_ops"] = f->fsum_.device_ops;
    jf["drops"] = drops;
    jf["truncated"] = f->fsum_.truncated;
    jf["clean_end"] = f->fsum_.has_footer;
    jf["clock_offset_ns"] = f->clock_offset_;
    jfiles.push_back(jf);
    if (drops > 0) {
      warnings.push_back(absl::StrCat(f->path_, ": the agent dropped ", drops,
                                      " records; totals are lower bounds"));
    }
    if (!f->fsum_.has_footer && !f->fsum_.truncated) {
      warnings.push_back(absl::StrCat(f->path_, ": no footer (the process ended abnormally)"));
    }
    for (const auto& w : f->warnings_) warnings.push_back(w);
    for (const auto& n : f->notes_) warnings.push_back(absl::StrCat(f->path_, ": agent ", n));
    if (f->bad_string_ids_ > 0) {
      warnings.push_back(absl::StrCat(f->path_, ": ", f->bad_string_ids_,
                                      " string definitions with an implausible id ignored"));
    }
    // A lone process without a rank (a single-GPU program) is rank 0: nothing to warn about.
    if (f->rank_guessed_ && sel.size() > 1) {
      warnings.push_back(absl::StrCat(f->path_, ": no rank recorded; using its position (",
                                      f->rank_, ") among the files"));
    }
  }
  if (world > 0 && options.ranks.empty()) {
    // The gaps between the ranks present, the first kListed of them by number (the world size
    // comes from the file: a corrupt one must not cost a loop or a list of 2^31 ranks).
    constexpr size_t kListed = 64;
    std::vector<int> missing;
    int64_t n_missing = world;
    int next = 0;  // every rank below is present or listed
    auto gap = [&](int end) {
      for (; next < end && missing.size() < kListed; ++next) missing.push_back(next);
    };
    // A process that drives several ranks (nccl-tests -t N: a thread per rank) is one file; the
    // ranks of its communicators over the whole world are present too.
    std::set<int> covered = ranks;
    for (auto* f : sel) f->WorldRanks(world, &covered);
    for (int r : covered) {
      if (r < 0 || r >= world) continue;
      --n_missing;
      gap(r);
      next = r + 1;
    }
    gap(world);
    if (n_missing > 0) {
      warnings.push_back(absl::StrCat(
          "ranks missing from the profile (world size ", world, "): ",
          absl::StrJoin(missing, ","),
          int64_t(missing.size()) < n_missing ? absl::StrCat(",... (", n_missing, " in all)")
                                              : std::string()));
    }
  }
  // Several files of one rank are one process and its children (fork; an exec keeps the pid)
  // on one host, or processes of one job (Header.job, inherited by a tree of processes: a
  // daemon's worker whose parent is gone). Others are several runs written to one directory:
  // their calls would be matched as one run's.
  {
    auto SameJob = [](const FileAnalysis* a, const FileAnalysis* b) {
      return !a->header_.job().empty() && a->header_.job() == b->header_.job();
    };
    std::map<int, std::vector<const FileAnalysis*>> by_rank;
    for (auto* f : sel) {
      if (f->rank_ >= 0 && !f->rank_guessed_) by_rank[f->rank_].push_back(f);
    }
    std::vector<int> dup_ranks;
    std::string example;
    for (const auto& kv : by_rank) {
      const auto& v = kv.second;
      if (v.size() < 2) continue;
      std::set<uint32_t> pids;
      for (const FileAnalysis* f : v) pids.insert(f->header_.pid());
      bool family = true;
      for (const FileAnalysis* f : v) {
        family = family && f->header_.hostname() == v[0]->header_.hostname() &&
                 (f->header_.pid() == v[0]->header_.pid() || pids.count(f->header_.ppid()) > 0 ||
                  SameJob(f, v[0]));
      }
      if (family) continue;
      dup_ranks.push_back(kv.first);
      if (example.empty()) {
        std::vector<std::string> names;
        for (const FileAnalysis* f : v) names.push_back(f->path_.substr(f->path_.rfind('/') + 1));
        example = absl::StrCat("rank ", kv.first, ": ", absl::StrJoin(names, ", "));
      }
    }
    if (!dup_ranks.empty()) {
      if (dup_ranks.size() > 16) dup_ranks.resize(16);
      warnings.push_back(absl::StrCat(
          "several unrelated files hold rank(s) ", absl::StrJoin(dup_ranks, ","), " (", example,
          "): the profiles of several runs in one directory? Their calls are matched as one "
          "run's; give each run its own PROFAGENT_OUTPUT"));
    }
    // Files without a rank (pid<P>.pb) of unrelated processes on one host that ran one after
    // the other, not side by side (the workers of one job overlap): several runs, too.
    std::vector<const FileAnalysis*> unranked;
    for (auto* f : sel) {
      if ((f->rank_ < 0 || f->rank_guessed_) && f->t0_ != UINT64_MAX) unranked.push_back(f);
    }
    std::sort(unranked.begin(), unranked.end(),
              [](const FileAnalysis* a, const FileAnalysis* b) { return a->t0_ < b->t0_; });
    for (size_t i = 1; i < unranked.size(); ++i) {
      const FileAnalysis* a = unranked[i - 1];
      const FileAnalysis* b = unranked[i];
      // Both know their job: that decides (two runs started from one shell are siblings).
      const bool jobs_known = !a->header_.job().empty() && !b->header_.job().empty();
      const bool related = jobs_known ? SameJob(a, b)
                                      : a->header_.pid() == b->header_.pid() ||
                                            a->header_.pid() == b->header_.ppid() ||
                                            b->header_.pid() == a->header_.ppid() ||
                                            a->header_.ppid() == b->header_.ppid();
      if (related || a->header_.hostname() != b->header_.hostname() || b->t0_ <= a->t1_) continue;
      warnings.push_back(absl::StrCat(
          "files without a rank from unrelated processes that ran one after the other (",
          a->path_.substr(a->path_.rfind('/') + 1), ", ", b->path_.substr(b->path_.rfind('/') + 1),
          "): the profiles of several runs in one directory? They are reported as one run's "
          "ranks; give each run its own PROFAGENT_OUTPUT"));
      break;
    }
  }
  if (sel.size() > 1) {
    for (auto* f : sel) {
      if (f->rank_ != sel[0]->rank_ && !f->has_offset_ && sel.size() > 1 &&
          hosts.size() > 1) {
        warnings.push_back(absl::StrCat(f->path_,
                                        ": no ClockOffset record; cross-host arrival times "
                                        "assume equal clocks"));
      }
    }
  }
  // Reference rank: the lowest rank with steps. Files without ranks (processes of one job with
  // no rank: a launcher and its engine process, an image and the one it exec'd) have positions,
  // not ranks: the one with the most steps.
  const bool positions =
      std::all_of(sel.begin(), sel.end(), [](const FileAnalysis* f) { return f->rank_guessed_; });
  FileAnalysis* ref = nullptr;
  for (auto* f : sel) {
    if (f->steps_.empty()) continue;
    if (ref == nullptr || (positions && f->steps_.size() > ref->steps_.size())) ref = f;
    if (!positions) break;
  }
  if (ref == nullptr) ref = sel[0];
  // Several processes without a rank with steps of their own (multiprocessing workers, a chain
  // of processes): the figures are one process's; say so, and which.
  if (positions) {
    std::vector<std::string> with_steps;
    for (auto* f : sel) {
      if (!f->steps_.empty()) with_steps.push_back(f->path_.substr(f->path_.rfind('/') + 1));
    }
    if (with_steps.size() > 1) {
      warnings.push_back(absl::StrCat(
          with_steps.size(), " processes without a rank recorded steps (",
          absl::StrJoin(with_steps, ", "), "): stats, runs, buckets and KV bins are ",
          ref->path_.substr(ref->path_.rfind('/') + 1),
          "'s (the most steps), not the others'; report each apart (--ranks N, N its position "
          "in meta.ranks) for theirs"));
    }
  }
  if (options.patterns_explicit && !ref->steps_.empty() && ref->runs_.empty()) {
    warnings.push_back(
        absl::StrCat("no runs found (no NVTX range matches the run pattern `", options.run_pattern,
                     "`): every step is measured, none excluded as a warm-up run's"));
  }
  if (ref->steps_.empty()) {
    warnings.push_back(
        options.patterns_explicit
            ? absl::StrCat("no steps found (no NVTX range matches the step pattern `",
                           options.step_pattern, "`): step statistics are empty")
            : "no steps found (no EV_STEP events and no NVTX range matching the step "
              "pattern): step statistics are empty");
    // What the agent was told that records no step: a schedule whose wait and warm-up the run
    // never got past, a capture range never opened.
    const auto& cfg = ref->header_.config();
    if (auto it = cfg.find("PROFAGENT_SCHEDULE"); it != cfg.end() && !it->second.empty()) {
      warnings.back() += absl::StrCat(
          "; the agent recorded under PROFAGENT_SCHEDULE ", it->second,
          ": steps are recorded only in its active phases (a run shorter than its wait and "
          "warm-up records none)");
    }
    if (auto it = cfg.find("PROFAGENT_CAPTURE");
        it != cfg.end() && it->second != "all" && !it->second.empty()) {
      warnings.back() += absl::StrCat("; the agent recorded under PROFAGENT_CAPTURE=", it->second,
                                      ": only between cudaProfilerStart and cudaProfilerStop");
    }
  }
  meta["ranks"] = Json(std::vector<int>(ranks.begin(), ranks.end()));
  meta["world_size"] = world;
  meta["hosts"] = Json(std::vector<std::string>(hosts.begin(), hosts.end()));
  meta["agent_versions"] = Json(std::vector<std::string>(versions.begin(), versions.end()));
  // A file that never set GPU timing up (a CPU-only rank: an MPI frontend, a data loader) does
  // not make the job's mode "mixed"; the reason is the reference rank's when it has the job's
  // mode, else the first such file's.
  if (timings.size() > 1) timings.erase(TimingName(GPU_TIMING_UNKNOWN));
  const std::string timing = timings.size() == 1 ? *timings.begin() : std::string("mixed");
  const FileAnalysis* timing_ref = ref;
  for (size_t i = 0; i < sel.size() && TimingName(timing_ref->timing_) != timing; ++i) {
    if (TimingName(sel[i]->timing_) == timing) timing_ref = sel[i];
  }
  meta["gpu_timing"] = timing;
  meta["gpu_timing_reason"] = timing_ref->timing_reason_;
  Json config = Json::object();
  {
    std::map<std::string, std::string> sorted(ref->header_.config().begin(),
                                              ref->header_.config().end());
    for (const auto& kv : sorted) config[kv.first] = kv.second;
  }
  meta["config"] = config;
  Json jopt;
  // The patterns and reduction the reference file's steps were re-derived with (the options',
  // else the agent's recorded ones); "agent" when they are the agent's steps.
  jopt["step_pattern"] = ref->step_pattern_;
  jopt["run_pattern"] = ref->run_pattern_;
  jopt["step_source"] = ref->nvtx_steps_used_ ? "nvtx" : "agent";
  jopt["kv_reduce"] = ref->nvtx_steps_used_ ? ref->kv_reduce_ : std::string("agent");
  jopt["warmup_runs"] = options.warmup_runs;
  jopt["kv_edges"] = options.kv_edges;
  jopt["rules"] = options.rules_file.empty() ? std::string("default") : options.rules_file;
  jopt["reference_rank"] = ref->rank_;
  meta["options"] = jopt;
  meta["files"] = jfiles;
  meta["drops"] = drops_total;

  // ----- stats, runs, buckets, KV bins (reference rank) -----
  const uint64_t origin = ref->t0_ == UINT64_MAX ? 0 : ref->t0_;
  StepSet all;
  std::vector<StepSet> per_run(ref->runs_.size() + 1);
  std::vector<const StepRec*> all_steps;
  std::vector<std::vector<const StepRec*>> run_steps(ref->runs_.size() + 1);
  for (const StepRec& s : ref->steps_) {
    if (s.warmup) continue;
    AddStep(&per_run[s.run], s);
    run_steps[s.run].push_back(&s);
    if (s.excluded) continue;
    AddStep(&all, s);
    all_steps.push_back(&s);
  }
  if (options.warmup_runs > 0 && size_t(options.warmup_runs) >= ref->runs_.size()) {
    warnings.push_back(
        ref->runs_.empty()
            ? absl::StrCat("--warmup-runs ", options.warmup_runs,
                           ": no run recorded (no range matches the run pattern), nothing "
                           "excluded")
            : absl::StrCat("--warmup-runs ", options.warmup_runs, " marks all ", ref->runs_.size(),
                           " run(s) warm-up: only steps outside runs count"));
  }
  if (!options.kv_edges.empty()) {
    uint64_t below = 0;
    for (const StepRec* s : all_steps) {
      below += s->kv >= 0 && s->kv < options.kv_edges.front() && DecodePhase(s->phase);
    }
    if (below > 0) {
      warnings.push_back(absl::StrCat(below,
                                      " decode step(s) with a KV length below the first KV "
                                      "edge (",
                                      options.kv_edges.front(),
                                      ") are in no decode_length_buckets bin"));
    }
  }
  {
    // Steps with a KV length that the bins leave out for their phase (prefill, mixed, a
    // speculative verify...): said, so that empty bins have a reason.
    std::map<std::string, uint64_t> other_phases;
    for (const StepRec* s : all_steps) {
      if (s->kv >= 0 && !DecodePhase(s->phase)) ++other_phases[s->phase];
    }
    if (!other_phases.empty() && (other_phases.size() > 1 || !other_phases.count("prefill"))) {
      uint64_t n = 0;
      std::string which;
      for (const auto& [phase, count] : other_phases) {
        n += count;
        absl::StrAppend(&which, which.empty() ? "" : ", ", phase, " ", count);
      }
      warnings.push_back(absl::StrCat(n,
                                      " step(s) with a KV length (kv=) are in no "
                                      "decode_length_buckets bin for their phase (",
                                      which,
                                      "): the bins take phase=decode and steps without a phase"));
    }
  }
  const size_t nb = ctx.buckets.size();
  std::vector<uint64_t> model_all(nb, 0), engine_all(nb, 0);
  for (size_t r = 0; r < ref->run_buckets_.size(); ++r) {
    if (r > 0 && ref->runs_[r - 1].warmup) continue;
    const BucketAcc& rb = ref->run_buckets_[r];
    for (size_t i = 0; i < nb; ++i) {
      model_all[i] += rb.model_ns[i];
      engine_all[i] += rb.engine_ns[i];
    }
  }
  Json runs = Json::array();
  std::vector<Json> run_stats;
  std::map<std::string, std::vector<double>> agg_metrics, agg_model, agg_engine;
  std::vector<std::string> metric_names = {"steps", "tokens", "total_time_ms", "tokens_per_s",
                                           "step_latency_ms.mean", "step_latency_ms.p50",
                                           "step_latency_ms.p90", "step_latency_ms.p99"};
  int agg_runs = 0, empty_runs = 0;
  std::set<std::string> model_keys, engine_keys;
  std::vector<std::pair<Json, Json>> run_bucket_json;
  for (size_t r = 0; r < ref->runs_.size(); ++r) {
    const RunRec& rr = ref->runs_[r];
    const StepSet& ss = per_run[r + 1];
    Json jr;
    jr["index"] = r + 1;
    jr["label"] = rr.label;
    jr["warmup"] = rr.warmup;
    if (rr.open) jr["open"] = true;
    jr["start_ms"] = Num(NsToMs(double(rr.start - std::min(origin, rr.start))));
    jr["duration_ms"] = Num(NsToMs(double(rr.end - rr.start)));
    jr["stats"] = StatsJson(ss, false);
    Json bm = BucketsJson(ctx, ref->run_buckets_[r + 1].model_ns, ss.steps, false);
    Json be = BucketsJson(
        ctx, EngineWithOthers(ctx, ref->run_buckets_[r + 1].engine_ns, ss.total_ns), ss.steps,
        true);
    jr["buckets_model_avg_ms"] = bm;
    jr["buckets_engine_avg_ms"] = be;
    jr["decode_length_buckets"] = KvBinsJson(options, run_steps[r + 1]);
    // A run with no recorded step (paused by PROFAGENT_SCHEDULE, or cut off) has nothing to
    // average: counted apart, not as a run of zeros.
    const bool empty_run = !rr.warmup && ss.steps == 0;
    if (empty_run) ++empty_runs;
    if (!rr.warmup && !empty_run) {
      ++agg_runs;
      const Json& st = jr["stats"];
      auto val = [](const Json& v) { return v.is_null() ? std::nan("") : v.get<double>(); };
      std::vector<double> vals = {val(st["steps"]),
                                  val(st["tokens"]),
                                  val(st["total_time_ms"]),
                                  val(st["tokens_per_s"]),
                                  val(st["step_latency_ms"]["mean"]),
                                  val(st["step_latency_ms"]["p50"]),
                                  val(st["step_latency_ms"]["p90"]),
                                  val(st["step_latency_ms"]["p99"])};
      for (size_t m = 0; m < metric_names.size(); ++m) {
        if (!std::isnan(vals[m])) agg_metrics[metric_names[m]].push_back(vals[m]);
      }
      for (auto it = bm.begin(); it != bm.end(); ++it) model_keys.insert(it.key());
      for (auto it = be.begin(); it != be.end(); ++it) engine_keys.insert(it.key());
      run_bucket_json.emplace_back(bm, be);
    }
    runs.push_back(jr);
  }
  Json ragg;
  ragg["runs"] = agg_runs;
  ragg["runs_without_steps"] = empty_runs;
  if (empty_runs > 0) {
    warnings.push_back(absl::StrCat(
        empty_runs, " run(s) not marked warmup have no recorded step (outside the schedule's "
                    "active steps, or cut off): left out of runs_aggregate"));
  }
  Json jm = Json::object();
  for (const auto& m : metric_names) jm[m] = MeanStd(agg_metrics[m]);
  ragg["metrics"] = jm;
  auto bucket_agg = [&](const std::set<std::string>& keys, bool engine, bool first) {
    std::vector<std::string> ordered(keys.begin(), keys.end());
    std::stable_sort(ordered.begin(), ordered.end(), [engine](const auto& a, const auto& b) {
      int ra = CanonicalRank(a, engine), rb = CanonicalRank(b, engine);
      return ra != rb ? ra < rb : a < b;
    });
    Json out = Json::object();
    for (const auto& k : ordered) {
      std::vector<double> v;
      for (const auto& p : run_bucket_json) {
        const Json& t = first ? p.first : p.second;
        v.push_back(t.contains(k) && !t[k]["ms"].is_null() ? t[k]["ms"].get<double>() : 0.0);
      }
      out[k] = MeanStd(v);
    }
    return out;
  };
  ragg["buckets_model_avg_ms"] = bucket_agg(model_keys, false, true);
  ragg["buckets_engine_avg_ms"] = bucket_agg(engine_keys, true, false);

  // ----- kernels (all selected ranks) -----
  std::map<std::string, KernelAgg> kmerged;
  uint64_t dev_total = 0, outside_ops = 0, outside_ns = 0;
  bool kscoped = false;
  std::set<int> ranks_whole;  // files without measured steps: counted whole
  for (auto* f : sel) {
    dev_total += f->device_total_ns_;
    outside_ops += f->outside_ops_;
    outside_ns += f->outside_ns_;
    kscoped |= f->measured_t0_ <= f->measured_t1_;
    if (f->measured_t0_ > f->measured_t1_ && f->device_total_ns_ > 0) ranks_whole.insert(f->rank_);
    for (auto& k : f->kernels_) {
      if ((k.first >> 16) & 1) continue;  // outside the measured steps: counted apart
      const uint32_t name_id = uint32_t(k.first >> 17);
      const std::string& bucket = ctx.buckets[k.first & 0xffff];
      const std::string& name = name_id != 0 ? f->StrPublic(name_id) : bucket;
      kmerged[absl::StrCat(name, std::string(1, '\0'), bucket)].d.Merge(k.second.d);
    }
  }
  std::vector<std::pair<std::string, const KernelAgg*>> klist;
  for (const auto& k : kmerged) klist.emplace_back(k.first, &k.second);
  std::stable_sort(klist.begin(), klist.end(), [](const auto& a, const auto& b) {
    if (a.second->d.sum() != b.second->d.sum()) return a.second->d.sum() > b.second->d.sum();
    return a.first < b.first;
  });
  Json kernels = Json::array();
  for (const auto& k : klist) {
    size_t z = k.first.find('\0');
    Json jk;
    jk["name"] = k.first.substr(0, z);
    jk["bucket"] = k.first.substr(z + 1);
    const Distribution& d = k.second->d;
    jk["count"] = d.count();
    jk["total_ms"] = Num(NsToMs(d.sum()));
    jk["mean_us"] = Num(d.Mean() / 1e3);
    jk["p50_us"] = Num(d.Percentile(50) / 1e3);
    jk["p99_us"] = Num(d.Percentile(99) / 1e3);
    jk["share"] = dev_total > 0 ? Num(d.sum() / double(dev_total)) : Json(nullptr);
    kernels.push_back(jk);
  }

  // ----- collectives -----
  std::map<std::string, CollAgg> cm;
  std::map<std::string, std::set<int>> cranks;
  for (auto* f : sel) {
    for (const auto& c : f->colls_) {
      CollAgg& a = cm[c.first];
      a.count += c.second.count;
      a.bytes += c.second.bytes;
      a.time_ns += c.second.time_ns;
      a.untimed += c.second.untimed;
      a.dev_count += c.second.dev_count;
      a.dev_ns += c.second.dev_ns;
      a.dev_span_ns += c.second.dev_span_ns;
      a.dev_host_ns += c.second.dev_host_ns;
      a.bus_bytes += c.second.bus_bytes;
      cranks[c.first].insert(f->rank_);
    }
  }
  // By library and op, then by size (a size sweep reads top to bottom; the labels' text order
  // put 16KiB before 1KiB).
  std::vector<std::map<std::string, CollAgg>::const_iterator> rows;
  for (auto it = cm.begin(); it != cm.end(); ++it) rows.push_back(it);
  auto row_key = [](const std::string& key) {
    std::vector<std::string> k = absl::StrSplit(key, '\0');
    k.resize(3);
    return std::make_tuple(k[0], k[1], SizeClassLow(k[2]), k[2]);
  };
  std::stable_sort(rows.begin(), rows.end(),
                   [&](auto a, auto b) { return row_key(a->first) < row_key(b->first); });
  Json cops = Json::array();
  for (const auto& row : rows) {
    const auto& c = *row;
    std::vector<std::string> k = absl::StrSplit(c.first, '\0');
    Json jc;
    jc["lib"] = k[0];
    jc["op"] = k[1];
    jc["size_class"] = k[2];
    jc["ranks"] = cranks[c.first].size();
    jc["count"] = c.second.count;
    uint64_t bytes = c.second.count > 0 ? c.second.bytes / c.second.count : 0;
    jc["bytes"] = bytes;
    const CollAgg& ca = c.second;
    jc["time_ms"] = Num(NsToMs(double(ca.best_ns())));
    jc["time_source"] = ca.dev_count == ca.count ? "device" : ca.dev_count == 0 ? "host" : "mixed";
    jc["device_timed"] = ca.dev_count;
    jc["untimed"] = ca.untimed;
    const uint64_t timed = ca.count - std::min(ca.untimed, ca.count);
    double mean_ns = timed > 0 ? double(ca.span_ns()) / double(timed) : 0;
    // An NCCL call's host time is only its kernel's enqueue: a row with device-timed calls
    // takes their mean alone (a mix read 4x short), one without any has no bandwidth.
    const bool nccl = k[0] == "nccl";
    if (nccl && ca.dev_count > 0) mean_ns = double(ca.dev_span_ns) / double(ca.dev_count);
    jc["mean_us"] = timed > 0 && (!nccl || ca.dev_count > 0) ? Num(mean_ns / 1e3) : Json(nullptr);
    // bytes/ns == GB/s, of the calls' exact mean size (the integer `bytes` is truncated: a row
    // of mixed small sizes read busbw/algbw off the bus factor by 1.5%).
    const double mean_bytes =
        c.second.count > 0 ? double(c.second.bytes) / double(c.second.count) : 0;
    double algbw = mean_ns > 0 ? mean_bytes / mean_ns : 0;
    // Graph replays: size unknown. One-sided calls: transfer time unknown. Zero-byte calls
    // (barriers): no bandwidth.
    const bool sized = mean_ns > 0 && bytes > 0 && k[2] != kGraphSizeClass &&
                       !OneSided(LowerOp(k[1])) && (!nccl || ca.dev_count > 0);
    jc["algbw_gbps"] = sized ? NumSig(algbw) : Json(nullptr);
    const double bus_per_call =
        c.second.count > 0 ? c.second.bus_bytes / double(c.second.count) : 0;
    jc["busbw_gbps"] = sized ? NumSig(bus_per_call / mean_ns) : Json(nullptr);
    jc["algorithm"] = "";
    cops.push_back(jc);
  }
  // Stragglers: the n-th call on the same communicator across ranks.
  // Participants of a call: a rank, and for NCCL the communicator's device (a process may drive
  // several GPUs, each with its own communicator of the clique: ncclCommInitAll).
  struct Member {
    int rank;
    int32_t device;
    int64_t at;
    double weight;
    int64_t dur;
    int64_t wait_group;  // Arrival::wait_group
    bool measured;       // within its file's measured steps (first start to last end)
  };
  // A call: (communicator, point-to-point pair or 0, sequence number).
  using CallKey = std::tuple<std::string, uint64_t, uint64_t>;
  std::map<CallKey, std::vector<Member>> calls;
  std::map<CallKey, int> call_lib;
  // With measured steps, the straggler view covers the calls made while they ran (as every
  // aggregate leaves warm-up out): a rank slow to start (loading its model, a long broadcast of
  // the NCCL id) is no straggler of the serving loop. The calls outside are summed apart.
  bool scoped = false;
  for (auto* f : sel) {
    uint64_t t0 = UINT64_MAX, t1 = 0;
    for (const StepRec& st : f->steps_) {
      if (st.warmup || st.excluded) continue;
      t0 = std::min(t0, st.start);
      t1 = std::max(t1, st.end);
    }
    scoped |= t0 <= t1;
    for (const auto& a : f->arrivals_) {
      const CallKey key{f->comm_uids_[a.uid], a.pair, a.seq};
      const bool measured = t0 <= t1 && a.at >= int64_t(t0) && a.at <= int64_t(t1);
      calls[key].push_back(Member{f->rank_, a.device, SaturatedAdd(a.at, f->clock_offset_),
                                  a.weight, a.dur, a.wait_group, measured});
      call_lib[key] = a.lib;
    }
  }
  // Every MPI arrival (the start of the wait or test that covered a call) per communicator, in
  // time order: the rank whose entry into MPI let a blocked member's call complete (below).
  std::unordered_map<std::string, std::vector<std::pair<int64_t, int>>> mpi_entries;
  for (const auto& c : calls) {
    if (call_lib[c.first] != LIB_MPI) continue;
    auto& v = mpi_entries[std::get<0>(c.first)];
    for (const Member& m : c.second) v.emplace_back(m.at, m.rank);
  }
  for (auto& kv : mpi_entries) std::sort(kv.second.begin(), kv.second.end());
  // The other rank that entered MPI on `uid` last at or before `t`, when that was after `after`
  // (an entry into a later call, not an arrival at this one) and at most `within` before `t`
  // (the entry that moved the call on: it completed right after); else -1.
  auto progressed_by = [&](const std::string& uid, int64_t t, int rank, int64_t after,
                           int64_t within) {
    auto it = mpi_entries.find(uid);
    if (it == mpi_entries.end()) return -1;
    const auto& v = it->second;
    auto e = std::upper_bound(v.begin(), v.end(), std::make_pair(t, INT_MAX));
    while (e != v.begin()) {
      --e;
      if (e->first <= after || t - e->first > within) return -1;
      if (e->second != rank) return e->second;
    }
    return -1;
  };
  Distribution skew;
  std::map<int, double> wait_ns;
  std::map<int, std::map<int, double>> wait_ns_by_lib;  // lib -> rank -> ns
  std::map<int, uint64_t> last_count;
  std::map<int, double> caused_ns;  // last arriver -> the others' waits for it
  std::map<std::pair<int, int32_t>, double> gpu_wait_ns;  // (rank, device), NCCL only
  std::map<std::pair<int, int32_t>, uint64_t> gpu_last_count;
  std::map<std::pair<int, int32_t>, double> gpu_caused_ns;
  std::set<int> waited;  // ranks with a matched call
  // (rank, wait group) -> the longest wait of the requests one MPI_Wait*/Test* finished, and
  // the rank it waited for then (MPI only: no device).
  // Of the longest: `wait` for the last arriver `last`, of which `moved` is due to `moved_to`
  // (which held the last arriver in its previous call), and `held` after the last arrival, due
  // to `held_by` (MPI, see below).
  struct GroupWait {
    double wait = -1;
    int last = -1;
    int lib = 0;
    double moved = 0;
    int moved_to = -1;
    double held = 0;
    int held_by = -1;
  };
  std::map<std::pair<int, int64_t>, GroupWait> group_waits;  // by (rank, wait call's start)
  // A call is complete when every member of its communicator (both ends of a point-to-point
  // transfer) is in the selected files: with rank files missing, deselected (--ranks) or not
  // recorded (PROFAGENT_RANKS), the last arrival among those present is not the call's, and
  // the straggler could be named wrongly. Incomplete calls are left out and counted.
  std::unordered_map<std::string, int> comm_size;
  for (auto* f : sel) f->CommSizes(&comm_size);
  auto members_of = [&](const CallKey& k) {
    if (std::get<1>(k) != 0) return 2;
    std::string uid = std::get<0>(k);
    const size_t g = uid.find("#graph");  // an execution of a call captured into a graph
    if (g != std::string::npos) uid.resize(g);
    auto it = comm_size.find(uid);
    return it != comm_size.end() ? it->second : 0;
  };
  uint64_t matched = 0, partial = 0;
  // The calls compared: those every member of whose communicator is in the selected files.
  std::vector<const std::pair<const CallKey, std::vector<Member>>*> compared;
  for (const auto& c : calls) {
    const int want = members_of(c.first);
    if (want >= 2 && int(c.second.size()) < want) {
      ++partial;
      continue;
    }
    if (c.second.size() < 2) continue;
    ++matched;
    compared.push_back(&c);
  }
  // MPI: blocked after the last arrival. MPI moves a nonblocking call on only inside MPI calls,
  // so a member's request may complete only when another rank next enters MPI (a post / compute
  // / test loop under Open MPI: the slow rank's next test, a whole compute phase later). The
  // time a member stays in a call beyond what the quickest member needed after the last arrival
  // (the operation itself) is a wait for the rank whose entry into MPI came just before it
  // completed; and a member so held that arrives last at its next call on the communicator is
  // late because of that rank, up to the time it was held. Left out, the ranks held back posted
  // their next call late and took the blame as last arrivers (round-16 sweep: a fast rank named
  // straggler 9 times in 12, the slow one cleared).
  struct Held {
    uint64_t ns = 0;  // unweighted
    int by = -1;
  };
  std::map<std::tuple<std::string, uint64_t, int, uint64_t>, Held> held_in;  // uid, pair, rank, seq
  auto last_of = [](const std::vector<Member>& members, int64_t* lo, int64_t* hi) {
    *lo = INT64_MAX;
    *hi = INT64_MIN;
    const Member* last = nullptr;
    for (const Member& m : members) {
      *lo = std::min(*lo, m.at);
      if (last == nullptr || m.at > *hi ||
          (m.at == *hi &&
           std::make_pair(m.rank, m.device) < std::make_pair(last->rank, last->device))) {
        *hi = m.at;
        last = &m;
      }
    }
    return last;
  };
  for (const auto* c : compared) {
    if (call_lib[c->first] != LIB_MPI) continue;
    int64_t lo, hi;
    last_of(c->second, &lo, &hi);
    auto after_last = [hi = hi](const Member& m) {
      const int64_t done = SaturatedAdd(m.at, m.dur);
      return done > hi ? uint64_t(done) - uint64_t(hi) : uint64_t{0};
    };
    // (Members done before the last arrival, an eager send or a broadcast's root, took no part.)
    uint64_t quickest = UINT64_MAX;
    for (const Member& m : c->second) {
      if (SaturatedAdd(m.at, m.dur) >= hi) quickest = std::min(quickest, after_last(m));
    }
    // Held 20 us or more (less is noise), and unblocked by another rank's entry into a later
    // call, the call completing within 100 us of it: a progress dependency, not a slow
    // operation.
    constexpr uint64_t kMinHeldNs = 20000, kProgressWindowNs = 100000;
    for (const Member& m : c->second) {
      if (SaturatedAdd(m.at, m.dur) < hi) continue;
      const uint64_t ns = after_last(m) - quickest;
      if (ns < kMinHeldNs) continue;
      const int by = progressed_by(std::get<0>(c->first), SaturatedAdd(m.at, m.dur), m.rank, hi,
                                   int64_t(kProgressWindowNs));
      if (by < 0) continue;
      held_in[{std::get<0>(c->first), std::get<1>(c->first), m.rank, std::get<2>(c->first)}] =
          Held{ns, by};
    }
  }
  uint64_t outside_calls = 0;
  std::map<int, double> outside_wait_ns;
  for (const auto* c : compared) {
    const CallKey& key = c->first;
    int64_t lo, hi;
    const Member* last = last_of(c->second, &lo, &hi);
    if (scoped && std::none_of(c->second.begin(), c->second.end(),
                               [](const Member& m) { return m.measured; })) {
      ++outside_calls;
      for (const Member& m : c->second) {
        const uint64_t behind = uint64_t(hi) - uint64_t(m.at);
        outside_wait_ns[m.rank] += double(std::min<uint64_t>(behind, uint64_t(m.dur))) * m.weight;
      }
      continue;
    }
    skew.Add(double(uint64_t(hi) - uint64_t(lo)));  // hi >= lo: exact in 64 bits
    // The last arriver held in its previous call on this communicator (or pair).
    Held late_for;
    if (std::get<2>(key) > 0) {
      auto it =
          held_in.find({std::get<0>(key), std::get<1>(key), last->rank, std::get<2>(key) - 1});
      if (it != held_in.end()) late_for = it->second;
    }
    for (const Member& m : c->second) {
      const uint64_t behind = uint64_t(hi) - uint64_t(m.at);
      const double wait = double(std::min<uint64_t>(behind, uint64_t(m.dur))) * m.weight;
      const double moved = late_for.by >= 0 ? std::min(wait, double(late_for.ns) * m.weight) : 0.0;
      Held held;
      if (auto it = held_in.find({std::get<0>(key), std::get<1>(key), m.rank, std::get<2>(key)});
          it != held_in.end()) {
        held = it->second;
      }
      const double held_ns = double(held.ns) * m.weight;
      waited.insert(m.rank);
      if (m.wait_group != 0) {  // counted once per wait call (its longest request), below
        GroupWait& g = group_waits[{m.rank, m.wait_group}];
        if (wait + held_ns >= g.wait + g.held) {
          g = GroupWait{wait, last->rank, call_lib[key], moved, late_for.by, held_ns, held.by};
        }
        continue;
      }
      wait_ns[m.rank] += wait + held_ns;
      // Caused by another rank only: a GPU of a process that drives several waiting for
      // another of them is in the per-GPU view (wait_caused_ms_by_gpu), not the rank's.
      if (last->rank != m.rank) caused_ns[last->rank] += wait - moved;
      if (moved > 0 && late_for.by != m.rank) caused_ns[late_for.by] += moved;
      if (held.by >= 0 && held.by != m.rank) caused_ns[held.by] += held_ns;
      wait_ns_by_lib[call_lib[key]][m.rank] += wait + held_ns;
      if (m.device >= 0) gpu_wait_ns[{m.rank, m.device}] += wait;
      if (last->device >= 0) gpu_caused_ns[{last->rank, last->device}] += wait;
    }
    ++last_count[last->rank];
    if (last->device >= 0) ++gpu_last_count[{last->rank, last->device}];
  }
  // Wait calls of one rank whose waits overlap (requests tested one by one, MPI_Test on each
  // in a loop, each request's wait starting at its own first test) are one wait: their union
  // counts, not their sum. The longest says who was waited for; the union's excess over it is
  // charged as it is.
  {
    auto it = group_waits.begin();
    while (it != group_waits.end()) {
      const int rank = it->first.first;
      const GroupWait* top = nullptr;
      int64_t cluster_end = INT64_MIN;
      double covered = 0;  // the union's length so far, ns
      auto flush = [&]() {
        if (top == nullptr) return;
        const GroupWait& w = *top;
        const double extra = std::max(0.0, covered - (w.wait + w.held));
        wait_ns[rank] += w.wait + w.held + extra;
        if (w.last != rank) caused_ns[w.last] += w.wait - w.moved + extra;
        if (w.moved > 0 && w.moved_to >= 0 && w.moved_to != rank) {
          caused_ns[w.moved_to] += w.moved;
        }
        if (w.held > 0 && w.held_by >= 0 && w.held_by != rank) caused_ns[w.held_by] += w.held;
        wait_ns_by_lib[w.lib][rank] += w.wait + w.held + extra;
        top = nullptr;
        covered = 0;
      };
      for (; it != group_waits.end() && it->first.first == rank; ++it) {
        const int64_t at = it->first.second;
        const GroupWait& w = it->second;
        const int64_t end = SaturatedAdd(at, int64_t(w.wait + w.held));
        if (top != nullptr && at < cluster_end) {  // overlaps the cluster (sorted by start)
          if (end > cluster_end) {
            covered += double(end - cluster_end);
            cluster_end = end;
          }
          if (w.wait + w.held > top->wait + top->held) top = &w;
          continue;
        }
        flush();
        top = &w;
        cluster_end = end;
        covered = double(end - at);
      }
      flush();
    }
  }
  Json per_rank = Json::array();
  for (auto* f : sel) {
    if (f->coll_calls_ == 0) continue;
    Json pr;
    pr["rank"] = f->rank_;
    pr["calls"] = f->coll_calls_;
    pr["time_ms"] = Num(NsToMs(double(f->coll_ns_)));
    // null: none of its calls could be matched (nothing to wait for, or no one seen with it).
    pr["wait_ms"] = waited.count(f->rank_) ? Num(NsToMs(wait_ns[f->rank_])) : Json(nullptr);
    per_rank.push_back(pr);
  }
  Json strag;
  strag["calls_matched"] = matched;
  strag["calls_incomplete"] = partial;
  strag["scope"] = scoped ? "measured steps" : "all calls";
  if (scoped) {
    Json out = Json::object();
    out["calls"] = outside_calls;
    Json w = Json::object();
    for (const auto& kv : outside_wait_ns) w[std::to_string(kv.first)] = Num(NsToMs(kv.second));
    out["wait_ms_by_rank"] = w;
    strag["outside_steps"] = out;
  }
  if (partial > 0) {
    warnings.push_back(
        absl::StrCat(partial,
                     " collective or point-to-point calls were seen on only some of their "
                     "communicator's ranks (rank files missing, not selected with --ranks, not "
                     "recorded: PROFAGENT_RANKS, after the end of a rank's file: a process "
                     "stopped before the others, or NCCL calls of a host-timed rank): left out "
                     "of the waits and the straggler"));
  }
  strag["skew_us"] = LatJson(skew, 1e-3);
  Json wbr = Json::object(), lac = Json::object();
  for (const auto& w : wait_ns) wbr[std::to_string(w.first)] = Num(NsToMs(w.second));
  Json wbl = Json::object();
  for (const auto& l : wait_ns_by_lib) {
    Json m = Json::object();
    for (const auto& w : l.second) m[std::to_string(w.first)] = Num(NsToMs(w.second));
    wbl[l.first == LIB_MPI ? "mpi" : "nccl"] = m;
  }
  int most = -1;
  uint64_t most_n = 0;
  for (const auto& l : last_count) {
    lac[std::to_string(l.first)] = l.second;
    if (l.second > most_n) {
      most_n = l.second;
      most = l.first;
    }
  }
  strag["wait_ms_by_rank"] = wbr;
  strag["wait_ms_by_lib"] = wbl;
  strag["last_arriver_counts"] = lac;
  strag["most_frequent_last_arriver"] = most >= 0 ? Json(most) : Json(nullptr);
  // Counts weigh a 2 us lead like a 3 ms one: the rank the others waited for longest, in total.
  Json wcr = Json::object();
  int top = -1;
  double top_ns = 0;
  for (const auto& c : caused_ns) {
    wcr[std::to_string(c.first)] = Num(NsToMs(c.second));
    if (c.second > top_ns) {
      top_ns = c.second;
      top = c.first;
    }
  }
  strag["wait_caused_ms_by_rank"] = wcr;
  // One process driving every GPU (ncclCommInitAll): the calls' members are all one rank, which
  // would be its own straggler. Only the per-GPU view means anything then.
  std::set<int> member_ranks;
  for (const auto& w : wait_ns) member_ranks.insert(w.first);
  for (const auto& c : caused_ns) member_ranks.insert(c.first);
  for (const auto& l : last_count) member_ranks.insert(l.first);
  if (member_ranks.size() < 2) {
    top = -1;
    strag["most_frequent_last_arriver"] = nullptr;
  }
  strag["straggler"] = top >= 0 ? Json(top) : Json(nullptr);
  // The same per GPU ("rank:device"), NCCL calls only.
  auto gpu_key = [](const std::pair<int, int32_t>& k) {
    return absl::StrCat(k.first, ":", k.second);
  };
  Json wbg = Json::object(), lag = Json::object();
  for (const auto& w : gpu_wait_ns) wbg[gpu_key(w.first)] = Num(NsToMs(w.second));
  std::string most_gpu;
  uint64_t most_gpu_n = 0;
  for (const auto& l : gpu_last_count) {
    lag[gpu_key(l.first)] = l.second;
    if (l.second > most_gpu_n) {
      most_gpu_n = l.second;
      most_gpu = gpu_key(l.first);
    }
  }
  strag["wait_ms_by_gpu"] = wbg;
  strag["last_arriver_gpu_counts"] = lag;
  strag["most_frequent_last_arriver_gpu"] = most_gpu.empty() ? Json(nullptr) : Json(most_gpu);
  Json wcg = Json::object();
  std::string top_gpu;
  double top_gpu_ns = 0;
  for (const auto& c : gpu_caused_ns) {
    wcg[gpu_key(c.first)] = Num(NsToMs(c.second));
    if (c.second > top_gpu_ns) {
      top_gpu_ns = c.second;
      top_gpu = gpu_key(c.first);
    }
  }
  strag["wait_caused_ms_by_gpu"] = wcg;
  strag["straggler_gpu"] = top_gpu.empty() ? Json(nullptr) : Json(top_gpu);
  Json coll;
  coll["ops"] = cops;
  coll["per_rank"] = per_rank;
  coll["stragglers"] = strag;
  std::map<std::string, uint64_t> captured;
  for (auto* f : sel) {
    for (const auto& c : f->captured_colls_) captured[c.first] += c.second;
  }
  Json jcap = Json::object();
  for (const auto& c : captured) jcap[c.first] = c.second;
  coll["captured_calls"] = jcap;
  uint64_t in_graph_matched = 0, in_graph_unmatched = 0;
  for (auto* f : sel) {
    in_graph_matched += f->in_graph_matched_;
    in_graph_unmatched += f->in_graph_unmatched_;
  }
  Json jig;
  jig["kernels_matched"] = in_graph_matched;
  jig["kernels_unmatched"] = in_graph_unmatched;
  coll["in_graph"] = jig;

  // ----- host (reference rank) -----
  Json host;
  uint64_t wall = ref->t1_ > origin ? ref->t1_ - origin : 0;
  host["wall_ms"] = Num(NsToMs(double(wall)));
  host["gpu_busy_ms"] = Num(NsToMs(double(ref->busy_ns_)));
  host["gpu_busy_share"] = wall > 0 ? Num(double(ref->busy_ns_) / double(wall)) : Json(nullptr);
  Json ps;
  ps["wall_ms"] = LatJson(all.lat, 1e-6);
  ps["gpu_busy_ms"] = LatJson(all.busy, 1e-6);
  host["per_step"] = ps;
  Json ig;
  ig["count"] = ref->gaps_.count();
  ig["total_ms"] = Num(NsToMs(ref->gaps_.sum()));
  ig["gap_us"] = LatJson(ref->gaps_, 1e-3);
  host["idle_gaps"] = ig;
  host["launch_to_start_us"] = LatJson(ref->launch_to_start_, 1e-3);
  std::map<std::string, ApiAcc> api_by_name;
  for (const auto& a : ref->api_) {
    std::string n = (a.first >> 32) != 0 ? std::string(KindApiName(int(a.first & 0xffffffff)))
                                         : ref->StrPublic(uint32_t(a.first));
    ApiAcc& acc = api_by_name[n];
    acc.count += a.second.count;
    acc.timed += a.second.timed;
    acc.ns += a.second.ns;
  }
  // Total time: the timed calls' mean times all calls (sampled launches are a random sample).
  auto total_ns = [](const ApiAcc& a) {
    return a.timed == 0 ? 0.0 : double(a.ns) * double(a.count) / double(a.timed);
  };
  std::vector<std::pair<std::string, ApiAcc>> apis(api_by_name.begin(), api_by_name.end());
  // By total time; APIs with no timed call (launches sampled 1 in N, rarely called) by calls.
  std::sort(apis.begin(), apis.end(), [&](const auto& a, const auto& b) {
    const double ta = total_ns(a.second), tb = total_ns(b.second);
    if (ta != tb) return ta > tb;
    if (a.second.count != b.second.count) return a.second.count > b.second.count;
    return a.first < b.first;
  });
  Json japi = Json::array();
  for (const auto& a : apis) {
    Json ja;
    ja["name"] = a.first;
    ja["count"] = a.second.count;
    ja["timed"] = a.second.timed;
    ja["total_ms"] = a.second.timed == 0 ? Json() : Num(NsToMs(total_ns(a.second)));
    ja["mean_us"] = a.second.timed == 0 ? Json()
                                        : Num(double(a.second.ns) / double(a.second.timed) / 1e3);
    japi.push_back(ja);
  }
  host["api"] = japi;
  // Times of day in the report (a gap's, a memory peak's): ms since the job's first recorded
  // event, on rank 0's clock, so that one rank's can be compared with another's.
  int64_t job_t0 = INT64_MAX;
  for (auto* f : sel) {
    if (f->t0_ != UINT64_MAX) {
      job_t0 = std::min(job_t0, SaturatedAdd(int64_t(f->t0_), f->clock_offset_));
    }
  }
  auto job_ms = [job_t0](const FileAnalysis* f, uint64_t t) {
    const int64_t x = SaturatedAdd(int64_t(t), f->clock_offset_);
    return job_t0 == INT64_MAX || x <= job_t0 ? 0.0
                                              : NsToMs(double(uint64_t(x) - uint64_t(job_t0)));
  };
  std::vector<std::pair<const FileAnalysis*, const Gap*>> gaps;
  for (auto* f : sel) {
    for (const auto& g : f->top_gaps_) gaps.emplace_back(f, &g);
  }
  std::stable_sort(gaps.begin(), gaps.end(), [](const auto& a, const auto& b) {
    return a.second->gap != b.second->gap ? a.second->gap > b.second->gap
                                          : a.second->at < b.second->at;
  });
  if (gaps.size() > kTopGaps) gaps.resize(kTopGaps);
  Json jg = Json::array();
  for (const auto& g : gaps) {
    Json j;
    j["rank"] = g.first->rank_;
    j["device"] = g.second->device;
    j["at_ms"] = Num(job_ms(g.first, g.second->at));
    j["gap_us"] = Num(double(g.second->gap) / 1e3);
    j["next_kernel"] = g.second->next_kernel;
    j["stack"] = g.second->stack;
    jg.push_back(j);
  }
  host["longest_gaps"] = jg;

  // ----- memory -----
  Json devs = Json::array();
  for (auto* f : sel) {
    for (const auto& m : f->mem_) {
      Json d;
      d["rank"] = f->rank_;
      d["device"] = m.first;
      d["allocs"] = m.second.allocs;
      d["frees"] = m.second.frees;
      d["alloc_bytes"] = m.second.alloc_bytes;
      d["peak_bytes"] = m.second.peak;
      d["peak_at_ms"] = Num(job_ms(f, m.second.peak_at));
      d["final_bytes"] = m.second.cur;
      devs.push_back(d);
    }
  }
  Json memory;
  memory["devices"] = devs;

  meta["warnings"] = warnings;

  Json out;
  out["schema"] = kSummarySchema;
  out["meta"] = meta;
  out["stats"] = StatsJson(all, true);
  out["stats"]["step_buckets_model_ms_samples"] = StepBucketSamples(ctx, all_steps);
  out["runs"] = runs;
  out["runs_aggregate"] = ragg;
  out["buckets_model_avg_ms"] = BucketsJson(ctx, model_all, all.steps, false);
  out["buckets_engine_avg_ms"] =
      BucketsJson(ctx, EngineWithOthers(ctx, engine_all, all.total_ns), all.steps, true);
  out["decode_length_buckets"] = KvBinsJson(options, all_steps);
  out["kernels"] = kernels;
  {
    Json ks;
    ks["scope"] = kscoped ? "measured steps" : "all ops";
    ks["outside_ops"] = outside_ops;
    ks["outside_ms"] = Num(NsToMs(double(outside_ns)));
    // With measured steps somewhere, the ranks that have none (a worker rank that marks no
    // step) are in the table whole: named, as they mix start-up and warm-up into it.
    ks["ranks_whole"] =
        kscoped ? Json(std::vector<int>(ranks_whole.begin(), ranks_whole.end())) : Json::array();
    out["kernels_scope"] = ks;
  }
  out["collectives"] = coll;
  out["host"] = host;
  out["memory"] = memory;
  return out;
}

}  // namespace analyzer
}  // namespace profagent
