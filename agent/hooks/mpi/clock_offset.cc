#include "agent/hooks/mpi/clock_offset.h"

#include <algorithm>

namespace profagent {

OffsetEstimate EstimateOffset(const PingSample* samples, size_t n) {
  OffsetEstimate best;
  uint64_t best_rtt = ~0ull;
  for (size_t i = 0; i < n; ++i) {
    const PingSample& s = samples[i];
    if (s.t_recv < s.t_send) continue;
    ++best.rounds;
    const uint64_t rtt = s.t_recv - s.t_send;
    if (rtt >= best_rtt) continue;
    best_rtt = rtt;
    // mid = t_send + rtt/2 without overflow; offset may be negative.
    const uint64_t mid = s.t_send + rtt / 2;
    best.offset_ns = static_cast<int64_t>(s.t_remote - mid);
    best.error_ns = (rtt + 1) / 2;
    best.valid = true;
  }
  return best;
}

bool ServePings(const PingTransport& t, int world_size, uint32_t rounds) {
  rounds = std::min(rounds, kMaxPingRounds);
  for (int peer = 1; peer < world_size; ++peer) {
    for (uint32_t r = 0; r < rounds; ++r) {
      uint64_t ping = 0;
      if (!t.recv_u64(t.ctx, peer, &ping)) return false;
      if (!t.send_u64(t.ctx, peer, t.now_ns(t.ctx))) return false;
    }
  }
  return true;
}

OffsetEstimate MeasureOffsetToRank0(const PingTransport& t, uint32_t rounds) {
  rounds = std::min(rounds, kMaxPingRounds);
  PingSample samples[kMaxPingRounds];
  uint32_t n = 0;
  for (uint32_t r = 0; r < rounds; ++r) {
    PingSample s;
    s.t_send = t.now_ns(t.ctx);
    if (!t.send_u64(t.ctx, 0, s.t_send)) break;
    if (!t.recv_u64(t.ctx, 0, &s.t_remote)) break;
    s.t_recv = t.now_ns(t.ctx);
    samples[n++] = s;
  }
  if (n < rounds) return OffsetEstimate{};  // the protocol broke: no estimate
  return EstimateOffset(samples, n);
}

}  // namespace profagent
