// End-to-end tests of gpusim's libcupti.so.13: testdata/cupti_client.cu (a CUPTI tool and a
// workload in one nvcc-built program) runs against gpusim's libcudart/libcupti/libnccl, and what
// it received through CUPTI is compared with the simulator's ground-truth log.
#include <stdlib.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "tests/gpusim/cupti_sim_testutil.h"

namespace {

using gpusim_test::Fields;
using gpusim_test::I64;
using gpusim_test::JsonLine;
using gpusim_test::Lines;
using gpusim_test::RunProgram;
using gpusim_test::U64;

struct Activity {
  std::string type;  // KERNEL, MEMCPY, MEMSET
  uint32_t corr;
  uint64_t start, end;
  uint32_t stream;
  std::vector<std::string> f;  // all fields
};

struct ClientOutput {
  std::map<std::string, std::vector<std::string>> results;  // RESULT <what> <code>
  std::vector<Activity> activities;
  std::vector<std::vector<std::string>> callbacks, apis, syncs, clocks;
  int corrdata_bad = -1;
  int dropped = -1;
};

ClientOutput ParseClient(const std::string& out) {
  ClientOutput c;
  for (const std::string& line : Lines(out)) {
    std::vector<std::string> f = Fields(line);
    if (f.empty()) continue;
    const std::string& t = f[0];
    if (t == "RESULT" && f.size() >= 3) {
      c.results[f[1]].push_back(f[2]);
    } else if (t == "KERNEL" || t == "MEMCPY" || t == "MEMSET") {
      Activity a;
      a.type = t;
      a.corr = static_cast<uint32_t>(std::stoul(f.at(1)));
      a.start = std::stoull(f.at(2));
      a.end = std::stoull(f.at(3));
      a.stream = static_cast<uint32_t>(std::stoul(f.at(4)));
      a.f = f;
      c.activities.push_back(a);
    } else if (t == "CB") {
      c.callbacks.push_back(f);
    } else if (t == "API") {
      c.apis.push_back(f);
    } else if (t == "SYNC") {
      c.syncs.push_back(f);
    } else if (t == "CLOCK") {
      c.clocks.push_back(f);
    } else if (t == "CORRDATA_BAD") {
      c.corrdata_bad = std::stoi(f.at(1));
    } else if (t == "DROPPED") {
      c.dropped = std::stoi(f.at(1));
    }
  }
  return c;
}

const char* TruthOp(const std::string& type) {
  if (type == "KERNEL") return "kernel";
  if (type == "MEMCPY") return "memcpy";
  return "memset";
}

// Checks that every device operation of the truth appears exactly once among the activity
// records of the same type (matched by correlation id and stream), with the same duration, and
// that the records' start times are the truth's plus one constant; returns that constant.
int64_t CheckActivitiesAgainstTruth(const ClientOutput& c, const std::vector<JsonLine>& truth) {
  int64_t offset = 0;
  bool have_offset = false;
  size_t matched = 0;
  for (const JsonLine& t : truth) {
    std::string op = t.at("op");
    if (op != "kernel" && op != "memcpy" && op != "memset") continue;
    uint32_t corr = static_cast<uint32_t>(U64(t, "corr"));
    int found = 0;
    for (const Activity& a : c.activities) {
      if (TruthOp(a.type) != op || a.corr != corr || a.stream != U64(t, "stream")) continue;
      ++found;
      INFO("op " << op << " corr " << corr);
      CHECK(a.end - a.start == U64(t, "end_ns") - U64(t, "start_ns"));
      int64_t off = static_cast<int64_t>(a.start) - static_cast<int64_t>(U64(t, "start_ns"));
      if (!have_offset) {
        offset = off;
        have_offset = true;
      }
      CHECK(off == offset);
      if (op == "kernel") {
        CHECK(a.f.at(13) == t.at("mangled"));
        std::string grid = "[" + a.f.at(7) + "," + a.f.at(8) + "," + a.f.at(9) + "]";
        std::string block = "[" + a.f.at(10) + "," + a.f.at(11) + "," + a.f.at(12) + "]";
        CHECK(grid == t.at("grid"));
        CHECK(block == t.at("block"));
        CHECK(a.f.at(5) == t.at("device"));
        CHECK(std::stoul(a.f.at(6)) == U64(t, "device") + 1);  // context id
      } else {
        CHECK(a.f.at(5) == t.at("bytes"));
      }
    }
    CHECK(found == 1);
    ++matched;
  }
  // And nothing CUPTI reported is missing from the truth (collectives are checked elsewhere).
  size_t non_nccl = 0;
  for (const Activity& a : c.activities) {
    if (a.type != "KERNEL" || a.f.at(13).rfind("ncclDevKernel", 0) != 0) ++non_nccl;
  }
  CHECK(non_nccl == matched);
  REQUIRE(have_offset);
  return offset;
}

// Correlation ids of the callbacks of one domain, with the function name seen at enter.
std::map<uint32_t, std::string> CallbackCorrs(const ClientOutput& c, int domain,
                                              const std::string& site) {
  std::map<uint32_t, std::string> m;
  for (const auto& f : c.callbacks) {
    if (f.at(1) == site && std::stoi(f.at(2)) == domain) {
      m[static_cast<uint32_t>(std::stoul(f.at(4)))] = f.at(5);
    }
  }
  return m;
}

}  // namespace

TEST_CASE("activity records match the simulator's ground truth", "[cupti]") {
  std::string truth_path = gpusim_test::TempPath("truth");
  auto r = RunProgram("cupti_client", {}, {"GPUSIM_TRUTH=" + truth_path});
  INFO("stderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  ClientOutput c = ParseClient(r.out);
  std::vector<JsonLine> truth = gpusim_test::ReadTruth(truth_path);

  REQUIRE(c.results["subscribe"] == std::vector<std::string>{"0"});
  REQUIRE(c.results["flush"] == std::vector<std::string>{"0"});
  CHECK(c.dropped == 0);
  CHECK(c.corrdata_bad == 0);

  size_t truth_kernels = std::count_if(truth.begin(), truth.end(),
                                       [](const JsonLine& j) { return j.at("op") == "kernel"; });
  CHECK(truth_kernels == 40);
  int64_t offset = CheckActivitiesAgainstTruth(c, truth);

  // Without a timestamp callback CUPTI's clock is CLOCK_REALTIME: the constant offset equals
  // (cuptiGetTimestamp - CLOCK_MONOTONIC) as the program sampled it.
  REQUIRE(c.clocks.size() == 2);
  for (const auto& f : c.clocks) {
    int64_t sampled = static_cast<int64_t>(std::stoull(f.at(1)) - std::stoull(f.at(2)));
    CHECK(std::llabs(sampled - offset) < 1000000);  // 1 ms
  }
  CHECK(offset > 1000000000ll * 3600 * 24 * 365);  // realtime: decades after the boot clock

  // Every kernel is correlated to a runtime-API launch callback seen on enter and exit.
  auto enters = CallbackCorrs(c, 2, "enter");
  auto exits = CallbackCorrs(c, 2, "exit");
  CHECK(enters.size() == exits.size());
  int kernels = 0;
  for (const Activity& a : c.activities) {
    if (a.type != "KERNEL") continue;
    ++kernels;
    INFO("kernel corr " << a.corr);
    REQUIRE(enters.count(a.corr) == 1);
    CHECK(enters[a.corr].find("Launch") != std::string::npos);
    CHECK(exits.count(a.corr) == 1);
  }
  CHECK(kernels == 40);

  // Runtime API records: one per callback pair, same correlation id, start <= end, inside the
  // CLOCK samples' window.
  std::set<uint32_t> api_corrs;
  for (const auto& f : c.apis) {
    if (f.at(1) != "runtime") continue;
    uint32_t corr = static_cast<uint32_t>(std::stoul(f.at(3)));
    api_corrs.insert(corr);
    CHECK(std::stoull(f.at(4)) <= std::stoull(f.at(5)));
  }
  for (const auto& e : enters) {
    if (e.second.find("Synchronize") != std::string::npos ||
        e.second.find("Launch") != std::string::npos) {
      CHECK(api_corrs.count(e.first) == 1);
    }
  }

  // Synchronization records: the cudaStreamSynchronize (type 3) names the kernels' stream
  // (when the simulator passes the call's parameters; else CUPTI's invalid value),
  // cudaDeviceSynchronize is a context synchronization (type 4).
  std::set<uint32_t> scale_streams;
  for (const JsonLine& t : truth) {
    if (t.at("op") == "kernel" && t.at("mangled").find("Scale") != std::string::npos) {
      scale_streams.insert(static_cast<uint32_t>(U64(t, "stream")));
    }
  }
  REQUIRE(scale_streams.size() == 1);
  bool stream_sync = false, ctx_sync = false;
  for (const auto& f : c.syncs) {
    if (f.at(1) == "3") {
      stream_sync = true;
      uint32_t id = static_cast<uint32_t>(std::stoul(f.at(5)));
      CHECK((id == *scale_streams.begin() || id == 0xffffffffu));
    }
    if (f.at(1) == "4") ctx_sync = true;
  }
  CHECK(stream_sync);
  CHECK(ctx_sync);
}

TEST_CASE("a timestamp callback puts activity records in the tool's clock", "[cupti]") {
  std::string truth_path = gpusim_test::TempPath("truth");
  auto r = RunProgram("cupti_client", {"tscb"}, {"GPUSIM_TRUTH=" + truth_path});
  INFO("stderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  ClientOutput c = ParseClient(r.out);
  REQUIRE(c.results["tscb"] == std::vector<std::string>{"0"});
  int64_t offset = CheckActivitiesAgainstTruth(c, gpusim_test::ReadTruth(truth_path));
  // The callback returns CLOCK_MONOTONIC, the simulator's own clock: the mapping is the
  // identity up to the measurement error of the offset.
  CHECK(std::llabs(offset) < 2000);
}

TEST_CASE("an NCCL collective appears as a kernel correlated to cuLaunchKernelEx", "[cupti]") {
  std::string truth_path = gpusim_test::TempPath("truth");
  auto r = RunProgram("cupti_client", {"nccl"}, {"GPUSIM_TRUTH=" + truth_path});
  INFO("stderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  ClientOutput c = ParseClient(r.out);
  REQUIRE(c.results["allreduce"] == std::vector<std::string>{"0"});
  std::vector<JsonLine> truth = gpusim_test::ReadTruth(truth_path);
  int64_t offset = CheckActivitiesAgainstTruth(c, truth);

  std::vector<JsonLine> colls;
  for (const JsonLine& t : truth) {
    if (t.at("op") == "collective") colls.push_back(t);
  }
  REQUIRE(colls.size() == 1);
  const JsonLine& t = colls[0];
  CHECK(t.at("name") == "AllReduce");
  CHECK(t.at("nranks") == "1");
  CHECK(t.at("seq") == "0");
  CHECK(t.at("dtype") == "float32");
  CHECK(t.at("bytes") == "4096");
  uint32_t corr = static_cast<uint32_t>(U64(t, "corr"));

  int found = 0;
  for (const Activity& a : c.activities) {
    if (a.type != "KERNEL" || a.f.at(13) != "ncclDevKernel_AllReduce_Sum_f32_RING_LL") continue;
    ++found;
    CHECK(a.corr == corr);
    CHECK(static_cast<int64_t>(a.end) - offset == static_cast<int64_t>(U64(t, "end_ns")));
    CHECK(static_cast<int64_t>(a.start) - offset == static_cast<int64_t>(U64(t, "arrive_ns")));
  }
  CHECK(found == 1);
  // The driver-API callback of the launch: domain 1, cbid of cuLaunchKernelEx (652).
  int driver_enters = 0;
  for (const auto& f : c.callbacks) {
    if (f.at(2) == "1" && std::stoul(f.at(4)) == corr) {
      CHECK(f.at(3) == "652");
      CHECK(f.at(5) == "cuLaunchKernelEx");
      CHECK(f.at(6) == "ncclDevKernel_AllReduce_Sum_f32_RING_LL");
      if (f.at(1) == "enter") ++driver_enters;
    }
  }
  CHECK(driver_enters == 1);
  bool driver_record = false;
  for (const auto& f : c.apis) {
    if (f.at(1) == "driver" && std::stoul(f.at(3)) == corr) driver_record = f.at(2) == "652";
  }
  CHECK(driver_record);
}

// A forced flush hands back the records of work still running without times, for good (as
// NVIDIA's CUPTI: cupti_activity.h, cuptiActivityFlushAll); a default flush leaves them be.
TEST_CASE("a forced flush costs the running kernel its times; a default flush does not") {
  const std::string truth_path = gpusim_test::TempPath("forced_truth") + ".jsonl";
  const std::string costs = gpusim_test::TempPath("forced_costs");
  FILE* f = fopen(costs.c_str(), "w");
  REQUIRE(f != nullptr);
  fputs("LongKernel 20000\n", f);
  fclose(f);
  auto r = RunProgram("cupti_client", {"forced"},
                      {"GPUSIM_TRUTH=" + truth_path, "GPUSIM_COSTS=" + costs});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  ClientOutput c = ParseClient(r.out);
  CHECK(c.results["flush0"] == std::vector<std::string>{"0"});
  CHECK(c.results["flushforced"] == std::vector<std::string>{"0"});
  std::map<uint32_t, std::pair<uint64_t, uint64_t>> by_grid;  // gridX -> (start, end)
  for (const Activity& a : c.activities) {
    if (a.type == "KERNEL") by_grid[uint32_t(std::stoul(a.f.at(7)))] = {a.start, a.end};
  }
  REQUIRE(by_grid.size() == 2);
  CHECK(by_grid[1].first != 0);  // the default flush's: timed, 20 ms
  CHECK(by_grid[1].second - by_grid[1].first == 20000000);
  CHECK(by_grid[2].first == 0);  // the forced flush's: no times
  CHECK(by_grid[2].second == 0);
}

TEST_CASE("GPUSIM_CUPTI_FAIL makes subscribe and activity enable fail", "[cupti]") {
  auto r = RunProgram("cupti_client", {"fail"}, {"GPUSIM_CUPTI_FAIL=999"});
  INFO("stderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  ClientOutput c = ParseClient(r.out);
  CHECK(c.results["subscribe"] == std::vector<std::string>{"999"});
  CHECK(c.results["enable"] == std::vector<std::string>{"999"});
  CHECK(c.results["timestamp"] == std::vector<std::string>{"0"});  // as NVIDIA's without driver
  CHECK(c.results["string"] == std::vector<std::string>{"CUPTI_ERROR_UNKNOWN"});
}

TEST_CASE("a second subscriber is refused", "[cupti]") {
  auto r = RunProgram("cupti_client", {"twosubs"}, {});
  REQUIRE(r.exit_code == 0);
  ClientOutput c = ParseClient(r.out);
  CHECK(c.results["subscribe"] == std::vector<std::string>{"0"});
  CHECK(c.results["subscribe2"] == std::vector<std::string>{"39"});  // MULTIPLE_SUBSCRIBERS
}

TEST_CASE("an unimplemented CUPTI function says so once and returns NOT_SUPPORTED", "[cupti]") {
  auto r = RunProgram("cupti_client", {"unsupported"}, {});
  REQUIRE(r.exit_code == 0);
  ClientOutput c = ParseClient(r.out);
  CHECK(c.results["profiler_init"] == std::vector<std::string>{"27", "27"});
  const std::string msg = "gpusim-cupti: cuptiProfilerInitialize is not supported\n";
  size_t first = r.err.find(msg);
  REQUIRE(first != std::string::npos);
  CHECK(r.err.find(msg, first + 1) == std::string::npos);
}

// ---- Graph node resource callbacks (testdata/cupti_graph_client.cu) ----------------------------

namespace {

struct GraphCall {  // a CB line
  size_t line;
  std::string phase;
  bool enter;
  int domain;
  uint32_t cbid, corr;
  std::string func, symbol;
};

struct NodeEvent {  // a RES line
  size_t line;
  std::string phase;
  uint32_t cbid;
  int encl_domain;
  uint32_t encl_cbid, encl_corr;
  std::string encl_func;
  std::string graph, original_graph, node, original_node, exec;  // pointers, "0" for NULL
  int type;
  uint64_t id, original_id;
  uint32_t context_id;
};

struct GraphRecord {  // KERNEL / MEMCPY / MEMSET lines
  std::string type;
  uint32_t corr, graph_id;
  uint64_t node_id;
  std::string name;  // kernels
};

struct GraphClient {
  std::vector<GraphCall> calls;
  std::vector<NodeEvent> events;
  std::vector<GraphRecord> records;
  std::map<std::string, std::string> handles;  // HANDLE <label> <pointer>
  std::map<std::string, uint64_t> node_ids;    // NODEID <label> <id>
  std::map<std::string, std::string> results;  // RESULT <what> <code>

  std::vector<NodeEvent> In(const std::string& phase) const {
    std::vector<NodeEvent> v;
    for (const NodeEvent& e : events) {
      if (e.phase == phase) v.push_back(e);
    }
    return v;
  }
  // Correlation ids of the calls of `func` entered in `phase`, in order.
  std::vector<uint32_t> Corrs(const std::string& phase, const std::string& func) const {
    std::vector<uint32_t> v;
    for (const GraphCall& c : calls) {
      if (c.phase == phase && c.enter && c.func == func) v.push_back(c.corr);
    }
    return v;
  }
  const GraphCall* Enter(int domain, uint32_t corr) const {
    for (const GraphCall& c : calls) {
      if (c.enter && c.domain == domain && c.corr == corr) return &c;
    }
    return nullptr;
  }
  const GraphCall* Exit(int domain, uint32_t corr) const {
    for (const GraphCall& c : calls) {
      if (!c.enter && c.domain == domain && c.corr == corr) return &c;
    }
    return nullptr;
  }
};

GraphClient RunGraphClient(const std::string& mode, const std::string& truth_path,
                           gpusim_test::RunResult* run) {
  *run = RunProgram("cupti_graph_client", {mode}, {"GPUSIM_TRUTH=" + truth_path});
  GraphClient g;
  std::string phase = "setup";
  std::vector<std::string> lines = Lines(run->out);
  for (size_t i = 0; i < lines.size(); ++i) {
    std::vector<std::string> f = Fields(lines[i]);
    if (f.empty()) continue;
    const std::string& t = f[0];
    if (t == "MARK") {
      phase = f.at(1);
    } else if (t == "CB") {
      g.calls.push_back(GraphCall{i, phase, f.at(1) == "enter", std::stoi(f.at(2)),
                                  static_cast<uint32_t>(std::stoul(f.at(3))),
                                  static_cast<uint32_t>(std::stoul(f.at(4))), f.at(5), f.at(6)});
    } else if (t == "RES") {
      NodeEvent e;
      e.line = i;
      e.phase = phase;
      e.cbid = static_cast<uint32_t>(std::stoul(f.at(1)));
      e.encl_domain = std::stoi(f.at(2));
      e.encl_cbid = static_cast<uint32_t>(std::stoul(f.at(3)));
      e.encl_corr = static_cast<uint32_t>(std::stoul(f.at(4)));
      e.encl_func = f.at(5);
      e.graph = f.at(6);
      e.original_graph = f.at(7);
      e.node = f.at(8);
      e.original_node = f.at(9);
      e.type = std::stoi(f.at(10));
      e.exec = f.at(11);
      e.id = std::stoull(f.at(12));
      e.original_id = std::stoull(f.at(13));
      e.context_id = static_cast<uint32_t>(std::stoul(f.at(14)));
      g.events.push_back(e);
    } else if (t == "KERNEL" || t == "MEMCPY" || t == "MEMSET") {
      g.records.push_back(GraphRecord{t, static_cast<uint32_t>(std::stoul(f.at(1))),
                                      static_cast<uint32_t>(std::stoul(f.at(2))),
                                      std::stoull(f.at(3)), f.at(4)});
    } else if (t == "HANDLE") {
      g.handles[f.at(1)] = f.at(2);
    } else if (t == "NODEID") {
      g.node_ids[f.at(1)] = std::stoull(f.at(2));
    } else if (t == "RESULT") {
      g.results[f.at(1)] = f.at(2);
    }
  }
  return g;
}

// The event was issued inside the API call it names: that call's enter callback (same domain,
// cbid, function) came before it and its exit callback after it, on the same thread.
void CheckInsideCall(const GraphClient& g, const NodeEvent& e, const std::string& func) {
  INFO("event on line " << e.line << " in " << e.encl_func);
  CHECK(e.encl_func == func);
  const GraphCall* enter = g.Enter(e.encl_domain, e.encl_corr);
  const GraphCall* exit = g.Exit(e.encl_domain, e.encl_corr);
  REQUIRE(enter != nullptr);
  REQUIRE(exit != nullptr);
  CHECK(enter->func == func);
  CHECK(enter->cbid == e.encl_cbid);
  CHECK(enter->line < e.line);
  CHECK(exit->line > e.line);
}

// The CREATED + CLONED pairs of one instantiation of `graph` into `exec`, from the nodes with
// ids `original_ids` (in launch order), made inside `func`. Returns exec node id -> original id.
std::map<uint64_t, uint64_t> CheckInstantiation(const GraphClient& g, const std::string& phase,
                                                const std::string& func, const std::string& graph,
                                                const std::string& exec,
                                                const std::vector<uint64_t>& original_ids) {
  std::vector<NodeEvent> ev = g.In(phase);
  INFO("phase " << phase);
  REQUIRE(ev.size() == 2 * original_ids.size());
  std::map<uint64_t, uint64_t> original_of;
  for (size_t i = 0; i < original_ids.size(); ++i) {
    const NodeEvent& created = ev[2 * i];
    const NodeEvent& cloned = ev[2 * i + 1];
    CHECK(created.cbid == 13);  // CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED
    CHECK(cloned.cbid == 20);   // CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED
    CheckInsideCall(g, created, func);
    CheckInsideCall(g, cloned, func);
    CHECK(created.encl_corr == cloned.encl_corr);
    CHECK(created.graph == graph);
    CHECK(cloned.graph == graph);
    CHECK(created.exec == exec);
    CHECK(cloned.exec == exec);
    CHECK(created.node == cloned.node);
    CHECK(created.id == cloned.id);
    CHECK(created.original_node == "0");
    CHECK(created.original_id == 0);
    CHECK(cloned.original_graph == graph);
    CHECK(cloned.original_id == original_ids[i]);
    CHECK(created.type == cloned.type);
    CHECK(cloned.id != 0);
    CHECK(std::find(original_ids.begin(), original_ids.end(), cloned.id) == original_ids.end());
    original_of[cloned.id] = cloned.original_id;
  }
  CHECK(original_of.size() == original_ids.size());  // exec ids distinct
  return original_of;
}

}  // namespace

TEST_CASE("graph nodes: created in the call that made them, cloned at instantiation", "[cupti]") {
  std::string truth_path = gpusim_test::TempPath("truth_graph_nodes");
  gpusim_test::RunResult r;
  GraphClient g = RunGraphClient("cbids", truth_path, &r);
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  REQUIRE(g.results["enable_created"] == "0");
  REQUIRE(g.results["enable_cloned"] == "0");
  REQUIRE(g.results["flush"] == "0");
  std::vector<JsonLine> truth = gpusim_test::ReadTruth(truth_path);

  // (a) Capture: one CREATED per node, inside the runtime call that made it (its enter before,
  // its exit after), with the capture graph, the node type and distinct ids.
  std::vector<NodeEvent> captured = g.In("capture");
  REQUIRE(captured.size() == 4);
  const std::vector<std::string> funcs = {"__cudaLaunchKernel", "cudaLaunchKernel",
                                          "cudaLaunchKernelExC", "cudaMemcpyAsync"};
  const std::vector<std::string> kernels = {"2kAEPf", "2kBEPf", "2kCEPf", ""};
  std::map<uint64_t, std::string> made_by;  // node id -> symbol of the launch (or the function)
  std::vector<uint64_t> graph_ids;
  std::set<std::string> graph_nodes;
  for (size_t i = 0; i < captured.size(); ++i) {
    const NodeEvent& e = captured[i];
    CHECK(e.cbid == 13);
    CHECK(e.encl_domain == 2);
    CheckInsideCall(g, e, funcs[i]);
    CHECK(e.graph == g.handles.at("graph"));
    CHECK(e.original_graph == "0");
    CHECK(e.original_node == "0");
    CHECK(e.exec == "0");
    CHECK(e.type == (i < 3 ? 0 : 1));  // CU_GRAPH_NODE_TYPE_KERNEL, _MEMCPY
    CHECK(e.context_id == 1);          // the fake context of device 0
    CHECK(e.id != 0);
    const GraphCall* enter = g.Enter(2, e.encl_corr);
    REQUIRE(enter != nullptr);
    if (i < 3) {
      CHECK(enter->symbol.size() > kernels[i].size());
      CHECK(enter->symbol.compare(enter->symbol.size() - kernels[i].size(), kernels[i].size(),
                                  kernels[i]) == 0);
    }
    made_by[e.id] = i < 3 ? enter->symbol : enter->func;
    graph_ids.push_back(e.id);
    graph_nodes.insert(e.node);
  }
  CHECK(made_by.size() == 4);
  CHECK(graph_nodes.size() == 4);
  // The launch entry points' cbids (runtime domain).
  CHECK(captured[1].encl_cbid == 211);  // cudaLaunchKernel_v7000
  CHECK(captured[2].encl_cbid == 430);  // cudaLaunchKernelExC_v11060
  CHECK(captured[3].encl_cbid == 41);   // cudaMemcpyAsync_v3020

  // (b) Instantiation: CREATED then CLONED for each node, new ids, originals = the graph's.
  std::map<uint64_t, uint64_t> exec_original =
      CheckInstantiation(g, "instantiate", "cudaGraphInstantiate", g.handles.at("graph"),
                         g.handles.at("exec"), graph_ids);

  // (c) Two launches: every record carries an exec node id; the kernel named K has the exec
  // node whose original was created by the launch of K; the copy the one of cudaMemcpyAsync.
  std::vector<uint32_t> launches = g.Corrs("launch", "cudaGraphLaunch");
  REQUIRE(launches.size() == 2);
  CHECK(g.In("launch").empty());
  std::map<uint32_t, std::set<uint64_t>> ids_per_launch;
  int kernel_records = 0, copy_records = 0;
  for (const GraphRecord& rec : g.records) {
    if (rec.corr != launches[0] && rec.corr != launches[1]) continue;
    INFO(rec.type << " " << rec.name << " node " << rec.node_id);
    CHECK(rec.graph_id != 0);
    REQUIRE(exec_original.count(rec.node_id) == 1);
    ids_per_launch[rec.corr].insert(rec.node_id);
    const std::string& maker = made_by.at(exec_original.at(rec.node_id));
    if (rec.type == "KERNEL") {
      ++kernel_records;
      CHECK(maker == rec.name);
    } else {
      ++copy_records;
      CHECK(rec.type == "MEMCPY");
      CHECK(maker == "cudaMemcpyAsync");
    }
  }
  CHECK(kernel_records == 6);
  CHECK(copy_records == 2);
  CHECK(ids_per_launch[launches[0]].size() == 4);
  CHECK(ids_per_launch[launches[1]] == ids_per_launch[launches[0]]);
  // The ground truth carries the same node ids as the records.
  std::set<std::pair<uint32_t, uint64_t>> truth_nodes, record_nodes;
  for (const JsonLine& t : truth) {
    uint32_t corr = static_cast<uint32_t>(U64(t, "corr"));
    if (corr == launches[0] || corr == launches[1]) truth_nodes.insert({corr, U64(t, "node")});
  }
  for (const GraphRecord& rec : g.records) {
    if (rec.corr == launches[0] || rec.corr == launches[1]) {
      record_nodes.insert({rec.corr, rec.node_id});
    }
  }
  CHECK(truth_nodes.size() == 8);
  CHECK(truth_nodes == record_nodes);

  // (d) cudaGraphClone: a CLONED per node (no CREATED), from the captured graph's nodes; the
  // clone's executable graph chains exec node -> clone node -> captured node.
  std::vector<NodeEvent> cloned = g.In("clone");
  REQUIRE(cloned.size() == 4);
  std::map<uint64_t, uint64_t> clone_original;
  std::vector<uint64_t> clone_ids;
  for (size_t i = 0; i < cloned.size(); ++i) {
    const NodeEvent& e = cloned[i];
    CHECK(e.cbid == 20);
    CheckInsideCall(g, e, "cudaGraphClone");
    CHECK(e.graph == g.handles.at("clone"));
    CHECK(e.original_graph == g.handles.at("graph"));
    CHECK(e.original_id == graph_ids[i]);
    CHECK(e.type == captured[i].type);
    CHECK(e.original_node == captured[i].node);
    CHECK(e.exec == "0");
    CHECK(made_by.count(e.id) == 0);
    CHECK(exec_original.count(e.id) == 0);
    clone_original[e.id] = e.original_id;
    clone_ids.push_back(e.id);
  }
  CHECK(clone_original.size() == 4);
  std::map<uint64_t, uint64_t> clone_exec_original =
      CheckInstantiation(g, "instantiate_clone", "cudaGraphInstantiate", g.handles.at("clone"),
                         g.handles.at("clone_exec"), clone_ids);
  std::vector<uint32_t> clone_launch = g.Corrs("launch_clone", "cudaGraphLaunch");
  REQUIRE(clone_launch.size() == 1);
  int clone_records = 0;
  for (const GraphRecord& rec : g.records) {
    if (rec.corr != clone_launch[0]) continue;
    ++clone_records;
    REQUIRE(clone_exec_original.count(rec.node_id) == 1);
    uint64_t in_clone = clone_exec_original.at(rec.node_id);
    REQUIRE(clone_original.count(in_clone) == 1);
    const std::string& maker = made_by.at(clone_original.at(in_clone));
    CHECK(maker == (rec.type == "KERNEL" ? rec.name : std::string("cudaMemcpyAsync")));
  }
  CHECK(clone_records == 4);

  // (e) A graph built by hand: CREATED inside cudaGraphAddKernelNode / AddMemsetNode with the
  // handles they returned; records of its launch carry the exec nodes cloned from them.
  std::vector<NodeEvent> manual = g.In("manual");
  REQUIRE(manual.size() == 4);  // the kernel, the memset, two empty nodes of the cyclic graph
  CHECK(manual[0].cbid == 13);
  CheckInsideCall(g, manual[0], "cudaGraphAddKernelNode");
  CHECK(manual[0].graph == g.handles.at("manual"));
  CHECK(manual[0].node == g.handles.at("manual_kernel"));
  CHECK(manual[0].id == g.node_ids.at("manual_kernel"));
  CHECK(manual[0].type == 0);
  CHECK(manual[1].cbid == 13);
  CheckInsideCall(g, manual[1], "cudaGraphAddMemsetNode");
  CHECK(manual[1].node == g.handles.at("manual_memset"));
  CHECK(manual[1].id == g.node_ids.at("manual_memset"));
  CHECK(manual[1].type == 2);  // CU_GRAPH_NODE_TYPE_MEMSET
  for (int i = 2; i < 4; ++i) {
    CheckInsideCall(g, manual[i], "cudaGraphAddEmptyNode");
    CHECK(manual[i].type == 5);  // CU_GRAPH_NODE_TYPE_EMPTY
    CHECK(manual[i].graph != g.handles.at("manual"));
  }
  std::map<uint64_t, uint64_t> manual_original = CheckInstantiation(
      g, "instantiate_manual", "cudaGraphInstantiateWithFlags", g.handles.at("manual"),
      g.handles.at("manual_exec"), {manual[0].id, manual[1].id});
  std::vector<uint32_t> manual_launch = g.Corrs("launch_manual", "cudaGraphLaunch");
  REQUIRE(manual_launch.size() == 1);
  int manual_records = 0;
  for (const GraphRecord& rec : g.records) {
    if (rec.corr != manual_launch[0]) continue;
    ++manual_records;
    REQUIRE(manual_original.count(rec.node_id) == 1);
    if (rec.type == "KERNEL") {
      CHECK(rec.name.find("2kDEPf") != std::string::npos);
      CHECK(manual_original.at(rec.node_id) == g.node_ids.at("manual_kernel"));
    } else {
      CHECK(rec.type == "MEMSET");
      CHECK(manual_original.at(rec.node_id) == g.node_ids.at("manual_memset"));
    }
  }
  CHECK(manual_records == 2);
  // A failed instantiation (a cycle) issues nothing.
  CHECK(g.results["instantiate_cycle"] == "1");  // cudaErrorInvalidValue
  CHECK(g.In("failed_instantiate").empty());

  // Capture of a memset, a host function and a kernel on a forked stream: three nodes (the
  // event records and waits make edges, not nodes).
  std::vector<NodeEvent> misc = g.In("misc");
  REQUIRE(misc.size() == 3);
  CheckInsideCall(g, misc[0], "cudaMemsetAsync");
  CheckInsideCall(g, misc[1], "cudaLaunchHostFunc");
  CheckInsideCall(g, misc[2], "cudaLaunchCooperativeKernel");
  CHECK(misc[0].type == 2);
  CHECK(misc[1].type == 3);  // CU_GRAPH_NODE_TYPE_HOST
  CHECK(misc[2].type == 0);
  for (const NodeEvent& e : misc) CHECK(e.graph == g.handles.at("misc"));

  // NCCL: the captured collective's node is made inside its cuLaunchKernelEx (driver domain);
  // the kernel record of the graph launch carries the exec node cloned from it.
  std::vector<NodeEvent> nccl = g.In("nccl");
  REQUIRE(nccl.size() == 1);
  CHECK(nccl[0].encl_domain == 1);
  CHECK(nccl[0].encl_cbid == 652);  // cuLaunchKernelEx
  CheckInsideCall(g, nccl[0], "cuLaunchKernelEx");
  CHECK(nccl[0].graph == g.handles.at("nccl_graph"));
  CHECK(nccl[0].type == 0);
  std::vector<NodeEvent> nccl_inst = g.In("instantiate_nccl");
  REQUIRE(nccl_inst.size() == 2);
  CHECK(nccl_inst[1].original_id == nccl[0].id);
  std::vector<uint32_t> nccl_launch = g.Corrs("launch_nccl", "cudaGraphLaunch");
  REQUIRE(nccl_launch.size() == 1);
  int nccl_records = 0;
  for (const GraphRecord& rec : g.records) {
    if (rec.corr != nccl_launch[0]) continue;
    ++nccl_records;
    CHECK(rec.name == "ncclDevKernel_AllReduce_Sum_f32_RING_LL");
    CHECK(rec.node_id == nccl_inst[1].id);
  }
  CHECK(nccl_records == 1);

  // cuptiGetGraphNodeId: NULL arguments and non-node pointers are refused; an id outlives its
  // graph.
  CHECK(g.results["nodeid_null_node"] == "1");  // CUPTI_ERROR_INVALID_PARAMETER
  CHECK(g.results["nodeid_null_out"] == "1");
  CHECK(g.results["nodeid_not_a_node"] == "1");
  CHECK(g.node_ids.at("manual_kernel_after_destroy") == g.node_ids.at("manual_kernel"));
  // Every id handed out is unique.
  std::set<uint64_t> all_ids;
  size_t new_nodes = 0;
  for (const NodeEvent& e : g.events) {
    if (e.cbid == 20 && e.exec == "0") ++new_nodes, all_ids.insert(e.id);  // cudaGraphClone
    if (e.cbid == 13) ++new_nodes, all_ids.insert(e.id);
  }
  CHECK(all_ids.size() == new_nodes);
  CHECK(new_nodes == 4 + 4 + 4 + 4 + 4 + 2 + 3 + 1 + 1);
}

TEST_CASE("graph node callbacks are delivered only for the enabled cbids", "[cupti]") {
  gpusim_test::RunResult r_all, r_domain, r_created, r_off;
  GraphClient all = RunGraphClient("cbids", gpusim_test::TempPath("truth_cbids"), &r_all);
  GraphClient domain = RunGraphClient("domain", gpusim_test::TempPath("truth_domain"), &r_domain);
  GraphClient created =
      RunGraphClient("created", gpusim_test::TempPath("truth_created"), &r_created);
  GraphClient off = RunGraphClient("off", gpusim_test::TempPath("truth_off"), &r_off);
  INFO("stderr: " << r_all.err << r_domain.err << r_created.err << r_off.err);
  REQUIRE(r_all.exit_code == 0);
  REQUIRE(r_domain.exit_code == 0);
  REQUIRE(r_created.exit_code == 0);
  REQUIRE(r_off.exit_code == 0);
  auto shape = [](const GraphClient& c, int only_cbid) {
    std::vector<std::string> v;
    for (const NodeEvent& e : c.events) {
      if (only_cbid == 0 || static_cast<int>(e.cbid) == only_cbid) {
        v.push_back(e.phase + " " + std::to_string(e.cbid) + " " + e.encl_func + " " +
                    std::to_string(e.type));
      }
    }
    return v;
  };
  size_t all_created = shape(all, 13).size();
  size_t all_cloned = shape(all, 20).size();
  CHECK(all_created == 23);
  CHECK(all_cloned == 15);
  // The whole resource domain: the same callbacks as the two cbids.
  CHECK(domain.results["enable_domain"] == "0");
  CHECK(shape(domain, 0) == shape(all, 0));
  // Only GRAPHNODE_CREATED enabled: exactly the CREATED callbacks.
  CHECK(created.results["enable_created"] == "0");
  CHECK(shape(created, 0) == shape(all, 13));
  // None enabled: no resource callback, though API callbacks and graph records still come.
  CHECK(off.events.empty());
  CHECK(off.calls.size() == all.calls.size());
  CHECK(off.calls.size() >= 100);
  int graph_kernels = 0;
  for (const GraphRecord& rec : off.records) {
    if (rec.type == "KERNEL" && rec.graph_id != 0 && rec.node_id != 0) ++graph_kernels;
  }
  CHECK(graph_kernels == 11);
}

// testdata/cupti_vmm_client.cu: the driver's memory functions, reached through
// cudaGetDriverEntryPoint, seen by a CUPTI subscriber with driver callbacks enabled for
// cuMemCreate, cuMemRelease, cuMemAlloc_v2 and cuMemFree_v2.
TEST_CASE("driver memory calls: one callback pair each, with params and return code", "[cupti]") {
  auto r = RunProgram("cupti_vmm_client", {}, {"GPUSIM_DEVICES=2"});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  std::vector<std::vector<std::string>> cbs, calls, apis;
  std::map<std::string, std::string> results;
  for (const std::string& line : Lines(r.out)) {
    std::vector<std::string> f = Fields(line);
    if (f.empty()) continue;
    if (f[0] == "CB") cbs.push_back(f);
    if (f[0] == "CALL") calls.push_back(f);
    if (f[0] == "API") apis.push_back(f);
    if (f[0] == "RESULT" && f.size() == 3) results[f[1]] = f[2];
    CHECK(f[0] != "OTHER");  // no callback that was not enabled (runtime, cuMemMap, ...)
  }
  for (const char* what : {"lookups", "subscribe", "enable_callbacks", "register",
                           "activity_driver", "vmm", "flush"}) {
    INFO(what);
    CHECK(results[what] == "0");
  }
  // The calls, as the program made them: function, CUresult.
  const std::vector<std::pair<std::string, int>> kWant = {
      {"cuMemCreate", 0},   {"cuMemCreate", 0},   {"cuMemCreate", 0},
      {"cuMemCreate", 1},   {"cuMemCreate", 101},  // size not a granule; device 7
      {"cuMemRelease", 0},  {"cuMemRelease", 0},  {"cuMemRelease", 0},
      {"cuMemRelease", 1},                                              // released twice
      {"cuMemAlloc_v2", 0}, {"cuMemFree_v2", 0},  {"cuMemFree_v2", 1},  // freed twice
      {"cuMemAlloc_v2", 0}, {"cuMemFree_v2", 0},                        // on device 1
  };
  REQUIRE(calls.size() == kWant.size());
  REQUIRE(cbs.size() == 2 * calls.size());
  const std::map<std::string, int> kCbid = {
      {"cuMemCreate", 549}, {"cuMemRelease", 550}, {"cuMemAlloc_v2", 243}, {"cuMemFree_v2", 245}};
  std::set<std::string> handles, corrs;
  for (size_t i = 0; i < calls.size(); ++i) {
    const auto& call = calls[i];     // CALL <function> <ret> <value> <size> <device>
    const auto& enter = cbs[2 * i];  // CB <site> <cbid> <corr> <function> <size> <device> ...
    const auto& exit = cbs[2 * i + 1];
    INFO("call " << i << ": " << call.at(1));
    CHECK(call.at(1) == kWant[i].first);
    CHECK(std::stoi(call.at(2)) == kWant[i].second);
    CHECK(enter.at(1) == "enter");
    CHECK(exit.at(1) == "exit");
    CHECK(std::stoi(enter.at(2)) == kCbid.at(call.at(1)));
    CHECK(exit.at(2) == enter.at(2));
    CHECK(enter.at(3) == exit.at(3));  // correlation id
    CHECK(corrs.insert(enter.at(3)).second);
    CHECK(enter.at(4) == call.at(1));  // functionName as CUPTI spells it
    CHECK(exit.at(4) == call.at(1));
    CHECK(exit.at(8) == call.at(2));  // the CUresult at exit
    CHECK(enter.at(8) == "-1");
    const std::string& f = call.at(1);
    if (f == "cuMemCreate" || f == "cuMemAlloc_v2") {
      // size, and the device: prop->location.id / the callback context's device.
      CHECK(enter.at(5) == call.at(4));
      CHECK(exit.at(5) == call.at(4));
      CHECK(enter.at(6) == call.at(5));
      CHECK(exit.at(6) == call.at(5));
      // *handle / *dptr at a successful exit: what the call returned.
      if (call.at(2) == "0") {
        CHECK(exit.at(7) == call.at(3));
        CHECK(call.at(3) != "0");
      } else {
        CHECK(exit.at(7) == "0");
      }
      if (f == "cuMemCreate" && call.at(2) == "0") CHECK(handles.insert(call.at(3)).second);
    } else {
      // cuMemRelease's handle / cuMemFree_v2's pointer, at enter and exit.
      CHECK(enter.at(7) == call.at(3));
      CHECK(exit.at(7) == call.at(3));
      if (f == "cuMemFree_v2") CHECK(enter.at(6) == call.at(5));
    }
  }
  CHECK(handles.size() == 3);
  // Sizes and devices as the workload chose them.
  CHECK(calls[0].at(4) == "2097152");
  CHECK(calls[2].at(5) == "1");
  CHECK(calls[3].at(4) == "1048576");
  CHECK(calls[4].at(5) == "7");
  CHECK(calls[9].at(4) == "4194304");
  CHECK(calls[12].at(4) == "1048576");
  CHECK(calls[12].at(5) == "1");
  // The releases name the handles cuMemCreate returned, in order; the first one twice.
  CHECK(calls[5].at(3) == calls[0].at(3));
  CHECK(calls[6].at(3) == calls[1].at(3));
  CHECK(calls[7].at(3) == calls[2].at(3));
  CHECK(calls[8].at(3) == calls[0].at(3));
  // Driver API activity records: every driver call (also those without callbacks: reserve, 3
  // maps, set access, unmap, address free), each with its return value.
  CHECK(apis.size() == calls.size() + 7);
  std::map<std::string, std::string> api_ret;
  for (const auto& a : apis) api_ret[a.at(2)] = a.at(3);
  for (size_t i = 0; i < calls.size(); ++i) {
    INFO("call " << i);
    CHECK(api_ret[cbs[2 * i].at(3)] == calls[i].at(2));
  }
}

// testdata/cupti_array_client.cu: copies with CUDA arrays and batch copies as a CUPTI tool sees
// them: activity records with the array copy kinds, memory kinds and bytes, correlated to the
// runtime call (callback and API record) that made them; one record per copy of a batch, all
// with the batch call's correlation id; each record one ground-truth line.
TEST_CASE("array and batch copies: copy kinds, bytes, correlation, one record per batch copy",
          "[cupti]") {
  std::string truth_path = gpusim_test::TempPath("truth_arrays");
  auto r = RunProgram("cupti_array_client", {}, {"GPUSIM_TRUTH=" + truth_path});
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.err.empty());
  struct Rec {
    uint32_t corr, stream;
    uint64_t start, end, bytes, count;
    int kind, src, dst;
  };
  std::vector<Rec> recs;
  std::map<std::string, uint32_t> call;          // label -> correlation id
  std::map<uint32_t, int> enter_cbid, exit_ret;  // correlation id -> cbid, return value
  std::map<uint32_t, std::string> func, params;  // correlation id -> function, params digest
  std::map<uint32_t, int> runtime_record;        // correlation id -> cbid of the API record
  std::map<std::string, std::string> results;
  for (const std::string& line : Lines(r.out)) {
    std::vector<std::string> f = Fields(line);
    if (f.empty()) continue;
    if (f[0] == "MEMCPY") {
      recs.push_back(Rec{static_cast<uint32_t>(std::stoul(f.at(1))),
                         static_cast<uint32_t>(std::stoul(f.at(4))), std::stoull(f.at(2)),
                         std::stoull(f.at(3)), std::stoull(f.at(5)), std::stoull(f.at(9)),
                         std::stoi(f.at(6)), std::stoi(f.at(7)), std::stoi(f.at(8))});
    } else if (f[0] == "CALL") {
      call[f.at(1)] = static_cast<uint32_t>(std::stoul(f.at(2)));
    } else if (f[0] == "CB") {
      uint32_t corr = static_cast<uint32_t>(std::stoul(f.at(3)));
      if (f.at(1) == "enter") {
        enter_cbid[corr] = std::stoi(f.at(2));
        func[corr] = f.at(4);
      } else {
        exit_ret[corr] = std::stoi(f.at(5));
      }
    } else if (f[0] == "P") {
      params[static_cast<uint32_t>(std::stoul(f.at(1)))] =
          line.substr(line.find(' ', line.find(' ', 2) + 1) + 1);
    } else if (f[0] == "RUNTIME") {
      runtime_record[static_cast<uint32_t>(std::stoul(f.at(2)))] = std::stoi(f.at(1));
    } else if (f[0] == "RESULT") {
      results[f.at(1)] = f.at(2);
    }
  }
  for (const char* what : {"subscribe", "enable_runtime", "register", "activity_memcpy",
                           "activity_runtime", "batch", "batch3d", "flush"}) {
    INFO(what);
    CHECK(results[what] == "0");
  }
  CHECK(r.out.find("DATA ok") != std::string::npos);

  // CUPTI_ACTIVITY_MEMCPY_KIND_*: HTOD 1, DTOH 2, HTOA 3, ATOH 4, ATOA 5, ATOD 6, DTOA 7.
  // CUPTI_ACTIVITY_MEMORY_KIND_*: PAGEABLE 1, DEVICE 3, ARRAY 4.
  struct Want {
    const char* label;
    int cbid;                                   // CUPTI_RUNTIME_TRACE_CBID_*
    std::vector<std::vector<int64_t>> records;  // {copyKind, bytes, srcKind, dstKind}
  };
  const std::vector<Want> kWant = {
      {"2d_htoa", 34, {{3, 8192, 1, 4}}},   // cudaMemcpy2DToArray_v3020
      {"2d_atoa", 38, {{5, 8192, 4, 4}}},   // cudaMemcpy2DArrayToArray_v3020
      {"2d_atoh", 46, {{4, 8192, 4, 1}}},   // cudaMemcpy2DFromArrayAsync_v3020
      {"2d_atod", 36, {{6, 1024, 4, 3}}},   // cudaMemcpy2DFromArray_v3020
      {"2d_dtoa", 45, {{7, 1024, 3, 4}}},   // cudaMemcpy2DToArrayAsync_v3020
      {"1d_htoa", 33, {{3, 8192, 1, 4}}},   // cudaMemcpyToArray_v3020
      {"1d_atoa", 37, {{5, 8192, 4, 4}}},   // cudaMemcpyArrayToArray_v3020
      {"1d_atoh", 43, {{4, 8192, 4, 1}}},   // cudaMemcpyFromArrayAsync_v3020
      {"3d_htoa", 144, {{3, 2048, 1, 4}}},  // cudaMemcpy3D_v3020 (16 x 8 x 4 uchar4)
      {"3d_atoh", 145, {{4, 2048, 4, 1}}},  // cudaMemcpy3DAsync_v3020
      // cudaMemcpyBatchAsync_v13000: one record per copy, in the batch's order.
      {"batch", 509, {{1, 4096, 1, 3}, {1, 2048, 1, 3}, {2, 4096, 3, 1}}},
      // cudaMemcpy3DBatchAsync_v13000: a volume in, two rows of floats out to device memory.
      {"batch3d", 511, {{3, 2048, 1, 4}, {6, 512, 4, 3}}},
  };
  size_t wanted = 0;
  for (const Want& w : kWant) {
    INFO(w.label);
    REQUIRE(call.count(w.label) == 1);
    uint32_t corr = call[w.label];
    CHECK(enter_cbid[corr] == w.cbid);
    CHECK(exit_ret[corr] == 0);
    CHECK(runtime_record[corr] == w.cbid);  // the API record of the same call
    std::vector<const Rec*> got;
    for (const Rec& rec : recs) {
      if (rec.corr == corr) got.push_back(&rec);
    }
    REQUIRE(got.size() == w.records.size());
    for (size_t i = 0; i < got.size(); ++i) {
      INFO("record " << i);
      CHECK(got[i]->kind == w.records[i][0]);
      CHECK(got[i]->bytes == static_cast<uint64_t>(w.records[i][1]));
      CHECK(got[i]->src == w.records[i][2]);
      CHECK(got[i]->dst == w.records[i][3]);
      CHECK(got[i]->count == 1);  // copyCount: one copy per record
      CHECK(got[i]->stream == got[0]->stream);
    }
    wanted += got.size();
  }
  // The calls' parameter structs as CUPTI hands them out.
  CHECK(params[call["malloc_array"]] == "bits=32 width=64 height=32");
  CHECK(params[call["2d_htoa"]] ==
        "dst=a wOffset=0 hOffset=0 spitch=256 width=256 height=32 kind=1");
  CHECK(params[call["2d_atoa"]] == "dst=b src=a width=256 height=32 kind=3");
  CHECK(params[call["2d_atoh"]] == "src=b dpitch=256 width=256 height=32 kind=2");
  CHECK(params[call["1d_htoa"]] == "dst=a count=8192 kind=1");
  CHECK(params[call["3d_htoa"]] == "dstArray=vol extent=16x8x4");
  CHECK(params[call["batch"]] == "count=3 bytes=10240 numAttrs=1");
  CHECK(params[call["batch3d"]] == "numOps=2 dst0=vol");
  CHECK(enter_cbid[call["malloc_3d_array"]] == 141);  // cudaMalloc3DArray_v3020
  CHECK(enter_cbid[call["free_array"]] == 24);        // cudaFreeArray_v3020

  // Every record is the simulator's: one truth line each (same correlation id, stream, bytes,
  // duration, kind), start times one constant apart; nothing else was copied but the cudaMemcpy
  // calls' own copies.
  std::vector<JsonLine> truth = gpusim_test::ReadTruth(truth_path);
  const std::map<int, std::string> kKind = {{1, "HtoD"}, {2, "DtoH"}, {3, "HtoA"}, {4, "AtoH"},
                                            {5, "AtoA"}, {6, "AtoD"}, {7, "DtoA"}, {8, "DtoD"}};
  std::vector<bool> used(recs.size(), false);
  int64_t offset = 0;
  bool have_offset = false;
  size_t matched = 0;
  for (const JsonLine& t : truth) {
    if (t.at("op") != "memcpy") continue;
    INFO("truth corr " << t.at("corr") << " bytes " << t.at("bytes"));
    bool found = false;
    for (size_t i = 0; i < recs.size() && !found; ++i) {
      const Rec& rec = recs[i];
      if (used[i] || rec.corr != U64(t, "corr") || rec.stream != U64(t, "stream") ||
          rec.bytes != U64(t, "bytes")) {
        continue;
      }
      used[i] = found = true;
      CHECK(kKind.at(rec.kind) == t.at("kind"));
      CHECK(rec.end - rec.start == U64(t, "end_ns") - U64(t, "start_ns"));
      int64_t off = static_cast<int64_t>(rec.start) - I64(t, "start_ns");
      if (!have_offset) offset = off;
      have_offset = true;
      CHECK(off == offset);
    }
    CHECK(found);
    matched += found;
  }
  CHECK(matched == recs.size());
  CHECK(wanted + 3 == recs.size());  // + the program's own cudaMemcpy checks (DtoH, 3 times)
}
