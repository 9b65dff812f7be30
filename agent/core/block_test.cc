// Overflow policy "block": producers wait for the writer instead of dropping: nothing is lost.
#include <stdlib.h>

#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "agent/core/agent.h"
#include "agent/core/testing.h"
#include "analyzer/reader.h"

namespace profagent {
namespace {

class Count : public analyzer::Visitor {
 public:
  uint64_t markers = 0;
  uint64_t drops = 0;
  void OnHostEvent(const analyzer::HostEvent& e) override { markers += e.ev->kind() == EV_MARKER; }
  void OnOther(const Record& r) override {
    if (r.has_drops()) drops += r.drops().count();
  }
};

TEST_CASE("policy block loses nothing", "[pipeline]") {
  std::string dir = testing::MakeTempDir("block");
  setenv("PROFAGENT_OUTPUT", dir.c_str(), 1);
  setenv("PROFAGENT_RING_SIZE", "64", 1);
  setenv("PROFAGENT_OVERFLOW", "block", 1);
  REQUIRE(profagent_init() == 1);
  constexpr int kThreads = 4;
  constexpr uint64_t kPerThread = 50000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([] {
      for (uint64_t i = 0; i < kPerThread; ++i) {
        RawEvent e{};
        e.t0 = e.t1 = Now();
        e.type = EvType::kMarker;
        e.gen.a = i;
        Emit(e);
      }
    });
  }
  for (auto& th : threads) th.join();
  profagent_shutdown("test");
  auto files = testing::ListDir(dir);
  REQUIRE(files.size() == 1);
  Count c;
  REQUIRE(analyzer::VisitFile(dir + "/" + files[0], &c, nullptr).ok());
  CHECK(c.markers == kThreads * kPerThread);
  CHECK(c.drops == 0);
}

}  // namespace
}  // namespace profagent
