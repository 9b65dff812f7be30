// fork(): parent and child each produce a complete, separate file. SIGTERM: the file is flushed
// and closed before the process dies of the signal.
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
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

// Forks a child that allocates all the time (a tokenizer's loop): it sets `handler` for SIGTERM
// (nullptr: the default action), starts the agent, calls `setup` (when given), records marker
// `first`, flushes, then mallocs and frees forever, above the per-thread cache's sizes (which
// take no lock: the arena's lock is held much of the time), recording marker `tick` (when not 0)
// every 4096 rounds. Returns once the child is in its loop.
pid_t ForkAllocatingChild(void (*handler)(int), void (*setup)(), uint64_t first, uint64_t tick) {
  int ready[2];
  REQUIRE(pipe(ready) == 0);
  pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    close(ready[0]);
    if (handler != nullptr) {
      struct sigaction sa;
      memset(&sa, 0, sizeof(sa));
      sa.sa_handler = handler;
      sigaction(SIGTERM, &sa, nullptr);
    }
    if (profagent_init() != 1) _exit(97);
    if (setup != nullptr) setup();
    EmitMarker(first);
    Flush(1000);
    (void)!write(ready[1], "r", 1);
    for (uint64_t i = 0;; ++i) {
      void* volatile p = malloc(2048 + i % 60000);
      free(p);
      if (tick != 0 && i % 4096 == 0) EmitMarker(tick);
      if (p == nullptr) break;
    }
    _exit(96);
  }
  close(ready[1]);
  char c;
  REQUIRE(read(ready[0], &c, 1) == 1);
  close(ready[0]);
  return child;
}

// Waits up to `ms` for `child`; kills it and returns false if it is still running.
bool WaitChild(pid_t child, int ms, int* status) {
  for (int waited_ms = 0; waited_ms < ms; waited_ms += 5) {
    if (waitpid(child, status, WNOHANG) == child) return true;
    usleep(5000);
  }
  kill(child, SIGKILL);
  waitpid(child, status, 0);
  return false;
}

// (Runs first: the test process itself never starts the agent here, each child does.)
// SIGTERM to a process whose main thread allocates all the time (a tokenizer's loop): the
// handler may interrupt malloc, so it must not allocate (nor join, nor lock): the process dies
// of the signal within a bound, every time, and its file is finished by the writer thread.
TEST_CASE("SIGTERM during malloc: no deadlock, the file is finished", "[fork]") {
  std::string dir = testing::MakeTempDir("sigmalloc");
  setenv("PROFAGENT_OUTPUT", dir.c_str(), 1);
  signal(SIGTERM, SIG_DFL);
  for (int round = 0; round < 12; ++round) {
    INFO("round " << round);
    const pid_t child = ForkAllocatingChild(nullptr, nullptr, 7, 8);
    usleep(useconds_t(1000 + round * 1700));
    kill(child, SIGTERM);
    int status = 0;
    if (!WaitChild(child, 5000, &status)) {
      FAIL("the process did not die of SIGTERM within 5 s (deadlocked in its handler)");
    }
    CHECK(WIFSIGNALED(status));
    CHECK(WTERMSIG(status) == SIGTERM);
  }
  int finished = 0;
  for (const auto& f : testing::ListDir(dir)) {
    Markers m;
    analyzer::FileSummary s;
    REQUIRE(analyzer::VisitFile(dir + "/" + f, &m, &s).ok());
    CHECK(m.count[7] == 1);
    finished += m.footer_reason == "signal 15 (SIGTERM)";
  }
  CHECK(finished == 12);
}

// An application whose own SIGTERM handler ends the process with _exit (a C++ server's usual
// shutdown). The handler may interrupt the main thread inside malloc, and the agent's _exit
// hook then runs the shutdown hooks (the CUPTI flush) on that thread. Here a hook that never
// returns stands for one waiting on the lock the interrupted code holds: the process still ends,
// with the application's status, and the writer finishes the file without the hook.
TEST_CASE("_exit from a signal handler: a stuck shutdown hook cannot hang the exit", "[fork]") {
  std::string dir = testing::MakeTempDir("exithang");
  setenv("PROFAGENT_OUTPUT", dir.c_str(), 1);
  const pid_t child = ForkAllocatingChild(
      [](int) { _exit(5); },
      [] {
        AtShutdown([] {
          for (;;) pause();  // (SIGTERM is blocked in its own handler: this never returns)
        });
      },
      9, 0);
  usleep(20000);
  kill(child, SIGTERM);
  int status = 0;
  REQUIRE(WaitChild(child, 15000, &status));  // the hooks get 5 s without progress
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 5);
  auto files = testing::ListDir(dir);
  REQUIRE(files.size() == 1);
  Markers m;
  analyzer::FileSummary s;
  REQUIRE(analyzer::VisitFile(dir + "/" + files[0], &m, &s).ok());
  CHECK(s.has_footer);
  CHECK(m.count[9] == 1);
  CHECK(m.footer_reason == "_exit (shutdown hooks stuck for 5 s: device records may be missing)");
}

// The same handler without a stuck hook, interrupting malloc again and again: every run ends
// with the application's status and a finished file.
TEST_CASE("_exit from a signal handler during malloc: status kept, file finished", "[fork]") {
  std::string dir = testing::MakeTempDir("exitmalloc");
  setenv("PROFAGENT_OUTPUT", dir.c_str(), 1);
  for (int round = 0; round < 8; ++round) {
    INFO("round " << round);
    const pid_t child = ForkAllocatingChild([](int) { _exit(6); }, nullptr, 10, 11);
    usleep(useconds_t(1000 + round * 2300));
    kill(child, SIGTERM);
    int status = 0;
    REQUIRE(WaitChild(child, 15000, &status));
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 6);
  }
  int finished = 0;
  for (const auto& f : testing::ListDir(dir)) {
    Markers m;
    analyzer::FileSummary s;
    REQUIRE(analyzer::VisitFile(dir + "/" + f, &m, &s).ok());
    CHECK(m.count[10] == 1);
    finished += s.has_footer;
  }
  CHECK(finished == 8);
}

TEST_CASE("fork gives parent and child complete separate files; SIGTERM flushes", "[fork]") {
  std::string dir = testing::MakeTempDir("fork");
  setenv("PROFAGENT_OUTPUT", dir.c_str(), 1);
  // Catch2 installed its own SIGTERM handler; an application with the default action is what
  // the agent's handler is for (it never replaces an application's handler).
  signal(SIGTERM, SIG_DFL);
  signal(SIGINT, SIG_DFL);
  REQUIRE(profagent_init() == 1);
  // The agent's handlers come with its first recorded event, not at load: an interpreter that
  // starts meanwhile (Python) sees the dispositions it would see without the agent.
  struct sigaction sa;
  REQUIRE(sigaction(SIGTERM, nullptr, &sa) == 0);
  CHECK(sa.sa_handler == SIG_DFL);
  EmitMarker(1);  // parent, before the fork
  Flush(1000);
  REQUIRE(sigaction(SIGTERM, nullptr, &sa) == 0);
  CHECK(sa.sa_handler != SIG_DFL);

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

  // An application handler installed after the agent's, that calls the previous one (the
  // agent's) and then shuts down in its own way: the file is finished, and the application
  // goes on to exit as it chose (its code, not the signal).
  pid_t chainer = fork();
  REQUIRE(chainer >= 0);
  if (chainer == 0) {
    static struct sigaction previous;
    struct sigaction mine;
    memset(&mine, 0, sizeof(mine));
    mine.sa_handler = [](int sig) {
      if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN) {
        previous.sa_handler(sig);
      }
      _exit(42);
    };
    sigaction(SIGTERM, &mine, &previous);
    for (int i = 0; i < 4; ++i) EmitMarker(6);
    raise(SIGTERM);
    _exit(98);  // not reached
  }
  REQUIRE(waitpid(chainer, &status, 0) == chainer);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 42);

  EmitMarker(4);  // parent, after both
  profagent_shutdown("test");

  auto files = testing::ListDir(dir);
  REQUIRE(files.size() == 5);
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
  Markers& c4 = by_pid[uint32_t(chainer)];
  CHECK(c4.count[6] == 4);
  CHECK(c4.footer_reason == "signal 15 (SIGTERM)");
}

}  // namespace
}  // namespace profagent
