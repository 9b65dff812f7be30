// The SPSC ring on its own: one producer, one consumer, small capacity so it fills.
#include "agent/core/ring.h"

#include <thread>

#include <catch2/catch.hpp>

namespace profagent {
namespace {

TEST_CASE("ring delivers in order or counts the drop", "[ring]") {
  Ring ring(256);
  constexpr uint64_t kN = 2000000;
  uint64_t dropped = 0;
  std::atomic<bool> done{false};
  std::thread producer([&] {
    for (uint64_t i = 0; i < kN; ++i) {
      RawEvent e{};
      e.t0 = i;
      if (!ring.TryPush(e)) {
        ring.CountDrop();
        ++dropped;
      }
    }
    done.store(true);
  });
  uint64_t received = 0, last = 0;
  bool first = true, in_order = true;
  for (;;) {
    bool fin = done.load();
    uint64_t b = ring.ReadableBegin(), e = ring.ReadableEnd();
    for (uint64_t i = b; i < e; ++i) {
      uint64_t v = ring.At(i).t0;
      if (!first && v <= last) in_order = false;
      last = v;
      first = false;
      ++received;
    }
    ring.Consume(e);
    if (fin && ring.ReadableEnd() == ring.ReadableBegin()) break;
  }
  producer.join();
  CHECK(in_order);
  CHECK(received + dropped == kN);
  CHECK(ring.drops() == dropped);
  CHECK(received > 0);
}

TEST_CASE("a ring reused by a new thread starts over at its first slot", "[ring]") {
  Ring ring(1024);
  for (uint64_t i = 0; i < 600; ++i) {
    RawEvent e{};
    e.t0 = i;
    REQUIRE(ring.TryPush(e));
  }
  ring.Consume(ring.ReadableEnd());
  ring.ResetForReuse();
  CHECK(ring.ReadableBegin() == 0);
  CHECK(ring.ReadableEnd() == 0);
  // The whole capacity fits again, from slot 0 (the pages the first thread touched).
  for (uint64_t i = 0; i < 1024; ++i) {
    RawEvent e{};
    e.t0 = 1000 + i;
    REQUIRE(ring.TryPush(e));
  }
  RawEvent more{};
  CHECK_FALSE(ring.TryPush(more));
  CHECK(ring.At(0).t0 == 1000);
  CHECK(ring.ReadableEnd() == 1024);
}

int g_high_water_calls = 0;
void CountHighWater() { ++g_high_water_calls; }

TEST_CASE("a half-full ring calls the high-water hook once per further quarter", "[ring]") {
  Ring::SetHighWaterHook(&CountHighWater);
  g_high_water_calls = 0;
  Ring ring(64);
  RawEvent e{};
  int calls_at[65];
  for (int i = 0; i < 64; ++i) {
    REQUIRE(ring.TryPush(e));
    calls_at[i + 1] = g_high_water_calls;
  }
  CHECK_FALSE(ring.TryPush(e));  // full
  CHECK(calls_at[31] == 0);      // below half: no call
  CHECK(calls_at[32] == 1);      // the push that fills half
  CHECK(calls_at[47] == 1);
  CHECK(calls_at[48] == 2);      // a quarter later
  CHECK(calls_at[64] == 3);
  // Drained, the next push is below half again: no call until half is reached anew.
  ring.Consume(ring.ReadableEnd());
  const int before = g_high_water_calls;
  for (int i = 0; i < 31; ++i) REQUIRE(ring.TryPush(e));
  CHECK(g_high_water_calls == before);
  REQUIRE(ring.TryPush(e));
  CHECK(g_high_water_calls == before + 1);
  // Multi-slot pushes check too.
  ring.Consume(ring.ReadableEnd());
  REQUIRE(ring.TryPushWithBytes(e, "x", 1, 30));
  CHECK(g_high_water_calls == before + 1);
  REQUIRE(ring.TryPushWithBytes(e, "x", 1, 0));
  CHECK(g_high_water_calls == before + 2);
  Ring::SetHighWaterHook(nullptr);
}

TEST_CASE("multi-slot push is all or nothing and keeps bytes", "[ring]") {
  Ring ring(8);
  RawEvent e{};
  e.type = EvType::kNvtxMark;
  // 180 bytes -> 3 continuation slots of 64 bytes (the last one zero-padded).
  std::string text(180, 'x');
  text[0] = 'A';
  text[179] = 'Z';
  REQUIRE(ring.TryPushWithBytes(e, text.data(), text.size(), 3));
  REQUIRE(ring.TryPushWithBytes(e, text.data(), text.size(), 3));
  // 8 slots hold two 4-slot events: the third does not fit and nothing is written.
  uint64_t end_before = ring.ReadableEnd();
  CHECK_FALSE(ring.TryPushWithBytes(e, text.data(), text.size(), 3));
  CHECK(ring.ReadableEnd() == end_before);
  std::string got;
  for (int k = 0; k < 3; ++k) {
    got.append(reinterpret_cast<const char*>(&ring.At(1 + k)), sizeof(RawEvent));
  }
  CHECK(got.substr(0, 180) == text);
  CHECK(got.substr(180) == std::string(3 * sizeof(RawEvent) - 180, '\0'));
  ring.Consume(4);
  CHECK(ring.TryPushWithBytes(e, text.data(), text.size(), 3));
}

}  // namespace
}  // namespace profagent

#include "agent/core/wire.h"

namespace profagent {
namespace {

TEST_CASE("strings are made valid UTF-8 for proto3", "[wire]") {
  CHECK(wire::ValidUtf8("plain ascii") == "plain ascii");
  CHECK(wire::ValidUtf8("gr\xc3\xbc\xc3\x9f") == "gr\xc3\xbc\xc3\x9f");       // 2-byte
  CHECK(wire::ValidUtf8("\xe2\x82\xac \xf0\x9f\x98\x80") == "\xe2\x82\xac \xf0\x9f\x98\x80");
  CHECK(wire::ValidUtf8("cut \xe2\x82") == "cut ??");                         // truncated
  CHECK(wire::ValidUtf8("\xff\xfe x") == "?? x");
  CHECK(wire::ValidUtf8("\xc0\xaf") == "??");                                 // overlong
  CHECK(wire::ValidUtf8("\xed\xa0\x80") == "???");                            // surrogate
  CHECK(wire::ValidUtf8(std::string("a\0b", 3)) == std::string("a\0b", 3));
}

}  // namespace
}  // namespace profagent
