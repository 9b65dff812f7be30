// fork(): parent and child each produce a complete, separate file. SIGTERM: the file is flushed
// and closed before the process dies of the signal.
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <map>
#include <string>

#include <catch2/catch.hpp>

#include "agent/core/agent.h"
#include "agent/core/testing.h"
#include "analyzer/reader.h"

namespace profagent {
namespace {

class Markers : public analyzer::Visitor {
 public:
  std::map<uint64_t, int> count;  // marker payload -> occurrences
  uint32_t pid = 0;
  std::string footer_reason;
  void OnHeader(const Header& h) override { pid = h.pid(); }
  void OnHostEvent(const analyzer::HostEvent& e) override {
    if (e.ev->kind() == EV_MARKER) count[e.ev->handle()]++;
  }
  void OnOther(const Record& r) override {
    if (r.has_footer()) footer_reason = r.footer().reason();
  }
};

void EmitMarker(uint64_t v) {
  RawEvent e{};
  e.t0 = e.t1 = Now();
  e.type = EvType::kMarker;
  e.gen.a = v;
  REQUIRE(Emit(e));
}

TEST_CASE("fork gives parent and child complete separate files; SIGTERM flushes", "[fork]") {
  std::string dir = testing::MakeTempDir("fork");
  setenv("PROFAGENT_OUTPUT", dir.c_str(), 1);
  // Catch2 installed its own SIGTERM handler; an application with the default action is what
  // the agent's handler is for (it never replaces an application's handler).
  signal(SIGTERM, SIG_DFL);
  REQUIRE(profagent_init() == 1);
  EmitMarker(1);  // parent, before the fork
  Flush(1000);

  pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    for (int i = 0; i < 100; ++i) EmitMarker(2);
    exit(0);  // atexit: the child's writer writes its footer
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);

  pid_t victim = fork();
  REQUIRE(victim >= 0);
  if (victim == 0) {
    for (int i = 0; i < 10; ++i) EmitMarker(3);
    raise(SIGTERM);
    _exit(99);  // not reached: SIGTERM is re-raised with the default action
  }
  REQUIRE(waitpid(victim, &status, 0) == victim);
  REQUIRE(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGTERM);

  pid_t quitter = fork();
  REQUIRE(quitter >= 0);
  if (quitter == 0) {
    for (int i = 0; i < 7; ++i) EmitMarker(5);
    _exit(3);  // no atexit handlers: the agent's _exit still finishes the file
  }
  REQUIRE(waitpid(quitter, &status, 0) == quitter);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 3);

  EmitMarker(4);  // parent, after both
  profagent_shutdown("test");

  auto files = testing::ListDir(dir);
  REQUIRE(files.size() == 4);
  std::map<uint32_t, Markers> by_pid;
  for (const auto& f : files) {
    Markers m;
    analyzer::FileSummary s;
    REQUIRE(analyzer::VisitFile(dir + "/" + f, &m, &s).ok());
    CHECK(s.has_footer);
    CHECK(f == "pid" + std::to_string(m.pid) + ".pb");
    by_pid[m.pid] = m;
  }
  Markers& parent = by_pid[uint32_t(getpid())];
  CHECK(parent.count[1] == 1);
  CHECK(parent.count[4] == 1);
  CHECK(parent.count.count(2) == 0);
  CHECK(parent.footer_reason == "test");
  Markers& c1 = by_pid[uint32_t(child)];
  CHECK(c1.count[2] == 100);
  CHECK(c1.count.count(1) == 0);  // the parent's events are not duplicated into the child's file
  CHECK(c1.footer_reason == "exit");
  Markers& c2 = by_pid[uint32_t(victim)];
  CHECK(c2.count[3] == 10);
  CHECK(c2.footer_reason == "signal 15 (SIGTERM)");
  Markers& c3 = by_pid[uint32_t(quitter)];
  CHECK(c3.count[5] == 7);
  CHECK(c3.footer_reason == "_exit");
}

}  // namespace
}  // namespace profagent
