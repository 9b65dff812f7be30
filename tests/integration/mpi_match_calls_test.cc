// End-to-end test of receives matched in less usual ways (matched probes, a cancelled receive, a
// Sendrecv from MPI_ANY_SOURCE, MPI_Request_get_status), in-place Scatter/Alltoallv, a datatype
// over 2 GiB and MPI_Comm_idup: runs mpi_match_calls (a plain MPI program that checks its own
// results) with real Open MPI, np 2, the agent injected with `mpirun -x LD_PRELOAD`, and checks
// every recorded call against the program's call sequence, then the report's matching.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "tests/integration/mpi_testutil.h"

namespace profagent {
namespace testing {
namespace {

constexpr uint64_t kNoSeq = 0xffffffffu;

struct Expect {
  const char* api;
  int peer;
  uint64_t seq;
  uint64_t bytes;
  bool nonblocking;
  int recv_peer = -1;  // a Sendrecv's receive side
  uint64_t recv_seq = 0;
};

// World, by start time (see mpi_match_calls.cc).
std::vector<Expect> World(int rank) {
  const uint64_t huge = ((1ull << 28) + 1) * 8;
  if (rank == 0) {
    return {
        {"MPI_Send", 1, 0, 16, false},
        {"MPI_Send", 1, 1, 16, false},
        {"MPI_Send", 1, 2, 16, false},
        {"MPI_Send", 1, 3, 16, false},
        {"MPI_Sendrecv", 1, 4, 8, false, 1, 0},
        {"MPI_Send", 1, 5, 16, false},
        {"MPI_Scatter", 0, 0, 16, false},
        {"MPI_Alltoallv", -1, 1, 16, false},
        {"MPI_Send", -2, kNoSeq, huge, false},
    };
  }
  return {
      {"MPI_Mrecv", 0, 0, 16, false},
      {"MPI_Imrecv", 0, 1, 16, true},
      {"MPI_Recv", 0, 2, 16, false},
      {"MPI_Recv", 0, 3, 16, false},  // the cancelled receive took no number
      {"MPI_Sendrecv", 0, 0, 8, false, 0, 4},
      {"MPI_Irecv", 0, 5, 16, true},
      {"MPI_Scatter", 0, 0, 16, false},
      {"MPI_Alltoallv", -1, 1, 16, false},
      {"MPI_Send", -2, kNoSeq, huge, false},
  };
}

TEST_CASE("matched probes, cancel, ANY_SOURCE Sendrecv, in-place, huge types, Comm_idup") {
  REQUIRE(HaveMpirun());
  const std::string out = FreshDir("mpi_match_calls_out");
  std::string log;
  const int rc = RunMpiUnderAgent(2, "mpi_match_calls", out, &log);
  INFO(log);
  REQUIRE(rc == 0);  // the program checked every result itself
  REQUIRE(log.find("all results correct") != std::string::npos);

  std::vector<RankProfile> ranks = LoadProfileDir(out);
  REQUIRE(ranks.size() == 2);
  std::map<std::string, int> uid_ranks;  // unique id of D and E -> ranks that used it
  for (int r = 0; r < 2; ++r) {
    const RankProfile& p = ranks[r];
    INFO("file " << p.path);
    REQUIRE(p.error.empty());
    REQUIRE(p.rank == r);
    std::map<uint64_t, std::vector<const CollRecord*>> by_comm = CallsByComm(p);
    const uint64_t world = CommIdOf(p, "world");
    REQUIRE(world != 0);
    const std::vector<const CollRecord*>& calls = by_comm[world];
    CheckCalls(r, calls, World(r), [](const CollRecord& c, const Expect& e) {
      CHECK(c.api == e.api);
      CHECK(c.peer == e.peer);
      CHECK(c.seq == e.seq);
      CHECK(c.bytes == e.bytes);
      CHECK(c.nonblocking == e.nonblocking);
      CHECK(c.recv_peer == e.recv_peer);
      if (e.recv_peer >= 0) CHECK(c.recv_seq == e.recv_seq);
    });
    // Rank 1's MPI_Request_get_status saw the receive complete before the MPI_Wait was called.
    if (r == 1) {
      const CollRecord& irecv = *calls[5];
      uint64_t last_wait_start = 0;
      for (const OtherEvent& o : p.others)
        if (o.name == "MPI_Wait" && o.start_ns > irecv.start_ns && last_wait_start == 0)
          last_wait_start = o.start_ns;
      REQUIRE(last_wait_start != 0);
      CHECK(irecv.complete_ns <= last_wait_start);
    }
    // D (idup) and E (dup): one transfer on D, one barrier on E, each under one unique id.
    int others = 0;
    for (const auto& kv : by_comm) {
      if (kv.first == world) continue;
      ++others;
      REQUIRE(kv.second.size() == 1);
      const CollRecord& c = *kv.second[0];
      INFO(c.api);
      const std::string uid = p.comms.at(kv.first).unique_id();
      uid_ranks[c.api == "MPI_Barrier" ? "E " + uid : "D " + uid]++;
      if (c.api != "MPI_Barrier") {
        CHECK(c.api == (r == 0 ? "MPI_Send" : "MPI_Recv"));
        CHECK(c.seq == 0);
      }
    }
    CHECK(others == 2);
  }
  INFO("unique ids");
  REQUIRE(uid_ranks.size() == 2);  // D and E: the same id on both ranks
  for (const auto& kv : uid_ranks) CHECK(kv.second == 2);

  // The report matches 0->1 transfers 0..5, the Sendrecv 1->0, Scatter, Alltoallv, D's transfer
  // and E's barrier; the send to MPI_PROC_NULL waits for no one.
  std::string rlog;
  nlohmann::json sum;
  if (!ReportSummary(out, out + "/rep", &sum, &rlog)) FAIL(rlog);
  CHECK(sum["collectives"]["stragglers"]["calls_matched"] == 11);
}

}  // namespace
}  // namespace testing
}  // namespace profagent
