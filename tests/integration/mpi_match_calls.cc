// A plain MPI program (no profiler code), 2 ranks, making the calls whose receives are matched in
// less usual ways, and checking its results itself (MPI_Abort on a wrong one). Run under the
// agent by mpi_match_calls_test, whose expectations follow the call order here. On world, rank 0
// sends rank 1 (S = MPI_Send, tags in parentheses):
//   1. S(1) S(2) S(3): rank 1 takes them with MPI_Mprobe + MPI_Mrecv, MPI_Improbe (polled) +
//      MPI_Imrecv + MPI_Wait, and MPI_Recv.
//   2. Rank 1 posts MPI_Irecv(tag 99), cancels it (MPI_Cancel + MPI_Wait: cancelled), then
//      receives S(4) with MPI_Recv.
//   3. Both: MPI_Sendrecv to the other, receiving from MPI_ANY_SOURCE (MPI_STATUS_IGNORE).
//   4. S(5): rank 1 MPI_Irecv, polls MPI_Request_get_status until complete, then MPI_Wait.
//   5. MPI_Scatter from rank 0 in place (root: MPI_IN_PLACE, recvcount 0, MPI_DATATYPE_NULL) of
//      int[4] per rank; MPI_Alltoallv in place of int[2] per peer (send counts NULL).
//   6. A contiguous type of 2^28 + 1 doubles (2 GiB + 8 bytes) sent to MPI_PROC_NULL (nothing is
//      read).
//   7. MPI_Comm_idup of world (D) (+MPI_Wait), then MPI_Comm_dup of world (E); rank 0 sends on D
//      (tag 7) before the dup, rank 1 receives it after (first uses in different orders); then
//      a barrier on E.
#include <mpi.h>

#include <cstdio>
#include <vector>

#include "tests/integration/mpi_program.h"

using mpi_program::Check;

int main(int argc, char** argv) {
  const mpi_program::World world = mpi_program::Start(&argc, &argv, 2, "mpi_match_calls");
  const int rank = world.rank;
  const MPI_Comm w = MPI_COMM_WORLD;
  const int other = 1 - rank;
  int v[4] = {0, 0, 0, 0};

  // 1. Matched probes.
  if (rank == 0) {
    for (int tag = 1; tag <= 3; ++tag) {
      v[0] = 10 * tag;
      MPI_Send(v, 4, MPI_INT, 1, tag, w);
    }
  } else {
    MPI_Message m;
    MPI_Status st;
    MPI_Mprobe(0, 1, w, &m, &st);
    MPI_Mrecv(v, 4, MPI_INT, &m, MPI_STATUS_IGNORE);
    Check(v[0] == 10, "Mrecv");
    int flag = 0;
    while (!flag) MPI_Improbe(0, 2, w, &flag, &m, MPI_STATUS_IGNORE);
    MPI_Request r;
    MPI_Imrecv(v, 4, MPI_INT, &m, &r);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    Check(v[0] == 20, "Imrecv");
    MPI_Recv(v, 4, MPI_INT, 0, 3, w, MPI_STATUS_IGNORE);
    Check(v[0] == 30, "Recv 3");
  }

  // 2. A cancelled receive.
  if (rank == 0) {
    v[0] = 40;
    MPI_Send(v, 4, MPI_INT, 1, 4, w);
  } else {
    MPI_Request r;
    MPI_Irecv(v, 4, MPI_INT, 0, 99, w, &r);
    MPI_Cancel(&r);
    MPI_Status st;
    MPI_Wait(&r, &st);
    int cancelled = 0;
    MPI_Test_cancelled(&st, &cancelled);
    Check(cancelled == 1, "Cancel");
    MPI_Recv(v, 4, MPI_INT, 0, 4, w, MPI_STATUS_IGNORE);
    Check(v[0] == 40, "Recv 4");
  }

  // 3. Sendrecv from MPI_ANY_SOURCE.
  int out[2] = {rank, rank}, in[2] = {-1, -1};
  MPI_Sendrecv(out, 2, MPI_INT, other, 8, in, 2, MPI_INT, MPI_ANY_SOURCE, 8, w, MPI_STATUS_IGNORE);
  Check(in[0] == other, "Sendrecv");

  // 4. A receive seen complete by MPI_Request_get_status.
  if (rank == 0) {
    v[0] = 50;
    MPI_Send(v, 4, MPI_INT, 1, 5, w);
  } else {
    MPI_Request r;
    MPI_Irecv(v, 4, MPI_INT, 0, 5, w, &r);
    int flag = 0;
    while (!flag) MPI_Request_get_status(r, &flag, MPI_STATUS_IGNORE);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    Check(v[0] == 50, "Request_get_status");
  }

  // 5. In-place Scatter (root) and Alltoallv.
  std::vector<int> sc(8);
  for (int i = 0; i < 8; ++i) sc[i] = 100 + i;
  if (rank == 0) {
    MPI_Scatter(sc.data(), 4, MPI_INT, MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, 0, w);
  } else {
    MPI_Scatter(nullptr, 0, MPI_DATATYPE_NULL, v, 4, MPI_INT, 0, w);
    Check(v[0] == 104 && v[3] == 107, "Scatter");
  }
  int a2a[4] = {rank, rank, rank, rank};
  const int counts[2] = {2, 2}, displs[2] = {0, 2};
  MPI_Alltoallv(MPI_IN_PLACE, nullptr, nullptr, MPI_DATATYPE_NULL, a2a, counts, displs, MPI_INT,
                w);
  Check(a2a[0] == 0 && a2a[2] == 1, "Alltoallv");

  // 6. A datatype of more than 2^31 bytes.
  MPI_Datatype huge;
  MPI_Type_contiguous((1 << 28) + 1, MPI_DOUBLE, &huge);
  MPI_Type_commit(&huge);
  MPI_Send(v, 1, huge, MPI_PROC_NULL, 6, w);  // not read: no destination
  MPI_Type_free(&huge);

  // 7. MPI_Comm_idup, used on rank 0 before the next duplicate exists, on rank 1 after.
  MPI_Comm d, e;
  MPI_Request r;
  MPI_Comm_idup(w, &d, &r);
  MPI_Wait(&r, MPI_STATUS_IGNORE);
  if (rank == 0) {
    v[0] = 70;
    MPI_Send(v, 4, MPI_INT, 1, 7, d);
    MPI_Comm_dup(w, &e);
  } else {
    MPI_Comm_dup(w, &e);
    MPI_Recv(v, 4, MPI_INT, 0, 7, d, MPI_STATUS_IGNORE);
    Check(v[0] == 70, "Recv on idup");
  }
  MPI_Barrier(e);
  MPI_Comm_free(&d);
  MPI_Comm_free(&e);

  MPI_Finalize();
  if (rank == 0) std::printf("mpi_match_calls: all results correct\n");
  return 0;
}
