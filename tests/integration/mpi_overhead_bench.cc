// Per-call overhead of the agent's PMPI wrappers, measured inside one MPI job.
//
// Each rank alternates blocks of MPI_X calls (through the agent's wrapper when libprofagent.so
// is preloaded) and PMPI_X calls (never wrapped) for X = Allreduce of 8 bytes and Barrier, so
// both variants see the same machine load; the per-call time of each variant is the median over
// blocks, and "overhead" is MPI_X minus PMPI_X. Lines ending in " b" run in bursts of 256 calls
// 10 ms apart, so the agent's writer thread drains its ring while the benchmark sleeps: they show
// the wrapper's own latency; the others run back to back (about 10^6 records/s per rank), where
// the writer thread also competes for the CPU. The same on MPI_COMM_SELF isolates the
// wrapper's own cost from inter-process latency. Without the agent both paths are the same
// function and the overhead must be ~0 (the control). Rank 0 prints one line per operation.
//
// Run (2 ranks, same host):
//   mpirun --allow-run-as-root --oversubscribe -np 2 [-x LD_PRELOAD=.../libprofagent.so
//     -x PROFAGENT_OUTPUT=/tmp/bench] mpi_overhead_bench [calls_per_block] [blocks]
#include <mpi.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

double NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// pause_us > 0: sleep between blocks so the agent's writer thread drains the ring while the
// benchmark is idle; the blocks then measure the wrapper's latency on the calling thread alone.
// pause_us == 0: back-to-back calls, which also pay for the writer competing for the CPU.
template <typename Wrapped, typename Direct>
void Measure(const char* name, int calls, int blocks, int rank, Wrapped wrapped, Direct direct,
             int pause_us = 0) {
  std::vector<double> w, d;
  for (int b = 0; b < blocks; ++b) {
    // Alternate which variant goes first, so neither always runs right after the pause.
    for (int k = 0; k < 2; ++k) {
      const bool run_wrapped = (k == 0) == (b % 2 == 0);
      if (pause_us > 0) usleep(pause_us);
      // Both ranks run the same block kind at the same time (collectives): start aligned.
      PMPI_Barrier(MPI_COMM_WORLD);
      const double t0 = NowNs();
      if (run_wrapped) {
        for (int i = 0; i < calls; ++i) wrapped();
        w.push_back((NowNs() - t0) / calls);
      } else {
        for (int i = 0; i < calls; ++i) direct();
        d.push_back((NowNs() - t0) / calls);
      }
    }
  }
  const double mw = Median(w), md = Median(d);
  // Rank 0 reports; the overhead is per call on this rank.
  if (rank == 0)
    std::printf("%-22s MPI_ %9.1f ns/call   PMPI_ %9.1f ns/call   overhead %+8.1f ns/call\n", name,
                mw, md, mw - md);
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, n = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  const int calls = argc > 1 ? std::atoi(argv[1]) : 2000;
  const int blocks = argc > 2 ? std::atoi(argv[2]) : 41;
  const char* preload = std::getenv("LD_PRELOAD");
  if (rank == 0)
    std::printf("mpi_overhead_bench: %d ranks, %d blocks of %d calls, agent %s\n", n, blocks,
                calls, preload && *preload ? "preloaded" : "absent");
  double x = rank + 1.0, y = 0;
  Measure("Allreduce(8 B, sum)", calls, blocks, rank,
          [&] { MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); },
          [&] { PMPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); });
  if (y != n * (n + 1) / 2.0) {
    std::fprintf(stderr, "wrong Allreduce result\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  Measure("Barrier", calls, blocks, rank, [] { MPI_Barrier(MPI_COMM_WORLD); },
          [] { PMPI_Barrier(MPI_COMM_WORLD); });
  Measure("Allreduce(8 B) b", 256, blocks, rank,
          [&] { MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); },
          [&] { PMPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); }, 10000);
  Measure("Barrier b", 256, blocks, rank, [] { MPI_Barrier(MPI_COMM_WORLD); },
          [] { PMPI_Barrier(MPI_COMM_WORLD); }, 10000);
  // The same calls on MPI_COMM_SELF: no peer to wait for, so the wrapper's own cost is not
  // buried in inter-process latency (which is noisy on an oversubscribed host). Sustained
  // (back-to-back, ~10^6 records/s: includes the writer thread's CPU) and in bursts of 256 calls
  // 10 ms apart (the wrapper alone).
  Measure("Allreduce(8 B) SELF", calls * 10, blocks, rank,
          [&] { MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_SELF); },
          [&] { PMPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_SELF); });
  Measure("Barrier SELF", calls * 10, blocks, rank, [] { MPI_Barrier(MPI_COMM_SELF); },
          [] { PMPI_Barrier(MPI_COMM_SELF); });
  Measure("Allreduce(8 B) SELF b", 256, blocks, rank,
          [&] { MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_SELF); },
          [&] { PMPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_SELF); }, 10000);
  Measure("Barrier SELF b", 256, blocks, rank, [] { MPI_Barrier(MPI_COMM_SELF); },
          [] { PMPI_Barrier(MPI_COMM_SELF); }, 10000);
  MPI_Finalize();
  return 0;
}
