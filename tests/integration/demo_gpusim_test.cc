// End-to-end test of the demo workload `//kernels:inference` on the CPU GPU simulator
// (tests/gpusim): runs the real nvcc-built program against gpusim's libcudart.so.13 and
// libnccl.so.2 (LD_LIBRARY_PATH), alone and under `mpirun -np 2`, and checks the simulator's
// ground-truth log (GPUSIM_TRUTH, one JSON object per completed device operation) against what
// the flags imply: the number of launches of every kernel, the attention grid growing with the
// KV length, copies per step, graph and second-stream placement, one AllReduce per layer x2 per
// forward pass with matching sequence numbers on both ranks, and equal checksums. A small NVTX
// tool (demo_nvtx_recorder.so) records the program's NVTX ranges to check the step/run
// convention the profiler relies on (tokens, kv, bsz, nesting of engine phases).
//
// Paths are relative to the test's runfiles directory (Bazel runs tests there).
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <dirent.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/wait.h>

namespace {

// ------------------------------------------------------------------------------------------
// A flat JSON object reader for the ground-truth lines: values are strings, integers, numbers
// or arrays of integers (all the truth format uses).
struct Value {
  enum Kind { kString, kInt, kDouble, kArray, kOther } kind = kOther;
  std::string s;
  long long i = 0;
  double d = 0.0;
  std::vector<long long> arr;
};
using Object = std::map<std::string, Value>;

class LineParser {
 public:
  explicit LineParser(const std::string& text) : t_(text) {}

  bool Parse(Object* out) {
    Ws();
    if (!Eat('{')) return false;
    Ws();
    if (Eat('}')) return AtEnd();
    while (true) {
      Ws();
      std::string key;
      if (!String(&key)) return false;
      Ws();
      if (!Eat(':')) return false;
      Ws();
      Value v;
      if (!ParseValue(&v)) return false;
      (*out)[key] = v;
      Ws();
      if (Eat(',')) continue;
      if (Eat('}')) return AtEnd();
      return false;
    }
  }

 private:
  bool AtEnd() {
    Ws();
    return p_ == t_.size();
  }
  void Ws() {
    while (p_ < t_.size() && std::isspace(static_cast<unsigned char>(t_[p_]))) ++p_;
  }
  bool Eat(char c) {
    if (p_ < t_.size() && t_[p_] == c) {
      ++p_;
      return true;
    }
    return false;
  }
  bool String(std::string* s) {
    if (!Eat('"')) return false;
    while (p_ < t_.size()) {
      char c = t_[p_++];
      if (c == '"') return true;
      if (c == '\\') {
        if (p_ >= t_.size()) return false;
        char e = t_[p_++];
        switch (e) {
          case 'n': s->push_back('\n'); break;
          case 't': s->push_back('\t'); break;
          case 'r': s->push_back('\r'); break;
          case 'b': s->push_back('\b'); break;
          case 'f': s->push_back('\f'); break;
          case 'u':
            if (p_ + 4 > t_.size()) return false;
            s->push_back('?');  // names here are ASCII; keep the position
            p_ += 4;
            break;
          default: s->push_back(e);
        }
      } else {
        s->push_back(c);
      }
    }
    return false;
  }
  bool Number(Value* v) {
    const size_t start = p_;
    if (p_ < t_.size() && (t_[p_] == '-' || t_[p_] == '+')) ++p_;
    bool is_double = false;
    while (p_ < t_.size() && (std::isdigit(static_cast<unsigned char>(t_[p_])) ||
                              t_[p_] == '.' || t_[p_] == 'e' || t_[p_] == 'E' ||
                              t_[p_] == '-' || t_[p_] == '+')) {
      if (!std::isdigit(static_cast<unsigned char>(t_[p_]))) is_double = true;
      ++p_;
    }
    if (p_ == start) return false;
    const std::string num = t_.substr(start, p_ - start);
    if (is_double && num.find_first_of(".eE") != std::string::npos) {
      v->kind = Value::kDouble;
      v->d = std::strtod(num.c_str(), nullptr);
    } else {
      v->kind = Value::kInt;
      v->i = std::strtoll(num.c_str(), nullptr, 10);
      v->d = static_cast<double>(v->i);
    }
    return true;
  }
  bool ParseValue(Value* v) {
    if (p_ >= t_.size()) return false;
    const char c = t_[p_];
    if (c == '"') {
      v->kind = Value::kString;
      return String(&v->s);
    }
    if (c == '[') {
      ++p_;
      v->kind = Value::kArray;
      Ws();
      if (Eat(']')) return true;
      while (true) {
        Ws();
        Value e;
        if (!Number(&e)) return false;
        v->arr.push_back(e.i);
        Ws();
        if (Eat(',')) continue;
        return Eat(']');
      }
    }
    for (const char* word : {"true", "false", "null"}) {
      const std::string w(word);
      if (t_.compare(p_, w.size(), w) == 0) {
        p_ += w.size();
        v->kind = Value::kOther;
        return true;
      }
    }
    return Number(v);
  }

  const std::string& t_;
  size_t p_ = 0;
};

// One ground-truth operation with the fields the checks use.
struct Op {
  Object raw;
  std::string op;
  std::string name;
  long long Int(const char* key) const {
    auto it = raw.find(key);
    return it == raw.end() ? -999999 : it->second.i;
  }
  std::string Str(const char* key) const {
    auto it = raw.find(key);
    return it == raw.end() ? std::string() : it->second.s;
  }
  std::vector<long long> Arr(const char* key) const {
    auto it = raw.find(key);
    return it == raw.end() ? std::vector<long long>() : it->second.arr;
  }
};

std::vector<Op> ReadTruth(const std::string& path) {
  std::ifstream in(path);
  REQUIRE(in.good());
  std::vector<Op> ops;
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty()) continue;
    Op op;
    LineParser parser(line);
    INFO(path << ":" << line_no << ": " << line);
    REQUIRE(parser.Parse(&op.raw));
    op.op = op.Str("op");
    op.name = op.Str("name");
    REQUIRE(!op.op.empty());
    REQUIRE(op.Int("start_ns") <= op.Int("end_ns"));
    ops.push_back(std::move(op));
  }
  std::stable_sort(ops.begin(), ops.end(), [](const Op& a, const Op& b) {
    return a.Int("start_ns") < b.Int("start_ns");
  });
  return ops;
}

// "llm::gemm_kernel(float const*, ...)" -> "gemm_kernel".
std::string ShortName(const std::string& demangled) {
  std::string s = demangled.substr(0, demangled.find('('));
  const size_t colon = s.rfind("::");
  if (colon != std::string::npos) s = s.substr(colon + 2);
  const size_t space = s.rfind(' ');  // "void foo<...>" forms
  if (space != std::string::npos) s = s.substr(space + 1);
  return s;
}

std::map<std::string, long long> KernelCounts(const std::vector<Op>& ops) {
  std::map<std::string, long long> counts;
  for (const Op& op : ops) {
    if (op.op == "kernel") ++counts[ShortName(op.name)];
  }
  return counts;
}

std::vector<const Op*> Kernels(const std::vector<Op>& ops, const std::string& short_name) {
  std::vector<const Op*> out;
  for (const Op& op : ops) {
    if (op.op == "kernel" && ShortName(op.name) == short_name) out.push_back(&op);
  }
  return out;
}

// ------------------------------------------------------------------------------------------
// Running the workload.

std::string AbsPath(const std::string& rel) {
  char buf[PATH_MAX];
  REQUIRE(realpath(rel.c_str(), buf) != nullptr);
  return buf;
}

std::string TmpDir() {
  const char* t = std::getenv("TEST_TMPDIR");
  return t != nullptr ? t : "/tmp";
}

struct Result {
  int exit_code = -1;
  std::string out;
};

Result Run(const std::string& command) {
  Result r;
  FILE* p = popen((command + " 2>&1").c_str(), "r");
  REQUIRE(p != nullptr);
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) r.out.append(buf, n);
  const int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128;
  return r;
}

// The flags of one invocation and what they imply.
struct Flags {
  int batch = 4;
  int prompt = 60;
  int steps = 8;
  int runs = 1;
  int warmup = 1;
  int layers = 2;
  int hidden = 128;
  int ffn = 256;
  int vocab = 512;
  int spec = 0;
  bool graph = false;
  bool streams = false;

  std::string Args() const {
    std::ostringstream s;
    s << " --batch " << batch << " --prompt-len " << prompt << " --steps " << steps
      << " --runs " << runs << " --warmup-runs " << warmup << " --layers " << layers
      << " --hidden " << hidden << " --ffn " << ffn << " --vocab " << vocab << " --spec "
      << spec << (graph ? " --graph" : "") << (streams ? " --streams" : "");
    return s.str();
  }
  int total_runs() const { return runs + warmup; }
  long long forwards() const { return static_cast<long long>(total_runs()) * (1 + steps); }
  int max_kv() const { return (prompt + (steps + 1) * (spec + 1) + 63) / 64 * 64; }
};

// Launches per kernel for the whole process (per rank), from kernels/engine.cc's structure.
std::map<std::string, long long> ExpectedKernelCounts(const Flags& f) {
  const long long fw = f.forwards();
  const long long l = f.layers;
  const long long decode = static_cast<long long>(f.total_runs()) * f.steps;
  return {
      {"init_weights_kernel", 3 + 9 * l},
      {"embedding_kernel", fw},
      {"rms_norm_kernel", fw},
      {"fused_add_rms_norm_kernel", 2 * l * fw},
      {"gemm_kernel", (4 * l + 1) * fw},
      {"rotary_embedding_kernel", l * fw},
      {"reshape_and_cache_kernel", l * fw},
      {"flash_attn_prefill_kernel", l * f.total_runs()},
      {"flash_attn_decode_kernel", l * decode},
      {"flash_attn_combine_kernel", l * decode},
      {"silu_and_mul_kernel", l * fw},
      {"topk_topp_sampling_kernel", fw},
  };
}

class Env {
 public:
  Env() {
    bin_ = AbsPath("kernels/inference");
    costs_ = AbsPath("kernels/gpusim_costs.txt");
    libdir_ = AbsPath("tests/gpusim/libcudart.so.13");
    libdir_ = libdir_.substr(0, libdir_.rfind('/'));
    // libnccl.so.2 must sit beside it (both are outputs of //tests/gpusim).
    const std::string nccl = AbsPath("tests/gpusim/libnccl.so.2");
    nccl_dir_ = nccl.substr(0, nccl.rfind('/'));
  }
  std::string NvtxPrefix(const std::string& out) const {
    return "env NVTX_INJECTION64_PATH=" + AbsPath("tests/integration/demo_nvtx_recorder.so") +
           " DEMO_NVTX_OUT=" + out + " ";
  }
  std::string Prefix(const std::string& truth) const {
    return "env HOME=" + TmpDir() + " LD_LIBRARY_PATH=" + libdir_ + ":" + nccl_dir_ +
           " GPUSIM_COSTS=" + costs_ + " GPUSIM_TRUTH=" + truth + " ";
  }
  const std::string& bin() const { return bin_; }

 private:
  std::string bin_, costs_, libdir_, nccl_dir_;
};

std::vector<std::string> Lines(const std::string& out, const std::string& prefix) {
  std::vector<std::string> lines;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, prefix.size(), prefix) == 0) lines.push_back(line);
  }
  return lines;
}

// The value of `key=` in a line ("" if absent).
std::string Field(const std::string& line, const std::string& key) {
  const std::string k = key + "=";
  size_t p = 0;
  while ((p = line.find(k, p)) != std::string::npos) {
    if (p == 0 || line[p - 1] == ' ') {
      const size_t e = line.find(' ', p);
      return line.substr(p + k.size(), e == std::string::npos ? std::string::npos
                                                              : e - p - k.size());
    }
    p += k.size();
  }
  return "";
}

std::vector<std::string> FilesWithPrefix(const std::string& dir, const std::string& prefix) {
  std::vector<std::string> files;
  DIR* d = opendir(dir.c_str());
  REQUIRE(d != nullptr);
  while (dirent* e = readdir(d)) {
    const std::string n = e->d_name;
    if (n.compare(0, prefix.size(), prefix) == 0) files.push_back(dir + "/" + n);
  }
  closedir(d);
  std::sort(files.begin(), files.end());
  return files;
}

// kernels/gpusim_costs.txt, read with the grammar of tests/gpusim/cost_model.h.
struct CostRule {
  std::regex regex;
  std::string pattern;
  double fixed_us = 0.0;
  double per_thread_us = 0.0;
};

std::vector<CostRule> ReadCostRules(const std::string& path) {
  std::ifstream in(path);
  REQUIRE(in.good());
  std::vector<CostRule> rules;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string pattern;
    if (!(words >> pattern) || pattern[0] == '#') continue;
    CostRule rule;
    rule.pattern = pattern;
    rule.regex = std::regex(pattern, std::regex::ECMAScript);
    REQUIRE(words >> rule.fixed_us);
    std::string plus, per_thread;
    if (words >> plus) {
      REQUIRE(plus == "+");
      REQUIRE(words >> per_thread);
      const size_t star = per_thread.find("*threads");
      REQUIRE(star != std::string::npos);
      rule.per_thread_us = std::stod(per_thread.substr(0, star));
    }
    rules.push_back(std::move(rule));
  }
  return rules;
}

// Every kernel of the demo matches a rule of the shipped cost file (not the simulator's 2 us
// default) and lasted at least what the rule says (the simulator may only run late).
void CheckKernelCosts(const std::vector<Op>& ops, const std::vector<CostRule>& rules) {
  for (const Op& op : ops) {
    if (op.op != "kernel") continue;
    INFO(op.name);
    const CostRule* rule = nullptr;
    for (const CostRule& r : rules) {
      if (std::regex_search(op.name, r.regex)) {
        rule = &r;
        break;
      }
    }
    REQUIRE(rule != nullptr);
    // The first matching rule is the kernel's own one (e.g. rms_norm must not catch
    // fused_add_rms_norm).
    CHECK(rule->pattern.find(ShortName(op.name)) != std::string::npos);
    long long threads = 1;
    for (long long v : op.Arr("grid")) threads *= v;
    for (long long v : op.Arr("block")) threads *= v;
    const double expected_ns = (rule->fixed_us + rule->per_thread_us * threads) * 1000.0;
    CHECK(static_cast<double>(op.Int("end_ns") - op.Int("start_ns")) >= 0.99 * expected_ns);
  }
}

void CheckKernelCounts(const std::vector<Op>& ops, const Flags& f) {
  const auto counts = KernelCounts(ops);
  for (const auto& [name, expected] : ExpectedKernelCounts(f)) {
    INFO("kernel " << name);
    auto it = counts.find(name);
    REQUIRE(it != counts.end());
    CHECK(it->second == expected);
  }
  for (const auto& [name, n] : counts) {
    INFO("unexpected kernel " << name);
    CHECK(ExpectedKernelCounts(f).count(name) == 1);
  }
}

}  // namespace

TEST_CASE("single rank: kernel counts, attention grid follows the KV length, copies per step") {
  Env env;
  Flags f;  // spec 0: every decode step appends exactly one token per sequence
  const std::string truth = TmpDir() + "/single.jsonl";
  std::remove(truth.c_str());
  const Result r = Run(env.Prefix(truth) + env.bin() + f.Args());
  INFO(r.out);
  REQUIRE(r.exit_code == 0);

  const auto runs = Lines(r.out, "run ");
  REQUIRE(runs.size() == static_cast<size_t>(f.total_runs()));
  CHECK(Field(runs[0], "warmup") == "1");
  CHECK(Field(runs[1], "warmup") == "0");
  for (const std::string& line : runs) {
    CHECK(std::stoll(Field(line, "tokens")) == f.batch * (1LL + f.steps));
    CHECK(std::stod(Field(line, "gpu_ms")) > 0.0);
  }
  REQUIRE(Lines(r.out, "rank=0 ").size() == 1);

  const std::vector<Op> ops = ReadTruth(truth);
  CheckKernelCounts(ops, f);
  CheckKernelCosts(ops, ReadCostRules("kernels/gpusim_costs.txt"));
  for (const Op& op : ops) {
    CHECK(op.Int("rank") == -1);  // not launched by MPI
  }

  // Decode attention: grid (ceil(kv / 64), heads, batch) with kv = prompt + step + 1.
  const auto attn = Kernels(ops, "flash_attn_decode_kernel");
  REQUIRE(attn.size() == static_cast<size_t>(f.layers * f.steps * f.total_runs()));
  size_t k = 0;
  std::set<long long> widths;
  for (int run = 0; run < f.total_runs(); ++run) {
    for (int step = 0; step < f.steps; ++step) {
      const long long kv = f.prompt + step + 1;
      for (int layer = 0; layer < f.layers; ++layer, ++k) {
        const auto grid = attn[k]->Arr("grid");
        INFO("run " << run << " step " << step << " layer " << layer);
        REQUIRE(grid.size() == 3);
        CHECK(grid[0] == (kv + 63) / 64);
        CHECK(grid[1] == f.hidden / 64);
        CHECK(grid[2] == f.batch);
        CHECK(attn[k]->Arr("block")[0] == 64);
        widths.insert(grid[0]);
      }
    }
  }
  CHECK(widths.size() == 2);  // 60 + 1 .. 60 + 8 crosses one 64-token chunk boundary

  // Per forward pass: one HtoD of the step inputs, one DtoH of the sampled tokens.
  int htod = 0, dtoh = 0, memsets = 0;
  std::vector<long long> dtoh_bytes;
  for (const Op& op : ops) {
    if (op.op == "memcpy" && op.Str("kind") == "HtoD") ++htod;
    if (op.op == "memcpy" && op.Str("kind") == "DtoH") {
      ++dtoh;
      dtoh_bytes.push_back(op.Int("bytes"));
    }
    if (op.op == "memset") ++memsets;
  }
  CHECK(htod == f.forwards());
  CHECK(dtoh == f.forwards());
  CHECK(memsets == 1);
  for (long long b : dtoh_bytes) CHECK(b == 4LL * f.batch);

  // Prefill attention covers the prompt: grid (ceil(prompt / 64), heads, batch).
  for (const Op* op : Kernels(ops, "flash_attn_prefill_kernel")) {
    CHECK(op->Arr("grid") == std::vector<long long>{(f.prompt + 63) / 64, f.hidden / 64, f.batch});
  }
  // The LM head of a prefill reads one row per sequence, of a decode step every token: gemm
  // grid (ceil(vocab / 16), ceil(rows / 16)); the sampling kernel has one block per row.
  for (const Op* op : Kernels(ops, "topk_topp_sampling_kernel")) {
    CHECK(op->Arr("grid")[0] == f.batch);
  }
}

TEST_CASE("speculative decoding: tokens per step vary, attention grid never shrinks in a run") {
  Env env;
  Flags f;
  f.spec = 3;
  f.steps = 10;
  const std::string truth = TmpDir() + "/spec.jsonl";
  std::remove(truth.c_str());
  const Result r = Run(env.Prefix(truth) + env.bin() + f.Args());
  INFO(r.out);
  REQUIRE(r.exit_code == 0);
  const auto runs = Lines(r.out, "run ");
  REQUIRE(runs.size() == static_cast<size_t>(f.total_runs()));
  std::set<long long> run_tokens;
  for (const std::string& line : runs) {
    const long long t = std::stoll(Field(line, "tokens"));
    // Each decode step keeps 1..spec+1 tokens per sequence.
    CHECK(t > f.batch * (1LL + f.steps));
    CHECK(t <= f.batch * (1LL + f.steps * (f.spec + 1)));
    run_tokens.insert(t);
  }
  CHECK(run_tokens.size() == runs.size());  // acceptance differs per run (seeded by run)

  const std::vector<Op> ops = ReadTruth(truth);
  CheckKernelCounts(ops, f);
  // Every decode step verifies spec + 1 tokens per sequence: sampling over batch*(spec+1) rows.
  const auto sampling = Kernels(ops, "topk_topp_sampling_kernel");
  REQUIRE(sampling.size() == static_cast<size_t>(f.forwards()));
  for (size_t i = 0; i < sampling.size(); ++i) {
    const bool prefill = i % (1 + f.steps) == 0;
    CHECK(sampling[i]->Arr("grid")[0] == (prefill ? f.batch : f.batch * (f.spec + 1)));
  }
  const auto attn = Kernels(ops, "flash_attn_decode_kernel");
  REQUIRE(attn.size() == static_cast<size_t>(f.layers * f.steps * f.total_runs()));
  const size_t per_run = static_cast<size_t>(f.layers * f.steps);
  for (int run = 0; run < f.total_runs(); ++run) {
    long long prev = 0;
    for (size_t i = run * per_run; i < (run + 1) * per_run; ++i) {
      const long long w = attn[i]->Arr("grid")[0];
      CHECK(w >= prev);
      prev = w;
    }
    // First step: kv = prompt + spec + 1; last: at least one token per step was kept.
    CHECK(attn[run * per_run]->Arr("grid")[0] == (f.prompt + f.spec + 1 + 63) / 64);
    CHECK(prev >= (f.prompt + f.steps + f.spec + 1 + 63) / 64);
    CHECK(prev <= f.max_kv() / 64);
  }
}

TEST_CASE("graph and streams: decode replays a graph, sampling runs on its own stream") {
  Env env;
  Flags f;
  f.graph = true;
  f.streams = true;
  const std::string truth = TmpDir() + "/graph.jsonl";
  std::remove(truth.c_str());
  const Result r = Run(env.Prefix(truth) + env.bin() + f.Args());
  INFO(r.out);
  REQUIRE(r.exit_code == 0);
  const std::vector<Op> ops = ReadTruth(truth);
  CheckKernelCounts(ops, f);

  const long long decode = static_cast<long long>(f.total_runs()) * f.steps;
  const long long per_decode_forward = 2 + f.layers * 11LL + 1;  // engine.cc Forward, decode
  long long from_graph = 0;
  for (const Op& op : ops) {
    if (op.op == "kernel" && op.Int("graph") != 0) ++from_graph;
  }
  CHECK(from_graph == decode * per_decode_forward);
  // Graph replays size the attention grid for the longest KV.
  for (const Op* op : Kernels(ops, "flash_attn_decode_kernel")) {
    CHECK(op->Int("graph") != 0);
    CHECK(op->Arr("grid")[0] == f.max_kv() / 64);
  }
  for (const Op* op : Kernels(ops, "flash_attn_prefill_kernel")) CHECK(op->Int("graph") == 0);
  const long long compute_stream = Kernels(ops, "gemm_kernel")[0]->Int("stream");
  for (const Op* op : Kernels(ops, "topk_topp_sampling_kernel")) {
    CHECK(op->Int("graph") == 0);
    CHECK(op->Int("stream") != compute_stream);
  }
}

TEST_CASE("two ranks under mpirun: tensor-parallel AllReduces line up, checksums agree") {
  Env env;
  Flags f;
  f.spec = 2;
  // Reference: the same flags in one process.
  const std::string single_truth = TmpDir() + "/tp_ref.jsonl";
  std::remove(single_truth.c_str());
  const Result single = Run(env.Prefix(single_truth) + env.bin() + f.Args());
  INFO(single.out);
  REQUIRE(single.exit_code == 0);
  const auto single_sum = Lines(single.out, "rank=0 ");
  REQUIRE(single_sum.size() == 1);

  const std::string dir = TmpDir() + "/tp";
  REQUIRE(Run("rm -rf " + dir + " && mkdir -p " + dir).exit_code == 0);
  const std::string truth = dir + "/truth_%p.jsonl";
  const Result r = Run(env.Prefix(truth) +
                       "mpirun --allow-run-as-root --oversubscribe -np 2 -x LD_LIBRARY_PATH -x "
                       "GPUSIM_TRUTH -x GPUSIM_COSTS " +
                       env.bin() + f.Args());
  INFO(r.out);
  REQUIRE(r.exit_code == 0);
  const auto sums = Lines(r.out, "rank=");
  REQUIRE(sums.size() == 2);
  CHECK(Field(sums[0], "checksum") == Field(sums[1], "checksum"));
  CHECK(Field(sums[0], "tokens") == Field(sums[1], "tokens"));
  // Same prompts, drafts and acceptance as one process.
  CHECK(Field(sums[0], "checksum") == Field(single_sum[0], "checksum"));
  CHECK(Field(sums[0], "tokens") == Field(single_sum[0], "tokens"));

  const auto files = FilesWithPrefix(dir, "truth_");
  REQUIRE(files.size() == 2);
  std::vector<std::vector<Op>> rank_ops(2);
  for (const std::string& file : files) {
    std::vector<Op> ops = ReadTruth(file);
    REQUIRE(!ops.empty());
    const long long rank = ops[0].Int("rank");
    REQUIRE((rank == 0 || rank == 1));
    for (const Op& op : ops) REQUIRE(op.Int("rank") == rank);
    rank_ops[rank] = std::move(ops);
  }
  REQUIRE(!rank_ops[0].empty());
  REQUIRE(!rank_ops[1].empty());

  const long long expected_collectives = 2LL * f.layers * f.forwards();
  std::vector<std::vector<const Op*>> colls(2);
  for (int rank = 0; rank < 2; ++rank) {
    CheckKernelCounts(rank_ops[rank], f);  // the shard size changes grids, not launches
    // Each rank holds half of the heads: decode attention grid.y == heads / 2.
    for (const Op* op : Kernels(rank_ops[rank], "flash_attn_decode_kernel")) {
      CHECK(op->Arr("grid")[1] == f.hidden / 64 / 2);
    }
    for (const Op& op : rank_ops[rank]) {
      if (op.op != "collective") continue;
      colls[rank].push_back(&op);
      CHECK(op.name == "AllReduce");
      CHECK(op.Int("nranks") == 2);
      CHECK(op.Int("comm_rank") == rank);
      CHECK(op.Str("dtype") == "float32");
    }
    CHECK(static_cast<long long>(colls[rank].size()) == expected_collectives);
    std::sort(colls[rank].begin(), colls[rank].end(),
              [](const Op* a, const Op* b) { return a->Int("seq") < b->Int("seq"); });
  }
  REQUIRE(colls[0].size() == colls[1].size());
  // seq 0..n-1 on both ranks, the same communicator, the same payload per seq; a prefill
  // reduces batch*prompt rows, a decode step batch*(spec+1) rows of `hidden` floats.
  const long long per_forward = 2LL * f.layers;
  for (size_t i = 0; i < colls[0].size(); ++i) {
    const Op& a = *colls[0][i];
    const Op& b = *colls[1][i];
    INFO("collective " << i);
    CHECK(a.Int("seq") == static_cast<long long>(i));
    CHECK(b.Int("seq") == static_cast<long long>(i));
    CHECK(a.Str("comm") == b.Str("comm"));
    CHECK(a.Int("count") == b.Int("count"));
    const long long forward = static_cast<long long>(i) / per_forward;
    const bool prefill = forward % (1 + f.steps) == 0;
    const long long rows = prefill ? 1LL * f.batch * f.prompt : 1LL * f.batch * (f.spec + 1);
    CHECK(a.Int("count") == rows * f.hidden);
    CHECK(a.Int("bytes") == rows * f.hidden * 4);
    // The collective starts when the last rank arrives: the same instant on both ranks.
    CHECK(a.Int("start_ns") == b.Int("start_ns"));
    CHECK(a.Int("arrive_ns") <= a.Int("start_ns"));
    CHECK(b.Int("arrive_ns") <= b.Int("start_ns"));
  }
}

namespace {

// One recorded NVTX range with its children, from demo_nvtx_recorder's push/pop lines.
struct Range {
  std::string message;
  std::vector<Range> children;
};

Range ReadNvtxTree(const std::string& path) {
  std::ifstream in(path);
  REQUIRE(in.good());
  Range root;
  std::vector<Range*> stack{&root};
  std::string line;
  while (std::getline(in, line)) {
    INFO(line);
    if (line.compare(0, 5, "push ") == 0) {
      const size_t sp = line.find(' ', 5);
      REQUIRE(sp != std::string::npos);
      REQUIRE(std::stoi(line.substr(5, sp - 5)) == static_cast<int>(stack.size()) - 1);
      stack.back()->children.push_back(Range{line.substr(sp + 1), {}});
      stack.push_back(&stack.back()->children.back());
    } else {
      REQUIRE(line.compare(0, 4, "pop ") == 0);
      REQUIRE(stack.size() > 1);
      stack.pop_back();
      REQUIRE(std::stoi(line.substr(4)) == static_cast<int>(stack.size()) - 1);
    }
  }
  REQUIRE(stack.size() == 1);  // every range was closed
  return root;
}

std::vector<long long> SplitInts(const std::string& csv) {
  std::vector<long long> out;
  std::istringstream in(csv);
  std::string item;
  while (std::getline(in, item, ',')) out.push_back(std::stoll(item));
  return out;
}

std::vector<std::string> ChildNames(const Range& r) {
  std::vector<std::string> names;
  for (const Range& c : r.children) names.push_back(c.message);
  return names;
}

}  // namespace

TEST_CASE("NVTX: run and step ranges carry tokens, kv and bsz consistent with the run") {
  Env env;
  Flags f;
  f.spec = 2;
  f.steps = 6;
  const std::string nvtx = TmpDir() + "/nvtx.txt";
  const std::string truth = TmpDir() + "/nvtx_truth.jsonl";
  std::remove(nvtx.c_str());
  const Result r = Run(env.NvtxPrefix(nvtx) + env.Prefix(truth) + env.bin() + f.Args());
  INFO(r.out);
  REQUIRE(r.exit_code == 0);
  const auto run_lines = Lines(r.out, "run ");
  REQUIRE(run_lines.size() == static_cast<size_t>(f.total_runs()));

  const Range root = ReadNvtxTree(nvtx);
  REQUIRE(root.children.size() == 1 + static_cast<size_t>(f.total_runs()));
  CHECK(root.children[0].message == "load_weights");
  for (int run = 0; run < f.total_runs(); ++run) {
    const Range& rr = root.children[1 + run];
    INFO("run " << run);
    CHECK(rr.message == std::string("run label=bs4") + (run < f.warmup ? " warmup=1" : ""));
    REQUIRE(rr.children.size() == 1 + static_cast<size_t>(f.steps));
    long long run_tokens = 0;
    std::vector<long long> prev_kv;
    long long prev_tokens = 0;
    for (size_t s = 0; s < rr.children.size(); ++s) {
      const Range& step = rr.children[s];
      INFO(step.message);
      REQUIRE(step.message.compare(0, 5, "step ") == 0);
      const bool prefill = s == 0;
      CHECK(Field(step.message, "phase") == (prefill ? "prefill" : "decode"));
      CHECK(Field(step.message, "bsz") == std::to_string(f.batch));
      const long long tokens = std::stoll(Field(step.message, "tokens"));
      const std::vector<long long> kv = SplitInts(Field(step.message, "kv"));
      REQUIRE(kv.size() == static_cast<size_t>(f.batch));
      run_tokens += tokens;
      if (prefill) {
        CHECK(tokens == f.batch);
        for (long long v : kv) CHECK(v == f.prompt);
      } else {
        CHECK(tokens >= f.batch);
        CHECK(tokens <= f.batch * (f.spec + 1LL));
        // kv = committed length + spec + 1; each sequence grew by the tokens it kept.
        long long grown = 0;
        for (int b = 0; b < f.batch; ++b) {
          const long long committed_before = s == 1 ? f.prompt : prev_kv[b] - (f.spec + 1);
          const long long delta = kv[b] - (f.spec + 1) - committed_before;
          if (s == 1) {
            CHECK(delta == 0);
          } else {
            CHECK(delta >= 1);
            CHECK(delta <= f.spec + 1);
            grown += delta;
          }
        }
        if (s > 1) CHECK(grown == prev_tokens);
      }
      prev_kv = kv;
      prev_tokens = tokens;
      // Engine phases, in order.
      CHECK(ChildNames(step) == std::vector<std::string>{"schedule", prefill ? "prefill" : "decode",
                                                         "sampler", "postproc"});
      const Range& fwd = step.children.at(1);
      REQUIRE(fwd.children.size() == static_cast<size_t>(f.layers) + 1);
      for (int l = 0; l < f.layers; ++l) {
        CHECK(fwd.children[l].message == "layer " + std::to_string(l));
        CHECK(ChildNames(fwd.children[l]) ==
              std::vector<std::string>{"qkv_proj", "kv.append", "attention", "o_proj",
                                       "gate_up_proj", "down_proj"});
      }
      CHECK(fwd.children.back().message == "lm_head");
    }
    CHECK(std::to_string(run_tokens) == Field(run_lines[run], "tokens"));
  }
}

TEST_CASE("two ranks with --graph: piecewise graphs, AllReduces between the segments") {
  Env env;
  Flags f;
  f.graph = true;
  f.streams = true;
  const std::string dir = TmpDir() + "/tp_graph";
  REQUIRE(Run("rm -rf " + dir + " && mkdir -p " + dir).exit_code == 0);
  const Result r = Run(env.Prefix(dir + "/truth_%p.jsonl") +
                       "mpirun --allow-run-as-root --oversubscribe -np 2 -x LD_LIBRARY_PATH -x "
                       "GPUSIM_TRUTH -x GPUSIM_COSTS " +
                       env.bin() + f.Args());
  INFO(r.out);
  REQUIRE(r.exit_code == 0);
  const auto sums = Lines(r.out, "rank=");
  REQUIRE(sums.size() == 2);
  CHECK(Field(sums[0], "checksum") == Field(sums[1], "checksum"));
  const auto files = FilesWithPrefix(dir, "truth_");
  REQUIRE(files.size() == 2);
  const long long decode = static_cast<long long>(f.total_runs()) * f.steps;
  for (const std::string& file : files) {
    const std::vector<Op> ops = ReadTruth(file);
    CheckKernelCounts(ops, f);
    long long from_graph = 0, collectives = 0;
    for (const Op& op : ops) {
      if (op.op == "kernel" && op.Int("graph") != 0) ++from_graph;
      if (op.op == "collective") ++collectives;
    }
    CHECK(from_graph == decode * (2 + f.layers * 11LL + 1));
    // No collective is lost to the capture: they run eagerly between segment replays.
    CHECK(collectives == 2LL * f.layers * f.forwards());
  }
}
