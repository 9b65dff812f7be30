// End-to-end test of the agent's MPI surface beyond mpi_collectives_test (one-sided calls,
// Alltoallw, receives from MPI_ANY_SOURCE, neighbor collectives): runs mpi_more_calls (a plain
// MPI program that checks its own results) with real Open MPI, np 4, the agent injected with
// `mpirun -x LD_PRELOAD`, checks every recorded call against golden tables written by hand from
// the program's call sequence, then the report's collectives section.
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

constexpr int kRanks = 4;
constexpr uint64_t kNoSeq = 0xffffffffu;  // a call with no number (one-sided communication)

struct Expect {
  const char* api;
  int peer;  // kRight, kLeft, kSelf or a literal -1
  uint64_t count, bytes, recv_bytes;
  const char* dtype;
  const char* redop;
  bool numbered;  // a collective over the window (fence, free): numbered 0, 1, ... in order
  bool nonblocking;
};
constexpr int kRight = -10, kLeft = -11, kSelf = -12;

// Per window, in call order (see mpi_more_calls.cc).
const std::vector<Expect>& WindowA() {
  static const std::vector<Expect> v = {
      {"MPI_Win_fence", -1, 0, 0, 0, "", "", true, false},
      {"MPI_Put", kRight, 4, 16, 0, "MPI_INT", "", false, false},
      {"MPI_Accumulate", kRight, 2, 8, 0, "MPI_INT", "sum", false, false},
      {"MPI_Win_fence", -1, 0, 0, 0, "", "", true, false},
      {"MPI_Win_lock", kRight, 0, 0, 0, "", "", false, false},
      {"MPI_Fetch_and_op", kRight, 1, 4, 4, "MPI_INT", "sum", false, false},
      {"MPI_Win_unlock", kRight, 0, 0, 0, "", "", false, false},
      {"MPI_Win_lock_all", -1, 0, 0, 0, "", "", false, false},
      {"MPI_Compare_and_swap", kRight, 1, 4, 4, "MPI_INT", "", false, false},
      {"MPI_Win_flush", kRight, 0, 0, 0, "", "", false, false},
      {"MPI_Get_accumulate", kRight, 0, 0, 4, "MPI_INT", "no_op", false, false},
      {"MPI_Win_flush_all", -1, 0, 0, 0, "", "", false, false},
      {"MPI_Win_unlock_all", -1, 0, 0, 0, "", "", false, false},
      {"MPI_Win_post", -1, 0, 0, 0, "", "", false, false},
      {"MPI_Win_start", -1, 0, 0, 0, "", "", false, false},
      {"MPI_Put", kRight, 1, 4, 0, "MPI_INT", "", false, false},
      {"MPI_Win_complete", -1, 0, 0, 0, "", "", false, false},
      {"MPI_Win_wait", -1, 0, 0, 0, "", "", false, false},
      {"MPI_Win_free", -1, 0, 0, 0, "", "", true, false},
  };
  return v;
}
const std::vector<Expect>& WindowB() {
  static const std::vector<Expect> v = {
      {"MPI_Win_fence", -1, 0, 0, 0, "", "", true, false},
      {"MPI_Get", kLeft, 8, 64, 64, "MPI_DOUBLE", "", false, false},
      {"MPI_Win_fence", -1, 0, 0, 0, "", "", true, false},
      {"MPI_Win_lock", kRight, 0, 0, 0, "", "", false, false},
      {"MPI_Rput", kRight, 2, 16, 0, "MPI_DOUBLE", "", false, true},
      {"MPI_Rget", kRight, 1, 8, 8, "MPI_DOUBLE", "", false, true},
      {"MPI_Win_unlock", kRight, 0, 0, 0, "", "", false, false},
      {"MPI_Win_lock", kSelf, 0, 0, 0, "", "", false, false},
      {"MPI_Win_unlock", kSelf, 0, 0, 0, "", "", false, false},
      {"MPI_Win_free", -1, 0, 0, 0, "", "", true, false},
  };
  return v;
}
const std::vector<Expect>& WindowC() {
  static const std::vector<Expect> v = {{"MPI_Win_free", -1, 0, 0, 0, "", "", true, false}};
  return v;
}
// Neighbor collectives on the periodic ring E (two neighbors each way) and the distributed graph
// F (one each way): bytes = all sent, recv_bytes = all received (agent/hooks/mpi/mpi_hooks.cc).
const std::vector<Expect>& RingE() {
  static const std::vector<Expect> v = {
      {"MPI_Neighbor_allgather", -1, 3, 24, 24, "MPI_INT", "", true, false},
      {"MPI_Neighbor_alltoall", -1, 2, 16, 16, "MPI_INT", "", true, false},
      {"MPI_Neighbor_allgatherv", -1, 1, 8, 12, "MPI_INT", "", true, false},
      {"MPI_Ineighbor_alltoallv", -1, 4, 16, 16, "MPI_INT", "", true, true},
      {"MPI_Neighbor_alltoallw", -1, 2, 12, 12, "MPI_INT", "", true, false},
  };
  return v;
}
const std::vector<Expect>& GraphF() {
  static const std::vector<Expect> v = {
      {"MPI_Neighbor_alltoall", -1, 4, 16, 16, "MPI_INT", "", true, false}};
  return v;
}

// MPI_COMM_WORLD, in sequence order. Alltoallw: to even peers 2 ints, to odd ones 1 double (the
// record names the first send type); received alike by parity: 8 bytes per peer either way.
std::vector<Expect> World(int n) {
  const uint64_t evens = uint64_t(n + 1) / 2, odds = uint64_t(n) / 2;
  const uint64_t count = 2 * evens + odds, bytes = 8ull * n;
  return {
      {"MPI_Win_allocate", -1, 0, 0, 0, "", "", true, false},
      {"MPI_Win_create", -1, 0, 0, 0, "", "", true, false},
      {"MPI_Barrier", -1, 0, 0, 0, "", "", true, false},
      {"MPI_Barrier", -1, 0, 0, 0, "", "", true, false},
      {"MPI_Alltoallw", -1, count, bytes, bytes, "MPI_INT", "", true, false},
      {"MPI_Ialltoallw", -1, count, bytes, bytes, "MPI_INT", "", true, true},
      {"MPI_Win_create_dynamic", -1, 0, 0, 0, "", "", true, false},
  };
}

void CheckCall(const CollRecord& c, const Expect& e, uint64_t seq, int rank) {
  INFO("rank " << rank << " " << e.api << " seq " << c.seq);
  const int right = (rank + 1) % kRanks, left = (rank - 1 + kRanks) % kRanks;
  const int peer = e.peer == kRight ? right : e.peer == kLeft ? left : e.peer == kSelf ? rank
                                                                                      : e.peer;
  CHECK(c.api == e.api);
  CHECK(c.lib == LIB_MPI);
  CHECK(c.peer == peer);
  CHECK(c.count == e.count);
  CHECK(c.bytes == e.bytes);
  CHECK(c.recv_bytes == e.recv_bytes);
  CHECK(c.dtype == e.dtype);
  CHECK(c.redop == e.redop);
  CHECK(c.seq == (e.numbered ? seq : kNoSeq));
  CHECK(c.nonblocking == e.nonblocking);
  CHECK(c.ret == 0);
  CHECK(c.end_ns >= c.start_ns);
  if (e.nonblocking) {
    CHECK(c.complete_ns >= c.end_ns);  // completed in the MPI_Wait after it
  }
}

// Checks `calls` (one window's or communicator's, in file order) against `want`; the numbered
// ones count 0, 1, ... in order.
void CheckSequence(const std::vector<const CollRecord*>& calls, const std::vector<Expect>& want,
                   int rank) {
  REQUIRE(calls.size() == want.size());
  uint64_t seq = 0;
  for (size_t i = 0; i < calls.size(); ++i) {
    CheckCall(*calls[i], want[i], seq, rank);
    if (want[i].numbered) ++seq;
  }
}

// Master/worker on D (a duplicate of world): every receive from MPI_ANY_SOURCE is numbered on its
// pair once its sender is known, so each worker's four sends (0..3) meet rank 0's receives 0..3
// from it, the last being the receive that names the worker.
void CheckMasterWorker(const RankProfile& p,
                       std::map<uint64_t, std::vector<const CollRecord*>>& by_comm,
                       uint64_t world, int rank) {
  const std::vector<const CollRecord*>* calls = nullptr;
  for (const auto& kv : p.comms) {
    const std::vector<const CollRecord*>& c = by_comm[kv.first];
    if (kv.first != world && kv.second.unique_id().rfind("mpi:", 0) == 0 && !c.empty() &&
        c[0]->api.find("eighbor") == std::string::npos) {
      REQUIRE(calls == nullptr);  // one such communicator
      calls = &c;
    }
  }
  REQUIRE(calls != nullptr);
  std::map<int, std::set<uint64_t>> seqs;  // peer -> sequence numbers
  int barriers = 0;
  for (const CollRecord* c : *calls) {
    INFO("rank " << rank << " " << c->api << " peer " << c->peer << " seq " << c->seq);
    if (c->api == "MPI_Barrier") {
      ++barriers;
      continue;
    }
    CHECK(c->bytes == 8);
    CHECK(c->seq != kNoSeq);
    if (rank == 0) {
      CHECK((c->api == "MPI_Recv" || c->api == "MPI_Irecv"));
      REQUIRE(c->peer >= 1);
      REQUIRE(c->peer < kRanks);
    } else {
      CHECK(c->api == "MPI_Ssend");
      CHECK(c->peer == 0);
    }
    CHECK(seqs[c->peer].insert(c->seq).second);
  }
  CHECK(barriers == 1);
  const std::set<uint64_t> all4 = {0, 1, 2, 3};
  CHECK(seqs.size() == size_t(rank == 0 ? kRanks - 1 : 1));
  for (const auto& kv : seqs) CHECK(kv.second == all4);
  if (rank == 0) {
    // The last n-1 calls name their worker: numbers 3 (after the barrier).
    for (size_t i = calls->size() - (kRanks - 1); i < calls->size(); ++i) {
      CHECK((*calls)[i]->api == "MPI_Recv");
      CHECK((*calls)[i]->seq == 3);
    }
  }
}

TEST_CASE("MPI one-sided, Alltoallw, ANY_SOURCE and neighbor calls: every call recorded") {
  REQUIRE(HaveMpirun());
  const std::string out = FreshDir("mpi_more_calls_out");
  std::string log;
  const int rc = Run("mpirun --allow-run-as-root --oversubscribe -np " + std::to_string(kRanks) +
                         " -x LD_PRELOAD=" + Runfile("agent/libprofagent.so") +
                         " -x PROFAGENT_OUTPUT=" + out + " " +
                         Runfile("tests/integration/mpi_more_calls"),
                     &log);
  INFO(log);
  REQUIRE(rc == 0);  // the program checked every result itself
  REQUIRE(log.find("all results correct") != std::string::npos);

  std::vector<RankProfile> ranks = LoadProfileDir(out);
  REQUIRE(ranks.size() == size_t(kRanks));
  // Unique id of window A, B, C on each rank: every rank must name a window alike.
  std::set<std::string> uids[3];
  for (int r = 0; r < kRanks; ++r) {
    const RankProfile& p = ranks[r];
    INFO("file " << p.path);
    REQUIRE(p.error.empty());
    CHECK(p.has_footer);
    CHECK(p.dropped == 0);
    REQUIRE(p.rank == r);
    std::map<uint64_t, std::vector<const CollRecord*>> by_comm;
    for (const CollRecord& c : p.colls) by_comm[c.comm].push_back(&c);
    uint64_t world = 0;
    std::vector<uint64_t> windows;
    for (const auto& kv : p.comms) {
      if (kv.second.unique_id() == "world") world = kv.first;
      if (kv.second.unique_id().rfind("mpi-win:", 0) == 0) {
        windows.push_back(kv.first);
        CHECK(kv.second.rank() == r);  // a window's members: its communicator's
        CHECK(kv.second.size() == kRanks);
        CHECK(kv.second.lib() == LIB_MPI);
      }
    }
    REQUIRE(world != 0);
    CheckSequence(by_comm[world], World(kRanks), r);
    CheckMasterWorker(p, by_comm, world, r);
    REQUIRE(windows.size() == 3);
    // Which window is which: by its number of calls (A 19, B 10, C 1).
    for (uint64_t id : windows) {
      const std::vector<const CollRecord*>& calls = by_comm[id];
      const int which = calls.size() == WindowA().size()   ? 0
                        : calls.size() == WindowB().size() ? 1
                                                            : 2;
      CheckSequence(calls, which == 0 ? WindowA() : which == 1 ? WindowB() : WindowC(), r);
      uids[which].insert(p.comms.at(id).unique_id());
    }
    // E and F: by their first call.
    int topo = 0;
    for (auto& kv : by_comm) {
      if (kv.second.empty() || kv.second[0]->api.find("eighbor") == std::string::npos) continue;
      REQUIRE(p.comms.count(kv.first) == 1);
      CHECK(p.comms.at(kv.first).size() == kRanks);
      const bool ring = kv.second[0]->api == "MPI_Neighbor_allgather";
      CheckSequence(kv.second, ring ? RingE() : GraphF(), r);
      topo += ring ? 1 : 10;
    }
    CHECK(topo == 11);
    CHECK(by_comm.size() == 7);  // world, three windows, D, E, F: nothing recorded elsewhere
  }
  std::set<std::string> all;
  for (const auto& u : uids) {
    CHECK(u.size() == 1);  // one unique id per window across ranks
    all.insert(u.begin(), u.end());
  }
  CHECK(all.size() == 3);  // and distinct windows, distinct ids

  // The report: one-sided calls have no bandwidth (their transfers complete later); the
  // straggler view matches the collectives over world (7) and the windows' fences and frees (7).
  const std::string rep = out + "/rep";
  std::string rlog;
  REQUIRE(Run(Runfile("analyzer/profanalyze") + " report " + out + " -o " + rep, &rlog) == 0);
  std::ifstream in(rep + "/summary.json");
  const nlohmann::json sum = nlohmann::json::parse(in);
  std::map<std::string, const nlohmann::json*> ops;
  for (const auto& o : sum["collectives"]["ops"]) ops[o["op"].get<std::string>()] = &o;
  for (const char* op : {"Put", "Get", "Accumulate", "Fetch_and_op", "Compare_and_swap",
                         "Get_accumulate", "Rput", "Rget"}) {
    INFO(op);
    REQUIRE(ops.count(op) == 1);
    CHECK((*ops[op])["algbw_gbps"].is_null());
    CHECK((*ops[op])["busbw_gbps"].is_null());
  }
  CHECK((*ops["Put"])["count"] == 2 * kRanks);
  CHECK((*ops["Win_fence"])["count"] == 4 * kRanks);
  CHECK((*ops["Win_free"])["count"] == 3 * kRanks);
  REQUIRE(ops.count("Alltoallw") == 1);
  // busbw = algbw * (n-1)/n, as nccl-tests' alltoall.
  CHECK((*ops["Alltoallw"])["busbw_gbps"].get<double>() ==
        Approx((*ops["Alltoallw"])["algbw_gbps"].get<double>() * (kRanks - 1) / kRanks)
            .epsilon(0.01));
  // Matched: 7 world collectives, 7 window collectives, D's barrier and its 4 x (n-1) transfers,
  // E's 5 and F's 1 neighbor collectives.
  CHECK(sum["collectives"]["stragglers"]["calls_matched"] == 14 + 1 + 4 * (kRanks - 1) + 6);
}

}  // namespace
}  // namespace testing
}  // namespace profagent
