// End-to-end tests of gpusim's libcudart.so.13: runs nvcc-built programs (testdata/*.cu) as
// child processes with LD_LIBRARY_PATH pointing at the simulated runtime, then checks what they
// printed and the ground-truth log (GPUSIM_TRUTH) they left.
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct RunResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

std::string TmpDir() {
  const char* t = getenv("TEST_TMPDIR");
  return t != nullptr ? t : "/tmp";
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Runs a program of this package (a runfiles path relative to the workspace root) against
// gpusim's libcudart.so.13, with extra environment variables.
RunResult Run(const std::string& program, const std::vector<std::string>& args,
              const std::vector<std::string>& env) {
  char lib_dir[PATH_MAX];
  REQUIRE(realpath("tests/gpusim", lib_dir) != nullptr);
  std::string out_path = TmpDir() + "/child.out", err_path = TmpDir() + "/child.err";
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(out, 1);
    dup2(err, 2);
    setenv("LD_LIBRARY_PATH", lib_dir, 1);
    unsetenv("GPUSIM_COSTS");
    unsetenv("GPUSIM_TRUTH");
    for (const std::string& kv : env) putenv(const_cast<char*>(kv.c_str()));
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(program.c_str()));
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(program.c_str(), argv.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  RunResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = ReadFile(out_path);
  r.err = ReadFile(err_path);
  return r;
}

// One ground-truth line. Only the keys the tests use.
struct TruthOp {
  std::string op, name, kind;
  int64_t stream = -1, corr = -1, graph = -1, node = -1, pid = -1, device = -1, rank = -2;
  int64_t queued_ns = 0, start_ns = 0, end_ns = 0, bytes = -1;
  std::vector<int64_t> grid, block;
  int64_t duration() const { return end_ns - start_ns; }
};

// Value of "key" in a flat JSON object line: the raw text up to the next ',' or '}' (strings
// without their quotes, arrays as "[..]").
bool RawValue(const std::string& line, const std::string& key, std::string* out) {
  std::string pat = "\"" + key + "\":";
  size_t p = line.find(pat);
  if (p == std::string::npos) return false;
  p += pat.size();
  if (line[p] == '"') {
    size_t e = p + 1;
    std::string v;
    for (; e < line.size() && line[e] != '"'; ++e) {
      if (line[e] == '\\') ++e;
      v += line[e];
    }
    *out = v;
  } else if (line[p] == '[') {
    *out = line.substr(p, line.find(']', p) - p + 1);
  } else {
    size_t e = line.find_first_of(",}", p);
    *out = line.substr(p, e - p);
  }
  return true;
}

int64_t IntValue(const std::string& line, const std::string& key) {
  std::string v;
  return RawValue(line, key, &v) ? std::stoll(v) : -1;
}

std::vector<int64_t> ArrayValue(const std::string& line, const std::string& key) {
  std::string v;
  std::vector<int64_t> out;
  if (!RawValue(line, key, &v)) return out;
  std::stringstream ss(v.substr(1, v.size() - 2));
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(std::stoll(item));
  return out;
}

std::vector<TruthOp> ReadTruth(const std::string& path) {
  std::vector<TruthOp> ops;
  std::ifstream f(path);
  std::string line;
  while (std::getline(f, line)) {
    if (line.empty()) continue;
    INFO(line);
    REQUIRE(line.front() == '{');
    REQUIRE(line.back() == '}');
    TruthOp t;
    RawValue(line, "op", &t.op);
    RawValue(line, "name", &t.name);
    RawValue(line, "kind", &t.kind);
    t.pid = IntValue(line, "pid");
    t.rank = IntValue(line, "rank");
    t.device = IntValue(line, "device");
    t.stream = IntValue(line, "stream");
    t.corr = IntValue(line, "corr");
    t.graph = IntValue(line, "graph");
    t.node = IntValue(line, "node");
    t.queued_ns = IntValue(line, "queued_ns");
    t.start_ns = IntValue(line, "start_ns");
    t.end_ns = IntValue(line, "end_ns");
    t.bytes = IntValue(line, "bytes");
    t.grid = ArrayValue(line, "grid");
    t.block = ArrayValue(line, "block");
    REQUIRE(t.start_ns >= t.queued_ns);
    REQUIRE(t.end_ns >= t.start_ns);
    ops.push_back(t);
  }
  return ops;
}

// The single kernel whose demangled name starts with `name`.
const TruthOp& Kernel(const std::vector<TruthOp>& ops, const std::string& name) {
  const TruthOp* found = nullptr;
  int n = 0;
  for (const TruthOp& t : ops) {
    if (t.op == "kernel" && t.name.rfind(name + "(", 0) == 0) {
      found = &t;
      ++n;
    }
  }
  INFO("kernel " << name);
  REQUIRE(n == 1);
  return *found;
}

// The single op of type `op` ("memcpy", "memset") with `bytes` bytes, copy kind `kind` (memcpy
// only) and graph id `graph` (0: enqueued by an API call, -1: any graph).
const TruthOp& One(const std::vector<TruthOp>& ops, const std::string& op,
                   const std::string& kind, int64_t bytes, int64_t graph = 0) {
  const TruthOp* found = nullptr;
  int n = 0;
  for (const TruthOp& t : ops) {
    if (t.op == op && (op != "memcpy" || t.kind == kind) && t.bytes == bytes &&
        (graph < 0 ? t.graph > 0 : t.graph == graph)) {
      found = &t;
      ++n;
    }
  }
  INFO(op << " " << kind << " " << bytes << " bytes, graph " << graph);
  REQUIRE(n == 1);
  return *found;
}

// Value printed by a test program as "<key> <value>".
double Printed(const std::string& out, const std::string& key) {
  size_t p = out.find(key + " ");
  INFO(out);
  REQUIRE(p != std::string::npos);
  return std::stod(out.substr(p + key.size() + 1));
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream f(path);
  f << text;
}

// Within each stream, ops run in the order they were enqueued (correlation ids increase) and
// never overlap.
void CheckStreamsSerial(const std::vector<TruthOp>& ops) {
  std::map<int64_t, std::vector<const TruthOp*>> by_stream;
  for (const TruthOp& t : ops) by_stream[t.stream].push_back(&t);
  for (auto& kv : by_stream) {
    auto& v = kv.second;
    std::stable_sort(v.begin(), v.end(), [](const TruthOp* a, const TruthOp* b) {
      return a->start_ns < b->start_ns;
    });
    for (size_t i = 1; i < v.size(); ++i) {
      INFO("stream " << kv.first << " op " << i << " " << v[i]->name);
      CHECK(v[i]->start_ns >= v[i - 1]->end_ns);
      CHECK(v[i]->corr >= v[i - 1]->corr);
    }
  }
}

const char kCosts[] =
    "# gpusim costs for sim_timing (us)\n"
    "^p1_warm 1000\n"
    "^p1_long 2000\n"
    "^p1_mid 500 + 0.001*threads\n"
    "^p1_other 2000\n"
    // Long enough that the next launches (another stream) start before it ends even when the
    // host thread is starved for milliseconds on a busy 2-core machine.
    "^p2_long 20000\n"
    "^p2_ 300\n"
    "^p3_first 300\n"
    "^p3_waiter 100\n"
    "^p3_after 1000\n"
    "^g_ 200\n";

// The checks of sim_timing's scenario; `legacy` is false for the per-thread-default-stream
// build, where <<<>>> without a stream goes to the per-thread stream (no legacy semantics).
void CheckTimingScenario(const std::string& program, bool legacy) {
  std::string costs = TmpDir() + "/costs.txt", truth = TmpDir() + "/truth_timing.jsonl";
  WriteFile(costs, kCosts);
  remove(truth.c_str());
  RunResult r = Run(program, {}, {"GPUSIM_COSTS=" + costs, "GPUSIM_TRUTH=" + truth});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.err.empty());
  std::vector<TruthOp> ops = ReadTruth(truth);
  CheckStreamsSerial(ops);

  // GPUSIM_COSTS durations are honoured (first matching rule; threads term).
  const TruthOp& warm = Kernel(ops, "p1_warm");
  const TruthOp& lng = Kernel(ops, "p1_long");
  const TruthOp& mid = Kernel(ops, "p1_mid");
  const TruthOp& other = Kernel(ops, "p1_other");
  CHECK(warm.duration() == Approx(1000000).margin(30000).epsilon(0.05));
  CHECK(lng.duration() == Approx(2000000).margin(30000).epsilon(0.05));
  // 500 us + 0.001 us * 1024 * 256 threads.
  CHECK(mid.duration() == Approx(762144).margin(30000).epsilon(0.05));
  CHECK(Kernel(ops, "p2_legacy").duration() == Approx(300000).margin(30000).epsilon(0.05));
  CHECK(Kernel(ops, "p3_waiter").duration() == Approx(100000).margin(30000).epsilon(0.05));
  CHECK(mid.grid == std::vector<int64_t>{1024, 1, 1});
  CHECK(mid.block == std::vector<int64_t>{256, 1, 1});

  // Order in s1, overlap of s1 and s2, events time exactly what ran between them.
  CHECK(lng.stream == mid.stream);
  CHECK(lng.stream != other.stream);
  CHECK(mid.start_ns >= lng.end_ns);
  CHECK(std::max(lng.start_ns, other.start_ns) < std::min(lng.end_ns, other.end_ns));
  double elapsed_ms = Printed(r.out, "elapsed_ms");
  CHECK(elapsed_ms * 1e6 == Approx(static_cast<double>(lng.duration())).margin(2000));
  // Synchronization is real: the host returned from cudaDeviceSynchronize after the ends.
  double synced = Printed(r.out, "phase1_synced_ns");
  CHECK(synced >= static_cast<double>(std::max(mid.end_ns, other.end_ns)));

  // Legacy default stream: waits for blocking s1, holds back s2, not the non-blocking s3.
  const TruthOp& p2_long = Kernel(ops, "p2_long");
  const TruthOp& p2_legacy = Kernel(ops, "p2_legacy");
  const TruthOp& p2_nb = Kernel(ops, "p2_nonblocking");
  const TruthOp& p2_after = Kernel(ops, "p2_after");
  CHECK(p2_nb.start_ns < p2_long.end_ns);
  if (legacy) {
    CHECK(p2_legacy.stream == 0);
    CHECK(p2_legacy.start_ns >= p2_long.end_ns);
    CHECK(p2_after.start_ns >= p2_legacy.end_ns);
  } else {
    CHECK(p2_legacy.stream != 0);
    CHECK(p2_legacy.start_ns < p2_long.end_ns);
  }

  // Host function in stream order; cross-stream event wait.
  CHECK(Printed(r.out, "hostfn_ran") == 1);
  const TruthOp& p3_first = Kernel(ops, "p3_first");
  const TruthOp& p3_waiter = Kernel(ops, "p3_waiter");
  const TruthOp* hostfn = nullptr;
  for (const TruthOp& t : ops) {
    if (t.op == "hostfn") hostfn = &t;
  }
  REQUIRE(hostfn != nullptr);
  CHECK(hostfn->stream == p3_first.stream);
  CHECK(hostfn->start_ns >= p3_first.end_ns);
  CHECK(p3_waiter.stream != p3_first.stream);
  CHECK(p3_waiter.start_ns >= hostfn->end_ns);
  // s2 waited for the event (after the host function), not for p3_after enqueued after it.
  const TruthOp& p3_after = Kernel(ops, "p3_after");
  CHECK(p3_after.start_ns >= hostfn->end_ns);
  CHECK(p3_waiter.start_ns < p3_after.end_ns);

  // Graph: captured ops did not run at capture; two replays, each op with the graph id and the
  // correlation id of its cudaGraphLaunch.
  CHECK(Printed(r.out, "capturing") == 1);
  std::vector<const TruthOp*> graph_ops;
  for (const TruthOp& t : ops) {
    if (t.name.rfind("g_", 0) == 0 || (t.op == "memset" && t.graph != 0)) {
      graph_ops.push_back(&t);
    }
  }
  REQUIRE(graph_ops.size() == 8);
  CHECK(Printed(r.out, "s2_capturing_after_end") == 0);
  std::map<int64_t, int> per_launch;
  for (const TruthOp* t : graph_ops) {
    CHECK(t->graph > 0);
    CHECK(t->graph == graph_ops[0]->graph);
    ++per_launch[t->corr];
  }
  CHECK(per_launch.size() == 2);
  for (auto& kv : per_launch) CHECK(kv.second == 4);  // g_first, memset, g_second, g_forked
  for (const TruthOp& t : ops) {
    if (t.name.rfind("p", 0) == 0) CHECK(t.graph == 0);
  }
}

// Kernels named `name` (demangled name starts with "name("), in truth order.
std::vector<const TruthOp*> Kernels(const std::vector<TruthOp>& ops, const std::string& name) {
  std::vector<const TruthOp*> out;
  for (const TruthOp& t : ops) {
    if (t.op == "kernel" && t.name.rfind(name + "(", 0) == 0) out.push_back(&t);
  }
  return out;
}

// Default-model kernel duration under sim_graph's costs: 100 us + 1 ns per thread.
int64_t GraphKernelNs(int64_t grid, int64_t block) { return 100000 + grid * block; }

TEST_CASE("sim_basic: bytes move, error codes, unsupported functions, truth of copies") {
  std::string truth = TmpDir() + "/truth_basic.jsonl";
  remove(truth.c_str());
  RunResult r = Run("tests/gpusim/sim_basic", {}, {"GPUSIM_TRUTH=" + truth});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("FAIL") == std::string::npos);
  CHECK(r.out.find("failures 0") != std::string::npos);
  // Printed once although called twice.
  const std::string kLine = "gpusim: cudaIpcGetMemHandle is not supported\n";
  size_t first = r.err.find(kLine);
  CHECK(first != std::string::npos);
  CHECK(r.err.find("cudaIpcGetMemHandle", first + kLine.size()) == std::string::npos);

  std::vector<TruthOp> ops = ReadTruth(truth);
  REQUIRE(ops.size() >= 6);
  CheckStreamsSerial(ops);
  // The first four ops: HtoD, DtoD, memset 64 B, DtoH on the legacy stream, in this order.
  CHECK(ops[0].op == "memcpy");
  CHECK(ops[0].kind == "HtoD");
  CHECK(ops[0].bytes == (1 << 16) * 4);
  CHECK(ops[0].stream == 0);
  CHECK(ops[1].kind == "DtoD");
  CHECK(ops[2].op == "memset");
  CHECK(ops[2].bytes == 64);
  CHECK(ops[3].kind == "DtoH");
  CHECK(ops[0].pid == ops[3].pid);
  CHECK(ops[0].rank == -1);
  // cudaMemcpyDefault is resolved from the pointers (device -> pinned host).
  bool default_resolved = false;
  for (const TruthOp& t : ops) {
    default_resolved |= t.op == "memcpy" && t.stream != 0 && t.kind == "DtoH";
  }
  CHECK(default_resolved);
  const TruthOp& k = Kernel(ops, "noop_kernel");
  CHECK(k.grid == std::vector<int64_t>{2, 1, 1});
  CHECK(k.block == std::vector<int64_t>{32, 1, 1});
  CHECK(k.duration() == Approx(2000).margin(1));  // default model: 2 us + 64/256 ns
  std::string line = ReadFile(truth);
  CHECK(line.find("\"mangled\":\"_Z11noop_kernelPi\"") != std::string::npos);
}

TEST_CASE("GPUSIM_DEVICES=3: device count, per-device legacy stream and device in the truth") {
  std::string truth = TmpDir() + "/truth_devices.jsonl";
  remove(truth.c_str());
  RunResult r = Run("tests/gpusim/sim_basic", {}, {"GPUSIM_DEVICES=3", "GPUSIM_TRUTH=" + truth});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("ok other_device") != std::string::npos);
  int on_last = 0;
  for (const TruthOp& t : ReadTruth(truth)) {
    if (t.op == "kernel" && t.grid == std::vector<int64_t>{7, 1, 1}) {
      CHECK(t.device == 2);
      CHECK(t.stream == 2);  // the legacy default stream of device d has id d
      ++on_last;
    } else {
      CHECK(t.device == 0);
    }
  }
  CHECK(on_last == 1);
}

TEST_CASE("sim_timing: costs, order, overlap, events, legacy stream, host fn, graphs") {
  CheckTimingScenario("tests/gpusim/sim_timing", /*legacy=*/true);
}

TEST_CASE("sim_timing built with --default-stream per-thread (_ptsz entry points)") {
  CheckTimingScenario("tests/gpusim/sim_timing_ptsz", /*legacy=*/false);
}

TEST_CASE("a bad GPUSIM_COSTS file: one line on stderr, default costs") {
  std::string costs = TmpDir() + "/bad_costs.txt", truth = TmpDir() + "/truth_bad.jsonl";
  WriteFile(costs, "^p1_long 2000\n^p1_mid fast\n");
  remove(truth.c_str());
  RunResult r = Run("tests/gpusim/sim_timing", {}, {"GPUSIM_COSTS=" + costs,
                                                     "GPUSIM_TRUTH=" + truth});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  CHECK(r.err.find("GPUSIM_COSTS") != std::string::npos);
  CHECK(r.err.find("line 2") != std::string::npos);
  std::vector<TruthOp> ops = ReadTruth(truth);
  CHECK(Kernel(ops, "p1_long").duration() == Approx(2000).margin(1));
}

TEST_CASE("%p in GPUSIM_TRUTH names one file per process") {
  std::string dir = TmpDir() + "/per_pid";
  REQUIRE(system(("rm -rf " + dir + " && mkdir -p " + dir).c_str()) == 0);
  RunResult r = Run("tests/gpusim/sim_basic", {}, {"GPUSIM_TRUTH=" + dir + "/truth.%p.jsonl"});
  REQUIRE(r.exit_code == 0);
  FILE* ls = popen(("ls " + dir).c_str(), "r");
  REQUIRE(ls != nullptr);
  std::vector<std::string> files;
  char name[256];
  while (fgets(name, sizeof(name), ls) != nullptr) {
    files.push_back(std::string(name, strcspn(name, "\n")));
  }
  pclose(ls);
  REQUIRE(files.size() == 1);
  std::vector<TruthOp> ops = ReadTruth(dir + "/" + files[0]);
  REQUIRE(!ops.empty());
  CHECK(files[0] == "truth." + std::to_string(ops[0].pid) + ".jsonl");
}

TEST_CASE("concurrent host threads: every op once, streams serial, bytes right") {
  std::string truth = TmpDir() + "/truth_threads.jsonl";
  remove(truth.c_str());
  RunResult r = Run("tests/gpusim/sim_threads", {}, {"GPUSIM_TRUTH=" + truth});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("failures 0") != std::string::npos);
  std::vector<TruthOp> ops = ReadTruth(truth);
  std::map<int64_t, int> kernels_per_stream;
  std::map<int64_t, int> corr_seen;
  for (const TruthOp& t : ops) {
    if (t.op == "kernel") ++kernels_per_stream[t.stream];
    ++corr_seen[t.corr];
  }
  CHECK(kernels_per_stream.size() == 4);
  for (auto& kv : kernels_per_stream) CHECK(kv.second == 200);
  for (auto& kv : corr_seen) CHECK(kv.second == 1);  // correlation ids are unique
  CheckStreamsSerial(ops);
}

TEST_CASE("observer: API enter/exit with cbids, ops correlated, driver calls, custom ops") {
  std::string truth = TmpDir() + "/truth_observer.jsonl";
  remove(truth.c_str());
  RunResult r = Run("tests/gpusim/sim_observer", {}, {"GPUSIM_TRUTH=" + truth});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("FAIL") == std::string::npos);
  CHECK(r.out.find("failures 0") != std::string::npos);
  // libcudart writes no line for a collective (libnccl writes its own); the rest are there.
  std::vector<TruthOp> ops = ReadTruth(truth);
  int kernels = 0;
  for (const TruthOp& t : ops) {
    CHECK(t.op != "collective");
    kernels += t.op == "kernel";
  }
  CHECK(kernels == 3);
}

TEST_CASE("gpusim_bench runs and reports a per-launch overhead") {
  RunResult r = Run("tests/gpusim/gpusim_bench", {"20000"}, {});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  double cpu_ns = Printed(r.out, "host_cpu_ns_per_launch");
  CHECK(cpu_ns > 0);
  CHECK(cpu_ns < 20000);  // a loaded 2-core CI box; typically ~0.5 us
  CHECK(r.out.find("noop_observer") != std::string::npos);
}

}  // namespace

TEST_CASE(
    "sim_hints: advice, prefetch, cache config, device choice, pools, peers, clusters, "
    "texture and surface objects") {
  RunResult r = Run("tests/gpusim/sim_hints", {}, {"GPUSIM_DEVICES=2"});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("done") != std::string::npos);
  CHECK(r.out.find("FAIL") == std::string::npos);
  CHECK(r.err.find("not supported") == std::string::npos);
}

// The device (compute capability 9.0) runs what a real one would pick from the fat binary:
// the newest cubin of its major version, else the newest PTX it can compile (binary 9.0), else
// (built only for newer GPUs) the newest image. CUB's dispatch needs the version to be one the
// program was built for: under nvcc's default (sm_75), Thrust and CUB run.
TEST_CASE("cudaFuncGetAttributes reports the architecture of the image the device runs") {
  const std::pair<const char*, const char*> cases[] = {
      {"default", "ptx=75 binary=90 cub=750 launch=cudaSuccess"},  // sm_75 cubin: other major
      {"ptx80", "ptx=80 binary=90 cub=800 launch=cudaSuccess"},
      {"multi", "ptx=90 binary=90 cub=900 launch=cudaSuccess"},
      {"newer", "ptx=100 binary=100 cub=1000 launch=cudaSuccess"},
  };
  for (const auto& c : cases) {
    RunResult r = Run(std::string("tests/gpusim/sim_arch_") + c.first, {}, {});
    INFO(c.first << ": " << r.out << r.err);
    CHECK(r.exit_code == 0);
    CHECK(r.out == std::string(c.second) + "\n");
  }
}

// Registration (at load time) does not start the device: a child forked before the first CUDA
// call runs its kernel, and so does the parent after it (before, the child's launch failed with
// cudaErrorInvalidResourceHandle: the device had started in the parent at registration).
TEST_CASE("A program with kernels that forks before its first CUDA call: both sides run") {
  const std::string truth = TmpDir() + "/truth_fork_first.%p.jsonl";
  RunResult r = Run("tests/gpusim/sim_fork_first", {}, {"GPUSIM_TRUTH=" + truth});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out ==
        "child: launch cudaSuccess sync cudaSuccess\n"
        "parent: launch cudaSuccess sync cudaSuccess\n");
}

// The checks of sim_pools; `legacy` is false for the per-thread-default-stream build, whose
// synchronous calls go to the per-thread stream instead of the legacy one (id 0).
void CheckPoolsScenario(const std::string& program, bool legacy) {
  std::string truth = TmpDir() + "/truth_pools.jsonl";
  remove(truth.c_str());
  RunResult r = Run(program, {}, {"GPUSIM_DEVICES=2", "GPUSIM_TRUTH=" + truth});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("FAIL") == std::string::npos);
  CHECK(r.out.find("failures 0") != std::string::npos);
  // Two 1 MiB allocations and one of 300000 bytes (256-byte granularity) from a new pool.
  CHECK(Printed(r.out, "pool_used_allocated") == 2 * 1048576 + 300032);
  CHECK(Printed(r.out, "pool_reserved_allocated") == 2 * 1048576 + 300032);
  // Two blocks per SM: half of 228 KiB each, less the runtime's 1 KiB per block.
  CHECK(Printed(r.out, "available_dynamic_smem_2_blocks") == 115712);
  // Nothing unsupported on the way; the driver entry point lookups fail quietly.
  CHECK(r.err.empty());

  std::vector<TruthOp> ops = ReadTruth(truth);
  CheckStreamsSerial(ops);
  // Each 3D copy and set once, bytes = width * height * depth (100 x 7 x 5), durations from the
  // cost model: HtoD and DtoH 2 us + bytes / 25 GB/s, DtoD 1 us + bytes / 1500 GB/s, memset
  // 1 us + bytes / 2000 GB/s.
  const TruthOp& htod = One(ops, "memcpy", "HtoD", 3500);
  const TruthOp& dtod = One(ops, "memcpy", "DtoD", 3500);
  const TruthOp& box = One(ops, "memset", "", 20 * 3 * 2);
  const TruthOp& dtoh = One(ops, "memcpy", "DtoH", 3500);
  // cudaMemcpy3D: the default stream, legacy (id 0) or per-thread (ids from 64).
  int64_t default_stream = htod.stream;
  CHECK((legacy ? default_stream == 0 : default_stream >= 64));
  CHECK(htod.duration() == 2140);
  CHECK(dtod.duration() == 1002);
  CHECK(box.duration() == 1000);
  CHECK(dtoh.duration() == 2140);
  // cudaMemcpy3DAsync, cudaMemset3DAsync, cudaMemcpy3DAsync on one stream, in that order, after
  // the synchronous cudaMemcpy3D.
  CHECK(dtod.stream >= 64);
  CHECK(dtod.stream != default_stream);
  CHECK(box.stream == dtod.stream);
  CHECK(dtoh.stream == dtod.stream);
  CHECK(dtod.start_ns >= htod.end_ns);
  CHECK(box.start_ns >= dtod.end_ns);
  CHECK(dtoh.start_ns >= box.end_ns);
  CHECK(htod.corr < dtod.corr);
  CHECK(dtod.corr < box.corr);
  CHECK(box.corr < dtoh.corr);
  // A sub-box (50 x 4 x 3) between positions; cudaMemset3D of the whole allocation.
  const TruthOp& sub = One(ops, "memcpy", "DtoH", 600);
  CHECK(sub.stream == default_stream);
  CHECK(sub.duration() == 2024);
  const TruthOp& whole = One(ops, "memset", "", 3500);
  CHECK(whole.stream == default_stream);
  CHECK(whole.duration() == 1001);
  CHECK(sub.start_ns >= dtoh.end_ns);
  CHECK(whole.start_ns >= sub.end_ns);
  // cudaMemcpy3DPeer (64 x 2 x 3) from device 0 to device 1, on device 0's default stream.
  const TruthOp& peer = One(ops, "memcpy", "DtoD", 384);
  CHECK(peer.device == 0);
  CHECK(peer.stream == default_stream);
  CHECK(peer.duration() == 1000);
  // The captured cudaMemcpy3DAsync (100 x 7 x 3) ran once, from its graph launch.
  const TruthOp& graph_copy = One(ops, "memcpy", "DtoD", 2100, -1);
  CHECK(graph_copy.node > 0);
  CHECK(graph_copy.stream == dtod.stream);
  CHECK(graph_copy.duration() == 1001);
  CHECK(graph_copy.start_ns >= whole.end_ns);
}

TEST_CASE("sim_pools: memory pools, stream attributes, 3D copies and sets, hints, cbids") {
  CheckPoolsScenario("tests/gpusim/sim_pools", /*legacy=*/true);
}

TEST_CASE("sim_pools built with --default-stream per-thread (_ptds / _ptsz entry points)") {
  CheckPoolsScenario("tests/gpusim/sim_pools_ptsz", /*legacy=*/false);
}

// The lines of a program's output.
std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

// The cost model's duration of a copy of `bytes` with the truth's kind: host <-> device (an
// array is device memory) 2 us + bytes / 25 GB/s, on the device 1 us + bytes / 1500 GB/s.
int64_t CopyNs(const std::string& kind, int64_t bytes) {
  const bool host = kind.find('H') != std::string::npos;
  return static_cast<int64_t>(host ? 2000 + static_cast<double>(bytes) / 25
                                   : 1000 + static_cast<double>(bytes) / 1500);
}

// The checks of sim_arrays; `legacy` is false for the per-thread-default-stream build, whose
// synchronous copies go to the per-thread stream instead of the legacy one (id 0).
void CheckArraysScenario(const std::string& program, bool legacy) {
  std::string truth = TmpDir() + "/truth_arrays.jsonl";
  remove(truth.c_str());
  RunResult r = Run(program, {}, {"GPUSIM_TRUTH=" + truth});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("FAIL") == std::string::npos);
  CHECK(r.out.find("failures 0") != std::string::npos);
  CHECK(r.err.empty());  // nothing unsupported on the way
  // Arrays count as device memory of elements x element size: two 64 x 32 floats, a
  // 16 x 8 x 4 uchar4 volume, 100 short2; a mipmapped 64 x 32 float array with its 7 levels.
  CHECK(Printed(r.out, "array_bytes_counted") == 2 * 8192 + 2048 + 400);
  CHECK(Printed(r.out, "mipmap_bytes_counted") == 4 * (2048 + 512 + 128 + 32 + 8 + 2 + 1));

  std::vector<TruthOp> ops = ReadTruth(truth);
  CheckStreamsSerial(ops);
  std::map<int64_t, std::vector<const TruthOp*>> by_corr;
  for (const TruthOp& t : ops) {
    if (t.op == "memcpy") by_corr[t.corr].push_back(&t);
  }
  // Each copy call: one memcpy line with its correlation id, the array kind (HtoA, AtoH, AtoA,
  // AtoD, DtoA), its bytes (elements x element size) and the cost model's duration.
  int copies = 0;
  std::map<std::string, int64_t> stream_of;
  for (const std::string& line : Lines(r.out)) {
    std::istringstream in(line);
    std::string tag, label, kind;
    int64_t corr = 0, bytes = 0;
    in >> tag;
    if (tag != "copy") continue;
    in >> label >> corr >> kind >> bytes;
    INFO(line);
    REQUIRE(by_corr[corr].size() == 1);
    const TruthOp& t = *by_corr[corr][0];
    CHECK(t.kind == kind);
    CHECK(t.bytes == bytes);
    CHECK(t.duration() == CopyNs(kind, bytes));
    CHECK(t.graph == 0);
    stream_of[label] = t.stream;
    ++copies;
  }
  CHECK(copies == 18);
  for (const char* kind : {"HtoA", "AtoH", "AtoA", "AtoD", "DtoA"}) {
    INFO(kind);
    CHECK(std::count_if(ops.begin(), ops.end(), [&](const TruthOp& t) { return t.kind == kind; }) >
          0);
  }
  // Synchronous copies on the default stream (legacy: id 0; per-thread: from 64), async ones on
  // the program's stream.
  CHECK((legacy ? stream_of["2d_to_array"] == 0 : stream_of["2d_to_array"] >= 64));
  CHECK(stream_of["2d_from_array_async"] >= 64);
  CHECK(stream_of["2d_from_array_async"] != stream_of["2d_to_array"]);

  // Each batch: one line per copy, all with the batch call's correlation id, in the batch's
  // order on its stream, each with its bytes and duration.
  int batches = 0;
  for (const std::string& line : Lines(r.out)) {
    std::istringstream in(line);
    std::string tag, label;
    int64_t corr = 0;
    size_t n = 0;
    in >> tag;
    if (tag != "batch") continue;
    in >> label >> corr >> n;
    INFO(line);
    std::vector<std::pair<std::string, int64_t>> want;
    for (const std::string& copy : Lines(r.out)) {
      std::istringstream c(copy);
      std::string ctag, clabel, kind;
      int64_t ccorr = 0, bytes = 0;
      c >> ctag >> clabel >> ccorr >> kind >> bytes;
      if (ctag == "batch_copy" && clabel == label && ccorr == corr) want.emplace_back(kind, bytes);
    }
    REQUIRE(want.size() == n);
    const std::vector<const TruthOp*>& got = by_corr[corr];
    REQUIRE(got.size() == n);
    for (size_t i = 0; i < n; ++i) {
      CHECK(got[i]->kind == want[i].first);
      CHECK(got[i]->bytes == want[i].second);
      CHECK(got[i]->duration() == CopyNs(want[i].first, want[i].second));
      CHECK(got[i]->stream == got[0]->stream);
      CHECK(got[i]->stream != 0);  // never the legacy stream
      if (i > 0) CHECK(got[i]->start_ns >= got[i - 1]->end_ns);
    }
    ++batches;
  }
  CHECK(batches == (legacy ? 2 : 3));

  // The captured copies and the hand-built node: each of the two launches ran them once, in
  // order, with the graph's id and their exec nodes' ids. Then a captured batch: a node per copy.
  std::map<int64_t, std::vector<const TruthOp*>> launches;
  std::set<int64_t> graphs;
  for (const TruthOp& t : ops) {
    if (t.graph > 0) launches[t.corr].push_back(&t);
    if (t.graph > 0) graphs.insert(t.graph);
  }
  REQUIRE(launches.size() == 3);
  REQUIRE(graphs.size() == 2);
  const std::vector<const TruthOp*> batch_launch = launches.rbegin()->second;
  launches.erase(std::prev(launches.end()));
  REQUIRE(batch_launch.size() == 2);
  for (const TruthOp* t : batch_launch) {
    CHECK(t->kind == "HtoD");
    CHECK(t->bytes == 512);
    CHECK(t->graph == *graphs.rbegin());
  }
  CHECK(batch_launch[0]->node != batch_launch[1]->node);
  std::vector<int64_t> nodes;
  for (auto& kv : launches) {
    const std::vector<const TruthOp*>& l = kv.second;
    REQUIRE(l.size() == 3);
    CHECK(l[0]->kind == "HtoA");
    CHECK(l[0]->bytes == 4 * 256);
    CHECK(l[1]->kind == "AtoH");
    CHECK(l[1]->bytes == 4 * 256);
    CHECK(l[2]->kind == "AtoH");
    CHECK(l[2]->bytes == 16 * 8 * 4);
    std::vector<int64_t> ids = {l[0]->node, l[1]->node, l[2]->node};
    if (nodes.empty()) nodes = ids;
    CHECK(ids == nodes);
    CHECK(l[0]->graph == l[2]->graph);
  }
  CHECK(std::set<int64_t>(nodes.begin(), nodes.end()).size() == 3);
}

TEST_CASE("sim_arrays: CUDA arrays, copies with them, batch copies, captured and in graphs") {
  CheckArraysScenario("tests/gpusim/sim_arrays", /*legacy=*/true);
}

TEST_CASE("sim_arrays built with --default-stream per-thread (_ptds / _ptsz entry points)") {
  CheckArraysScenario("tests/gpusim/sim_arrays_ptsz", /*legacy=*/false);
}

// The checks of sim_vmm: the driver's memory functions through cudaGetDriverEntryPoint.
// `per_thread`: the --default-stream per-thread build, whose default lookups give the _ptsz
// forms of the stream-ordered functions.
void CheckVmmScenario(const std::string& program, bool per_thread) {
  std::string truth = TmpDir() + "/truth_vmm.jsonl";
  remove(truth.c_str());
  RunResult r = Run(program, {}, {"GPUSIM_DEVICES=2", "GPUSIM_TRUTH=" + truth});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("FAIL") == std::string::npos);
  CHECK(r.out.find("failures 0") != std::string::npos);
  CHECK(r.err.empty());  // nothing unsupported on the way
  CHECK(Printed(r.out, "granularity_minimum") == 2 << 20);
  CHECK(Printed(r.out, "granularity_recommended") == 2 << 20);
  // One enter and one exit callback per driver call (the program compares each pair with the
  // call: cbid, name, params, CUresult).
  double calls = Printed(r.out, "driver_calls");
  CHECK(calls >= 90);
  CHECK(Printed(r.out, "driver_callbacks") == 2 * calls);
  // Successful cuMemCreate calls of 2 MiB as their params show them: four on device 0, one on
  // device 1.
  CHECK(Printed(r.out, "creates_device0") == 4);
  CHECK(Printed(r.out, "creates_device1") == 1);
  // Five stream-ordered allocations through the default lookup, one through the other form.
  CHECK(Printed(r.out, "calls_cuMemAllocAsync") == (per_thread ? 1 : 5));
  CHECK(Printed(r.out, "calls_cuMemAllocAsync_ptsz") == (per_thread ? 5 : 1));

  // What the device did with the mapped memory: the kernel launched on it, the 4 MiB copied in
  // (cudaMemcpyDefault resolved as host to device), the 4 KiB set, the copy out; a device to
  // device copy from it; device 1's mapping used from device 1. No allocation lines.
  std::vector<TruthOp> ops = ReadTruth(truth);
  CheckStreamsSerial(ops);
  const TruthOp& fill = Kernel(ops, "vmm_fill_kernel");
  CHECK(fill.grid == std::vector<int64_t>{64, 1, 1});
  CHECK(fill.block == std::vector<int64_t>{256, 1, 1});
  const TruthOp& in = One(ops, "memcpy", "HtoD", 4 << 20);
  const TruthOp& set = One(ops, "memset", "", 4096);
  const TruthOp& dtod = One(ops, "memcpy", "DtoD", 1 << 20);
  CHECK(fill.corr < in.corr);
  CHECK(in.corr < set.corr);
  CHECK(set.corr < dtod.corr);
  CHECK(in.start_ns >= fill.end_ns);
  int out_copies = 0, host_to_host = 0;
  for (const TruthOp& t : ops) {
    out_copies += t.op == "memcpy" && t.kind == "DtoH" && t.bytes == 4 << 20;  // + cuMemAlloc's
    host_to_host += t.op == "memcpy" && t.kind == "HtoH";
    CHECK((t.op == "kernel" || t.op == "memcpy" || t.op == "memset"));
  }
  CHECK(out_copies == 2);
  CHECK(host_to_host == 0);
  CHECK(One(ops, "memcpy", "HtoD", 8).device == 1);
  CHECK(One(ops, "memcpy", "DtoH", 8).device == 1);
  CHECK(ops.size() == 15);
}

TEST_CASE("sim_vmm: driver memory functions through cudaGetDriverEntryPoint, VMM, callbacks") {
  CheckVmmScenario("tests/gpusim/sim_vmm", /*per_thread=*/false);
}

TEST_CASE("sim_vmm built with --default-stream per-thread (_ptsz lookups)") {
  CheckVmmScenario("tests/gpusim/sim_vmm_ptsz", /*per_thread=*/true);
}

TEST_CASE("sim_graph: graphs built by hand, cloned, launched, updated; captured graph updated") {
  std::string costs = TmpDir() + "/graph_costs.txt", truth = TmpDir() + "/truth_graph.jsonl";
  WriteFile(costs, "^gk_long 2000\n^gk_ 100 + 0.001*threads\n");
  remove(truth.c_str());
  RunResult r = Run("tests/gpusim/sim_graph", {}, {"GPUSIM_COSTS=" + costs,
                                                    "GPUSIM_TRUTH=" + truth});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("FAIL") == std::string::npos);
  CHECK(r.out.find("failures 0") != std::string::npos);
  CHECK(Printed(r.out, "host_node_runs") == 6);
  CHECK(r.err.empty());  // nothing unsupported on the way
  std::vector<TruthOp> ops = ReadTruth(truth);
  CheckStreamsSerial(ops);

  // ---- The hand-built graph: six launches of the clone's executable graph. ----
  std::vector<const TruthOp*> first = Kernels(ops, "gk_first");
  std::vector<const TruthOp*> second = Kernels(ops, "gk_second");
  REQUIRE(first.size() == 6);
  REQUIRE(second.size() == 6);
  int64_t graph_id = first[0]->graph;
  CHECK(graph_id > 0);
  // Each launch (one correlation id): memset, HtoD, gk_first, gk_second, two DtoH, host node,
  // all with the graph's id and each with its node's id.
  std::map<int64_t, std::vector<const TruthOp*>> launches;
  for (const TruthOp& t : ops) {
    if (t.graph == graph_id) launches[t.corr].push_back(&t);
  }
  REQUIRE(launches.size() == 6);
  std::vector<int64_t> node_ids;  // of the first launch, in truth order
  for (const TruthOp* t : launches.begin()->second) node_ids.push_back(t->node);
  int index = 0;
  const TruthOp* previous_last = nullptr;
  for (auto& kv : launches) {
    std::vector<const TruthOp*>& l = kv.second;
    INFO("launch " << index + 1);
    REQUIRE(l.size() == 7);
    std::map<std::string, std::vector<const TruthOp*>> by;
    for (const TruthOp* t : l) {
      by[t->op == "kernel" ? t->name.substr(0, t->name.find('(')) : t->op + t->kind].push_back(t);
      CHECK(t->stream == l[0]->stream);
      CHECK(t->node > 0);
    }
    REQUIRE(by["memset"].size() == 1);
    REQUIRE(by["memcpyHtoD"].size() == 1);
    REQUIRE(by["gk_first"].size() == 1);
    REQUIRE(by["gk_second"].size() == 1);
    REQUIRE(by["memcpyDtoH"].size() == 2);
    REQUIRE(by["hostfn"].size() == 1);
    const TruthOp& set = *by["memset"][0];
    const TruthOp& htod = *by["memcpyHtoD"][0];
    const TruthOp& k1 = *by["gk_first"][0];
    const TruthOp& k2 = *by["gk_second"][0];
    const TruthOp& host = *by["hostfn"][0];
    CHECK(set.bytes == 4096);
    CHECK(htod.bytes == 4096);
    // Dependency order: memset and HtoD -> gk_first -> gk_second -> both DtoH -> host node.
    CHECK(k1.start_ns >= std::max(set.end_ns, htod.end_ns));
    CHECK(k2.start_ns >= k1.end_ns);
    for (const TruthOp* d : by["memcpyDtoH"]) {
      CHECK(d->start_ns >= k2.end_ns);
      CHECK(host.start_ns >= d->end_ns);
    }
    // The same nodes (ids) in every launch, each once.
    std::vector<int64_t> ids;
    for (const TruthOp* t : l) ids.push_back(t->node);
    CHECK(ids == node_ids);
    CHECK(k1.node == first[0]->node);
    // The id of gk_first's node in the executable graph (a copy made at instantiation, as
    // CUPTI's graphNodeId), not that of the clone's node it was instantiated from; kept through
    // cudaGraphExecKernelNodeSetParams and cudaGraphExecUpdate.
    CHECK(k1.node == static_cast<int64_t>(Printed(r.out, "exec_node_first")));
    CHECK(k1.node != static_cast<int64_t>(Printed(r.out, "clone_node_first")));
    // Grids: 64/64 (launches 1-3), 256/64 after cudaGraphExecKernelNodeSetParams (4), 64/512
    // after cudaGraphExecUpdate from the edited clone (5, 6); durations from the cost model.
    int64_t g1 = index == 3 ? 256 : 64;
    int64_t g2 = index >= 4 ? 512 : 64;
    CHECK(k1.grid == std::vector<int64_t>{g1, 1, 1});
    CHECK(k2.grid == std::vector<int64_t>{g2, 1, 1});
    CHECK(k1.duration() == GraphKernelNs(g1, 256));
    CHECK(k2.duration() == GraphKernelNs(g2, 256));
    // Launches do not overlap; launch 6 (another stream) waited for launch 5.
    const TruthOp* launch_first = l[0];
    const TruthOp* launch_last = l[0];
    for (const TruthOp* t : l) {
      if (t->start_ns < launch_first->start_ns) launch_first = t;
      if (t->end_ns > launch_last->end_ns) launch_last = t;
    }
    if (previous_last != nullptr) CHECK(launch_first->start_ns >= previous_last->end_ns);
    if (index == 5) CHECK(l[0]->stream != first[4]->stream);
    previous_last = launch_last;
    ++index;
  }

  // ---- Child graph (inlined, cloned at add time) and its event record node. ----
  const TruthOp& child_a = Kernel(ops, "gk_child_a");
  const TruthOp& child_b = Kernel(ops, "gk_child_b");
  const TruthOp& after = Kernel(ops, "gk_after");
  CHECK(child_a.graph > 0);
  CHECK(child_a.graph != graph_id);
  CHECK(child_b.graph == child_a.graph);
  CHECK(child_b.corr == child_a.corr);
  CHECK(child_a.grid == std::vector<int64_t>{3, 1, 1});  // the edit after adding did not reach
  CHECK(child_b.start_ns >= child_a.end_ns);
  const TruthOp* set2d = nullptr;
  for (const TruthOp& t : ops) {
    if (t.op == "memset" && t.graph == child_a.graph) set2d = &t;
  }
  REQUIRE(set2d != nullptr);
  CHECK(set2d->bytes == 16 * 2 * 4);
  CHECK(child_a.start_ns >= set2d->end_ns);
  CHECK(after.graph == 0);
  CHECK(after.stream != child_b.stream);
  CHECK(after.start_ns >= child_b.end_ns);

  // ---- Event wait node: gk_waiter's graph waited for gk_long on the other stream. ----
  const TruthOp& lng = Kernel(ops, "gk_long");
  const TruthOp& waiter = Kernel(ops, "gk_waiter");
  CHECK(lng.duration() == 2000000);
  CHECK(waiter.graph > 0);
  CHECK(waiter.stream != lng.stream);
  CHECK(waiter.start_ns >= lng.end_ns);

  // ---- Captured graph: grid 32 (exec set params), then 48 (exec update). ----
  std::vector<const TruthOp*> captured = Kernels(ops, "gk_captured");
  REQUIRE(captured.size() == 2);
  CHECK(captured[0]->grid == std::vector<int64_t>{32, 1, 1});
  CHECK(captured[1]->grid == std::vector<int64_t>{48, 1, 1});
  CHECK(captured[0]->duration() == GraphKernelNs(32, 128));
  CHECK(captured[1]->duration() == GraphKernelNs(48, 128));
  CHECK(captured[0]->graph > 0);
  CHECK(captured[1]->graph == captured[0]->graph);
  CHECK(captured[1]->node == captured[0]->node);
  CHECK(captured[1]->corr != captured[0]->corr);

  // ---- cudaGraphAddNode: the kernel ran only in the launch where it was enabled. ----
  const TruthOp& generic = Kernel(ops, "gk_generic");
  CHECK(generic.grid == std::vector<int64_t>{5, 1, 1});
  int generic_memsets = 0;
  for (const TruthOp& t : ops) generic_memsets += t.op == "memset" && t.graph == generic.graph;
  CHECK(generic_memsets == 2);

  // ---- cudaStreamBeginCaptureToGraph: the captured kernel ran from that graph. ----
  const TruthOp& tograph = Kernel(ops, "gk_tograph");
  CHECK(tograph.graph > 0);
  CHECK(tograph.grid == std::vector<int64_t>{2, 1, 1});
}
