// In-process tests of the NVTX surface: a program calling the real NVTX v3 API (CUDA 13 headers),
// injected statically (static_injection_for_test.cc), recording into the fake core. Checks every
// captured event against what the program did and the times it read around each call.
#include <nvtx3/nvToolsExt.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "agent/core/agent.h"
#include "agent/core/clock.h"
#include "agent/hooks/nvtx/nvtx_hooks.h"
#include "agent/model/steps.h"
#include "agent/model/testing/fake_core.h"

namespace profagent {
namespace nvtx {
namespace {

void Fresh(const Config& c = Config()) {
  fake::Reset(c);
  model::ResetForTest(c);
}

nvtxEventAttributes_t Attr(const char* msg) {
  nvtxEventAttributes_t a;
  std::memset(&a, 0, sizeof(a));
  a.version = NVTX_VERSION;
  a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  a.messageType = NVTX_MESSAGE_TYPE_ASCII;
  a.message.ascii = msg;
  return a;
}

TEST_CASE("the injection installs handlers") {
  Fresh();
  nvtxMarkA("hello");  // the first NVTX call initializes the injection
  CHECK(GetStats().inits >= 1);
  auto marks = fake::EventsOfType(EvType::kNvtxMark);
  REQUIRE(marks.size() == 1);
  CHECK(marks[0].bytes == "hello");
  CHECK(marks[0].e.t0 == marks[0].e.t1);
}

TEST_CASE("nested push/pop: messages, depth, return levels and true time bounds") {
  Fresh();
  const uint64_t a0 = Now();
  CHECK(nvtxRangePushA("outer") == 0);
  const uint64_t b0 = Now();
  CHECK(nvtxRangePushA("inner") == 1);
  const uint64_t b1 = Now();
  CHECK(nvtxRangePop() == 1);
  const uint64_t a1 = Now();
  CHECK(nvtxRangePop() == 0);
  const uint64_t a2 = Now();
  auto r = fake::EventsOfType(EvType::kNvtxRange);
  REQUIRE(r.size() == 2);
  CHECK(r[0].bytes == "inner");
  CHECK(r[0].e.nvtx.depth == 1);
  CHECK(r[0].e.t0 >= b0);
  CHECK(r[0].e.t0 <= b1);
  CHECK(r[0].e.t1 >= b1);
  CHECK(r[0].e.t1 <= a1);
  CHECK(r[1].bytes == "outer");
  CHECK(r[1].e.nvtx.depth == 0);
  CHECK(r[1].e.t0 >= a0);
  CHECK(r[1].e.t0 <= b0);
  CHECK(r[1].e.t1 >= a1);
  CHECK(r[1].e.t1 <= a2);
  CHECK(r[1].e.nvtx.domain == 0);
  CHECK(r[1].e.nvtx.name == 0);
  CHECK((r[1].e.flags & kFlagHasPayload) == 0);
}

TEST_CASE("event attributes: color, category and every payload type") {
  Fresh();
  struct Case {
    int32_t type;
    bool is_double;
    int64_t i;
    double f;
  } cases[] = {
      {NVTX_PAYLOAD_TYPE_UNSIGNED_INT64, false, 1ll << 40, 0},
      {NVTX_PAYLOAD_TYPE_INT64, false, -5, 0},
      {NVTX_PAYLOAD_TYPE_UNSIGNED_INT32, false, 4000000000ll, 0},
      {NVTX_PAYLOAD_TYPE_INT32, false, -7, 0},
      {NVTX_PAYLOAD_TYPE_DOUBLE, true, 0, 2.5},
      {NVTX_PAYLOAD_TYPE_FLOAT, true, 0, 0.25},
  };
  for (const Case& c : cases) {
    nvtxEventAttributes_t a = Attr("attr");
    a.category = 9;
    a.colorType = NVTX_COLOR_ARGB;
    a.color = 0xFF00FF00u;
    a.payloadType = c.type;
    switch (c.type) {
      case NVTX_PAYLOAD_TYPE_UNSIGNED_INT64: a.payload.ullValue = uint64_t(c.i); break;
      case NVTX_PAYLOAD_TYPE_INT64: a.payload.llValue = c.i; break;
      case NVTX_PAYLOAD_TYPE_UNSIGNED_INT32: a.payload.uiValue = uint32_t(c.i); break;
      case NVTX_PAYLOAD_TYPE_INT32: a.payload.iValue = int32_t(c.i); break;
      case NVTX_PAYLOAD_TYPE_DOUBLE: a.payload.dValue = c.f; break;
      case NVTX_PAYLOAD_TYPE_FLOAT: a.payload.fValue = float(c.f); break;
    }
    nvtxRangePushEx(&a);
    nvtxRangePop();
  }
  // An unsigned 64-bit payload of 2^63 or more is a double (the file's integer is signed:
  // before, it read as a negative number).
  nvtxEventAttributes_t big = Attr("attr");
  big.payloadType = NVTX_PAYLOAD_TYPE_UNSIGNED_INT64;
  big.payload.ullValue = (1ull << 63) + (1ull << 62);
  nvtxRangePushEx(&big);
  nvtxRangePop();
  auto r = fake::EventsOfType(EvType::kNvtxRange);
  REQUIRE(r.size() == 7);
  CHECK((r[6].e.flags & kFlagPayloadDouble) != 0);
  CHECK(r[6].e.nvtx.payload.f == double((1ull << 63) + (1ull << 62)));
  r.pop_back();
  for (size_t k = 0; k < r.size(); ++k) {
    INFO("case " << k);
    CHECK(r[k].bytes == "attr");
    CHECK(r[k].e.nvtx.category == 9);
    CHECK(r[k].e.nvtx.color == 0xFF00FF00u);
    CHECK((r[k].e.flags & kFlagHasPayload) != 0);
    CHECK(((r[k].e.flags & kFlagPayloadDouble) != 0) == cases[k].is_double);
    if (cases[k].is_double) {
      CHECK(r[k].e.nvtx.payload.f == cases[k].f);
    } else {
      CHECK(r[k].e.nvtx.payload.i == cases[k].i);
    }
  }
}

TEST_CASE("wide strings are converted to UTF-8") {
  Fresh();
  nvtxRangePushW(L"h\u00e9llo \u2713 \U0001D11E");
  nvtxRangePop();
  nvtxMarkW(L"w-mark");
  auto r = fake::EventsOfType(EvType::kNvtxRange);
  REQUIRE(r.size() == 1);
  CHECK(r[0].bytes == "h\xc3\xa9llo \xe2\x9c\x93 \xf0\x9d\x84\x9e");
  CHECK((r[0].e.flags & kFlagMessageWide) != 0);
  auto m = fake::EventsOfType(EvType::kNvtxMark);
  REQUIRE(m.size() == 1);
  CHECK(m[0].bytes == "w-mark");
}

// A step message for a batch of 64 sequences (kv list) runs past the inline buffer: kept whole
// up to kMaxLongMessageBytes - 1 (before: cut at 255 bytes, so tokens= and most kv values after
// the cut were lost), as push/pop, start/end and marks, ASCII and wide.
TEST_CASE("long messages are kept up to kMaxLongMessageBytes - 1") {
  Fresh();
  std::string kv = "step tokens=64 kv=";
  for (int i = 0; i < 64; ++i) kv += std::to_string(2000 + i) + (i < 63 ? "," : "");
  REQUIRE(kv.size() > kMaxMessageBytes);
  // A batch of 512 sequences with 5-digit KV lengths, tokens= after the list: 3 KB.
  std::string batch = "step phase=decode kv=";
  for (int i = 0; i < 512; ++i) batch += std::to_string(10000 + i) + (i < 511 ? "," : "");
  batch += " bsz=512 tokens=512";
  REQUIRE(batch.size() > 3000);
  const std::string big(20000, 'x');
  nvtxRangePushA(kv.c_str());
  nvtxRangePop();
  nvtxRangePushA(big.c_str());
  nvtxRangePop();
  nvtxRangeEnd(nvtxRangeStartA(kv.c_str()));
  nvtxRangePushA(batch.c_str());
  nvtxRangePop();
  std::wstring wide(300, L'w');
  nvtxMarkW(wide.c_str());
  auto r = fake::EventsOfType(EvType::kNvtxRange);
  REQUIRE(r.size() == 4);
  CHECK(r[0].bytes == kv);
  CHECK(r[1].bytes == std::string(kMaxLongMessageBytes - 1, 'x'));
  CHECK(r[2].bytes == kv);
  CHECK(r[3].bytes == batch);
  auto m = fake::EventsOfType(EvType::kNvtxMark);
  REQUIRE(m.size() == 1);
  CHECK(m[0].bytes == std::string(300, 'w'));
  // The model saw the whole messages: 64 tokens, the mean of the 64 KV lengths; 512 tokens and
  // the mean of all 512 KV lengths.
  auto steps = fake::EventsOfType(EvType::kStep);
  REQUIRE(steps.size() == 3);
  CHECK(steps[0].e.step.tokens == 64);
  CHECK(steps[0].e.step.kv == 2032);  // mean of 2000..2063, 2031.5, rounded
  CHECK(steps[2].e.step.tokens == 512);
  CHECK(steps[2].e.step.bsz == 512);
  CHECK(steps[2].e.step.kv == 10256);  // mean of 10000..10511, 10255.5, rounded
  // A step message cut inside its kv list: the partial last word is not parsed (before, a value
  // 50000 cut to "50" entered the mean silently); the words before the cut count.
  std::string cut = "step tokens=3 kv=";
  for (int i = 0; i < 3000; ++i) cut += "50000,";
  REQUIRE(cut.size() > kMaxLongMessageBytes);
  nvtxRangePushA(cut.c_str());
  nvtxRangePop();
  steps = fake::EventsOfType(EvType::kStep);
  REQUIRE(steps.size() == 4);
  CHECK(steps[3].e.step.tokens == 3);
  CHECK(steps[3].e.step.kv == -1);
  // The cut messages are counted, in a note at shutdown (before, only a step's "bad value" said
  // anything, and only when the cut fell in a kv list right after a comma).
  FlushOpenRanges();
  size_t cut_notes = 0;
  for (const std::string& n : fake::Notes()) {
    cut_notes += n.find("messages longer than 16383 bytes were cut there") != std::string::npos;
  }
  CHECK(cut_notes == 1);
}

TEST_CASE("domains and registered strings") {
  Fresh();
  nvtxDomainHandle_t d = nvtxDomainCreateA("engine");
  REQUIRE(d != nullptr);
  CHECK(nvtxDomainCreateA("engine") == d);  // same name, same handle
  nvtxDomainHandle_t dw = nvtxDomainCreateW(L"wide-dom\u00e9");
  nvtxStringHandle_t s = nvtxDomainRegisterStringA(d, "registered message");
  nvtxStringHandle_t sw = nvtxDomainRegisterStringW(d, L"wide registered");
  REQUIRE(s != nullptr);
  REQUIRE(sw != nullptr);

  nvtxEventAttributes_t a = Attr(nullptr);
  a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
  a.message.registered = s;
  CHECK(nvtxDomainRangePushEx(d, &a) == 0);
  nvtxEventAttributes_t b = Attr("plain in dom");
  CHECK(nvtxDomainRangePushEx(dw, &b) == 1);
  CHECK(nvtxDomainRangePop(dw) == 1);
  CHECK(nvtxDomainRangePop(d) == 0);
  a.message.registered = sw;
  nvtxDomainMarkEx(d, &a);

  auto r = fake::EventsOfType(EvType::kNvtxRange);
  REQUIRE(r.size() == 2);
  CHECK(r[0].bytes == "plain in dom");
  CHECK(fake::StringOf(uint32_t(r[0].e.nvtx.domain)) == "wide-dom\xc3\xa9");
  CHECK(r[1].bytes.empty());  // registered: by id, no bytes
  CHECK(fake::StringOf(r[1].e.nvtx.name) == "registered message");
  CHECK(fake::StringOf(uint32_t(r[1].e.nvtx.domain)) == "engine");
  auto m = fake::EventsOfType(EvType::kNvtxMark);
  REQUIRE(m.size() == 1);
  CHECK(fake::StringOf(m[0].e.nvtx.name) == "wide registered");
}

TEST_CASE("a domain pop ends the innermost range of that domain, even out of order") {
  Fresh();
  nvtxDomainHandle_t d = nvtxDomainCreateA("other");
  nvtxRangePushA("default-1");
  nvtxEventAttributes_t a = Attr("dom-1");
  nvtxDomainRangePushEx(d, &a);
  CHECK(nvtxRangePop() == 0);  // ends default-1, below dom-1
  nvtxRangePushA("default-2");
  CHECK(nvtxDomainRangePop(d) == 0);  // dom-1 is now at the bottom
  CHECK(nvtxRangePop() == 0);
  CHECK(nvtxRangePop() < 0);  // nothing open
  auto r = fake::EventsOfType(EvType::kNvtxRange);
  REQUIRE(r.size() == 3);
  CHECK(r[0].bytes == "default-1");
  CHECK(r[1].bytes == "dom-1");
  CHECK(r[2].bytes == "default-2");
  CHECK(GetStats().unmatched_pops >= 1);
}

TEST_CASE("start/end ranges may end on another thread") {
  Fresh();
  const uint64_t t_before = Now();
  nvtxRangeId_t id = nvtxRangeStartA("cross-thread");
  nvtxEventAttributes_t a = Attr("started-ex");
  a.payloadType = NVTX_PAYLOAD_TYPE_INT64;
  a.payload.llValue = 42;
  nvtxRangeId_t id2 = nvtxRangeStartEx(&a);
  nvtxRangeId_t id3 = nvtxRangeStartW(L"wide-start");
  CHECK(id != id2);
  uint64_t t_end_before = 0, t_end_after = 0;
  std::thread th([&] {
    t_end_before = Now();
    nvtxRangeEnd(id);
    t_end_after = Now();
    nvtxRangeEnd(id3);
  });
  th.join();
  nvtxRangeEnd(id2);
  nvtxRangeEnd(123456789);  // unknown id: ignored, counted
  auto r = fake::EventsOfType(EvType::kNvtxRange);
  REQUIRE(r.size() == 3);
  CHECK(r[0].bytes == "cross-thread");
  CHECK(r[0].e.t0 >= t_before);
  CHECK(r[0].e.t1 >= t_end_before);
  CHECK(r[0].e.t1 <= t_end_after);
  CHECK(r[1].bytes == "wide-start");
  CHECK(r[2].bytes == "started-ex");
  CHECK(r[2].e.nvtx.payload.i == 42);
  for (const auto& x : r) CHECK(x.e.nvtx.depth == kNvtxStartEnd);  // not push/pop
  CHECK(GetStats().unknown_ends >= 1);
}

TEST_CASE("many concurrent start/end ranges on several threads") {
  Fresh();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([] {
      for (int i = 0; i < 500; ++i) {
        nvtxRangeId_t a = nvtxRangeStartA("a");
        nvtxRangeId_t b = nvtxRangeStartA("b");
        nvtxRangeEnd(a);
        nvtxRangeEnd(b);
        nvtxRangePushA("p");
        nvtxRangePop();
      }
    });
  }
  for (auto& th : threads) th.join();
  auto r = fake::EventsOfType(EvType::kNvtxRange);
  size_t a = 0, b = 0, p = 0;
  for (const auto& c : r) {
    a += c.bytes == "a";
    b += c.bytes == "b";
    p += c.bytes == "p";
    CHECK(c.e.t1 >= c.e.t0);
  }
  CHECK(a == 2000);
  CHECK(b == 2000);
  CHECK(p == 2000);
}

TEST_CASE("step and run ranges reach the model") {
  Fresh();
  nvtxRangePushA("run label=bench");
  for (int i = 0; i < 3; ++i) {
    nvtxRangePushA("step phase=decode tokens=8 kv=10,20,30 bsz=8");
    nvtxRangePushA("sampler");
    nvtxRangePop();
    nvtxRangePop();
  }
  nvtxRangePop();
  auto steps = fake::EventsOfType(EvType::kStep);
  REQUIRE(steps.size() == 3);
  auto ranges = fake::EventsOfType(EvType::kNvtxRange);
  REQUIRE(ranges.size() == 7);
  for (size_t i = 0; i < 3; ++i) {
    CHECK(steps[i].e.step.index == i);
    CHECK(steps[i].e.step.run == 1);
    CHECK(steps[i].e.step.tokens == 8);
    CHECK(steps[i].e.step.kv == 20);
    CHECK(steps[i].e.step.bsz == 8);
    // The step's times are those of its NVTX range.
    CHECK(steps[i].e.t0 == ranges[2 * i + 1].e.t0);
    CHECK(steps[i].e.t1 == ranges[2 * i + 1].e.t1);
  }
  auto runs = fake::EventsOfType(EvType::kRun);
  REQUIRE(runs.size() == 1);
  CHECK(fake::StringOf(runs[0].e.step.label) == "bench");
  CHECK(runs[0].e.t0 == ranges[6].e.t0);
}

TEST_CASE("ranges are tracked while the schedule is inactive; only active steps are emitted") {
  Config c;
  c.schedule_set = true;
  c.sched_wait = 1;
  c.sched_active = 1;
  c.sched_repeat = 1;
  Fresh(c);
  REQUIRE_FALSE(Recording());
  nvtxRangePushA("step tokens=1");  // step 0: wait
  nvtxRangePushA("inside-0");
  nvtxRangePop();
  nvtxRangePop();
  REQUIRE(Recording());
  nvtxRangePushA("step tokens=2");  // step 1: active
  nvtxRangePushA("inside-1");
  nvtxRangePop();
  nvtxRangePop();
  REQUIRE_FALSE(Recording());
  nvtxMarkA("after");
  auto r = fake::EventsOfType(EvType::kNvtxRange);
  REQUIRE(r.size() == 2);
  CHECK(r[0].bytes == "inside-1");
  CHECK(r[1].bytes == "step tokens=2");
  auto steps = fake::EventsOfType(EvType::kStep);
  REQUIRE(steps.size() == 1);
  CHECK(steps[0].e.step.index == 1);
  CHECK(steps[0].e.step.tokens == 2);
  CHECK(fake::EventsOfType(EvType::kNvtxMark).empty());
  Fresh();
}

TEST_CASE("pushes deeper than kMaxDepth are counted and their pops matched") {
  Fresh();
  const uint64_t before = GetStats().depth_overflow;
  const int n = kMaxDepth + 6;
  for (int i = 0; i < n; ++i) nvtxRangePushA(("level " + std::to_string(i)).c_str());
  for (int i = 0; i < n; ++i) nvtxRangePop();
  CHECK(nvtxRangePop() < 0);
  CHECK(GetStats().depth_overflow - before == 6);
  auto r = fake::EventsOfType(EvType::kNvtxRange);
  REQUIRE(r.size() == size_t(kMaxDepth));
  for (int k = 0; k < kMaxDepth; ++k) {
    CHECK(r[size_t(k)].e.nvtx.depth == uint32_t(kMaxDepth - 1 - k));
    CHECK(r[size_t(k)].bytes == "level " + std::to_string(kMaxDepth - 1 - k));
  }
}

// A server with more requests in flight than the lock-free table holds (each a start/end
// range), and a step inside them: every range is recorded once, with its own text, also those
// kept in the overflow map, whatever the end order; the step is seen. Deep push/pop nesting
// (past the thread's inline stack) keeps its step too, and a note says what was lost.
TEST_CASE("start/end ranges beyond the table and deep push/pop ranges are all recorded") {
  Fresh();
  const int n = int(kStartSlots) * 3;
  std::vector<nvtxRangeId_t> ids;
  for (int i = 0; i < n; ++i) ids.push_back(nvtxRangeStartA(("req " + std::to_string(i)).c_str()));
  CHECK(GetStats().start_table_full > 0);
  nvtxRangePushA("step tokens=3");
  nvtxRangePop();
  for (int i = n - 1; i >= 0; i -= 2) nvtxRangeEnd(ids[size_t(i)]);  // odd ones, newest first
  for (int i = 0; i < n; i += 2) nvtxRangeEnd(ids[size_t(i)]);
  auto r = fake::EventsOfType(EvType::kNvtxRange);
  std::set<std::string> seen;
  for (const auto& x : r) seen.insert(x.bytes);
  CHECK(r.size() == size_t(n) + 1);
  CHECK(seen.size() == size_t(n) + 1);
  CHECK(seen.count("req 0") == 1);
  CHECK(seen.count("req " + std::to_string(n - 1)) == 1);
  CHECK(fake::EventsOfType(EvType::kStep).size() == 1);
  FlushOpenRanges();
  CHECK(fake::EventsOfType(EvType::kNvtxPush).empty());  // nothing left open

  Fresh();
  const int deep = 200;  // past kInlineDepth: the stack grows
  for (int i = 0; i < deep; ++i) nvtxRangePushA(("level " + std::to_string(i)).c_str());
  nvtxRangePushA("step tokens=5");
  nvtxRangePop();
  for (int i = 0; i < deep; ++i) nvtxRangePop();
  auto d = fake::EventsOfType(EvType::kNvtxRange);
  REQUIRE(d.size() == size_t(deep) + 1);
  CHECK(d[0].e.nvtx.depth == uint32_t(deep));
  CHECK(d.back().bytes == "level 0");
  auto steps = fake::EventsOfType(EvType::kStep);
  REQUIRE(steps.size() == 1);
  CHECK(steps[0].e.step.tokens == 5);
}

TEST_CASE("a note says how many ranges nested too deep were not recorded") {
  Fresh();
  const uint64_t before = GetStats().depth_overflow;
  for (int i = 0; i < kMaxDepth + 2; ++i) nvtxRangePushA("x");
  for (int i = 0; i < kMaxDepth + 2; ++i) nvtxRangePop();
  REQUIRE(GetStats().depth_overflow - before == 2);
  FlushOpenRanges();
  bool noted = false;
  for (const std::string& n : fake::Notes()) {
    noted = noted || n.find("nested deeper than " + std::to_string(kMaxDepth)) != std::string::npos;
  }
  CHECK(noted);
}

TEST_CASE("ranges still open are flushed as kNvtxPush") {
  Fresh();
  std::thread th([] {
    nvtxRangePushA("left open");
    nvtxRangePushA("left open inner");
  });
  th.join();
  nvtxRangeId_t id = nvtxRangeStartA("started, never ended");
  (void)id;
  FlushOpenRanges();
  auto p = fake::EventsOfType(EvType::kNvtxPush);
  REQUIRE(p.size() == 3);
  CHECK(p[0].bytes == "left open");
  CHECK(p[0].e.nvtx.depth == 0);
  CHECK(p[1].bytes == "left open inner");
  CHECK(p[1].e.nvtx.depth == 1);
  CHECK(p[2].bytes == "started, never ended");
  CHECK(p[2].e.nvtx.depth == kNvtxStartEnd);
  CHECK(p[2].e.t1 == p[2].e.t0);
}

TEST_CASE("category names become notes; thread names name the thread") {
  Fresh();
  nvtxNameCategoryA(3, "memory");
  nvtxNameOsThreadA(1234, "worker");
  nvtxNameOsThreadW(1235, L"w\u00e9");
  auto notes = fake::Notes();
  REQUIRE(notes.size() == 3);
  CHECK(notes[0].find("category 3 named 'memory'") != std::string::npos);
  CHECK(notes[1] == "thread name: 1234 worker");
  CHECK(notes[2] == "thread name: 1235 w\xc3\xa9");  // UTF-8
}

}  // namespace
}  // namespace nvtx
}  // namespace profagent
