// Debugging aid for the MPI/NCCL tests: prints what mpi_testutil.h loads from each rank file
// given on the command line (collectives, communicators, clock offsets, rank facts).
#include <cstdio>

#include "tests/integration/mpi_testutil.h"

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const profagent::testing::RankProfile p = profagent::testing::LoadProfile(argv[i]);
    std::printf("%s: rank %d local %d world %d source '%s' footer %d dropped %llu %s\n",
                p.path.c_str(), p.rank, p.local_rank, p.world_size, p.rank_source.c_str(),
                int(p.has_footer), static_cast<unsigned long long>(p.dropped), p.error.c_str());
    for (const auto& kv : p.comms)
      std::printf("  comm %llx lib %d rank %d size %d uid %s parent %llx\n",
                  static_cast<unsigned long long>(kv.first), kv.second.lib(), kv.second.rank(),
                  kv.second.size(), kv.second.unique_id().c_str(),
                  static_cast<unsigned long long>(kv.second.parent()));
    for (const auto& o : p.offsets)
      std::printf("  clock offset %lld ns +- %llu ns (%s, %u rounds)\n",
                  static_cast<long long>(o.offset_ns()),
                  static_cast<unsigned long long>(o.error_ns()), o.method().c_str(), o.rounds());
    size_t shown = 0;
    for (const auto& c : p.colls) {
      if (++shown > 40) break;
      std::printf("  %-26s comm %llx seq %3llu count %6llu bytes %7llu recv %7llu dtype %-10s "
                  "redop %-4s peer %2d grp %llu corr %llu nb %d dur %llu wait %lld\n",
                  c.api.c_str(), static_cast<unsigned long long>(c.comm),
                  static_cast<unsigned long long>(c.seq), static_cast<unsigned long long>(c.count),
                  static_cast<unsigned long long>(c.bytes),
                  static_cast<unsigned long long>(c.recv_bytes), c.dtype.c_str(), c.redop.c_str(),
                  c.peer, static_cast<unsigned long long>(c.group),
                  static_cast<unsigned long long>(c.corr), int(c.nonblocking),
                  static_cast<unsigned long long>(c.end_ns - c.start_ns),
                  c.complete_ns ? static_cast<long long>(c.complete_ns - c.end_ns) : -1ll);
    }
    std::printf("  (%zu collective records)\n", p.colls.size());
    shown = 0;
    for (const auto& d : p.device_ops) {
      if (++shown > 12) break;
      std::printf("  device op %-40s corr %llu start %llu dur %llu\n", d.name.c_str(),
                  static_cast<unsigned long long>(d.corr),
                  static_cast<unsigned long long>(d.start_ns),
                  static_cast<unsigned long long>(d.end_ns - d.start_ns));
    }
    std::printf("  (%zu device ops)\n", p.device_ops.size());
  }
  return 0;
}
