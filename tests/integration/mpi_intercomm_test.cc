// End-to-end test of an MPI intercommunicator: runs mpi_intercomm (a plain MPI program that
// checks its own results) with real Open MPI, np 3, the agent injected with `mpirun -x
// LD_PRELOAD`, and checks that the intercommunicator is recorded as one communicator of both
// groups (same unique id on all three ranks, ranks in the union: A = {world 0, world 2} first,
// then B = {world 1}), remote ranks and roots recorded as union ranks, and that the report
// matches its calls across the groups and names the late rank.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "tests/integration/mpi_testutil.h"

namespace profagent {
namespace testing {
namespace {

struct Expect {
  const char* api;
  int peer;
  uint64_t seq;
  uint64_t bytes;
  uint64_t recv_bytes;
};

// World rank -> its rank among both groups of the intercommunicator.
constexpr int kUnion[3] = {0, 2, 1};

// Calls on the intercommunicator, by start time (see mpi_intercomm.cc).
std::vector<Expect> OnInter(int world_rank) {
  switch (world_rank) {
    case 0:
      return {{"MPI_Send", 2, 0, 16, 0},     {"MPI_Bcast", 2, 0, 16, 16},
              {"MPI_Allreduce", -1, 1, 8, 8}, {"MPI_Allgather", -1, 2, 4, 4},
              {"MPI_Barrier", -1, 3, 0, 0}};
    case 2:
      return {{"MPI_Isend", 2, 0, 16, 0},    {"MPI_Bcast", 2, 0, 16, 16},
              {"MPI_Allreduce", -1, 1, 8, 8}, {"MPI_Allgather", -1, 2, 4, 4},
              {"MPI_Barrier", -1, 3, 0, 0}};
    default:  // B's only rank: the sender's union rank (ANY_SOURCE from its status), MPI_ROOT
      return {{"MPI_Recv", 0, 0, 16, 16},     {"MPI_Recv", 1, 0, 16, 16},
              {"MPI_Bcast", 2, 0, 16, 16},    {"MPI_Allreduce", -1, 1, 8, 8},
              {"MPI_Allgather", -1, 2, 4, 8}, {"MPI_Barrier", -1, 3, 0, 0}};
  }
}

TEST_CASE("an intercommunicator is one communicator of both groups") {
  REQUIRE(HaveMpirun());
  const std::string out = FreshDir("mpi_intercomm_out");
  std::string log;
  const int rc = RunMpiUnderAgent(3, "mpi_intercomm", out, &log);
  INFO(log);
  REQUIRE(rc == 0);  // the program checked every result itself
  REQUIRE(log.find("all results correct") != std::string::npos);

  std::vector<RankProfile> ranks = LoadProfileDir(out);
  REQUIRE(ranks.size() == 3);
  std::set<std::string> inter_uids, merged_uids;
  for (int r = 0; r < 3; ++r) {
    const RankProfile& p = ranks[r];
    INFO("file " << p.path);
    REQUIRE(p.error.empty());
    REQUIRE(p.rank == r);
    std::map<uint64_t, std::vector<const CollRecord*>> by_comm = CallsByComm(p);
    // Two communicators have calls: the intercommunicator and the merged one.
    uint64_t inter = 0, merged = 0;
    for (const auto& kv : by_comm) {
      if (kv.second.size() == 1 && kv.second[0]->api == "MPI_Barrier") {
        merged = kv.first;
      } else {
        inter = kv.first;
      }
    }
    REQUIRE(inter != 0);
    REQUIRE(merged != 0);
    const CommDef& x = p.comms.at(inter);
    CHECK(x.rank() == kUnion[r]);
    CHECK(x.size() == 3);
    inter_uids.insert(x.unique_id());
    const CommDef& m = p.comms.at(merged);
    CHECK(m.size() == 3);
    merged_uids.insert(m.unique_id());

    CheckCalls(r, by_comm[inter], OnInter(r), [](const CollRecord& c, const Expect& e) {
      CHECK(c.api == e.api);
      CHECK(c.peer == e.peer);
      CHECK(c.seq == e.seq);
      CHECK(c.bytes == e.bytes);
      CHECK(c.recv_bytes == e.recv_bytes);
    });
  }
  CHECK(inter_uids.size() == 1);
  CHECK(merged_uids.size() == 1);
  CHECK(*inter_uids.begin() != *merged_uids.begin());

  // Matched across the groups: the two transfers, Bcast, Allreduce, Allgather and Barrier on the
  // intercommunicator, the merged barrier. World 1 was 30 ms late to the intercommunicator's
  // barrier: the straggler.
  std::string rlog;
  nlohmann::json sum;
  if (!ReportSummary(out, out + "/rep", &sum, &rlog)) FAIL(rlog);
  const nlohmann::json& st = sum["collectives"]["stragglers"];
  INFO(st.dump());
  CHECK(st["calls_matched"] == 7);
  CHECK(st["straggler"] == 1);
  CHECK(st["wait_ms_by_rank"]["0"].get<double>() >= 25.0);
  CHECK(st["wait_ms_by_rank"]["2"].get<double>() >= 25.0);
  CHECK(st["wait_ms_by_rank"]["1"].get<double>() < 25.0);
}

}  // namespace
}  // namespace testing
}  // namespace profagent
