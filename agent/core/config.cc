#include "agent/core/config.h"

#include "agent/core/bounded_regex.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <regex>

namespace profagent {
namespace {

// Decimal digits only (no sign, space or base prefix: "010" is ten, "0x100" is an error), or,
// with `hex`, also 0x-prefixed hexadecimal (a stream handle as printed).
bool ParseU64(const char* s, uint64_t* out, bool hex = false) {
  if (s == nullptr || *s == '\0') return false;
  int base = 10;
  const char* digits = s;
  if (hex && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    base = 16;
    digits = s + 2;
  }
  if (*digits == '\0') return false;
  for (const char* p = digits; *p != '\0'; ++p) {
    const bool ok = base == 10 ? (*p >= '0' && *p <= '9')
                               : ((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f') ||
                                  (*p >= 'A' && *p <= 'F'));
    if (!ok) return false;
  }
  char* end = nullptr;
  errno = 0;
  unsigned long long v = strtoull(digits, &end, base);
  if (errno != 0 || *end != '\0') return false;
  *out = v;
  return true;
}

std::string Bad(const char* var, const char* value, const char* accepted) {
  return std::string(var) + "=" + value + " is invalid (expected " + accepted + ")";
}

bool ParseRanks(const std::string& s, std::vector<int>* out) {
  size_t i = 0;
  while (i < s.size()) {
    size_t j = s.find(',', i);
    if (j == std::string::npos) j = s.size();
    std::string part = s.substr(i, j - i);
    size_t dash = part.find('-');
    uint64_t a, b;
    if (dash == std::string::npos) {
      if (!ParseU64(part.c_str(), &a)) return false;
      b = a;
    } else {
      if (!ParseU64(part.substr(0, dash).c_str(), &a) ||
          !ParseU64(part.substr(dash + 1).c_str(), &b) || b < a || b - a > 100000) {
        return false;
      }
    }
    if (b > 0x7fffffffull) return false;  // a rank is an int
    for (uint64_t r = a; r <= b; ++r) out->push_back(int(r));
    i = j + 1;
  }
  return !out->empty();
}

bool ParseSchedule(const std::string& s, Config* c) {
  size_t i = 0;
  bool any = false;
  while (i < s.size()) {
    size_t j = s.find(',', i);
    if (j == std::string::npos) j = s.size();
    std::string kv = s.substr(i, j - i);
    size_t eq = kv.find('=');
    if (eq == std::string::npos) return false;
    std::string k = kv.substr(0, eq);
    uint64_t v;
    if (!ParseU64(kv.substr(eq + 1).c_str(), &v) || v > 0xffffffffull) return false;
    if (k == "wait") c->sched_wait = uint32_t(v);
    else if (k == "warmup") c->sched_warmup = uint32_t(v);
    else if (k == "active") c->sched_active = uint32_t(v);
    else if (k == "repeat") c->sched_repeat = uint32_t(v);
    else return false;
    any = true;
    i = j + 1;
  }
  return any && c->sched_active > 0;
}

}  // namespace

bool ParseConfig(GetenvFn env, Config* out, std::string* error) {
  Config c;
  const char* v;
  if ((v = env("PROFAGENT_ENABLE")) != nullptr && *v) {
    if (!strcmp(v, "1") || !strcmp(v, "true")) c.enabled = true;
    else if (!strcmp(v, "0") || !strcmp(v, "false")) c.enabled = false;
    else return *error = Bad("PROFAGENT_ENABLE", v, "1 or 0"), false;
  }
  if ((v = env("PROFAGENT_OUTPUT")) != nullptr && *v) c.output_dir = v;
  if ((v = env("PROFAGENT_GPU_TIMING")) != nullptr && *v) {
    if (!strcmp(v, "auto")) c.gpu_timing = GpuTimingWanted::kAuto;
    else if (!strcmp(v, "cupti")) c.gpu_timing = GpuTimingWanted::kCupti;
    else if (!strcmp(v, "events")) c.gpu_timing = GpuTimingWanted::kEvents;
    else if (!strcmp(v, "host")) c.gpu_timing = GpuTimingWanted::kHost;
    else if (!strcmp(v, "off")) c.gpu_timing = GpuTimingWanted::kOff;
    else return *error = Bad("PROFAGENT_GPU_TIMING", v, "auto|cupti|events|host|off"), false;
  }
  if ((v = env("PROFAGENT_CUPTI_PATH")) != nullptr) c.cupti_path = v;
  if ((v = env("PROFAGENT_RING_SIZE")) != nullptr && *v) {
    uint64_t n;
    if (!ParseU64(v, &n) || n < 64 || n > (1u << 24) || (n & (n - 1)) != 0) {
      return *error = Bad("PROFAGENT_RING_SIZE", v, "a power of two from 64 to 16777216"), false;
    }
    c.ring_slots = uint32_t(n);
  }
  if ((v = env("PROFAGENT_OVERFLOW")) != nullptr && *v) {
    if (!strcmp(v, "drop")) c.overflow = OverflowPolicy::kDrop;
    else if (!strcmp(v, "block")) c.overflow = OverflowPolicy::kBlock;
    else return *error = Bad("PROFAGENT_OVERFLOW", v, "drop|block"), false;
  }
  for (auto [var, field] : {std::pair<const char*, std::string*>{"PROFAGENT_STEP_PATTERN", &c.step_pattern},
                            {"PROFAGENT_RUN_PATTERN", &c.run_pattern}}) {
    if ((v = env(var)) != nullptr && *v) {
      std::regex re;
      std::string why;
      if (!CompileBounded(v, std::regex::ECMAScript, &re, &why)) {
        const std::string shown = std::strlen(v) > 80 ? std::string(v, 80) + "..." : v;
        return *error = Bad(var, shown.c_str(),
                            ("an ECMAScript regular expression without back-references, at "
                             "most 1024 bytes: " + why).c_str()),
               false;
      }
      *field = v;
    }
  }
  if ((v = env("PROFAGENT_KV_REDUCE")) != nullptr && *v) {
    if (!strcmp(v, "mean")) c.kv_reduce = KvReduce::kMean;
    else if (!strcmp(v, "max")) c.kv_reduce = KvReduce::kMax;
    else if (!strcmp(v, "p50")) c.kv_reduce = KvReduce::kP50;
    else if (!strcmp(v, "p90")) c.kv_reduce = KvReduce::kP90;
    else if (!strcmp(v, "sum")) c.kv_reduce = KvReduce::kSum;
    else return *error = Bad("PROFAGENT_KV_REDUCE", v, "mean|max|p50|p90|sum"), false;
  }
  if ((v = env("PROFAGENT_STEP_RULE")) != nullptr && *v) {
    std::string s = v;
    if (s == "none") c.step_rule = StepRule::kNone;
    else if (s == "graph") c.step_rule = StepRule::kGraphLaunch;
    else if (s == "sync") c.step_rule = StepRule::kStreamSync;
    else if (s.compare(0, 5, "sync:") == 0) {
      // The handle as %p prints it: 0x-prefixed hex (digits alone would be read as decimal and
      // pick another stream silently), or 0 / (nil) for the legacy default stream.
      const std::string hs = s.substr(5);
      uint64_t h = 0;
      const bool ok = hs == "0" || hs == "(nil)" ||
                      (hs.size() > 2 && hs[0] == '0' && (hs[1] == 'x' || hs[1] == 'X') &&
                       ParseU64(hs.c_str(), &h, /*hex=*/true));
      if (!ok) {
        return *error = Bad("PROFAGENT_STEP_RULE", v,
                            "none|graph|sync|sync:<stream handle, 0x-prefixed hex, or 0>"),
               false;
      }
      c.step_rule = StepRule::kStreamSync;
      c.step_rule_any_stream = false;
      c.step_rule_stream = h;
    } else {
      return *error = Bad("PROFAGENT_STEP_RULE", v, "none|graph|sync|sync:<stream handle>"), false;
    }
  }
  if ((v = env("PROFAGENT_STACKS")) != nullptr && *v) {
    uint64_t n;
    if (!ParseU64(v, &n) || n > 1000000000) {
      return *error = Bad("PROFAGENT_STACKS", v, "0 (off), 1 (every launch) or N (1 in N)"), false;
    }
    c.stack_every = uint32_t(n);
  }
  if ((v = env("PROFAGENT_LAUNCH_API_SAMPLE")) != nullptr && *v) {
    uint64_t n;
    if (!ParseU64(v, &n) || n < 1 || n > 1000000) {
      return *error = Bad("PROFAGENT_LAUNCH_API_SAMPLE", v,
                          "N in 1..1000000 (API duration of 1 in N launches; 1 = every launch)"),
             false;
    }
    c.launch_api_sample = uint32_t(n);
  }
  if ((v = env("PROFAGENT_STACK_DEPTH")) != nullptr && *v) {
    uint64_t n;
    if (!ParseU64(v, &n) || n < 1 || n > 128) {
      return *error = Bad("PROFAGENT_STACK_DEPTH", v, "1..128"), false;
    }
    c.stack_depth = uint32_t(n);
  }
  if ((v = env("PROFAGENT_SCHEDULE")) != nullptr && *v) {
    if (!ParseSchedule(v, &c)) {
      return *error = Bad("PROFAGENT_SCHEDULE", v, "wait=W,warmup=U,active=A,repeat=R with A > 0"), false;
    }
    c.schedule_set = true;
  }
  if ((v = env("PROFAGENT_CAPTURE")) != nullptr && *v) {
    if (!strcmp(v, "cudaProfilerApi")) c.capture_profiler_api = true;
    else if (!strcmp(v, "all")) c.capture_profiler_api = false;
    else return *error = Bad("PROFAGENT_CAPTURE", v, "all or cudaProfilerApi"), false;
  }
  if ((v = env("PROFAGENT_RANKS")) != nullptr && *v && strcmp(v, "all") != 0) {
    if (!ParseRanks(v, &c.ranks)) {
      return *error = Bad("PROFAGENT_RANKS", v, "all or a list like 0,2-3"), false;
    }
  }
  if ((v = env("PROFAGENT_LOG")) != nullptr && *v) {
    uint64_t n;
    if (!ParseU64(v, &n) || n > 3) return *error = Bad("PROFAGENT_LOG", v, "0..3"), false;
    c.log_level = int(n);
  }
  if ((v = env("PROFAGENT_FLUSH_MS")) != nullptr && *v) {
    uint64_t n;
    if (!ParseU64(v, &n) || n < 1 || n > 10000) return *error = Bad("PROFAGENT_FLUSH_MS", v, "1..10000"), false;
    c.flush_ms = uint32_t(n);
  }
  if ((v = env("PROFAGENT_CLOCK_SYNC")) != nullptr && *v) {
    if (!strcmp(v, "1")) c.mpi_clock_sync = true;
    else if (!strcmp(v, "0")) c.mpi_clock_sync = false;
    else return *error = Bad("PROFAGENT_CLOCK_SYNC", v, "1 or 0"), false;
  }
  // The job name itself is read at start-up (agent.cc); a user's that is too long is refused
  // here rather than silently replaced by a made-up one.
  if ((v = env("PROFAGENT_JOB")) != nullptr && strlen(v) > 128) {
    return *error = Bad("PROFAGENT_JOB", v, "at most 128 bytes"), false;
  }
  *out = c;
  return true;
}

std::map<std::string, std::string> ConfigToMap(const Config& c) {
  static const char* kTiming[] = {"auto", "cupti", "events", "host", "off"};
  static const char* kReduce[] = {"mean", "max", "p50", "p90", "sum"};
  std::map<std::string, std::string> m;
  m["PROFAGENT_OUTPUT"] = c.output_dir;
  m["PROFAGENT_GPU_TIMING"] = kTiming[int(c.gpu_timing)];
  m["PROFAGENT_RING_SIZE"] = std::to_string(c.ring_slots);
  m["PROFAGENT_OVERFLOW"] = c.overflow == OverflowPolicy::kDrop ? "drop" : "block";
  m["PROFAGENT_STEP_PATTERN"] = c.step_pattern;
  m["PROFAGENT_RUN_PATTERN"] = c.run_pattern;
  m["PROFAGENT_KV_REDUCE"] = kReduce[int(c.kv_reduce)];
  if (c.step_rule == StepRule::kStreamSync && !c.step_rule_any_stream) {
    char handle[32];
    snprintf(handle, sizeof(handle), "sync:0x%llx",
             static_cast<unsigned long long>(c.step_rule_stream));
    m["PROFAGENT_STEP_RULE"] = handle;
  } else {
    m["PROFAGENT_STEP_RULE"] = c.step_rule == StepRule::kNone        ? "none"
                               : c.step_rule == StepRule::kGraphLaunch ? "graph"
                                                                       : "sync";
  }
  m["PROFAGENT_STACKS"] = std::to_string(c.stack_every);
  m["PROFAGENT_STACK_DEPTH"] = std::to_string(c.stack_depth);
  m["PROFAGENT_CLOCK_SYNC"] = c.mpi_clock_sync ? "1" : "0";
  if (!c.cupti_path.empty()) m["PROFAGENT_CUPTI_PATH"] = c.cupti_path;
  m["PROFAGENT_LAUNCH_API_SAMPLE"] = std::to_string(c.launch_api_sample);
  if (c.schedule_set) {
    m["PROFAGENT_SCHEDULE"] = "wait=" + std::to_string(c.sched_wait) +
                              ",warmup=" + std::to_string(c.sched_warmup) +
                              ",active=" + std::to_string(c.sched_active) +
                              ",repeat=" + std::to_string(c.sched_repeat);
  }
  m["PROFAGENT_CAPTURE"] = c.capture_profiler_api ? "cudaProfilerApi" : "all";
  std::string ranks;
  for (int r : c.ranks) ranks += (ranks.empty() ? "" : ",") + std::to_string(r);
  m["PROFAGENT_RANKS"] = ranks.empty() ? "all" : ranks;
  m["PROFAGENT_LOG"] = std::to_string(c.log_level);
  m["PROFAGENT_FLUSH_MS"] = std::to_string(c.flush_ms);
  return m;
}

}  // namespace profagent
