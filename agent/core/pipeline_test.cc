// The whole pipeline: many threads hammer their rings while the writer drains to a real file;
// the file is read back with the analyzer's reader. Every event arrives exactly once and in
// per-thread order, or is counted as dropped, and the counts add up exactly.
#include <stdlib.h>

#include <map>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "agent/core/agent.h"
#include "agent/core/testing.h"
#include "analyzer/reader.h"

namespace profagent {
namespace {

class Collect : public analyzer::Visitor {
 public:
  std::map<uint32_t, std::vector<uint64_t>> seq_by_thread;  // thread -> payload sequence
  std::map<uint32_t, uint64_t> drops_by_thread;
  uint64_t footer_dropped = ~0ull;
  void OnHostEvent(const analyzer::HostEvent& e) override {
    if (e.ev->kind() == EV_MARKER) seq_by_thread[e.thread].push_back(e.ev->handle());
  }
  void OnOther(const Record& r) override {
    if (r.has_drops()) drops_by_thread[r.drops().thread()] = r.drops().count();
    if (r.has_footer()) footer_dropped = r.footer().dropped();
  }
};

TEST_CASE("threads hammering rings: exactly once, in order, or counted", "[pipeline]") {
  std::string dir = testing::MakeTempDir("pipeline");
  setenv("PROFAGENT_OUTPUT", dir.c_str(), 1);
  setenv("PROFAGENT_RING_SIZE", "1024", 1);  // small: forces drops
  setenv("PROFAGENT_FLUSH_MS", "1", 1);
  REQUIRE(profagent_init() == 1);

  constexpr int kThreads = 8;
  constexpr uint64_t kPerThread = 200000;
  uint16_t api = RegisterApi("testMarker");
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([api] {
      for (uint64_t i = 1; i <= kPerThread; ++i) {
        RawEvent e{};
        e.t0 = e.t1 = Now();
        e.type = EvType::kMarker;
        e.api = api;
        e.gen.a = i;
        Emit(e);
      }
    });
  }
  for (auto& th : threads) th.join();
  // Short-lived threads one after another: each exits, its ring is drained and recycled, and the
  // next thread takes it; each must still appear as a thread of its own.
  constexpr int kSequential = 5;
  for (int t = 0; t < kSequential; ++t) {
    Flush(2000);  // the writer notices the exited threads and recycles their rings
    std::thread th([api] {
      for (uint64_t i = 1; i <= 100; ++i) {
        RawEvent e{};
        e.t0 = e.t1 = Now();
        e.type = EvType::kMarker;
        e.api = api;
        e.gen.a = kPerThread + i;
        Emit(e);
      }
    });
    th.join();
  }
  profagent_shutdown("test");

  auto files = testing::ListDir(dir);
  REQUIRE(files.size() == 1);
  Collect c;
  analyzer::FileSummary s;
  REQUIRE(analyzer::VisitFile(dir + "/" + files[0], &c, &s).ok());
  CHECK(s.has_footer);
  CHECK_FALSE(s.truncated);
  REQUIRE(c.seq_by_thread.size() == kThreads + kSequential);
  uint64_t total_received = 0, total_dropped = 0;
  int sequential = 0;
  for (auto& kv : c.seq_by_thread) {
    const auto& seq = kv.second;
    if (!seq.empty() && seq.front() > kPerThread) {  // one of the short-lived threads
      ++sequential;
      CHECK(seq.size() == 100);
      CHECK(seq.front() == kPerThread + 1);
      CHECK(seq.back() == kPerThread + 100);
      continue;
    }
    bool increasing = true;
    for (size_t i = 1; i < seq.size(); ++i) increasing &= seq[i] > seq[i - 1];
    CHECK(increasing);
    uint64_t dropped = c.drops_by_thread.count(kv.first) ? c.drops_by_thread[kv.first] : 0;
    CHECK(seq.size() + dropped == kPerThread);
    total_received += seq.size();
    total_dropped += dropped;
  }
  CHECK(sequential == kSequential);
  CHECK(total_received + total_dropped == kThreads * kPerThread);
  CHECK(c.footer_dropped == total_dropped);
  CHECK(total_received > 0);
}

}  // namespace
}  // namespace profagent
