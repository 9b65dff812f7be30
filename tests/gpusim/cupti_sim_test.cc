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
