// End-to-end: runs nvtx_demo (an unmodified NVTX program) with LD_PRELOAD of the agent, parses
// the record file with the generated protobuf code (proto/profagent.proto) and checks every
// range against the times the program printed: message, nesting depth, domain, registered
// string, payload, color, category, steps and runs, the range left open at exit.
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "agent/core/testing.h"
#include "proto/profagent.pb.h"

namespace {

// Clock conversion tolerance: the agent timestamps with the TSC and converts to
// CLOCK_MONOTONIC off the hot path. Measured worst case here: 0 ns outside the true window
// (the test prints it); 5 us leaves room for a calibration on a loaded machine.
constexpr int64_t kTolNs = 5000;

std::string Runfile(const std::string& rel) {
  const char* s = getenv("TEST_SRCDIR");
  return std::string(s ? s : ".") + "/profagent/" + rel;
}

struct Truth {
  std::string kind;  // "R" or "M"
  std::string msg;
  int64_t b0 = 0, a0 = 0, b1 = 0, a1 = 0;
};

struct Ev {
  profagent::Event e;
  int64_t start = 0;
  uint32_t thread = 0;
};

struct Parsed {
  std::map<uint32_t, std::string> strings;
  std::vector<Ev> events;
  std::map<uint32_t, std::string> thread_names;  // by thread index: the last ThreadInfo's name
  bool footer = false;
  std::string S(uint32_t id) const {
    auto it = strings.find(id);
    return it == strings.end() ? "" : it->second;
  }
};

bool ReadVarint(const std::string& d, size_t* pos, uint64_t* v) {
  *v = 0;
  for (int shift = 0; *pos < d.size() && shift < 64; shift += 7) {
    uint8_t b = uint8_t(d[(*pos)++]);
    *v |= uint64_t(b & 0x7f) << shift;
    if (!(b & 0x80)) return true;
  }
  return false;
}

Parsed ParseFile(const std::string& path) {
  Parsed p;
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string d = ss.str();
  REQUIRE(d.size() >= 12);
  REQUIRE(d.compare(0, 8, "PROFAGNT") == 0);
  REQUIRE((uint8_t(d[8]) | (uint8_t(d[9]) << 8)) == 1);  // schema major
  size_t pos = 12;
  while (pos < d.size()) {
    uint64_t len;
    REQUIRE(ReadVarint(d, &pos, &len));
    REQUIRE(pos + len <= d.size());
    profagent::Record r;
    REQUIRE(r.ParseFromArray(d.data() + pos, int(len)));
    pos += len;
    if (r.has_string()) p.strings[r.string().id()] = r.string().value();
    if (r.has_footer()) p.footer = true;
    if (r.has_thread()) p.thread_names[r.thread().thread()] = r.thread().name();
    if (r.has_batch()) {
      int64_t t = int64_t(r.batch().base_ns());
      for (const auto& e : r.batch().events()) {
        t += e.dt();
        p.events.push_back({e, t, r.batch().thread()});
      }
    }
  }
  return p;
}

std::vector<Truth> ParseTruth(const std::string& out) {
  std::vector<Truth> v;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream l(line);
    Truth t;
    l >> t.kind;
    if (t.kind == "R") {
      std::string tag;
      l >> tag >> t.b0 >> t.a0 >> t.b1 >> t.a1;
    } else if (t.kind == "M") {
      l >> t.b0 >> t.a0;
    } else {
      continue;
    }
    std::getline(l, t.msg);
    if (!t.msg.empty() && t.msg[0] == ' ') t.msg.erase(0, 1);
    v.push_back(t);
  }
  return v;
}

std::string RunDemo(const std::string& outdir, const std::string& extra_env) {
  const std::string cmd = "LD_PRELOAD=" + Runfile("agent/hooks/nvtx/libprofagent_nvtx_test.so") +
                          " PROFAGENT_OUTPUT=" + outdir + " " + extra_env + " " +
                          Runfile("agent/hooks/nvtx/nvtx_demo") + " " +
                          Runfile("agent/hooks/nvtx/libnvtx_plugin.so");
  FILE* f = popen(cmd.c_str(), "r");
  REQUIRE(f != nullptr);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), f)) > 0) out.append(buf, n);
  REQUIRE(pclose(f) == 0);
  return out;
}

std::string OnlyPbFile(const std::string& dir) {
  std::vector<std::string> pbs;
  for (const auto& n : profagent::testing::ListDir(dir)) {
    if (n.size() > 3 && n.compare(n.size() - 3, 3, ".pb") == 0) pbs.push_back(n);
  }
  REQUIRE(pbs.size() == 1);
  return dir + "/" + pbs[0];
}

TEST_CASE("every NVTX range of an unmodified program is recorded with the right data") {
  const std::string dir = profagent::testing::MakeTempDir("nvtx_e2e");
  REQUIRE(!dir.empty());
  const std::vector<Truth> truth = ParseTruth(RunDemo(dir, ""));
  // 2 nested + 10 step/sampler + 2 cross-thread + mark + layer + wide + plugin + run
  REQUIRE(truth.size() == 19);
  const Parsed p = ParseFile(OnlyPbFile(dir));
  CHECK(p.footer);

  std::multimap<std::string, const Ev*> ranges;
  std::vector<const Ev*> marks, steps, runs, pushes;
  for (const auto& ev : p.events) {
    switch (ev.e.kind()) {
      case profagent::EV_NVTX_RANGE: ranges.emplace(p.S(ev.e.name()), &ev); break;
      case profagent::EV_NVTX_MARK: marks.push_back(&ev); break;
      case profagent::EV_STEP: steps.push_back(&ev); break;
      case profagent::EV_RUN: runs.push_back(&ev); break;
      case profagent::EV_NVTX_PUSH: pushes.push_back(&ev); break;
      default: break;
    }
  }
  REQUIRE(ranges.size() == 18);
  // nvtxNameOsThread names the track of the thread it names, before or after its first event.
  std::multiset<std::string> names;
  for (const auto& kv : p.thread_names) names.insert(kv.second);
  CHECK(names.count("nvtx-worker") == 1);
  CHECK(names.count("engine-main") == 1);
  for (const auto& ev : p.events) {
    if (ev.e.kind() == profagent::EV_NVTX_RANGE && p.S(ev.e.name()) == "cross-thread") {
      CHECK(p.thread_names.at(ev.thread) == "nvtx-worker");  // ended on the worker
      REQUIRE(ev.e.start_thread() != 0);                     // started on the main thread
      CHECK(p.thread_names.at(ev.e.start_thread()) == "engine-main");
    }
    // Started by a thread with no other event: that thread's, named.
    if (ev.e.kind() == profagent::EV_NVTX_RANGE && p.S(ev.e.name()) == "opened-elsewhere") {
      REQUIRE(ev.e.start_thread() != 0);
      CHECK(ev.e.start_thread() != ev.thread);
      CHECK(p.thread_names.at(ev.e.start_thread()) == "nvtx-scheduler");
    }
    if (ev.e.kind() == profagent::EV_NVTX_MARK) {
      CHECK(p.thread_names.at(ev.thread) == "engine-main");
    }
  }
  // Each printed range matches one recorded range (same message) whose start lies within the
  // start call and whose end within the end call.
  std::map<std::string, int> used;
  int64_t worst_outside = 0;  // how far a recorded time fell outside its true window, at worst
  auto outside = [](int64_t v, int64_t lo, int64_t hi) {
    return v < lo ? lo - v : v > hi ? v - hi : 0;
  };
  for (const Truth& t : truth) {
    if (t.kind != "R") continue;
    INFO("range '" << t.msg << "'");
    auto span = ranges.equal_range(t.msg);
    REQUIRE(span.first != span.second);
    auto it = span.first;
    std::advance(it, used[t.msg]++);  // same message: recorded in end order, printed likewise
    REQUIRE(it != span.second);
    const Ev& ev = *it->second;
    const int64_t end = ev.start + int64_t(ev.e.dur());
    CHECK(ev.start >= t.b0 - kTolNs);
    CHECK(ev.start <= t.a0 + kTolNs);
    CHECK(end >= t.b1 - kTolNs);
    CHECK(end <= t.a1 + kTolNs);
    worst_outside = std::max({worst_outside, outside(ev.start, t.b0, t.a0),
                              outside(end, t.b1, t.a1)});
  }
  printf("nvtx_e2e: %zu ranges checked; worst recorded time outside its true window: %lld ns "
         "(tolerance %lld ns)\n",
         ranges.size(), (long long)worst_outside, (long long)kTolNs);
  auto one = [&](const std::string& m) -> const profagent::Event& {
    REQUIRE(ranges.count(m) == 1);
    return ranges.find(m)->second->e;
  };
  // Nesting: run (0) > outer (1) > inner (2); steps (1) > sampler (2).
  CHECK(one("run label=demo").depth() == 0);
  CHECK(one("outer").depth() == 1);
  CHECK(one("inner").depth() == 2);
  for (auto it = ranges.lower_bound("sampler"); it != ranges.upper_bound("sampler"); ++it) {
    CHECK(it->second->e.depth() == 2);
  }
  // Domain, registered string, payload, color, category.
  const profagent::Event& layer = one("layer 3");
  CHECK(p.S(layer.domain()) == "engine");
  CHECK(layer.category() == 7);
  CHECK(layer.color() == 0xFF336699u);
  CHECK(layer.has_payload());
  CHECK(layer.payload_f() == 1.5);
  const profagent::Event& wide = one("wide \xe2\x9c\x93");
  CHECK(wide.domain() == 0);
  CHECK(wide.payload_i() == -42);
  CHECK(wide.depth() == 1);
  // The dlopened library's own NVTX instance reached the injection too.
  CHECK(one("plugin range").depth() == 1);
  // Only the start/end range says so (the analyzer gives those tracks of their own).
  for (const auto& kv : ranges) {
    CHECK(kv.second->e.start_end() ==
          (kv.first == "cross-thread" || kv.first == "opened-elsewhere"));
  }
  // The cross-thread range was ended on another thread: recorded there.
  const Ev& cross = *ranges.find("cross-thread")->second;
  const Ev& outer = *ranges.find("outer")->second;
  CHECK(cross.thread != outer.thread);
  // Mark.
  REQUIRE(marks.size() == 1);
  CHECK(p.S(marks[0]->e.name()) == "checkpoint");
  CHECK(marks[0]->start >= truth[14].b0 - kTolNs);
  CHECK(marks[0]->start <= truth[14].a0 + kTolNs);
  // Steps: five, parsed, in the run, with the times of their ranges.
  REQUIRE(steps.size() == 5);
  auto step_range = ranges.lower_bound("step phase=decode tokens=8 kv=100,300 bsz=2");
  for (size_t i = 0; i < steps.size(); ++i, ++step_range) {
    const profagent::StepInfo& s = steps[i]->e.step();
    CHECK(s.index() == i);
    CHECK(s.tokens() == 8);
    CHECK(s.kv() == 200);  // mean of 100 and 300 (PROFAGENT_KV_REDUCE default)
    CHECK(s.bsz() == 2);
    CHECK(p.S(s.phase()) == "decode");
    CHECK(p.S(s.source()) == "nvtx");
    CHECK(s.run() == 1);
    CHECK(steps[i]->start == step_range->second->start);
    CHECK(steps[i]->e.dur() == step_range->second->e.dur());
  }
  REQUIRE(runs.size() == 1);
  CHECK(runs[0]->e.step().index() == 1);
  CHECK(p.S(runs[0]->e.step().label()) == "demo");
  CHECK(runs[0]->start == ranges.find("run label=demo")->second->start);
  // The range left open at exit.
  REQUIRE(pushes.size() == 1);
  CHECK(p.S(pushes[0]->e.name()) == "left open");
}

TEST_CASE("the schedule records only the active steps, and KV reduction is configurable") {
  const std::string dir = profagent::testing::MakeTempDir("nvtx_e2e_sched");
  REQUIRE(!dir.empty());
  RunDemo(dir, "PROFAGENT_SCHEDULE=wait=1,warmup=1,active=2,repeat=1 PROFAGENT_KV_REDUCE=max");
  const Parsed p = ParseFile(OnlyPbFile(dir));
  std::vector<uint64_t> step_index;
  std::set<std::string> ranges;
  int samplers = 0;
  for (const auto& ev : p.events) {
    if (ev.e.kind() == profagent::EV_STEP) {
      step_index.push_back(ev.e.step().index());
      CHECK(ev.e.step().kv() == 300);
    }
    if (ev.e.kind() == profagent::EV_NVTX_RANGE && p.S(ev.e.name()) == "sampler") ++samplers;
    if (ev.e.kind() == profagent::EV_NVTX_RANGE) ranges.insert(p.S(ev.e.name()));
  }
  // Steps 0 (wait) and 1 (warm-up) are skipped, 2 and 3 recorded, then the schedule is done.
  CHECK(step_index == std::vector<uint64_t>{2, 3});
  CHECK(samplers == 2);
  // The run range, opened before the schedule's first active step and closed after its last,
  // holds recorded steps: it is recorded (ops.csv paths and runs need it). Ranges wholly
  // outside the active steps (before: outer, inner; after: the domain's range) are not.
  CHECK(ranges.count("run label=demo") == 1);
  CHECK(ranges.count("outer") == 0);
  CHECK(ranges.count("inner") == 0);
  CHECK(ranges.count("layer 3") == 0);
}

// A process whose only act is an open range (an orchestrator's `run`), stopped by SIGTERM: its
// file holds the range, open, and a footer (before: the thread registered at its first pop, so
// no writer and no handler existed, and the process left no file at all).
TEST_CASE("a process with only an open range, stopped by SIGTERM, writes it") {
  const std::string dir = profagent::testing::MakeTempDir("nvtx_e2e_orchestrator");
  REQUIRE(!dir.empty());
  int out[2];
  REQUIRE(pipe(out) == 0);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    dup2(out[1], 1);
    close(out[0]);
    setenv("LD_PRELOAD", Runfile("agent/hooks/nvtx/libprofagent_nvtx_test.so").c_str(), 1);
    setenv("PROFAGENT_OUTPUT", dir.c_str(), 1);
    const std::string prog = Runfile("agent/hooks/nvtx/nvtx_orchestrator");
    execl(prog.c_str(), prog.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  close(out[1]);
  char line[16] = {};
  REQUIRE(read(out[0], line, 6) == 6);  // "ready\n"
  close(out[0]);
  usleep(50000);
  kill(pid, SIGTERM);
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGTERM);
  const Parsed p = ParseFile(OnlyPbFile(dir));
  CHECK(p.footer);
  size_t open_runs = 0;
  for (const auto& e : p.events) {
    if (e.e.kind() == profagent::EV_NVTX_PUSH) {
      auto it = p.strings.find(e.e.name());
      open_runs += it != p.strings.end() && it->second == "run label=orchestrate";
    }
  }
  CHECK(open_runs == 1);
}

// Another NVTX injection library loaded first, exporting InitializeInjectionNvtx2 as the agent
// does: the agent still points NVTX_INJECTION64_PATH at itself (before, at the first library
// that exported the symbol: its steps were lost).
TEST_CASE(
    "another library exporting InitializeInjectionNvtx2 loaded first: NVTX still reaches "
    "the agent") {
  const std::string dir = profagent::testing::MakeTempDir("nvtx_e2e_other_tool");
  REQUIRE(!dir.empty());
  RunDemo(dir, "LD_PRELOAD=" + Runfile("agent/hooks/nvtx/libfake_nvtx_tool.so") + ":" +
                   Runfile("agent/hooks/nvtx/libprofagent_nvtx_test.so"));
  const Parsed p = ParseFile(OnlyPbFile(dir));
  int steps = 0;
  for (const auto& ev : p.events) steps += ev.e.kind() == profagent::EV_STEP;
  CHECK(steps == 5);
}

TEST_CASE("PROFAGENT_ENABLE=0: no injection, no file, same program output") {
  const std::string dir = profagent::testing::MakeTempDir("nvtx_e2e_off");
  REQUIRE(!dir.empty());
  const std::string out = RunDemo(dir, "PROFAGENT_ENABLE=0");
  CHECK(ParseTruth(out).size() == 19);
  CHECK(profagent::testing::ListDir(dir).empty());
}

}  // namespace
