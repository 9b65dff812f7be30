// Cross-rank clock offsets by ping-pong (the NTP/Cristian estimate, best of N rounds).
//
// A non-zero rank sends a ping to rank 0 at local time t_send; rank 0 answers with its clock
// reading t_remote; the pong arrives at local t_recv. Since t_remote was read between the two
// local readings (on rank 0's clock), with rtt = t_recv - t_send and mid = (t_send + t_recv) / 2:
//   rank0_clock = local_clock + offset,  offset = t_remote - mid,  |error| <= rtt / 2.
// The round with the smallest rtt gives the tightest bound, so EstimateOffset keeps that one.
//
// The protocol is written against a tiny transport (function pointers + context) so it runs over
// PMPI in the agent and over in-process queues in tests. Slow path only: it blocks on messages.
// Not thread-safe per transport; different transports are independent.
#ifndef PROFAGENT_AGENT_HOOKS_MPI_CLOCK_OFFSET_H_
#define PROFAGENT_AGENT_HOOKS_MPI_CLOCK_OFFSET_H_

#include <cstddef>
#include <cstdint>

namespace profagent {

struct PingSample {
  uint64_t t_send;    // local clock when the ping left
  uint64_t t_remote;  // rank 0's clock when it answered
  uint64_t t_recv;    // local clock when the pong arrived
};

struct OffsetEstimate {
  bool valid = false;
  int64_t offset_ns = 0;  // rank0 = local + offset
  uint64_t error_ns = 0;  // half the best round trip
  uint32_t rounds = 0;    // usable samples
};

// Best (minimum round-trip) estimate of `n` samples; samples with t_recv < t_send are ignored.
OffsetEstimate EstimateOffset(const PingSample* samples, size_t n);

struct PingTransport {
  void* ctx;
  bool (*send_u64)(void* ctx, int peer, uint64_t value);  // blocking send to `peer`
  bool (*recv_u64)(void* ctx, int peer, uint64_t* value); // blocking receive from `peer`
  uint64_t (*now_ns)(void* ctx);                          // the clock being aligned
};

constexpr uint32_t kMaxPingRounds = 64;

// Rank 0: answers `rounds` pings from each of ranks 1..world_size-1, one peer after another.
// Returns false on a transport failure (the caller gives up on clock alignment).
bool ServePings(const PingTransport& t, int world_size, uint32_t rounds);

// Any other rank: `rounds` (<= kMaxPingRounds) pings to rank 0, then the estimate.
OffsetEstimate MeasureOffsetToRank0(const PingTransport& t, uint32_t rounds);

}  // namespace profagent

#endif  // PROFAGENT_AGENT_HOOKS_MPI_CLOCK_OFFSET_H_
