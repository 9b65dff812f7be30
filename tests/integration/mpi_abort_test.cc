// A rank that calls MPI_Abort: its file is finished first, with a footer that says so, and the
// report warns (before, it ended as a plain "_exit", indistinguishable from a normal end).
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/integration/mpi_testutil.h"

namespace profagent {
namespace testing {
namespace {

// Runs mpi_abort (2 ranks, `args`) under the agent: rank 1 ends the job after 20 allreduces.
// Checks the job failed with `said` in its output and rank 1's file: read whole, finished with
// a footer whose reason is `footer` (any when empty), its 20 allreduces in.
struct Ending {
  std::string log, warnings;  // mpirun's output, the report's warnings
};
Ending RankOneEnding(const std::string& name, const std::string& args, const std::string& said,
                     const std::string& footer) {
  const std::string out = FreshDir(name);
  std::string log;
  const int status = RunMpiUnderAgent(2, "mpi_abort", out + "/prof", &log, args);
  INFO(log);
  CHECK(status != 0);  // the job was ended
  CHECK(log.find(said) != std::string::npos);
  std::vector<RankProfile> ranks = LoadProfileDir(out + "/prof");
  REQUIRE(ranks.size() == 2);
  const RankProfile& ended = ranks[1];
  REQUIRE(ended.error.empty());
  CHECK(ended.rank == 1);
  CHECK(ended.has_footer);
  if (!footer.empty()) CHECK(ended.footer_reason == footer);
  size_t allreduces = 0;
  for (const CollRecord& c : ended.colls) allreduces += c.api == "MPI_Allreduce";
  CHECK(allreduces == 20);
  nlohmann::json summary;
  std::string report;
  REQUIRE(ReportSummary(out + "/prof", out, &summary, &report));
  return Ending{log, summary["meta"]["warnings"].dump()};
}

TEST_CASE("MPI_Abort: the aborting rank's file ends with a footer naming it, the report warns") {
  if (!HaveMpirun()) {
    WARN("mpirun not found: test skipped");
    return;
  }
  const Ending e = RankOneEnding("abort", "", "rank 1: giving up", "");
  INFO(e.warnings);
  CHECK(e.warnings.find(
            "rank1.pb: the process called MPI_Abort (errorcode 7), which ended the job") !=
        std::string::npos);
}

// A rank that crashes after MPI_Init, where Open MPI's stack-trace handler (opal_signal) owns
// SIGSEGV: it prints its trace, sets the default back and raises the signal again, which the
// agent's raise sees: the file is finished first, and the report says the rank crashed (before,
// the crashing rank's file had no footer and lost its last flush period).
TEST_CASE("A rank crashing under Open MPI's own SIGSEGV handler: its file is finished") {
  if (!HaveMpirun()) {
    WARN("mpirun not found: test skipped");
    return;
  }
  const Ending e = RankOneEnding("crash", "segv", "rank 1: crashing", "signal 11 (SIGSEGV)");
  INFO(e.warnings);
  CHECK(e.log.find("Process received signal") != std::string::npos);  // Open MPI's handler ran
  CHECK(e.warnings.find("rank1.pb: the process crashed (signal 11 (SIGSEGV))") !=
        std::string::npos);
}

}  // namespace
}  // namespace testing
}  // namespace profagent
