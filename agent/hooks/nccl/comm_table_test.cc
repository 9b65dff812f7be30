#include "agent/hooks/nccl/comm_table.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <set>
#include <thread>
#include <vector>

#include "agent/hooks/nccl/nccl_tables.h"

namespace profagent {
namespace {

TEST_CASE("CommTable finds what was inserted and nothing else") {
  CommTable t;
  REQUIRE(t.Find(0x1000) == nullptr);
  CommSlot* a = t.Insert(0x1000, 2, 4, 77);
  REQUIRE(a != nullptr);
  CHECK(t.Find(0x1000) == a);
  CHECK(a->rank == 2);
  CHECK(a->size == 4);
  CHECK(a->uid_hash == 77);
  CHECK(t.Find(0x2000) == nullptr);
  CHECK(t.Insert(0, 0, 1, 1) == nullptr);  // null handle is never a communicator
  CHECK(t.Find(CommTable::kTombstone) == nullptr);
  CHECK(t.size() == 1);
}

TEST_CASE("Sequence numbers count per communicator from 0 and restart on handle reuse") {
  CommTable t;
  CommSlot* a = t.Insert(0xa0, 0, 2, 1);
  CommSlot* b = t.Insert(0xb0, 1, 2, 2);
  CHECK(NextCollSeq(a) == 0);
  CHECK(NextCollSeq(a) == 1);
  CHECK(NextCollSeq(b) == 0);
  CHECK(NextP2pSeq(a) == 0);  // separate counter for send/recv
  CHECK(NextCollSeq(a) == 2);
  CHECK(NextCollSeq(nullptr) == 0xffffffffu);

  t.Remove(0xa0);
  CHECK(t.Find(0xa0) == nullptr);
  CHECK(t.Find(0xb0) == b);  // still reachable past the tombstone
  CommSlot* a2 = t.Insert(0xa0, 1, 8, 9);
  REQUIRE(a2 != nullptr);
  CHECK(NextCollSeq(a2) == 0);
  CHECK(a2->size == 8);
  // Re-inserting a live handle resets it in place.
  NextCollSeq(b);
  CHECK(t.Insert(0xb0, 1, 2, 2) == b);
  CHECK(NextCollSeq(b) == 0);
}

TEST_CASE("Point-to-point numbers count per ordered pair and direction") {
  CommTable t;
  CommSlot* s = t.Insert(0xc0, 1, 3, 5);
  // Rank 1 sends twice to 2 and once to 0, receives once from 0: independent counters.
  CHECK(NextPeerSeq(s, 2, false) == 0);
  CHECK(NextPeerSeq(s, 2, false) == 1);
  CHECK(NextPeerSeq(s, 0, false) == 0);
  CHECK(NextPeerSeq(s, 0, true) == 0);
  CHECK(NextPeerSeq(s, 2, true) == 0);
  CHECK(NextPeerSeq(s, 2, false) == 2);
  // Peers outside the communicator (MPI_ANY_SOURCE = -1, MPI_PROC_NULL = -2, >= size) and
  // unknown slots get no number.
  CHECK(NextPeerSeq(s, -1, true) == 0xffffffffu);
  CHECK(NextPeerSeq(s, -2, false) == 0xffffffffu);
  CHECK(NextPeerSeq(s, 3, false) == 0xffffffffu);
  CHECK(NextPeerSeq(nullptr, 0, false) == 0xffffffffu);
  // Re-creation with a larger size (an intercommunicator's two groups): counters restart and
  // cover the new peers; the groups are kept, and reset by the next re-creation.
  CommSlot* s2 = t.Insert(0xc0, 1, 8, 6, -1, InterGroups{5, 0, 5});
  REQUIRE(s2 == s);
  CHECK(s->inter.local_base == 5);
  CHECK(s->inter.remote_size == 5);
  CHECK(NextPeerSeq(s, 2, false) == 0);
  CHECK(NextPeerSeq(s, 7, true) == 0);
  CHECK(NextPeerSeq(s, 7, true) == 1);
  REQUIRE(t.Insert(0xc0, 1, 8, 7) == s);
  CHECK(s->inter.remote_size == 0);
  CHECK(s->inter.local_base == 0);
  // Size unknown (0): no per-peer numbers, collectives still count.
  CommSlot* z = t.Insert(0xd0, -1, 0, 0);
  CHECK(NextPeerSeq(z, 0, false) == 0xffffffffu);
  CHECK(NextCollSeq(z) == 0);
}

TEST_CASE("CommTable probes past collisions and fills up cleanly") {
  CommTable t;
  std::vector<CommSlot*> slots;
  // Pointer-like handles (16-byte aligned) fill every slot.
  for (uint64_t i = 1; i <= CommTable::kSlots; ++i) {
    CommSlot* s = t.Insert(i * 16, int(i), 1, i);
    REQUIRE(s != nullptr);
    slots.push_back(s);
  }
  CHECK(t.Insert(0xdead0000, 0, 1, 0) == nullptr);  // full
  for (uint64_t i = 1; i <= CommTable::kSlots; ++i) {
    REQUIRE(t.Find(i * 16) == slots[i - 1]);
    CHECK(t.Find(i * 16)->uid_hash == i);
  }
  std::set<CommSlot*> distinct(slots.begin(), slots.end());
  CHECK(distinct.size() == CommTable::kSlots);
  // Removing frees a slot for a new handle; the others stay findable.
  t.Remove(16 * 5);
  CHECK(t.Insert(0xdead0000, 0, 1, 0) != nullptr);
  CHECK(t.Find(16 * 5) == nullptr);
  CHECK(t.Find(16 * 6) == slots[5]);
  CHECK(t.Find(0xdead0000) != nullptr);
}

TEST_CASE("Concurrent collectives on one communicator get distinct sequence numbers") {
  CommTable t;
  CommSlot* s = t.Insert(0x5000, 0, 1, 0);
  constexpr int kThreads = 4, kPer = 20000;
  std::vector<std::vector<uint32_t>> got(kThreads);
  std::vector<std::thread> th;
  for (int i = 0; i < kThreads; ++i)
    th.emplace_back([&, i] {
      CommSlot* mine = t.Find(0x5000);  // lookups race with nothing but other lookups
      for (int k = 0; k < kPer; ++k) got[i].push_back(NextCollSeq(mine));
    });
  for (auto& x : th) x.join();
  std::vector<uint32_t> all;
  for (auto& v : got) {
    CHECK(std::is_sorted(v.begin(), v.end()));  // per thread: increasing
    all.insert(all.end(), v.begin(), v.end());
  }
  std::sort(all.begin(), all.end());
  REQUIRE(all.size() == size_t(kThreads * kPer));
  for (size_t i = 0; i < all.size(); ++i) REQUIRE(all[i] == i);
  CHECK(s->coll_seq.load() == uint32_t(kThreads * kPer));
}

TEST_CASE("Unique-id hashes are the published FNV-1a and equal for equal inputs") {
  CHECK(Fnv1a64("", 0) == 0xcbf29ce484222325ull);
  CHECK(Fnv1a64("a", 1) == 0xaf63dc4c8601ec8cull);
  CHECK(Fnv1a64("foobar", 6) == 0x85944171f73967e8ull);
  char id1[128] = {1, 2, 3}, id2[128] = {1, 2, 3}, id3[128] = {1, 2, 4};
  CHECK(Fnv1a64(id1, 128) == Fnv1a64(id2, 128));
  CHECK(Fnv1a64(id1, 128) != Fnv1a64(id3, 128));
  // Split: every member with the same (parent, color, index) agrees; anything else differs.
  const uint64_t p = Fnv1a64(id1, 128);
  CHECK(SplitHash(p, 0, 0, 1) == SplitHash(p, 0, 0, 1));
  CHECK(SplitHash(p, 0, 0, 1) != SplitHash(p, 1, 0, 1));
  CHECK(SplitHash(p, 0, 0, 1) != SplitHash(p, 0, 1, 1));
  CHECK(SplitHash(p, 0, 0, 1) != SplitHash(p, 0, 0, 2));
  CHECK(UidString("nccl", 0xabcull) == "nccl:0000000000000abc");
}

TEST_CASE("NCCL datatype sizes and names follow nccl.h") {
  // ncclInt8=0 ... ncclFloat8e5m2=11 (NCCL 2.28).
  CHECK(nccl::DtypeSize(0) == 1);
  CHECK(nccl::DtypeSize(2) == 4);   // ncclInt32
  CHECK(nccl::DtypeSize(4) == 8);   // ncclInt64
  CHECK(nccl::DtypeSize(6) == 2);   // ncclFloat16
  CHECK(nccl::DtypeSize(7) == 4);   // ncclFloat32
  CHECK(nccl::DtypeSize(8) == 8);   // ncclFloat64
  CHECK(nccl::DtypeSize(9) == 2);   // ncclBfloat16
  CHECK(nccl::DtypeSize(11) == 1);  // ncclFloat8e5m2
  CHECK(nccl::DtypeSize(12) == 0);
  CHECK(nccl::DtypeSize(-1) == 0);
  CHECK(std::string(nccl::kDtypeNames[nccl::DtypeIndex(7)]) == "float32");
  CHECK(std::string(nccl::kDtypeNames[nccl::DtypeIndex(99)]) == "unknown");
  CHECK(std::string(nccl::kRedopNames[nccl::RedopIndex(0)]) == "sum");
  CHECK(std::string(nccl::kRedopNames[nccl::RedopIndex(4)]) == "avg");
  CHECK(std::string(nccl::kRedopNames[nccl::RedopIndex(5)]) == "premulsum");  // user op
  CHECK(std::string(nccl::kRedopNames[nccl::RedopIndex(1000)]) == "premulsum");
}

}  // namespace
}  // namespace profagent
