// A rank that calls MPI_Abort: its file is finished first, with a footer that says so, and the
// report warns (before, it ended as a plain "_exit", indistinguishable from a normal end).
#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "tests/integration/mpi_testutil.h"

namespace profagent {
namespace testing {
namespace {

TEST_CASE("MPI_Abort: the aborting rank's file ends with a footer naming it, the report warns") {
  if (!HaveMpirun()) {
    WARN("mpirun not found: test skipped");
    return;
  }
  const std::string out = FreshDir("abort");
  std::string log;
  const int status = RunMpiUnderAgent(2, "mpi_abort", out + "/prof", &log);
  INFO(log);
  CHECK(status != 0);  // the job was aborted
  CHECK(log.find("rank 1: giving up") != std::string::npos);
  std::vector<RankProfile> ranks = LoadProfileDir(out + "/prof");
  REQUIRE(ranks.size() == 2);
  const RankProfile& aborting = ranks[1];
  REQUIRE(aborting.error.empty());
  CHECK(aborting.rank == 1);
  CHECK(aborting.has_footer);
  size_t allreduces = 0;
  for (const CollRecord& c : aborting.colls) allreduces += c.api == "MPI_Allreduce";
  CHECK(allreduces == 20);
  std::string report;
  REQUIRE(Run(Runfile("analyzer/profanalyze") + " report " + out + "/prof -o " + out, &report) ==
          0);
  std::ifstream f(out + "/summary.json");
  std::stringstream ss;
  ss << f.rdbuf();
  const nlohmann::json summary = nlohmann::json::parse(ss.str());
  const std::string warnings = summary["meta"]["warnings"].dump();
  INFO(warnings);
  CHECK(
      warnings.find("rank1.pb: the process called MPI_Abort (errorcode 7), which ended the job") !=
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
  const std::string out = FreshDir("crash");
  std::string log;
  const int status = RunMpiUnderAgent(2, "mpi_abort", out + "/prof", &log, "segv");
  INFO(log);
  CHECK(status != 0);
  CHECK(log.find("rank 1: crashing") != std::string::npos);
  CHECK(log.find("Process received signal") != std::string::npos);  // Open MPI's handler ran
  std::vector<RankProfile> ranks = LoadProfileDir(out + "/prof");
  REQUIRE(ranks.size() == 2);
  const RankProfile& crashed = ranks[1];
  REQUIRE(crashed.error.empty());
  CHECK(crashed.rank == 1);
  CHECK(crashed.has_footer);
  CHECK(crashed.footer_reason == "signal 11 (SIGSEGV)");
  size_t allreduces = 0;
  for (const CollRecord& c : crashed.colls) allreduces += c.api == "MPI_Allreduce";
  CHECK(allreduces == 20);
  nlohmann::json summary;
  std::string report;
  REQUIRE(ReportSummary(out + "/prof", out, &summary, &report));
  const std::string warnings = summary["meta"]["warnings"].dump();
  INFO(warnings);
  CHECK(warnings.find("rank1.pb: the process crashed (signal 11 (SIGSEGV))") != std::string::npos);
}

}  // namespace
}  // namespace testing
}  // namespace profagent
