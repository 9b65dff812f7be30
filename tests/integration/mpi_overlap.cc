// A plain MPI program, 3 ranks, in the post / compute / wait pattern of codes that overlap
// communication with computation. Rank 1 computes kSlowUs longer than the others every
// iteration, after posting and before waiting: the others post on time but then block in their
// waits until rank 1 gets there (MPI progresses the transfers only inside its calls). Phases,
// kIters iterations each:
//   1. MPI_Iallreduce, compute, MPI_Wait.
//   2. A ring exchange: MPI_Irecv from the left, MPI_Isend to the right, compute, MPI_Waitall of
//      both (one wait for two requests).
//   3. The same exchange, completed by polling MPI_Testall.
// Each rank measures the time it spent inside its waits and tests, and in the two barriers
// around the phases (a barrier waits for the last rank to reach it: at start-up that can be
// milliseconds), and prints it as "rank R blocked_us B", the truth the profile's waits are
// checked against.
#include <mpi.h>
#include <time.h>

#include <cstdio>

#include "tests/integration/mpi_program.h"

namespace {

constexpr int kIters = 10;
constexpr double kSlowUs = 3000;

double NowUs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
}

void Compute(double us) {
  const double until = NowUs() + us;
  while (NowUs() < until) {
  }
}

}  // namespace

int main(int argc, char** argv) {
  const mpi_program::World world = mpi_program::Start(&argc, &argv, 3, "mpi_overlap");
  const int rank = world.rank;
  const double work = 200 + (rank == 1 ? kSlowUs : 0);
  double blocked = 0;
  double t_barrier = NowUs();
  MPI_Barrier(MPI_COMM_WORLD);
  blocked += NowUs() - t_barrier;
  for (int i = 0; i < kIters; ++i) {
    int in = rank + i, out = 0;
    MPI_Request r;
    MPI_Iallreduce(&in, &out, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &r);
    Compute(work);
    const double t0 = NowUs();
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    blocked += NowUs() - t0;
    mpi_program::Check(out == 3 + 3 * i, "Iallreduce");
  }
  const int left = (rank + 2) % 3, right = (rank + 1) % 3;
  for (int phase = 2; phase <= 3; ++phase) {
    for (int i = 0; i < kIters; ++i) {
      int send = 100 * rank + i, recv = -1;
      MPI_Request rq[2];
      MPI_Irecv(&recv, 1, MPI_INT, left, phase, MPI_COMM_WORLD, &rq[0]);
      MPI_Isend(&send, 1, MPI_INT, right, phase, MPI_COMM_WORLD, &rq[1]);
      Compute(work);
      const double t0 = NowUs();
      if (phase == 2) {
        MPI_Waitall(2, rq, MPI_STATUSES_IGNORE);
      } else {
        int done = 0;
        while (!done) MPI_Testall(2, rq, &done, MPI_STATUSES_IGNORE);
      }
      blocked += NowUs() - t0;
      mpi_program::Check(recv == 100 * left + i, "ring exchange");
    }
  }
  t_barrier = NowUs();
  MPI_Barrier(MPI_COMM_WORLD);
  blocked += NowUs() - t_barrier;
  std::printf("rank %d blocked_us %.0f\n", rank, blocked);
  MPI_Finalize();
  if (rank == 0) std::printf("all results correct\n");
  return 0;
}
