// Events emitted by the shutdown hooks (the last CUPTI flush, the CUDA-event poller's final
// drain) reach the file even from a thread that never emitted before: the hooks run on the
// thread that ends the process, often the main thread of a program whose CUDA work ran on
// worker threads, and CUPTI may deliver on a thread of its own.
#include <stdlib.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <thread>
#include <vector>

#include "agent/core/agent.h"
#include "agent/core/testing.h"
#include "analyzer/reader.h"

namespace profagent {
namespace {

uint16_t g_api = 0;

void EmitMarkers(uint64_t first, int n) {
  for (int i = 0; i < n; ++i) {
    RawEvent e{};
    e.t0 = e.t1 = Now();
    e.type = EvType::kMarker;
    e.api = g_api;
    e.gen.a = first + uint64_t(i);
    Emit(e);
  }
}

class Collect : public analyzer::Visitor {
 public:
  std::vector<uint64_t> markers;
  void OnHostEvent(const analyzer::HostEvent& e) override {
    if (e.ev->kind() == EV_MARKER) markers.push_back(e.ev->handle());
  }
};

TEST_CASE("a thread's first events, emitted by a shutdown hook, are written") {
  std::string dir = testing::MakeTempDir("shutdown");
  setenv("PROFAGENT_OUTPUT", dir.c_str(), 1);
  REQUIRE(profagent_init() == 1);
  g_api = RegisterApi("testMarker");
  // A worker emits during the run; the main thread never does before shutdown.
  std::thread([] { EmitMarkers(1, 5); }).join();
  AtShutdown([] {
    EmitMarkers(100, 7);                              // the calling (main) thread
    std::thread([] { EmitMarkers(200, 3); }).join();  // a thread born during shutdown
  });
  profagent_shutdown("test");
  EmitMarkers(300, 2);  // after the file is closed: nothing, and no crash

  auto files = testing::ListDir(dir);
  REQUIRE(files.size() == 1);
  Collect c;
  analyzer::FileSummary s;
  REQUIRE(analyzer::VisitFile(dir + "/" + files[0], &c, &s).ok());
  CHECK(s.has_footer);
  std::sort(c.markers.begin(), c.markers.end());
  CHECK(c.markers ==
        std::vector<uint64_t>{1, 2, 3, 4, 5, 100, 101, 102, 103, 104, 105, 106, 200, 201, 202});
}

}  // namespace
}  // namespace profagent
