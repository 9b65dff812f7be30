// A plain MPI program (no profiler code), 3 ranks, talking across an intercommunicator and
// checking its results itself (MPI_Abort on a wrong one). Run under the agent by
// mpi_intercomm_test, whose expectations follow the call order here.
//
// World splits by rank parity into A = {0, 2} and B = {1}; MPI_Intercomm_create joins them (X).
// On X, in order:
//   1. A's rank 0 (world 0) MPI_Send 4 ints to B's rank 0 (world 1), which MPI_Recv's them.
//   2. A's rank 1 (world 2) MPI_Isend + MPI_Wait 4 ints to B's rank 0, which receives them from
//      MPI_ANY_SOURCE.
//   3. MPI_Bcast of 4 ints from B's rank 0 (MPI_ROOT there; A passes root 0).
//   4. MPI_Allreduce (sum) of 2 ints: each group gets the sum over the other group.
//   5. MPI_Allgather of 1 int: A's ranks receive 1 (B's size), B's receives 2.
//   6. World 1 sleeps 30 ms, then MPI_Barrier on X: world 0 and 2 wait for it.
// Then MPI_Intercomm_merge (B high) gives an intracommunicator M = {0, 2, 1}; an MPI_Barrier on M.
#include <mpi.h>
#include <unistd.h>

#include <cstdio>

#include "tests/integration/mpi_program.h"

using mpi_program::Check;

int main(int argc, char** argv) {
  const mpi_program::World world = mpi_program::Start(&argc, &argv, 3, "mpi_intercomm");
  const int rank = world.rank;
  const bool in_a = rank % 2 == 0;
  MPI_Comm group, x;
  MPI_Comm_split(MPI_COMM_WORLD, in_a ? 0 : 1, rank, &group);
  // Leaders: world 0 for A, world 1 for B.
  MPI_Intercomm_create(group, 0, MPI_COMM_WORLD, in_a ? 1 : 0, 17, &x);
  int flag = 0, rsize = 0, lrank = -1;
  MPI_Comm_test_inter(x, &flag);
  MPI_Comm_remote_size(x, &rsize);
  MPI_Comm_rank(x, &lrank);
  Check(flag == 1 && rsize == (in_a ? 1 : 2), "Comm_test_inter / Comm_remote_size");

  int v[4] = {0, 0, 0, 0};
  // 1 and 2.
  if (rank == 0) {
    v[0] = 100;
    MPI_Send(v, 4, MPI_INT, 0, 1, x);
  } else if (rank == 2) {
    v[0] = 200;
    MPI_Request req;
    MPI_Isend(v, 4, MPI_INT, 0, 2, x, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
  } else {
    MPI_Recv(v, 4, MPI_INT, 0, 1, x, MPI_STATUS_IGNORE);
    Check(v[0] == 100, "Recv from A's rank 0");
    MPI_Status st;
    MPI_Recv(v, 4, MPI_INT, MPI_ANY_SOURCE, 2, x, &st);
    Check(v[0] == 200 && st.MPI_SOURCE == 1, "Recv from ANY_SOURCE");
  }

  // 3. Broadcast from B.
  v[0] = rank == 1 ? 7 : 0;
  MPI_Bcast(v, 4, MPI_INT, in_a ? 0 : MPI_ROOT, x);
  if (in_a) Check(v[0] == 7, "Bcast");

  // 4. Allreduce: A gets B's sum (1), B gets A's (0 + 2).
  int mine[2] = {rank, 1}, sum[2] = {0, 0};
  MPI_Allreduce(mine, sum, 2, MPI_INT, MPI_SUM, x);
  Check(in_a ? (sum[0] == 1 && sum[1] == 1) : (sum[0] == 2 && sum[1] == 2), "Allreduce");

  // 5. Allgather: one int from each remote process.
  int got[2] = {-1, -1};
  MPI_Allgather(&rank, 1, MPI_INT, got, 1, MPI_INT, x);
  Check(in_a ? got[0] == 1 : (got[0] == 0 && got[1] == 2), "Allgather");

  // 6. A late barrier.
  if (rank == 1) usleep(30000);
  MPI_Barrier(x);

  MPI_Comm m;
  MPI_Intercomm_merge(x, in_a ? 0 : 1, &m);
  int mrank = -1;
  MPI_Comm_rank(m, &mrank);
  Check(mrank == (rank == 0 ? 0 : rank == 2 ? 1 : 2), "Intercomm_merge order");
  MPI_Barrier(m);

  MPI_Comm_free(&m);
  MPI_Comm_free(&x);
  MPI_Comm_free(&group);
  if (rank == 0) std::printf("all results correct\n");
  MPI_Finalize();
  return 0;
}
