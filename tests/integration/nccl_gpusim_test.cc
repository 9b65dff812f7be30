// End-to-end test of the agent's NCCL surface on the CPU GPU simulator: nccl_mpi_ranks (NCCL
// collectives + grouped Send/Recv + a split communicator; the unique id travels by MPI_Bcast)
// runs under mpirun -np 4 with the agent preloaded and rank 2 made a straggler
// (GPUSIM_NCCL_DELAY_RANK). Every recorded NCCL call is checked against the simulator's
// ground-truth log: same op, sequence number, count, bytes, datatype and peer, and the host
// enqueue window [t0, t1] of the call contains the time the simulator saw the operation queued.
// Across ranks: equal communicator unique ids and sequence numbers. When the agent has device
// timing (CUPTI surface linked in), each call's correlation id leads to a device op whose
// interval matches the truth.
#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "tests/integration/mpi_testutil.h"

namespace profagent {
namespace testing {
namespace {

constexpr int kRanks = 4;
constexpr int kIters = 3;
constexpr int kMainColls = 6 * kIters + 1;

struct Truth {
  int rank = -1, comm_rank = -1, nranks = 0, peer = -1;
  std::string name, comm, dtype;
  uint64_t seq = 0, count = 0, bytes = 0, queued_ns = 0, start_ns = 0, end_ns = 0, arrive_ns = 0;
  uint32_t corr = 0;
};

std::string Field(const std::string& line, const std::string& key) {
  const std::regex re("\"" + key + "\":(\"([^\"]*)\"|(-?[0-9]+))");
  std::smatch m;
  if (!std::regex_search(line, m, re)) return "";
  return m[2].matched ? m[2].str() : m[3].str();
}
uint64_t U(const std::string& line, const std::string& key) {
  const std::string v = Field(line, key);
  return v.empty() ? 0 : std::stoull(v);
}
int I(const std::string& line, const std::string& key) {
  const std::string v = Field(line, key);
  return v.empty() ? -1 : std::stoi(v);
}

std::vector<Truth> ReadTruth(const std::string& path) {
  std::vector<Truth> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (Field(line, "op") != "collective") continue;
    Truth t;
    t.rank = I(line, "rank");
    t.comm_rank = I(line, "comm_rank");
    t.nranks = I(line, "nranks");
    t.peer = I(line, "peer");
    t.name = Field(line, "name");
    t.comm = Field(line, "comm");
    t.dtype = Field(line, "dtype");
    t.seq = U(line, "seq");
    t.count = U(line, "count");
    t.bytes = U(line, "bytes");
    t.queued_ns = U(line, "queued_ns");
    t.start_ns = U(line, "start_ns");
    t.end_ns = U(line, "end_ns");
    t.arrive_ns = U(line, "arrive_ns");
    t.corr = uint32_t(U(line, "corr"));
    out.push_back(t);
  }
  return out;
}

TEST_CASE("NCCL on gpusim under the agent: calls match the simulator's ground truth") {
  REQUIRE(HaveMpirun());
  const std::string out = FreshDir("nccl_out");
  const std::string truth_path = FreshDir("nccl_truth") + "/truth.jsonl";
  const std::string libdir = Runfile("tests/gpusim/libcudart.so.13");
  const std::string nccldir = Runfile("tests/gpusim/libnccl.so.2");
  const std::string dir_of_cudart = libdir.substr(0, libdir.rfind('/'));
  const std::string dir_of_nccl = nccldir.substr(0, nccldir.rfind('/'));
  const std::string cmd =
      "mpirun --allow-run-as-root --oversubscribe -np " + std::to_string(kRanks) +
      " -x LD_LIBRARY_PATH=" + dir_of_cudart + ":" + dir_of_nccl + " -x GPUSIM_TRUTH=" +
      truth_path + " -x GPUSIM_NCCL_DELAY_RANK=2 -x GPUSIM_NCCL_DELAY_US=3000" +
      " -x GPUSIM_NCCL_TIMEOUT_S=30 -x LD_PRELOAD=" + Runfile("agent/libprofagent.so") +
      " -x PROFAGENT_OUTPUT=" + out + " " + Runfile("tests/integration/nccl_mpi_ranks");
  std::string log;
  const int rc = Run(cmd, &log);
  INFO(log);
  REQUIRE(rc == 0);  // the program checked every NCCL result itself
  REQUIRE(log.find("all results correct") != std::string::npos);

  const std::vector<Truth> truth = ReadTruth(truth_path);
  REQUIRE(truth.size() >= size_t(kRanks * (kMainColls + 2 * kIters + 1)));
  // Truth by (world rank, nranks of the comm, op, seq). The main communicator has 4 ranks, the
  // split halves 2.
  std::map<std::tuple<int, int, std::string, uint64_t>, Truth> by_key;
  for (const Truth& t : truth) by_key[{t.rank, t.nranks, t.name, t.seq}] = t;

  std::vector<RankProfile> ranks = LoadProfileDir(out);
  REQUIRE(ranks.size() == size_t(kRanks));
  std::set<std::string> main_uids, half_uids[2];
  std::map<uint64_t, std::set<std::string>> ops_by_seq;  // main comm: seq -> op on every rank
  for (int r = 0; r < kRanks; ++r) {
    const RankProfile& p = ranks[r];
    INFO("file " << p.path);
    REQUIRE(p.error.empty());
    CHECK(p.has_footer);
    CHECK(p.dropped == 0);
    REQUIRE(p.rank == r);

    // Communicators: the main one (4 ranks) and this rank's half (2 ranks).
    uint64_t main_comm = 0, half_comm = 0;
    for (const auto& kv : p.comms) {
      if (kv.second.lib() != LIB_NCCL) continue;
      if (kv.second.size() == kRanks) main_comm = kv.first;
      if (kv.second.size() == kRanks / 2) half_comm = kv.first;
    }
    REQUIRE(main_comm != 0);
    REQUIRE(half_comm != 0);
    CHECK(p.comms.at(main_comm).rank() == r);
    CHECK(p.comms.at(half_comm).rank() == r / 2);
    CHECK(p.comms.at(half_comm).parent() == main_comm);
    main_uids.insert(p.comms.at(main_comm).unique_id());
    half_uids[r % 2].insert(p.comms.at(half_comm).unique_id());

    // Group events: one per iteration, two members each.
    std::map<uint64_t, const OtherEvent*> groups;
    for (const OtherEvent& o : p.others)
      if (o.kind == EV_GROUP) groups[o.handle] = &o;
    CHECK(groups.size() == size_t(kIters));
    int group_starts = 0;  // each ncclGroupStart, an API call of its own
    for (const OtherEvent& o : p.others)
      group_starts += o.kind == EV_API && o.name == "ncclGroupStart";
    CHECK(group_starts == kIters);

    int main_colls = 0, sends = 0, recvs = 0, half_colls = 0, timed = 0;
    std::map<uint64_t, std::set<uint64_t>> group_corrs;
    std::map<uint64_t, uint64_t> group_truth_end, group_dev_end;
    int failed = 0;
    for (const CollRecord& c : p.colls) {
      if (c.lib != LIB_NCCL) continue;
      INFO(c.api << " seq " << c.seq);
      if (c.ret != 0) {  // rank 0's rejected AllReduce (ncclInvalidArgument): recorded as such
        CHECK(c.ret == 4);
        CHECK(c.op == "AllReduce");
        ++failed;
        continue;
      }
      CHECK(c.api == "nccl" + c.op);
      CHECK(c.stream != 0);  // the program's own stream, not the default one
      const bool on_main = c.comm == main_comm;
      CHECK((on_main || c.comm == half_comm));
      const int nr = on_main ? kRanks : kRanks / 2;
      auto it = by_key.find({r, nr, c.op, c.seq});
      REQUIRE(it != by_key.end());
      const Truth& t = it->second;
      CHECK(t.count == c.count);
      CHECK(t.bytes == c.bytes);
      CHECK(t.dtype == c.dtype);
      CHECK(t.peer == c.peer);
      if (c.op == "Send" || c.op == "Recv") {
        // Grouped: called before the ncclGroupEnd (the group event), enqueued inside it.
        REQUIRE(c.group != 0);
        REQUIRE(groups.count(c.group) == 1);
        const OtherEvent* g = groups.at(c.group);
        CHECK(c.end_ns <= g->start_ns);
        CHECK(g->start_ns <= t.queued_ns);
        CHECK(t.queued_ns <= g->end_ns);
        CHECK(g->graph == 2);  // member calls of the group
        (c.op == "Send" ? sends : recvs)++;
        // One stream: both members carry the fused launch's correlation id, whose device op
        // ends when the later of the two transfers ended.
        if (!p.device_ops.empty()) {
          REQUIRE(c.corr != 0);
          group_corrs[c.group].insert(c.corr);
          const RankProfile::Dev* dev = nullptr;
          for (const auto& d : p.device_ops)
            if (d.corr == c.corr) dev = &d;
          REQUIRE(dev != nullptr);
          group_truth_end[c.group] = std::max(group_truth_end[c.group], t.end_ns);
          group_dev_end[c.group] = dev->end_ns;
        }
      } else {
        CHECK(c.group == 0);
        // The host enqueue window holds the true enqueue, up to the agent's clock conversion
        // (TSC ticks to CLOCK_MONOTONIC: tens of ns here; once 14 ns past the window's end).
        constexpr uint64_t kClockSlackNs = 1000;
        CHECK(c.start_ns <= t.queued_ns + kClockSlackNs);
        CHECK(t.queued_ns <= c.end_ns + kClockSlackNs);
        if (on_main) {
          ++main_colls;
          ops_by_seq[c.seq].insert(c.op);
        } else {
          ++half_colls;
        }
        // With device timing (CUPTI, or CUDA events around the call), the correlation id
        // leads to one device op: the NCCL kernel's interval on the stream, which ends when the
        // simulator says the collective ended (events: within the event-to-host mapping error).
        if (!p.device_ops.empty()) {
          REQUIRE(c.corr != 0);
          const RankProfile::Dev* dev = nullptr;
          int matches = 0;
          for (const auto& d : p.device_ops)
            if (d.corr == c.corr) dev = &d, ++matches;
          REQUIRE(matches == 1);
          constexpr int64_t kTol = 200000;  // 200 us
          INFO("device op " << dev->start_ns << ".." << dev->end_ns << " truth arrive "
                            << t.arrive_ns << " start " << t.start_ns << " end " << t.end_ns);
          CHECK(std::llabs(int64_t(dev->end_ns) - int64_t(t.end_ns)) <= kTol);
          CHECK(int64_t(dev->start_ns) + kTol >= int64_t(c.start_ns));  // not before enqueue
          CHECK(int64_t(dev->start_ns) <= int64_t(t.start_ns) + kTol);  // running by the start
          ++timed;
        }
      }
      if (c.op == "AllGather" || c.op == "AlltoAll") CHECK(c.recv_bytes == c.bytes * nr);
    }
    CHECK(failed == (r == 0 ? kIters : 0));
    CHECK(main_colls == kMainColls);
    CHECK(sends == kIters);
    CHECK(recvs == kIters);
    CHECK(half_colls == 1);
    if (p.device_ops.empty()) {
      WARN("rank " << r << ": no device timing in this run; device intervals not checked");
    } else {
      CHECK(timed == kMainColls + 1);  // every ungrouped call has its device interval
      CHECK(group_corrs.size() == size_t(kIters));
      for (const auto& kv : group_corrs) {
        CHECK(kv.second.size() == 1);  // both members: the same fused launch
        CHECK(std::llabs(int64_t(group_dev_end[kv.first]) -
                         int64_t(group_truth_end[kv.first])) <= 200000);
      }
    }
  }
  CHECK(main_uids.size() == 1);
  CHECK(half_uids[0].size() == 1);
  CHECK(half_uids[1].size() == 1);
  CHECK(*half_uids[0].begin() != *half_uids[1].begin());
  CHECK(*half_uids[0].begin() != *main_uids.begin());
  REQUIRE(ops_by_seq.size() == size_t(kMainColls));
  for (const auto& kv : ops_by_seq) CHECK(kv.second.size() == 1);  // same op at the same seq

  // The report times both members of each grouped Send/Recv on their fused kernel (one
  // correlation id for two calls): neither falls back to its host enqueue time.
  std::string rep_log;
  REQUIRE(Run(Runfile("analyzer/profanalyze") + " report " + out + " -o " + out + "/rep",
              &rep_log) == 0);
  std::ifstream in(out + "/rep/summary.json");
  nlohmann::json sum = nlohmann::json::parse(in);
  int p2p_rows = 0;
  uint64_t allreduces = 0;
  for (const auto& o : sum["collectives"]["ops"]) {
    if (o["lib"] == "nccl" && o["op"] == "AllReduce") allreduces += o["count"].get<uint64_t>();
    if (o["op"] != "Send" && o["op"] != "Recv") continue;
    ++p2p_rows;
    INFO(o.dump());
    if (sum["meta"]["gpu_timing"] == "host") continue;  // no device timing on this machine
    CHECK(o["time_source"] == "device");
    CHECK(o["device_timed"] == o["count"]);
  }
  CHECK(p2p_rows == 2);
  // The rejected calls are out of the figures and said so.
  CHECK(allreduces == uint64_t(kRanks * (kIters + 1) + kRanks));  // loop, last check, split
  CHECK(sum["meta"]["warnings"].dump().find(std::to_string(kIters) + " MPI or NCCL calls failed") !=
        std::string::npos);
}

// One process, four communicators from ncclCommInitAll (gpusim's own nccl_ranks test program,
// mode "initall"), and one ncclGroupStart/End around an AllReduce on each (as nccl-tests -g 4
// runs), in CUPTI and in CUDA-event timing.
// Communicator rank 2 (device 2) reaches the collective 5 ms late (well beyond the scheduling
// noise of 4 simulated streams on 2 loaded cores): the report's per-GPU view must
// name it.
void CheckInitAllGroup(const std::string& timing) {
  INFO("PROFAGENT_GPU_TIMING=" << timing);
  const std::string out = FreshDir("nccl_initall_" + timing);
  const std::string cudart = Runfile("tests/gpusim/libcudart.so.13");
  const std::string nccl = Runfile("tests/gpusim/libnccl.so.2");
  const std::string truth_path = out + "/truth.jsonl";
  std::string log;
  const int rc = Run("env LD_LIBRARY_PATH=" + cudart.substr(0, cudart.rfind('/')) + ":" +
                         nccl.substr(0, nccl.rfind('/')) +
                         " GPUSIM_NCCL_DELAY_RANK=2 GPUSIM_NCCL_DELAY_US=5000"
                         " GPUSIM_DEVICES=4 LD_PRELOAD=" +
                         Runfile("agent/libprofagent.so") + " PROFAGENT_OUTPUT=" + out +
                         "/prof PROFAGENT_GPU_TIMING=" + timing + " GPUSIM_TRUTH=" + truth_path +
                         " " + Runfile("tests/gpusim/nccl_ranks") + " 4 initall",
                     &log);
  INFO(log);
  REQUIRE(rc == 0);
  std::vector<RankProfile> files = LoadProfileDir(out + "/prof");
  REQUIRE(files.size() == 1);
  const RankProfile& p = files[0];
  REQUIRE(p.error.empty());
  // Four communicators of one clique: ranks 0..3, devices 0..3, one unique id.
  std::set<int> ranks;
  std::set<std::string> uids;
  for (const auto& kv : p.comms) {
    CHECK(kv.second.lib() == LIB_NCCL);
    CHECK(kv.second.size() == 4);
    CHECK(kv.second.device() == kv.second.rank());
    ranks.insert(kv.second.rank());
    uids.insert(kv.second.unique_id());
  }
  CHECK(ranks == std::set<int>{0, 1, 2, 3});
  REQUIRE(uids.size() == 1);
  CHECK(uids.begin()->rfind("nccl-all:", 0) == 0);
  // One call, one event (before: one per device, three of them stretched over the agent's work).
  size_t init_calls = 0;
  for (const OtherEvent& o : p.others)
    init_calls += o.kind == EV_COMM && o.name == "ncclCommInitAll";
  CHECK(init_calls == 1);
  // One AllReduce per communicator, all members of the same group, each seq 0 on its comm.
  REQUIRE(p.colls.size() == 4);
  std::set<uint64_t> comms;
  for (const CollRecord& c : p.colls) {
    CHECK(c.api == "ncclAllReduce");
    CHECK(c.seq == 0);
    CHECK(c.count == 64);
    CHECK(c.bytes == 256);
    CHECK(c.group == p.colls[0].group);
    CHECK(c.group != 0);
    comms.insert(c.comm);
  }
  CHECK(comms.size() == 4);
  // Four streams, four kernels: each member has its own stream's kernel (CUPTI: the launch on
  // its stream; events: its stream's event pair), whose device interval is the simulator's.
  std::vector<Truth> truth = ReadTruth(truth_path);
  REQUIRE(truth.size() == 4);
  std::set<uint64_t> corrs;
  for (const CollRecord& c : p.colls) {
    INFO("comm " << c.comm);
    REQUIRE(c.corr != 0);
    corrs.insert(c.corr);
    const RankProfile::Dev* dev = nullptr;
    for (const auto& d : p.device_ops) {
      if (d.corr == c.corr) dev = &d;
    }
    REQUIRE(dev != nullptr);
    const int comm_rank = p.comms.at(c.comm).rank();
    const Truth* t = nullptr;
    for (const Truth& x : truth) {
      if (x.comm_rank == comm_rank) t = &x;
    }
    REQUIRE(t != nullptr);
    const int64_t kTol = timing == "cupti" ? 1000 : 200000;  // events: host-side gaps
    CHECK(std::llabs(int64_t(dev->end_ns) - int64_t(t->end_ns)) <= kTol);
    // Named after the kernel (CUPTI), or after the group's one collective (events).
    if (timing == "cupti") {
      CHECK(dev->name.rfind("ncclDevKernel_AllReduce_", 0) == 0);
    } else {
      CHECK(dev->name == "ncclAllReduce");
    }
    if (timing == "cupti") {
      // The kernel runs from this rank's arrival (it then waits for the others) to the end.
      CHECK(c.corr == t->corr);
      CHECK(std::llabs(int64_t(dev->start_ns) - int64_t(t->arrive_ns)) <= kTol);
    }
  }
  CHECK(corrs.size() == 4);
  int groups = 0;
  for (const OtherEvent& o : p.others) {
    if (o.kind != EV_GROUP) continue;
    ++groups;
    CHECK(o.handle == p.colls[0].group);  // group number
    CHECK(o.graph == 4);                  // member calls
    // The ncclGroupEnd call, after its members' calls (the kernel is launched in it).
    for (const CollRecord& c : p.colls) CHECK(c.end_ns <= o.start_ns);
  }
  CHECK(groups == 1);

  // The report: one process, four GPUs; the last arriver is device 2 (file position 0: no rank).
  // CUPTI only: gpusim delays a rank inside its kernel, and a CUDA-event pair (recorded before
  // the group's launches) dates a kernel's start from when its stream reached it.
  if (timing != "cupti") return;
  std::string rep_log;
  REQUIRE(Run(Runfile("analyzer/profanalyze") + " report " + out + "/prof -o " + out + "/rep",
              &rep_log) == 0);
  std::ifstream in(out + "/rep/summary.json");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string sum = ss.str();
  INFO(sum.substr(sum.find("\"stragglers\"")));
  CHECK(sum.find("\"most_frequent_last_arriver_gpu\": \"0:2\"") != std::string::npos);
  // One process drives every GPU: no rank-level straggler (it would be rank 0, itself), and no
  // wait caused at rank level (its GPUs' waits for each other are the per-GPU view's).
  CHECK(sum.find("\"straggler\": null") != std::string::npos);
  const nlohmann::json js = nlohmann::json::parse(sum);
  const nlohmann::json& caused = js["collectives"]["stragglers"]["wait_caused_ms_by_rank"];
  for (auto it = caused.begin(); it != caused.end(); ++it) CHECK(it.value().get<double>() == 0.0);
  double gpu_caused = 0;
  for (const auto& v : js["collectives"]["stragglers"]["wait_caused_ms_by_gpu"]) {
    gpu_caused += v.get<double>();
  }
  CHECK(gpu_caused > 0);
  CHECK(sum.find("\"most_frequent_last_arriver\": null") != std::string::npos);
  for (int d = 0; d < 4; ++d) {
    CHECK(sum.find("\"0:" + std::to_string(d) + "\":") != std::string::npos);  // a wait per GPU
  }
  std::ifstream md(out + "/rep/report.md");
  std::stringstream ms;
  ms << md.rdbuf();
  CHECK(ms.str().find("most frequent last arriver 0:2") != std::string::npos);
}

// Runs `program args` on gpusim (its libcudart and libnccl) under the agent, CUPTI timing,
// writing the profile to `out`/prof; `env` adds variables. Returns the exit code.
int RunOnGpusim(const std::string& out, const std::string& env, const std::string& program,
                std::string* log) {
  const std::string cudart = Runfile("tests/gpusim/libcudart.so.13");
  const std::string nccl = Runfile("tests/gpusim/libnccl.so.2");
  return Run("env LD_LIBRARY_PATH=" + cudart.substr(0, cudart.rfind('/')) + ":" +
                 nccl.substr(0, nccl.rfind('/')) + " " + env + " LD_PRELOAD=" +
                 Runfile("agent/libprofagent.so") + " PROFAGENT_OUTPUT=" + out +
                 "/prof PROFAGENT_GPU_TIMING=cupti " + program,
             log);
}

// PROFAGENT_RANKS=1 with ranks learned only at ncclCommInitRank (forked children, no launcher
// variables at start-up): rank 0's file, begun before its rank was known, is removed; rank 1's
// stays (before, rank 0's stayed, and as the lowest rank with steps made the report's figures).
TEST_CASE("PROFAGENT_RANKS: a rank learned late and not selected leaves no file") {
  const std::string out = FreshDir("nccl_ranks_select");
  std::string log;
  REQUIRE(RunOnGpusim(out, "PROFAGENT_RANKS=1", Runfile("tests/gpusim/nccl_ranks") + " 2 timing",
                      &log) == 0);
  INFO(log);
  std::set<int> ranks;
  for (const RankProfile& p : LoadProfileDir(out + "/prof")) {
    REQUIRE(p.error.empty());
    ranks.insert(p.rank);
  }
  CHECK(ranks.count(0) == 0);
  CHECK(ranks.count(1) == 1);
  struct stat st;
  CHECK(stat((out + "/prof/rank0.pb").c_str(), &st) != 0);
}

// The report of `out`/prof written to `out`/rep, as summary.json.
nlohmann::json ReportOf(const std::string& out) {
  std::string rep_log;
  nlohmann::json sum;
  if (!ReportSummary(out + "/prof", out + "/rep", &sum, &rep_log)) FAIL(rep_log);
  return sum;
}

// ncclCommSplit of every communicator inside one group (NCCL's pattern for a process that drives
// several GPUs): the children exist only when the group ends. Each is registered then, with its
// half's unique id, and the AllReduce on each half is on a registered communicator (before,
// the children were NULL when the calls returned and their calls matched nothing).
TEST_CASE("ncclCommSplit inside a group: the children are registered at ncclGroupEnd") {
  const std::string out = FreshDir("nccl_initall_split");
  std::string log;
  const int rc = RunOnGpusim(out, "GPUSIM_DEVICES=4",
                             Runfile("tests/gpusim/nccl_ranks") + " 4 initall_split", &log);
  INFO(log);
  REQUIRE(rc == 0);
  CHECK(log.find("FAIL") == std::string::npos);
  std::vector<RankProfile> files = LoadProfileDir(out + "/prof");
  REQUIRE(files.size() == 1);
  const RankProfile& p = files[0];
  REQUIRE(p.error.empty());
  std::map<std::string, std::set<int>> half_ranks;  // unique id -> ranks in it
  std::set<uint64_t> halves;
  for (const auto& kv : p.comms) {
    if (kv.second.size() != 2) continue;
    halves.insert(kv.first);
    half_ranks[kv.second.unique_id()].insert(kv.second.rank());
  }
  CHECK(halves.size() == 4);
  REQUIRE(half_ranks.size() == 2);  // the even half and the odd half
  for (const auto& kv : half_ranks) CHECK(kv.second == std::set<int>{0, 1});
  int on_halves = 0;
  for (const CollRecord& c : p.colls) on_halves += halves.count(c.comm);
  CHECK(on_halves == 4);
  // The process drives ranks 0..3: the report finds no rank missing (each rank's communicator
  // is in its file).
  const nlohmann::json sum = ReportOf(out);
  INFO(sum["meta"]["warnings"].dump());
  CHECK(sum["meta"]["warnings"].dump().find("ranks missing") == std::string::npos);
}

// A thread per rank (nccl-tests -t 2): one file, named after the process's lowest rank whichever
// thread initialized first, and no rank reported missing (before: rank0.pb or rank1.pb from run
// to run, and "ranks missing from the profile (world size 2)").
TEST_CASE("One process with a thread per NCCL rank: one file, its lowest rank, none missing") {
  for (int run = 0; run < 3; ++run) {
    const std::string out = FreshDir("nccl_thread_ranks_" + std::to_string(run));
    std::string log;
    const int rc = RunOnGpusim(out, "GPUSIM_DEVICES=2",
                               Runfile("tests/integration/nccl_thread_ranks") + " 2", &log);
    INFO(log);
    REQUIRE(rc == 0);
    std::vector<RankProfile> files = LoadProfileDir(out + "/prof");
    REQUIRE(files.size() == 1);
    CHECK(files[0].path.substr(files[0].path.rfind('/') + 1) == "rank0.pb");
    CHECK(files[0].colls.size() == 6);
    const nlohmann::json sum = ReportOf(out);
    INFO(sum["meta"]["warnings"].dump());
    CHECK(sum["meta"]["warnings"].dump().find("ranks missing") == std::string::npos);
  }
}

// nccl-tests -t 2 -G: one file holds both ranks, each capturing an AllReduce and a Send/Recv
// ring into a graph launched 4 times. Each rank's k-th execution meets the other's: every
// execution is matched, none is "seen on only some ranks" (before, the two ranks' captures were
// numbered in one sequence and never met).
TEST_CASE("One process with a thread per rank, collectives in CUDA graphs: all matched") {
  const std::string out = FreshDir("nccl_thread_graphs");
  std::string log;
  const int rc = RunOnGpusim(out, "GPUSIM_DEVICES=2 PROFAGENT_GPU_TIMING=cupti",
                             Runfile("tests/integration/nccl_thread_ranks") + " 2 graph", &log);
  INFO(log);
  REQUIRE(rc == 0);
  const nlohmann::json sum = ReportOf(out);
  const nlohmann::json& c = sum["collectives"];
  INFO(c.dump(1));
  INFO(sum["meta"]["warnings"].dump());
  // 2 ranks x 4 launches x 2 kernels (the AllReduce's, the ring's fused SendRecv).
  CHECK(c["in_graph"]["kernels_matched"] == 16);
  CHECK(c["in_graph"]["kernels_unmatched"] == 0);
  // 3 eager AllReduces, then per launch: the AllReduce and each direction of the ring.
  CHECK(c["stragglers"]["calls_matched"] == 3 + 4 * 3);
  CHECK(c["stragglers"]["calls_incomplete"] == 0);
  CHECK(sum["meta"]["warnings"].dump().find("seen on only some") == std::string::npos);
}

// Non-blocking communicators (ncclConfig_t.blocking = 0): world init and a split return
// ncclInProgress and are polled with ncclCommGetAsyncError until ready (gpusim refuses queries
// before that, as NCCL 2.28 does, recording an error). The agent asks nothing of a communicator
// in progress, so the program finds no NCCL error left, and completes the registration once it
// is ready: the halves' AllGathers gather 2 x 16 KiB with n = 2 in busbw, and the per-GPU view
// is there (before: size 0 and no device, 16 KiB rows with n = 4, "Attempt to use communicator
// before..." as the program's last error).
TEST_CASE(
    "Non-blocking NCCL communicators: registered once ready, the program's errors untouched") {
  const std::string out = FreshDir("nccl_nonblocking");
  std::string log;
  const int rc = RunOnGpusim(out, "PROFAGENT_GPU_TIMING=cupti",
                             Runfile("tests/gpusim/nccl_ranks") + " 4 nonblocking", &log);
  INFO(log);
  REQUIRE(rc == 0);
  CHECK(log.find("FAIL") == std::string::npos);
  CHECK(log.find("Attempt to use communicator") == std::string::npos);
  const nlohmann::json sum = ReportOf(out);
  const nlohmann::json& c = sum["collectives"];
  INFO(c.dump(1));
  int rows = 0;
  for (const auto& o : c["ops"]) {
    if (o["op"] == "AllGather") {
      ++rows;
      CHECK(o["count"] == 12);     // 3 per rank
      CHECK(o["bytes"] == 32768);  // per call: 2 ranks x 4096 floats
      CHECK(o["busbw_gbps"].get<double>() ==
            Approx(o["algbw_gbps"].get<double>() * 0.5).epsilon(1e-3));  // (n - 1) / n, n = 2
    } else if (o["op"] == "AllReduce") {
      ++rows;
      CHECK(o["busbw_gbps"].get<double>() ==
            Approx(o["algbw_gbps"].get<double>() * 1.5).epsilon(1e-3));  // 2 (n - 1) / n, n = 4
    }
  }
  CHECK(rows == 2);
  CHECK(c["stragglers"]["calls_matched"] == 2 * 3 + 2);
  CHECK(c["stragglers"]["calls_incomplete"] == 0);
  CHECK(c["stragglers"]["wait_ms_by_gpu"].size() == 4);
  // The failed ncclCommSplit at the end is recorded with its error on every rank, and the
  // report says so (the in-progress ones are no failures).
  CHECK(sum["meta"]["warnings"].dump().find("1 communicator creations, splits or shrinks failed") !=
        std::string::npos);
  std::vector<RankProfile> files = LoadProfileDir(out + "/prof");
  REQUIRE(files.size() == 4);
  for (const RankProfile& f : files) {
    int failed = 0;
    for (const OtherEvent& o : f.others) {
      failed +=
          o.kind == EV_COMM && o.name == "ncclCommSplit" && o.ret == 4;  // ncclInvalidArgument
    }
    CHECK(failed == 1);
  }
}

// A group of 100 AllReduces (more than the 64 members the agent first makes room for): every
// call joined to the group's kernel, each charged its share of it (before, the calls past the
// 64th had no kernel and the report's time source was "mixed").
TEST_CASE("An NCCL group of 100 calls: every member joined to the fused kernel") {
  const std::string out = FreshDir("nccl_biggroup");
  std::string log;
  const int rc =
      RunOnGpusim(out, "", Runfile("tests/gpusim/nccl_ranks") + " 2 biggroup", &log);
  INFO(log);
  REQUIRE(rc == 0);
  CHECK(log.find("FAIL") == std::string::npos);
  const nlohmann::json sum = ReportOf(out);
  if (sum["meta"]["gpu_timing"] == "host") return;  // no device timing on this machine
  const nlohmann::json& ops = sum["collectives"]["ops"];
  INFO(ops.dump(1));
  REQUIRE(ops.size() == 1);
  CHECK(ops[0]["count"] == 200);
  CHECK(ops[0]["device_timed"] == 200);
  CHECK(ops[0]["time_source"] == "device");
}

TEST_CASE("ncclCommInitAll and a multi-communicator group in one process") {
  CheckInitAllGroup("cupti");
  CheckInitAllGroup("events");
}

// NCCL calls captured into a CUDA graph (nccl-tests -G, vLLM's decode graphs): two ranks each
// capture an AllReduce and a grouped Send/Recv, then launch the graph 3 times. The capture-time
// calls ran nothing and are not collectives; the 3 executions per rank are, timed on their
// kernels (CUPTI reports them at the graph launches).
// Runs `nccl_ranks 2 <mode>` under the agent (CUPTI) and checks the captured-NCCL picture:
// every recorded call flagged captured, `captured` calls per op in the report, and the graph
// launches' NCCL kernels, tied to the calls captured, counted as those calls' executions (`ran`
// per op) with the calls' sizes (1 KiB each) and bandwidths, not as collectives "in graph" of
// unknown size.
void CheckCapturedNccl(const std::string& mode, const std::map<std::string, int>& truth_want,
                       const nlohmann::json& captured,
                       const std::map<std::string, uint64_t>& ran) {
  const std::string out = FreshDir("nccl_" + mode);
  const std::string cudart = Runfile("tests/gpusim/libcudart.so.13");
  const std::string nccl = Runfile("tests/gpusim/libnccl.so.2");
  const std::string truth_path = out + "/truth.%p.jsonl";
  std::string log;
  const int rc = Run("env LD_LIBRARY_PATH=" + cudart.substr(0, cudart.rfind('/')) + ":" +
                         nccl.substr(0, nccl.rfind('/')) + " LD_PRELOAD=" +
                         Runfile("agent/libprofagent.so") + " PROFAGENT_OUTPUT=" + out +
                         "/prof PROFAGENT_GPU_TIMING=cupti GPUSIM_TRUTH=" + truth_path + " " +
                         Runfile("tests/gpusim/nccl_ranks") + " 2 " + mode,
                     &log);
  INFO(log);
  REQUIRE(rc == 0);
  CHECK(log.find("FAIL") == std::string::npos);
  // What the simulator ran, all from graph launches.
  std::map<std::string, int> truth_ops;
  std::unique_ptr<DIR, int (*)(DIR*)> d(opendir(out.c_str()), closedir);
  REQUIRE(d != nullptr);
  while (dirent* ent = readdir(d.get())) {
    if (std::string(ent->d_name).rfind("truth.", 0) != 0) continue;
    for (const Truth& t : ReadTruth(out + "/" + ent->d_name)) truth_ops[t.name]++;
  }
  CHECK(truth_ops == truth_want);
  // The recorded calls are flagged as captured.
  std::vector<RankProfile> files = LoadProfileDir(out + "/prof");
  REQUIRE(files.size() == 2);
  size_t calls = 0;
  for (const auto& kv : captured.items()) calls += kv.value().get<size_t>();
  for (const RankProfile& p : files) {
    REQUIRE(p.error.empty());
    CHECK(p.colls.size() == calls / 2);
    for (const CollRecord& k : p.colls) CHECK(k.captured);
  }
  std::string rep_log;
  REQUIRE(Run(Runfile("analyzer/profanalyze") + " report " + out + "/prof -o " + out + "/rep",
              &rep_log) == 0);
  INFO(rep_log);
  // No launch of a captured call (also NCCL's own kernel launch on a side stream that joined
  // the capture) waits for device activity that never comes.
  CHECK(rep_log.find("without device activity") == std::string::npos);
  std::ifstream in(out + "/rep/summary.json");
  nlohmann::json sum = nlohmann::json::parse(in);
  const nlohmann::json& c = sum["collectives"];
  INFO(c.dump(1));
  CHECK(c["captured_calls"] == captured);
  std::map<std::string, uint64_t> counts;
  for (const auto& o : c["ops"]) {
    INFO(o.dump());
    CHECK(o["size_class"] != "in graph");
    CHECK(o["bytes"] == 1024);
    CHECK(o["time_source"] == "device");
    CHECK(o["ranks"] == 2);
    // Two ranks: nccl-tests' bus factor is 1 for AllReduce (2(n-1)/n) and for Send/Recv.
    REQUIRE(o["algbw_gbps"].is_number());
    CHECK(o["busbw_gbps"].get<double>() == Approx(o["algbw_gbps"].get<double>()));
    counts[o["op"].get<std::string>()] += o["count"].get<uint64_t>();
  }
  CHECK(counts == ran);
  CHECK(c["in_graph"]["kernels_unmatched"] == 0);
}

TEST_CASE("NCCL calls captured into CUDA graphs: counted at each graph launch, not at capture") {
  // One fused kernel per launch for the grouped Send/Recv (NCCL's SendRecv kernel), an execution
  // of each of the two calls.
  CheckCapturedNccl("graph", {{"AllReduce", 6}, {"Recv", 6}, {"Send", 6}},
                    nlohmann::json({{"AllReduce", 2}, {"Recv", 2}, {"Send", 2}}),
                    {{"AllReduce", 6}, {"Recv", 6}, {"Send", 6}});
}

// In-graph collectives in the straggler view: `nccl_ranks 2 graph_late` captures an AllReduce
// and a grouped Send/Recv ring, then launches the graph 4 times, rank 1 sleeping 3 ms before
// each launch. Under CUPTI each launch's NCCL kernels are tied back to the captured calls and
// matched across the ranks: both ranks' waits agree with the simulator's (last arrival minus
// own arrival, summed) within 2% of rank 0's, and rank 1 is the straggler.
TEST_CASE("NCCL calls captured into CUDA graphs: their executions are in the straggler view") {
  const std::string out = FreshDir("nccl_graph_late");
  const std::string cudart = Runfile("tests/gpusim/libcudart.so.13");
  const std::string nccl = Runfile("tests/gpusim/libnccl.so.2");
  std::string log;
  const int rc = Run("env LD_LIBRARY_PATH=" + cudart.substr(0, cudart.rfind('/')) + ":" +
                         nccl.substr(0, nccl.rfind('/')) + " LD_PRELOAD=" +
                         Runfile("agent/libprofagent.so") + " PROFAGENT_OUTPUT=" + out +
                         "/prof PROFAGENT_GPU_TIMING=cupti GPUSIM_TRUTH=" + out +
                         "/truth.%p.jsonl " + Runfile("tests/gpusim/nccl_ranks") + " 2 graph_late",
                     &log);
  INFO(log);
  REQUIRE(rc == 0);
  CHECK(log.find("FAIL") == std::string::npos);
  // The truth's waits: an execution waits from its arrival to its peer's (the same AllReduce,
  // the Recv matching a Send); the grouped Send and Recv share one kernel, whose wait the report
  // splits in half between them, so each counts half of its own.
  std::map<std::pair<int, std::string>, std::map<uint64_t, uint64_t>> arrive;  // seq -> ns
  int executions = 0;
  std::unique_ptr<DIR, int (*)(DIR*)> d(opendir(out.c_str()), closedir);
  REQUIRE(d != nullptr);
  while (dirent* ent = readdir(d.get())) {
    if (std::string(ent->d_name).rfind("truth.", 0) != 0) continue;
    for (const Truth& t : ReadTruth(out + "/" + ent->d_name)) {
      arrive[{t.rank, t.name}][t.seq] = t.arrive_ns;
      ++executions;
    }
  }
  CHECK(executions == 2 * 4 * 3);  // per rank and launch: AllReduce, Send, Recv
  std::map<int, double> truth_wait_ns;
  for (const auto& own : arrive) {
    const int rank = own.first.first;
    const std::string& name = own.first.second;
    const std::string peer_name = name == "Send" ? "Recv" : name == "Recv" ? "Send" : name;
    const auto peer = arrive.find({1 - rank, peer_name});
    REQUIRE(peer != arrive.end());
    for (const auto& e : own.second) {
      REQUIRE(peer->second.count(e.first) == 1);
      const uint64_t last = std::max(e.second, peer->second.at(e.first));
      truth_wait_ns[rank] += double(last - e.second) * (name == "AllReduce" ? 1.0 : 0.5);
    }
  }
  INFO("truth wait ms: rank 0 " << truth_wait_ns[0] / 1e6 << ", rank 1 " << truth_wait_ns[1] / 1e6);
  REQUIRE(truth_wait_ns[0] > 4 * 2e6);
  const nlohmann::json sum = ReportOf(out);
  const nlohmann::json& c = sum["collectives"];
  INFO(c.dump(1));
  // 2 ranks x 4 launches x 2 kernels (the AllReduce's, the ring's fused SendRecv).
  CHECK(c["in_graph"]["kernels_matched"] == 16);
  CHECK(c["in_graph"]["kernels_unmatched"] == 0);
  const nlohmann::json& st = c["stragglers"];
  CHECK(st["calls_matched"] == 4 * 3);  // per launch: the AllReduce, each direction of the ring
  CHECK(st["straggler"] == 1);
  const double tol_ms = 0.02 * truth_wait_ns[0] / 1e6;
  const double wait0_ms = st["wait_ms_by_rank"]["0"].get<double>();
  CHECK(std::abs(wait0_ms - truth_wait_ns[0] / 1e6) <= tol_ms);
  const double wait1_ms = st["wait_ms_by_rank"]["1"].get<double>();
  CHECK(std::abs(wait1_ms - truth_wait_ns[1] / 1e6) <= tol_ms);
  // Per rank: the in-graph executions are its calls, as they are its waits (4 launches x 3
  // calls, no call outside the graphs), and their time is at least rank 0's wait inside them.
  REQUIRE(c["per_rank"].size() == 2);
  for (const auto& pr : c["per_rank"]) {
    CHECK(pr["calls"] == 12);
    CHECK(pr["time_ms"].get<double>() >= pr["wait_ms"].get<double>());
  }
  std::ifstream md(out + "/rep/report.md");
  const std::string text((std::istreambuf_iterator<char>(md)), std::istreambuf_iterator<char>());
  CHECK(text.find("16 of their kernels were tied to their captured call") != std::string::npos);
}

TEST_CASE("NCCL on a side stream joined to a capture (multi-stream capture): captured too") {
  CheckCapturedNccl("graph_side", {{"AllReduce", 6}}, nlohmann::json({{"AllReduce", 2}}),
                    {{"AllReduce", 6}});
}

}  // namespace
}  // namespace testing
}  // namespace profagent
