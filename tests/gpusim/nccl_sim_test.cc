// End-to-end tests of gpusim's libnccl.so.2: testdata/nccl_ranks.cu forks real rank processes
// that rendezvous through shared memory; the ranks check their own results, and this test checks
// the ground-truth log (sequence numbers, a common start at the last arrival, the alpha-beta
// duration, straggler waits, timeouts).
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <catch2/catch.hpp>

#include "tests/gpusim/cupti_sim_testutil.h"

namespace {

using gpusim_test::I64;
using gpusim_test::JsonLine;
using gpusim_test::RunProgram;
using gpusim_test::U64;

std::vector<JsonLine> Collectives(const std::string& truth_path) {
  std::vector<JsonLine> out;
  for (const JsonLine& j : gpusim_test::ReadTruth(truth_path)) {
    if (j.at("op") == "collective") out.push_back(j);
  }
  return out;
}

// The documented model: alpha 5 us + wire bytes / 100 GB/s.
double ModelNs(const JsonLine& j) {
  double n = static_cast<double>(I64(j, "nranks"));
  double s = static_cast<double>(U64(j, "bytes"));
  const std::string& name = j.at("name");
  double wire = s;
  if (name == "AllReduce") wire = n > 1 ? 2 * (n - 1) / n * s : 0;
  if (name == "AllGather" || name == "ReduceScatter" || name == "AlltoAll" ||
      name == "Gather" || name == "Scatter") {
    wire = (n - 1) * s;
  }
  return 5000.0 + wire / 100.0;
}

void CheckCollectiveTruth(const std::vector<JsonLine>& colls, int nranks) {
  // Group the lines of one operation: (comm, name, seq, for p2p the ordered pair).
  std::map<std::tuple<std::string, std::string, uint64_t, std::string>, std::vector<JsonLine>>
      ops;
  std::map<int, std::vector<uint64_t>> coll_seqs;  // rank -> seqs of collectives, in order
  for (const JsonLine& j : colls) {
    const std::string& name = j.at("name");
    bool p2p = name == "Send" || name == "Recv";
    int me = static_cast<int>(I64(j, "comm_rank"));
    int peer = static_cast<int>(I64(j, "peer"));
    std::string pair = !p2p ? "" : name == "Send" ? std::to_string(me) + ">" + std::to_string(peer)
                                                  : std::to_string(peer) + ">" + std::to_string(me);
    ops[{j.at("comm"), p2p ? "p2p" : name, U64(j, "seq"), pair}].push_back(j);
    if (!p2p) coll_seqs[me].push_back(U64(j, "seq"));
    CHECK(I64(j, "rank") == me);  // RANK from the environment (one communicator of all)
    CHECK(I64(j, "nranks") == nranks);
    CHECK(j.at("comm").size() == 16);
    CHECK(!j.count("error"));
  }
  REQUIRE(coll_seqs.size() == static_cast<size_t>(nranks));
  for (auto& rs : coll_seqs) {
    // Every rank saw the collectives 0..K-1 once each (the truth is written in completion order).
    std::vector<uint64_t> seqs = rs.second;
    std::sort(seqs.begin(), seqs.end());
    for (size_t i = 0; i < seqs.size(); ++i) CHECK(seqs[i] == i);
    CHECK(seqs.size() == coll_seqs.begin()->second.size());
  }
  for (auto& op : ops) {
    const std::vector<JsonLine>& lines = op.second;
    INFO(std::get<1>(op.first) << " seq " << std::get<2>(op.first) << " " << std::get<3>(op.first));
    size_t want = std::get<1>(op.first) == "p2p" ? 2 : static_cast<size_t>(nranks);
    REQUIRE(lines.size() == want);
    uint64_t last_arrival = 0;
    std::set<int64_t> ranks;
    for (const JsonLine& j : lines) {
      last_arrival = std::max(last_arrival, U64(j, "arrive_ns"));
      ranks.insert(I64(j, "comm_rank"));
    }
    CHECK(ranks.size() == want);
    for (const JsonLine& j : lines) {
      CHECK(U64(j, "start_ns") == last_arrival);
      CHECK(U64(j, "arrive_ns") <= U64(j, "start_ns"));
      CHECK(U64(j, "queued_ns") <= U64(j, "arrive_ns"));
      double dur = static_cast<double>(U64(j, "end_ns") - U64(j, "start_ns"));
      CHECK(dur >= ModelNs(j) - 1);
      CHECK(dur <= ModelNs(j) + 1);
    }
  }
}

}  // namespace

TEST_CASE("collectives compute correct results across 2 and 4 rank processes", "[nccl]") {
  for (int n : {2, 4}) {
    INFO("nranks " << n);
    std::string truth_path = gpusim_test::TempPath("truth");
    auto r = RunProgram("nccl_ranks", {std::to_string(n), "check"},
                        {"GPUSIM_TRUTH=" + truth_path});
    INFO("stdout: " << r.out << "\nstderr: " << r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(r.out.find("FAIL") == std::string::npos);
    // 17 checks per rank, plus the gather result on rank 0.
    size_t oks = 0;
    for (size_t p = r.out.find("OK "); p != std::string::npos; p = r.out.find("OK ", p + 1)) ++oks;
    CHECK(oks == static_cast<size_t>(17 * n + 1));
    std::vector<JsonLine> colls = Collectives(truth_path);
    // Per rank: 9 AllReduce + Broadcast + Reduce + AllGather + ReduceScatter + AlltoAll +
    // Gather + Scatter = 16 collectives, plus one Send and one Recv.
    CHECK(colls.size() == static_cast<size_t>(18 * n));
    CheckCollectiveTruth(colls, n);
  }
}

TEST_CASE("a delayed rank makes the others wait", "[nccl]") {
  const int n = 3;
  const uint64_t delay_ns = 20000000;  // 20 ms
  std::string truth_path = gpusim_test::TempPath("truth");
  auto r = RunProgram("nccl_ranks", {std::to_string(n), "timing"},
                      {"GPUSIM_TRUTH=" + truth_path, "GPUSIM_NCCL_DELAY_RANK=1",
                       "GPUSIM_NCCL_DELAY_US=20000"});
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  std::vector<JsonLine> colls = Collectives(truth_path);
  REQUIRE(colls.size() == 5 * n);
  CheckCollectiveTruth(colls, n);
  // Waits (start - arrive) per rank; medians keep the check robust on a loaded machine.
  std::map<int64_t, std::vector<uint64_t>> waits;
  for (const JsonLine& j : colls) {
    waits[I64(j, "comm_rank")].push_back(U64(j, "start_ns") - U64(j, "arrive_ns"));
    // 64 KiB AllReduce over 3 ranks: 5 us + 2*(2/3)*64 KiB / 100 GB/s = 5.87 us.
    CHECK(U64(j, "end_ns") - U64(j, "start_ns") >= 5873);
  }
  for (auto& w : waits) {
    std::sort(w.second.begin(), w.second.end());
    uint64_t median = w.second[w.second.size() / 2];
    INFO("rank " << w.first << " median wait " << median << " ns");
    if (w.first == 1) {
      CHECK(median < 3000000);  // the straggler hardly waits
    } else {
      CHECK(median > delay_ns - 3000000);  // the others wait for it
      CHECK(median < delay_ns + 15000000);
    }
  }
}

TEST_CASE("NCCL calls captured into a CUDA graph run at every graph launch", "[nccl]") {
  const int n = 2;
  std::string truth_path = gpusim_test::TempPath("truth_graph");
  auto r = RunProgram("nccl_ranks", {std::to_string(n), "graph"}, {"GPUSIM_TRUTH=" + truth_path});
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("FAIL") == std::string::npos);
  CHECK(r.err.find("dropped") == std::string::npos);
  std::vector<JsonLine> colls = Collectives(truth_path);
  // Per rank and launch: the AllReduce, the Send and the Recv; none at capture time.
  REQUIRE(colls.size() == size_t(3 * 3 * n));
  CheckCollectiveTruth(colls, n);
  std::map<std::string, int> by_name;
  std::map<int64_t, std::set<uint64_t>> corrs;  // per rank: one correlation id per launch
  for (const JsonLine& j : colls) {
    by_name[j.at("name")]++;
    corrs[I64(j, "comm_rank")].insert(U64(j, "corr"));
  }
  CHECK(by_name == std::map<std::string, int>{{"AllReduce", 3 * n}, {"Send", 3 * n},
                                              {"Recv", 3 * n}});
  for (auto& c : corrs) CHECK(c.second.size() == 3);
}

TEST_CASE("a missing rank times out with an error instead of hanging", "[nccl]") {
  std::string truth_path = gpusim_test::TempPath("truth");
  auto r = RunProgram("nccl_ranks", {"2", "skip"},
                      {"GPUSIM_TRUTH=" + truth_path, "GPUSIM_NCCL_TIMEOUT_S=1"});
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.seconds < 30);
  CHECK(r.err.find("timed out") != std::string::npos);
  CHECK(r.out.find("ASYNC 6 rank 0") != std::string::npos);  // ncclRemoteError
  std::vector<JsonLine> colls = Collectives(truth_path);
  REQUIRE(colls.size() == 1);
  CHECK(colls[0].at("error") == "timeout");
  CHECK(U64(colls[0], "end_ns") - U64(colls[0], "arrive_ns") >= 1000000000ull);
}

TEST_CASE("ncclCommSplit makes working sub-communicators", "[nccl]") {
  std::string truth_path = gpusim_test::TempPath("truth");
  auto r = RunProgram("nccl_ranks", {"4", "split"}, {"GPUSIM_TRUTH=" + truth_path});
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("FAIL") == std::string::npos);
  std::vector<JsonLine> colls = Collectives(truth_path);
  REQUIRE(colls.size() == 4);
  std::map<std::string, std::set<int64_t>> comms;  // comm -> comm ranks
  for (const JsonLine& j : colls) {
    CHECK(j.at("nranks") == "2");
    CHECK(j.at("seq") == "0");
    CHECK(I64(j, "comm_rank") == I64(j, "rank") / 2);
    comms[j.at("comm")].insert(I64(j, "comm_rank"));
  }
  CHECK(comms.size() == 2);
  for (auto& c : comms) CHECK(c.second == std::set<int64_t>{0, 1});
}

// One thread splits the communicators of all its ranks inside one group, as NCCL requires
// (before, the first split waited for the others, which came later on the same thread: a 60 s
// timeout, then ncclSystemError).
TEST_CASE("ncclCommSplit of several ranks by one thread inside a group", "[nccl]") {
  std::string truth_path = gpusim_test::TempPath("truth_split_group");
  auto r = RunProgram("nccl_ranks", {"4", "initall_split"}, {"GPUSIM_TRUTH=" + truth_path});
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("FAIL") == std::string::npos);
  // The AllReduce on the 4 ranks, then one on each half (2 ranks each).
  std::vector<JsonLine> colls = Collectives(truth_path);
  CHECK(colls.size() == 8);
  std::set<std::string> comms;
  for (const JsonLine& j : colls) comms.insert(j.at("comm"));
  CHECK(comms.size() == 3);
}

TEST_CASE("ncclCommInitAll communicators of one process rendezvous in a group", "[nccl]") {
  std::string truth_path = gpusim_test::TempPath("truth");
  auto r = RunProgram("nccl_ranks", {"3", "initall"}, {"GPUSIM_TRUTH=" + truth_path});
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("FAIL") == std::string::npos);
  std::vector<JsonLine> colls = Collectives(truth_path);
  REQUIRE(colls.size() == 3);
  std::set<std::string> streams;
  for (const JsonLine& j : colls) {
    CHECK(j.at("comm") == colls[0].at("comm"));
    CHECK(j.at("start_ns") == colls[0].at("start_ns"));
    streams.insert(j.at("stream"));
  }
  CHECK(streams.size() == 3);
}
