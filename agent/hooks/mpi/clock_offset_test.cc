#include "agent/hooks/mpi/clock_offset.h"

#include <catch2/catch.hpp>

#include <time.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <random>
#include <thread>

namespace profagent {
namespace {

TEST_CASE("EstimateOffset keeps the round with the smallest round trip") {
  // Hand-computed: rtt 20, mid 110, offset 1060 - 110 = 950, error 10.
  const PingSample s[] = {
      {200, 1170, 260},  // rtt 60
      {100, 1060, 120},  // rtt 20 <- best
      {300, 1300, 340},  // rtt 40
      {500, 0, 400},     // broken (t_recv < t_send): ignored
  };
  OffsetEstimate e = EstimateOffset(s, 4);
  REQUIRE(e.valid);
  CHECK(e.offset_ns == 950);
  CHECK(e.error_ns == 10);
  CHECK(e.rounds == 3);
}

TEST_CASE("EstimateOffset handles a rank 0 clock behind the local one") {
  const PingSample s[] = {{1000000, 400010, 1000030}};  // mid 1000015
  OffsetEstimate e = EstimateOffset(s, 1);
  REQUIRE(e.valid);
  CHECK(e.offset_ns == 400010 - 1000015);
  CHECK(e.error_ns == 15);
  CHECK_FALSE(EstimateOffset(nullptr, 0).valid);
}

// Two "ranks" as threads: rank 0's clock runs `kTrueOffset` ahead of the local one, and every
// message takes a random, asymmetric delay. The estimate must contain the true offset.
uint64_t Mono() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

constexpr int64_t kTrueOffset = 7345678;  // ns

struct Channel {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<uint64_t> q;
};

struct Side {
  Channel* out;
  Channel* in;
  int64_t clock_shift;
  std::mt19937 rng;
  int max_delay_us;
};

bool SendU64(void* ctx, int, uint64_t v) {
  Side* s = static_cast<Side*>(ctx);
  std::uniform_int_distribution<int> d(0, s->max_delay_us);
  std::this_thread::sleep_for(std::chrono::microseconds(d(s->rng)));  // one-way latency
  std::lock_guard<std::mutex> l(s->out->mu);
  s->out->q.push_back(v);
  s->out->cv.notify_one();
  return true;
}

bool RecvU64(void* ctx, int, uint64_t* v) {
  Side* s = static_cast<Side*>(ctx);
  std::unique_lock<std::mutex> l(s->in->mu);
  s->in->cv.wait(l, [&] { return !s->in->q.empty(); });
  *v = s->in->q.front();
  s->in->q.pop_front();
  return true;
}

uint64_t NowNs(void* ctx) { return Mono() + static_cast<Side*>(ctx)->clock_shift; }

TEST_CASE("Ping-pong recovers a known offset within its error bound") {
  Channel to0, from0;
  Side rank0{&from0, &to0, kTrueOffset, std::mt19937(1), 300};
  Side rank1{&to0, &from0, 0, std::mt19937(2), 50};
  PingTransport t0{&rank0, SendU64, RecvU64, NowNs};
  PingTransport t1{&rank1, SendU64, RecvU64, NowNs};
  bool served = false;
  std::thread server([&] { served = ServePings(t0, 2, 16); });
  OffsetEstimate e = MeasureOffsetToRank0(t1, 16);
  server.join();
  REQUIRE(served);
  REQUIRE(e.valid);
  CHECK(e.rounds == 16);
  INFO("offset " << e.offset_ns << " error " << e.error_ns);
  CHECK(std::llabs(e.offset_ns - kTrueOffset) <= int64_t(e.error_ns));
  CHECK(e.error_ns < 5000000);  // best of 16 rounds of <= 350 us one-way delays (+ scheduling)
}

TEST_CASE("Rank 0 serves every peer in turn") {
  // Three peers share one fake link to rank 0 (peer ids are ignored by the fake), served
  // sequentially: 3 x 4 rounds must all be answered.
  Channel to0, from0;
  Side rank0{&from0, &to0, 0, std::mt19937(3), 0};
  Side peer{&to0, &from0, 0, std::mt19937(4), 0};
  PingTransport t0{&rank0, SendU64, RecvU64, NowNs};
  PingTransport tp{&peer, SendU64, RecvU64, NowNs};
  bool served = false;
  std::thread server([&] { served = ServePings(t0, 4, 4); });
  for (int p = 1; p < 4; ++p) {
    OffsetEstimate e = MeasureOffsetToRank0(tp, 4);
    REQUIRE(e.valid);
    CHECK(std::llabs(e.offset_ns) <= int64_t(e.error_ns));  // same clock: |offset| <= rtt/2
  }
  server.join();
  CHECK(served);
}

}  // namespace
}  // namespace profagent
