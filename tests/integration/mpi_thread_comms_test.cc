// End-to-end test of communicators that threads create at once: runs mpi_thread_comms (a plain
// MPI program that checks its own results) with real Open MPI, np 3, the agent injected, and
// checks that each communicator has one id on every rank, whatever order the ranks' threads
// created them in, so that calls are matched on the right communicator.
#include <catch2/catch.hpp>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "tests/integration/mpi_testutil.h"

namespace profagent {
namespace testing {
namespace {

TEST_CASE("communicators created by threads at once: one id on every rank") {
  REQUIRE(HaveMpirun());
  const std::string out = FreshDir("mpi_thread_comms");
  std::string log;
  const int rc = RunMpiUnderAgent(3, "mpi_thread_comms", out, &log);
  INFO(log);
  REQUIRE(rc == 0);
  if (log.find("skip") != std::string::npos) {
    WARN("this MPI does not provide MPI_THREAD_MULTIPLE: skipped");
    return;
  }
  REQUIRE(log.find("ok") != std::string::npos);
  const std::vector<RankProfile> ranks = LoadProfileDir(out);
  REQUIRE(ranks.size() == 3);
  // Per communicator id: the Bcast sizes seen on each rank. Each thread's duplicate carries its
  // own size, twice, on all 3 ranks.
  std::map<uint64_t, std::map<int, std::multiset<uint64_t>>> bcasts;
  std::map<uint64_t, std::set<int>> allreduce_ranks;
  for (const RankProfile& p : ranks) {
    REQUIRE(p.error.empty());
    for (const CollRecord& c : p.colls) {
      if (c.api == "MPI_Bcast") bcasts[c.comm][p.rank].insert(c.bytes);
      if (c.api == "MPI_Allreduce" && c.bytes == 4) allreduce_ranks[c.comm].insert(p.rank);
    }
  }
  REQUIRE(bcasts.size() == 3);
  std::set<uint64_t> sizes;
  for (const auto& comm : bcasts) {
    REQUIRE(comm.second.size() == 3);  // every rank on the same id
    const std::multiset<uint64_t>& first = comm.second.begin()->second;
    REQUIRE(first.size() == 2);
    CHECK(*first.begin() == *first.rbegin());
    for (const auto& r : comm.second) CHECK(r.second == first);
    sizes.insert(*first.begin());
  }
  CHECK(sizes == std::set<uint64_t>{1000, 2000, 3000});
  // The duplicate made after a split that left rank 0 out: one id on all ranks too (the split
  // counted on every member of world, MPI_COMM_NULL or not). The final check allreduce on
  // world is the other 4-byte one.
  for (const auto& kv : allreduce_ranks) CHECK(kv.second.size() == 3);
  CHECK(allreduce_ranks.size() == 2);
  // And the report matched every call with nothing left half-seen.
  nlohmann::json sum;
  std::string rep_log;
  REQUIRE(ReportSummary(out, out + "/rep", &sum, &rep_log));
  CHECK(sum["collectives"]["stragglers"]["calls_incomplete"] == 0);
}

}  // namespace
}  // namespace testing
}  // namespace profagent
