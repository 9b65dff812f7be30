// End-to-end test of the agent's Fortran MPI interposers: runs mpi_fortran (`use mpi`) and
// mpi_fortran_f08 (`use mpi_f08`), plain Fortran programs that check their own results, with
// real Open MPI, np 2, the agent injected with `mpirun -x LD_PRELOAD`, and checks every
// recorded call against the programs' call sequence (mpi_fortran.F90), then the report's
// matching. Open MPI's Fortran library calls PMPI_* directly: without these interposers the
// agent saw nothing of these programs and wrote no file.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "tests/integration/mpi_testutil.h"

namespace profagent {
namespace testing {
namespace {

struct Expect {
  const char* api;
  int peer;
  uint64_t seq, count, bytes, recv_bytes;
  const char* dtype;
  bool nonblocking;
};

// World, in start order.
std::vector<Expect> World(int rank) {
  const int other = 1 - rank;
  std::vector<Expect> v;
  if (rank == 0) {
    v.push_back({"MPI_Send", 1, 0, 100, 800, 0, "MPI_DOUBLE_PRECISION", false});
  } else {
    v.push_back({"MPI_Recv", 0, 0, 100, 800, 800, "MPI_DOUBLE_PRECISION", false});
  }
  v.push_back({"MPI_Isend", other, uint64_t(rank == 0 ? 1 : 0), 1, 8, 0, "MPI_DOUBLE_PRECISION",
               true});
  v.push_back({"MPI_Irecv", other, uint64_t(rank == 0 ? 0 : 1), 1, 8, 8, "MPI_DOUBLE_PRECISION",
               true});
  if (rank == 0) {
    v.push_back({"MPI_Send", 1, 2, 4, 16, 0, "MPI_INTEGER", false});
  } else {  // from MPI_ANY_SOURCE: numbered from its status
    v.push_back({"MPI_Recv", 0, 2, 4, 16, 16, "MPI_INTEGER", false});
  }
  v.push_back({"MPI_Bcast", 0, 0, 10, 40, 40, "MPI_INTEGER", false});
  // In place: the receive block stands for the send side.
  v.push_back({"MPI_Allgather", -1, 1, 5, 20, 40, "MPI_INTEGER", false});
  v.push_back({"MPI_Allreduce", -1, 2, 1000, 8000, 8000, "MPI_DOUBLE_PRECISION", false});
  v.push_back({"MPI_Barrier", -1, 3, 0, 0, 0, "", false});
  return v;
}

void CheckProgram(const std::string& program) {
  INFO(program);
  const std::string out = FreshDir(program + "_out");
  std::string log;
  const int rc = RunMpiUnderAgent(2, program, out, &log);
  INFO(log);
  REQUIRE(rc == 0);  // the program checked every result itself
  REQUIRE(log.find(program + ": all results correct") != std::string::npos);

  std::vector<RankProfile> ranks = LoadProfileDir(out);
  REQUIRE(ranks.size() == 2);
  for (int r = 0; r < 2; ++r) {
    const RankProfile& p = ranks[r];
    INFO("file " << p.path);
    REQUIRE(p.error.empty());
    CHECK(p.has_footer);
    REQUIRE(p.rank == r);  // from MPI_Init, seen through the Fortran binding
    CHECK(p.world_size == 2);
    std::map<uint64_t, std::vector<const CollRecord*>> by_comm = CallsByComm(p);
    const uint64_t world = CommIdOf(p, "world");
    REQUIRE(world != 0);
    CheckCalls(r, by_comm[world], World(r), [](const CollRecord& c, const Expect& e) {
      CHECK(c.api == e.api);
      CHECK(c.lib == LIB_MPI);
      CHECK(c.peer == e.peer);
      CHECK(c.seq == e.seq);
      CHECK(c.count == e.count);
      CHECK(c.bytes == e.bytes);
      CHECK(c.recv_bytes == e.recv_bytes);
      CHECK(c.dtype == e.dtype);
      CHECK(c.nonblocking == e.nonblocking);
      if (e.nonblocking) CHECK(c.complete_ns >= c.end_ns);  // completed by MPI_Waitall
    });
    // The split communicator (one member): its Allreduce, under a communicator of its own.
    REQUIRE(by_comm.size() == 2);
    for (const auto& kv : by_comm) {
      if (kv.first == world) continue;
      REQUIRE(kv.second.size() == 1);
      CHECK(kv.second[0]->api == "MPI_Allreduce");
      CHECK(kv.second[0]->bytes == 4);
      CHECK(p.comms.at(kv.first).size() == 1);
    }
  }
  // Matched: the transfers 0->1 (3) and 1->0 (1), and the four collectives on world.
  std::string rlog;
  nlohmann::json sum;
  if (!ReportSummary(out, out + "/rep", &sum, &rlog)) FAIL(rlog);
  CHECK(sum["collectives"]["stragglers"]["calls_matched"] == 8);
}

TEST_CASE("Fortran MPI (use mpi): every call recorded as its C form") {
  REQUIRE(HaveMpirun());
  CheckProgram("mpi_fortran");
}

TEST_CASE("Fortran MPI (use mpi_f08): every call recorded as its C form") {
  REQUIRE(HaveMpirun());
  CheckProgram("mpi_fortran_f08");
}

}  // namespace
}  // namespace testing
}  // namespace profagent
