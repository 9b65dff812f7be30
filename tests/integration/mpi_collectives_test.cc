// End-to-end test of the agent's MPI surface: runs mpi_collectives (a plain MPI program that
// checks its own results) with real Open MPI, np 4, the agent injected with `mpirun -x
// LD_PRELOAD`, then parses every rank file and checks each recorded call against a golden table
// written by hand from the program's call sequence and sizes.
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "tests/integration/mpi_testutil.h"

namespace profagent {
namespace testing {
namespace {

constexpr int kRanks = 4;
constexpr int kIters = 2;
constexpr int kWorldCollsPerIter = 19;
constexpr int kExtraColls = 13;  // Completions() in mpi_collectives.cc

struct Expect {
  const char* api;
  const char* dtype;
  const char* redop;
  uint64_t count, bytes, recv_bytes;
  int peer;
  bool nonblocking;
};

// World collectives of one iteration, in sequence order, for rank r of n (see
// mpi_collectives.cc and the byte conventions in agent/hooks/mpi/mpi_hooks.cc).
std::vector<Expect> WorldCollectives(int r, int n) {
  const uint64_t tri = uint64_t(n) * (n + 1) / 2;  // sum of (p + 1) over ranks
  return {
      {"MPI_Allreduce", "MPI_INT", "sum", 1000, 4000, 4000, -1, false},
      {"MPI_Bcast", "MPI_DOUBLE", "", 257, 2056, 2056, 1, false},
      {"MPI_Reduce", "MPI_LONG", "max", 64, 512, 512, 0, false},
      {"MPI_Allgather", "MPI_INT", "", 10, 40, 40ull * n, -1, false},
      {"MPI_Allgatherv", "MPI_INT", "", uint64_t(r + 1), 4ull * (r + 1), 4 * tri, -1, false},
      {"MPI_Gather", "MPI_FLOAT", "", 3, 12, r == 2 ? 12ull * n : 0, 2, false},
      {"MPI_Gatherv", "MPI_INT", "", uint64_t(r + 1), 4ull * (r + 1), r == 0 ? 4 * tri : 0, 0,
       false},
      {"MPI_Scatter", "MPI_INT", "", 5, 20, 20, 3, false},
      {"MPI_Scatterv", "MPI_INT", "", uint64_t(r + 2), 4ull * (r + 2), 4ull * (r + 2), 0, false},
      {"MPI_Reduce_scatter_block", "MPI_INT", "sum", 6, 24, 24, -1, false},
      {"MPI_Reduce_scatter", "MPI_INT", "sum", tri, 4 * tri, 4ull * (r + 1), -1, false},
      {"MPI_Alltoall", "MPI_INT", "", 2, 8, 8ull * n, -1, false},
      {"MPI_Alltoallv", "MPI_INT", "", tri, 4 * tri, 4ull * n * (r + 1), -1, false},
      {"MPI_Barrier", "", "", 0, 0, 0, -1, false},
      {"MPI_Scan", "MPI_INT", "sum", 3, 12, 12, -1, false},
      {"MPI_Exscan", "MPI_INT", "sum", 3, 12, 12, -1, false},
      {"MPI_Iallreduce", "MPI_DOUBLE", "sum", 128, 1024, 1024, -1, true},
      {"MPI_Ibcast", "MPI_INT", "", 33, 132, 132, 0, true},
      {"MPI_Ibarrier", "", "", 0, 0, 0, -1, true},
  };
}

// The non-blocking collectives of Completions(), after the iterations, in sequence order (each
// pair/group completed by a different Wait*/Test* function).
std::vector<Expect> ExtraCollectives(int r, int n) {
  const uint64_t tri = uint64_t(n) * (n + 1) / 2;
  return {
      {"MPI_Iallgather", "MPI_INT", "", 1, 4, 4ull * n, -1, true},
      {"MPI_Iscan", "MPI_INT", "sum", 1, 4, 4, -1, true},
      {"MPI_Ireduce", "MPI_DOUBLE", "sum", 4, 32, 32, 0, true},
      {"MPI_Ialltoall", "MPI_INT", "", 1, 4, 4ull * n, -1, true},
      {"MPI_Igather", "MPI_INT", "", 2, 8, r == 1 ? 8ull * n : 0, 1, true},
      {"MPI_Iexscan", "MPI_INT", "sum", 1, 4, 4, -1, true},
      {"MPI_Iscatter", "MPI_INT", "", 3, 12, 12, 2, true},
      {"MPI_Ireduce_scatter_block", "MPI_INT", "sum", 2, 8, 8, -1, true},
      {"MPI_Ialltoallv", "MPI_INT", "", tri, 4 * tri, 4ull * n * (r + 1), -1, true},
      {"MPI_Iallgatherv", "MPI_INT", "", uint64_t(r + 1), 4ull * (r + 1), 4 * tri, -1, true},
      {"MPI_Igatherv", "MPI_INT", "", uint64_t(r + 1), 4ull * (r + 1), r == 0 ? 4 * tri : 0, 0,
       true},
      {"MPI_Iscatterv", "MPI_INT", "", uint64_t(r + 1), 4ull * (r + 1), 4ull * (r + 1), 3, true},
      {"MPI_Ireduce_scatter", "MPI_INT", "sum", tri, 4 * tri, 4ull * (r + 1), -1, true},
  };
}

// Point-to-point calls of one iteration, by direction in per-pair sequence order: sends to
// the right neighbour (Isend, Send, Sendrecv, Issend, Ssend, Sendrecv_replace, and two starts of
// a persistent Send_init) and receives from the left one (Irecv, Recv, -, Irecv, Recv, -, two
// starts of a Recv_init: a Sendrecv's receive takes its number of the pair without a record of
// its own).
constexpr int kP2pPerIter = 8;
bool NoRecvRecord(uint64_t seq) { return seq % kP2pPerIter == 2 || seq % kP2pPerIter == 5; }
std::vector<Expect> Sends(int r, int n) {
  const int right = (r + 1) % n;
  return {
      {"MPI_Isend", "MPI_INT", "", 100, 400, 0, right, true},
      {"MPI_Send", "MPI_CHAR", "", 50, 50, 0, right, false},
      {"MPI_Sendrecv", "MPI_INT", "", 7, 28, 28, right, false},
      {"MPI_Issend", "MPI_INT", "", 30, 120, 0, right, true},
      {"MPI_Ssend", "MPI_CHAR", "", 20, 20, 0, right, false},
      {"MPI_Sendrecv_replace", "MPI_INT", "", 3, 12, 12, right, false},
      {"MPI_Send_init", "MPI_INT", "", 16, 64, 0, right, true},  // each start: one transfer
      {"MPI_Send_init", "MPI_INT", "", 16, 64, 0, right, true},
  };
}
std::vector<Expect> Recvs(int r, int n) {
  const int left = (r - 1 + n) % n;
  const Expect none{"", "", "", 0, 0, 0, -1, false};
  return {
      {"MPI_Irecv", "MPI_INT", "", 100, 400, 400, left, true},
      {"MPI_Recv", "MPI_CHAR", "", 50, 50, 50, left, false},
      none,
      {"MPI_Irecv", "MPI_INT", "", 30, 120, 120, left, true},
      {"MPI_Recv", "MPI_CHAR", "", 20, 20, 20, left, false},
      none,
      {"MPI_Recv_init", "MPI_INT", "", 16, 64, 64, left, true},
      {"MPI_Recv_init", "MPI_INT", "", 16, 64, 64, left, true},
  };
}

void CheckCall(const CollRecord& c, const Expect& e) {
  INFO(e.api << " seq " << c.seq);
  CHECK(c.api == e.api);
  CHECK(c.op == std::string(e.api).substr(4));
  CHECK(c.lib == LIB_MPI);
  CHECK(c.dtype == e.dtype);
  CHECK(c.redop == e.redop);
  CHECK(c.count == e.count);
  CHECK(c.bytes == e.bytes);
  CHECK(c.recv_bytes == e.recv_bytes);
  CHECK(c.peer == e.peer);
  CHECK(c.nonblocking == e.nonblocking);
  CHECK(c.ret == 0);
  CHECK(c.end_ns >= c.start_ns);
  if (e.nonblocking) {
    CHECK(c.complete_ns >= c.end_ns);  // completion seen in MPI_Wait/Test*/Waitall
  } else {
    CHECK(c.complete_ns == 0);
  }
}

std::string MpirunCommand(const std::string& out, const std::string& extra_env) {
  return "mpirun --allow-run-as-root --oversubscribe -np " + std::to_string(kRanks) +
         " -x LD_PRELOAD=" + Runfile("agent/libprofagent.so") + " -x PROFAGENT_OUTPUT=" + out +
         extra_env + " " + Runfile("tests/integration/mpi_collectives");
}

TEST_CASE("MPI collectives under the agent: every call recorded on every rank") {
  REQUIRE(HaveMpirun());
  const std::string out = FreshDir("mpi_out");
  std::string log;
  const int rc = Run(MpirunCommand(out, ""), &log);
  INFO(log);
  REQUIRE(rc == 0);  // the program checked every MPI result itself
  REQUIRE(log.find("all results correct") != std::string::npos);

  std::vector<RankProfile> ranks = LoadProfileDir(out);
  REQUIRE(ranks.size() == size_t(kRanks));
  std::map<int, std::vector<const CollRecord*>> world_by_seq;  // seq -> one record per rank
  std::map<uint64_t, const CollRecord*> sends_by_seq[kRanks], recvs_by_seq[kRanks];
  std::set<std::string> half_uids[2];
  std::set<std::string> dup_uids;  // unique ids of the duplicate every rank used
  for (int r = 0; r < kRanks; ++r) {
    const RankProfile& p = ranks[r];
    INFO("file " << p.path);
    REQUIRE(p.error.empty());
    CHECK(p.has_footer);
    CHECK(p.dropped == 0);
    REQUIRE(p.rank == r);
    CHECK(p.world_size == kRanks);
    CHECK(p.local_rank == r);  // one host
    // rank_source is lost by the core when SetRankInfo precedes the header (writer.cc clears
    // process_info_dirty after EncodeHeader; Header has no rank_source): reported to the lead.
    if (!p.rank_source.empty()) CHECK(p.rank_source == "MPI");
    CHECK(p.path.size() > 8);
    CHECK(p.path.substr(p.path.size() - 8) == "rank" + std::to_string(r) + ".pb");

    // Find the world communicator through its CommDef.
    uint64_t world = 0;
    for (const auto& kv : p.comms)
      if (kv.second.unique_id() == "world") world = kv.first;
    REQUIRE(world != 0);
    CHECK(p.comms.at(world).rank() == r);
    CHECK(p.comms.at(world).size() == kRanks);
    CHECK(p.comms.at(world).lib() == LIB_MPI);

    const std::vector<Expect> coll = WorldCollectives(r, kRanks);
    const std::vector<Expect> extra = ExtraCollectives(r, kRanks);
    const std::vector<Expect> sends = Sends(r, kRanks), recvs = Recvs(r, kRanks);
    std::map<uint64_t, const CollRecord*> coll_seq;
    const CollRecord* half_call = nullptr;
    for (const CollRecord& c : p.colls) {
      if (c.comm != world) {
        if (c.api == "MPI_Allreduce" && c.count == 4) {  // on the duplicate every rank used
          REQUIRE(p.comms.count(c.comm) == 1);
          dup_uids.insert(p.comms.at(c.comm).unique_id());
        } else if (c.api == "MPI_Allreduce") {
          half_call = &c;
        }
        continue;
      }
      const bool is_send = c.api == "MPI_Send" || c.api == "MPI_Isend" ||
                           c.api == "MPI_Sendrecv" || c.api == "MPI_Issend" ||
                           c.api == "MPI_Ssend" || c.api == "MPI_Sendrecv_replace" ||
                           c.api == "MPI_Send_init";
      const bool is_recv = c.api == "MPI_Recv" || c.api == "MPI_Irecv" ||
                           c.api == "MPI_Recv_init";
      if (is_send || is_recv) {
        auto& m = is_send ? sends_by_seq[r] : recvs_by_seq[r];
        CHECK(m.count(c.seq) == 0);  // one number per transfer of the ordered pair
        m[c.seq] = &c;
        continue;
      }
      CHECK(coll_seq.count(c.seq) == 0);  // sequence numbers are unique per communicator
      coll_seq[c.seq] = &c;
    }
    REQUIRE(coll_seq.size() == size_t(kIters * kWorldCollsPerIter + kExtraColls));
    REQUIRE(sends_by_seq[r].size() == size_t(kIters * kP2pPerIter));
    REQUIRE(recvs_by_seq[r].size() == size_t(kIters * 6));
    for (const auto& kv : coll_seq) {
      const uint64_t iter_end = kIters * kWorldCollsPerIter;
      CheckCall(*kv.second, kv.first < iter_end ? coll[kv.first % kWorldCollsPerIter]
                                                : extra[kv.first - iter_end]);
      world_by_seq[int(kv.first)].push_back(kv.second);
    }
    CHECK(coll_seq.rbegin()->first == uint64_t(kIters * kWorldCollsPerIter + kExtraColls - 1));
    for (const auto& kv : sends_by_seq[r]) CheckCall(*kv.second, sends[kv.first % kP2pPerIter]);
    for (const auto& kv : recvs_by_seq[r]) {
      REQUIRE(!NoRecvRecord(kv.first));
      CheckCall(*kv.second, recvs[kv.first % kP2pPerIter]);
    }

    // The split communicator: one Allreduce, its own sequence from 0, matching unique ids.
    REQUIRE(half_call != nullptr);
    CHECK(half_call->api == "MPI_Allreduce");
    CHECK(half_call->seq == 0);
    CHECK(half_call->count == 16);
    CHECK(half_call->bytes == 64);
    REQUIRE(p.comms.count(half_call->comm) == 1);
    const CommDef& half = p.comms.at(half_call->comm);
    CHECK(half.size() == kRanks / 2);
    CHECK(half.rank() == r / 2);
    half_uids[r % 2].insert(half.unique_id());

    // Clock offsets to rank 0, at MPI_Init and at MPI_Finalize; same host => offset ~ 0.
    REQUIRE(p.offsets.size() == 2);
    for (const ClockOffset& o : p.offsets) {
      std::printf("rank %d clock offset %lld ns, error bound %llu ns\n", r,
                  static_cast<long long>(o.offset_ns()),
                  static_cast<unsigned long long>(o.error_ns()));
      INFO("offset " << o.offset_ns() << " error " << o.error_ns());
      CHECK(o.method() == "mpi-pingpong");
      CHECK(o.rounds() == 16);
      if (r == 0) {
        CHECK(o.offset_ns() == 0);
        CHECK(o.error_ns() == 0);
      } else {
        CHECK(o.error_ns() > 0);
        CHECK(o.error_ns() < 50000000);  // < 50 ms even on 2 oversubscribed cores
        CHECK(std::llabs(o.offset_ns()) <= int64_t(o.error_ns()) + 5000);
      }
    }
  }
  // Cross-rank: the n-th collective on world is the same call on every rank.
  REQUIRE(world_by_seq.size() == size_t(kIters * kWorldCollsPerIter + kExtraColls));
  for (const auto& kv : world_by_seq) {
    REQUIRE(kv.second.size() == size_t(kRanks));
    for (const CollRecord* c : kv.second) CHECK(c->api == kv.second[0]->api);
  }
  // Point-to-point: rank r's k-th send to its right neighbour is that neighbour's k-th receive
  // from r (the Sendrecv pairs with the neighbour's Sendrecv, which has no receive record).
  for (int r = 0; r < kRanks; ++r) {
    const int right = (r + 1) % kRanks;
    for (const auto& kv : sends_by_seq[r]) {
      if (NoRecvRecord(kv.first)) {
        // Sendrecv(_replace): its receive side is the right neighbour's own call of that
        // number, which names this rank as its source.
        REQUIRE(sends_by_seq[right].count(kv.first) == 1);
        const CollRecord* sr = sends_by_seq[right].at(kv.first);
        CHECK(sr->api == kv.second->api);
        CHECK(sr->recv_peer == r);
        CHECK(sr->recv_seq == kv.first);
        continue;
      }
      REQUIRE(recvs_by_seq[right].count(kv.first) == 1);
      const CollRecord* rcv = recvs_by_seq[right].at(kv.first);
      CHECK(rcv->bytes == kv.second->bytes);
      CHECK(rcv->peer == r);
      CHECK((rcv->api == "MPI_Recv" || rcv->api == "MPI_Irecv" || rcv->api == "MPI_Recv_init"));
    }
  }
  // The duplicate used by all has one unique id on every rank, though only ranks 0 and 1 used
  // the duplicate made before it (communicators are numbered at creation, not first use).
  CHECK(dup_uids.size() == 1);
  // Each half's members agree on its unique id; the two halves differ.
  REQUIRE(half_uids[0].size() == 1);
  REQUIRE(half_uids[1].size() == 1);
  CHECK(*half_uids[0].begin() != *half_uids[1].begin());
}

TEST_CASE("PROFAGENT_CLOCK_SYNC=0 turns the ping-pong off and still records every call") {
  REQUIRE(HaveMpirun());
  const std::string out = FreshDir("mpi_out_nosync");
  std::string log;
  const int rc = Run(MpirunCommand(out, " -x PROFAGENT_CLOCK_SYNC=0"), &log);
  INFO(log);
  REQUIRE(rc == 0);
  std::vector<RankProfile> ranks = LoadProfileDir(out);
  REQUIRE(ranks.size() == size_t(kRanks));
  for (const RankProfile& p : ranks) {
    CHECK(p.offsets.empty());
    // Per iteration: the world collectives, 8 sends and 6 receives; then the extra collectives,
    // the duplicates' message (ranks 0 and 1) and Allreduce, and the split communicator's.
    CHECK(p.colls.size() == size_t(kIters * (kWorldCollsPerIter + kP2pPerIter + 6) +
                                   kExtraColls + (p.rank < 2 ? 1 : 0) + 2));
  }
}

TEST_CASE("Without a local rank from the launcher, ranks derive it from a node split") {
  REQUIRE(HaveMpirun());
  const std::string out = FreshDir("mpi_out_nolocal");
  std::string log;
  // An empty OMPI_COMM_WORLD_LOCAL_RANK: every rank takes the PMPI_Comm_split_type path.
  const int rc = Run(MpirunCommand(out, " -x OMPI_COMM_WORLD_LOCAL_RANK="), &log);
  INFO(log);
  REQUIRE(rc == 0);
  std::vector<RankProfile> ranks = LoadProfileDir(out);
  REQUIRE(ranks.size() == size_t(kRanks));
  for (int r = 0; r < kRanks; ++r) {
    CHECK(ranks[r].rank == r);
    CHECK(ranks[r].local_rank == r);  // one host: node rank == world rank
    CHECK(ranks[r].offsets.size() == 2);
  }
}

TEST_CASE("PROFAGENT_ENABLE=0: the program runs unchanged and nothing is written") {
  REQUIRE(HaveMpirun());
  const std::string out = FreshDir("mpi_out_disabled");
  std::string log;
  const int rc = Run(MpirunCommand(out, " -x PROFAGENT_ENABLE=0"), &log);
  INFO(log);
  REQUIRE(rc == 0);
  CHECK(log.find("all results correct") != std::string::npos);
  CHECK(LoadProfileDir(out).empty());
}

}  // namespace
}  // namespace testing
}  // namespace profagent
