// Helpers for the MPI and NCCL integration tests: run a command, find runfiles, and load a
// profagent rank file (through analyzer/reader.h) into plain structs the tests can assert on.
//
// Test-only code; not thread-safe (tests call it from one thread).
#ifndef PROFAGENT_TESTS_INTEGRATION_MPI_TESTUTIL_H_
#define PROFAGENT_TESTS_INTEGRATION_MPI_TESTUTIL_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "proto/profagent.pb.h"

namespace profagent {
namespace testing {

struct CollRecord {
  std::string api;    // "MPI_Allreduce", "ncclAllReduce"
  std::string op;     // Collective.op: API name without the library prefix
  std::string dtype;
  std::string redop;
  uint64_t count = 0, bytes = 0, recv_bytes = 0;
  int peer = -1;
  int recv_peer = -1;  // MPI_Sendrecv(_replace): its source (Collective.recv_peer), else -1
  uint64_t recv_seq = 0;
  uint64_t comm = 0, seq = 0, group = 0, corr = 0, complete_ns = 0;
  uint64_t wait_ns = 0;  // nonblocking MPI: start of the first wait or test that covered it
  bool nonblocking = false;
  bool captured = false;  // Event.captured: made during CUDA graph capture
  uint64_t start_ns = 0, end_ns = 0;
  uint32_t stream = 0;
  int ret = 0;
  int lib = 0;
};

struct OtherEvent {  // EV_GROUP, EV_COMM, EV_API
  EventKind kind;
  std::string name;
  uint64_t start_ns = 0, end_ns = 0;
  uint64_t handle = 0, graph = 0;
  int32_t ret = 0;  // the call's return code
};

struct RankProfile {
  std::string path;
  int rank = -1, local_rank = -1, world_size = -1;
  std::string rank_source;
  std::vector<CollRecord> colls;        // in file order
  std::vector<OtherEvent> others;
  std::vector<ClockOffset> offsets;
  std::map<uint64_t, CommDef> comms;    // last CommDef per id
  struct Dev {
    uint64_t start_ns, end_ns, corr;
    std::string name;
  };
  std::vector<Dev> device_ops;
  bool has_footer = false;
  std::string footer_reason;
  uint64_t dropped = 0;
  std::string error;  // non-empty when the file could not be read
};

RankProfile LoadProfile(const std::string& path);
// All *.pb files of `dir`, loaded, indexed by rank (files without a rank are appended at the end).
std::vector<RankProfile> LoadProfileDir(const std::string& dir);

// Absolute path of a runfile given its workspace-relative path ("agent/libprofagent.so").
std::string Runfile(const std::string& rel);
// A fresh empty directory under TEST_TMPDIR (or /tmp).
std::string FreshDir(const std::string& name);
// Runs `cmd` with /bin/sh, returns its exit status (or -1), appends its output to *out.
int Run(const std::string& cmd, std::string* out);
bool HaveMpirun();

// Runs the test program `program` (a tests/integration runfile) with `mpirun -np np`, the agent
// preloaded and writing to `out`, with the arguments `args`; returns the exit status, appends
// the output to *log.
int RunMpiUnderAgent(int np, const std::string& program, const std::string& out, std::string* log,
                     const std::string& args = "");
// A file's collective and point-to-point records by communicator id, each in start order.
std::map<uint64_t, std::vector<const CollRecord*>> CallsByComm(const RankProfile& p);
// The id of the communicator whose unique id is `uid` ("world"), 0 when there is none.
uint64_t CommIdOf(const RankProfile& p, const std::string& uid);
// Checks a communicator's calls against the expected ones, entry by entry: as many, each
// returned success, and `check(call, expected)` holds (the test's own fields). Failures name
// the rank, the call's position, API, peer and sequence number.
template <typename Expect, typename Check>
void CheckCalls(int rank, const std::vector<const CollRecord*>& calls,
                const std::vector<Expect>& want, Check check) {
  REQUIRE(calls.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    const CollRecord& c = *calls[i];
    INFO("rank " << rank << " call " << i << " " << c.api << " peer " << c.peer << " seq "
                 << c.seq);
    CHECK(c.ret == 0);
    check(c, want[i]);
  }
}
// Runs `profanalyze report prof_dir -o rep_dir` and reads rep_dir/summary.json into *summary;
// false (the output appended to *log) when the report failed or wrote no valid summary.
bool ReportSummary(const std::string& prof_dir, const std::string& rep_dir,
                   nlohmann::json* summary, std::string* log);

}  // namespace testing
}  // namespace profagent

#endif  // PROFAGENT_TESTS_INTEGRATION_MPI_TESTUTIL_H_
