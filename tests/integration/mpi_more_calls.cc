// A plain MPI program (no profiler code) making the MPI calls mpi_collectives does not: one-sided
// communication, MPI_Alltoallw, receives from MPI_ANY_SOURCE, neighbor collectives on Cartesian
// and distributed-graph topologies, as RMA benchmarks, master/worker and halo codes do. It checks
// every result itself (MPI_Abort on a wrong one). Run under the agent by mpi_more_calls_test,
// whose golden tables follow the call order here.
//
// Collectives on MPI_COMM_WORLD, in order: 0 Win_allocate (window A: int[16]), 1 Win_create
// (window B: double[8]), 2 Barrier, 3 Barrier, 4 Alltoallw, 5 Ialltoallw (+Wait),
// 6 Win_create_dynamic (window C). Per window, in order:
//   A: Fence | Put int[4] to right, Accumulate int[2] sum to right | Fence | Win_lock(right),
//      Fetch_and_op int sum at right, Win_unlock(right) | (Barrier) Win_lock_all,
//      Compare_and_swap at right, Win_flush(right), Get_accumulate (no_op) from right,
//      Win_flush_all, Win_unlock_all | Win_post, Win_start, Put int[1] to right, Win_complete,
//      Win_wait | Win_free
//   B: Fence | Get double[8] from left | Fence | Win_lock(right), Rput double[2] (+Wait),
//      Rget double[1] (+Wait), Win_unlock(right) | (Barrier) Win_lock(self), Win_unlock(self) |
//      Win_free
//   C: Win_free
// Then master/worker point-to-point on a duplicate of world (D): each worker sends rank 0 four
// int[2] messages (tag 5); rank 0 takes the first n-1 with MPI_Recv(MPI_ANY_SOURCE) and
// MPI_STATUS_IGNORE, the next n-1 with MPI_Recv(MPI_ANY_SOURCE) and a status, the next n-1 with
// MPI_Irecv(MPI_ANY_SOURCE) completed by one MPI_Waitall(MPI_STATUSES_IGNORE), and the last from
// each worker by name (MPI_Recv(w)): workers send their last message after a barrier on D, so the
// 3(n-1) receives from MPI_ANY_SOURCE take the first three of every worker, in some order.
// Then neighbor collectives on a periodic 1-D Cartesian ring (E: two neighbors each way, left and
// right) in order: Neighbor_allgather int[3], Neighbor_alltoall int[2] per neighbor,
// Neighbor_allgatherv (int[1] from the left, int[2] from the right), Ineighbor_alltoallv (+Wait:
// int[1] to the left, int[3] to the right), Neighbor_alltoallw (int[1] left, double[1] right); and
// on a distributed graph (F: in from the left, out to the right): Neighbor_alltoall int[4].
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <vector>

#include "tests/integration/mpi_program.h"

using mpi_program::Check;

int main(int argc, char** argv) {
  const mpi_program::World world = mpi_program::Start(&argc, &argv, 0, "mpi_more_calls");
  const int rank = world.rank, n = world.size;
  const int right = (rank + 1) % n, left = (rank - 1 + n) % n;
  MPI_Comm w = MPI_COMM_WORLD;

  int* a = nullptr;
  MPI_Win wa, wb, wc;
  MPI_Win_allocate(16 * sizeof(int), sizeof(int), MPI_INFO_NULL, w, &a, &wa);
  for (int i = 0; i < 16; ++i) a[i] = 0;
  std::vector<double> b(8);
  for (int i = 0; i < 8; ++i) b[i] = rank * 10 + i;
  MPI_Win_create(b.data(), 8 * sizeof(double), sizeof(double), MPI_INFO_NULL, w, &wb);

  // Active target, fences: put to the right neighbour, accumulate into it.
  MPI_Win_fence(MPI_MODE_NOPRECEDE, wa);
  int four[4] = {rank, rank, rank, rank}, ones[2] = {1, 1};
  MPI_Put(four, 4, MPI_INT, right, 0, 4, MPI_INT, wa);
  MPI_Accumulate(ones, 2, MPI_INT, right, 4, 2, MPI_INT, MPI_SUM, wa);
  MPI_Win_fence(MPI_MODE_NOSUCCEED, wa);
  Check(a[0] == left && a[3] == left && a[4] == 1 && a[5] == 1, "MPI_Put/MPI_Accumulate");

  // Get from the left neighbour's window B.
  MPI_Win_fence(MPI_MODE_NOPRECEDE, wb);
  double got[8] = {};
  MPI_Get(got, 8, MPI_DOUBLE, left, 0, 8, MPI_DOUBLE, wb);
  MPI_Win_fence(MPI_MODE_NOSUCCEED, wb);
  Check(got[0] == left * 10 && got[7] == left * 10 + 7, "MPI_Get");

  // Passive target: an atomic increment of the right neighbour's a[8].
  int one = 1, old = -1;
  MPI_Win_lock(MPI_LOCK_SHARED, right, 0, wa);
  MPI_Fetch_and_op(&one, &old, MPI_INT, right, 8, MPI_SUM, wa);
  MPI_Win_unlock(right, wa);
  Check(old == 0, "MPI_Fetch_and_op");
  MPI_Barrier(w);

  // Lock-all epoch: compare-and-swap (which finds the increment above), then read back with a
  // no-op Get_accumulate.
  int swap = rank + 100, compare = 1, before = -1, now = -1;
  MPI_Win_lock_all(0, wa);
  MPI_Compare_and_swap(&swap, &compare, &before, MPI_INT, right, 8, wa);
  MPI_Win_flush(right, wa);
  MPI_Get_accumulate(nullptr, 0, MPI_INT, &now, 1, MPI_INT, right, 8, 1, MPI_INT, MPI_NO_OP, wa);
  MPI_Win_flush_all(wa);
  MPI_Win_unlock_all(wa);
  Check(before == 1 && now == rank + 100, "MPI_Compare_and_swap/MPI_Get_accumulate");

  // Request-based calls in an exclusive lock of the right neighbour's window B.
  double pair[2] = {rank + 0.5, rank + 0.25}, last = -1;
  MPI_Request req;
  MPI_Win_lock(MPI_LOCK_EXCLUSIVE, right, 0, wb);
  MPI_Rput(pair, 2, MPI_DOUBLE, right, 0, 2, MPI_DOUBLE, wb, &req);
  MPI_Wait(&req, MPI_STATUS_IGNORE);
  MPI_Rget(&last, 1, MPI_DOUBLE, right, 7, 1, MPI_DOUBLE, wb, &req);
  MPI_Wait(&req, MPI_STATUS_IGNORE);
  MPI_Win_unlock(right, wb);
  Check(last == right * 10 + 7, "MPI_Rget");
  MPI_Barrier(w);
  MPI_Win_lock(MPI_LOCK_SHARED, rank, 0, wb);
  Check(b[0] == left + 0.5 && b[1] == left + 0.25, "MPI_Rput");
  MPI_Win_unlock(rank, wb);

  // Generalized active target (post/start/complete/wait): expose to the left, access the right.
  MPI_Group world_group, from_left, to_right;
  MPI_Comm_group(w, &world_group);
  MPI_Group_incl(world_group, 1, &left, &from_left);
  MPI_Group_incl(world_group, 1, &right, &to_right);
  int seven = rank + 7;
  MPI_Win_post(from_left, 0, wa);
  MPI_Win_start(to_right, 0, wa);
  MPI_Put(&seven, 1, MPI_INT, right, 9, 1, MPI_INT, wa);
  MPI_Win_complete(wa);
  MPI_Win_wait(wa);
  Check(a[9] == left + 7, "MPI_Win_post/start/complete/wait");
  MPI_Group_free(&from_left);
  MPI_Group_free(&to_right);
  MPI_Group_free(&world_group);

  // Alltoallw: to an even peer 2 ints, to an odd peer 1 double; received likewise by parity.
  std::vector<int> scounts(n), sdispls(n), rcounts(n), rdispls(n);
  std::vector<MPI_Datatype> stypes(n), rtypes(n);
  std::vector<char> sbuf(16 * n), rbuf(16 * n);
  for (int p = 0; p < n; ++p) {
    const bool even_peer = p % 2 == 0, even_me = rank % 2 == 0;
    scounts[p] = even_peer ? 2 : 1;
    stypes[p] = even_peer ? MPI_INT : MPI_DOUBLE;
    rcounts[p] = even_me ? 2 : 1;
    rtypes[p] = even_me ? MPI_INT : MPI_DOUBLE;
    sdispls[p] = rdispls[p] = 16 * p;
    if (even_peer) {
      const int v[2] = {rank, p};
      std::memcpy(&sbuf[16 * p], v, sizeof(v));
    } else {
      const double v = rank + 0.5;
      std::memcpy(&sbuf[16 * p], &v, sizeof(v));
    }
  }
  for (int k = 0; k < 2; ++k) {
    std::fill(rbuf.begin(), rbuf.end(), 0);
    if (k == 0) {
      MPI_Alltoallw(sbuf.data(), scounts.data(), sdispls.data(), stypes.data(), rbuf.data(),
                    rcounts.data(), rdispls.data(), rtypes.data(), w);
    } else {
      MPI_Ialltoallw(sbuf.data(), scounts.data(), sdispls.data(), stypes.data(), rbuf.data(),
                     rcounts.data(), rdispls.data(), rtypes.data(), w, &req);
      MPI_Wait(&req, MPI_STATUS_IGNORE);
    }
    bool ok = true;
    for (int p = 0; p < n; ++p) {
      if (rank % 2 == 0) {
        int v[2];
        std::memcpy(v, &rbuf[16 * p], sizeof(v));
        ok &= v[0] == p && v[1] == rank;
      } else {
        double v;
        std::memcpy(&v, &rbuf[16 * p], sizeof(v));
        ok &= v == p + 0.5;
      }
    }
    Check(ok, k == 0 ? "MPI_Alltoallw" : "MPI_Ialltoallw");
  }

  // Master/worker on D, receives from MPI_ANY_SOURCE.
  MPI_Comm d;
  MPI_Comm_dup(w, &d);
  if (rank == 0) {
    std::vector<int> per_worker(n, 0);
    auto take = [&](const int* msg) {
      Check(msg[0] >= 1 && msg[0] < n && msg[1] == per_worker[msg[0]], "MPI_ANY_SOURCE order");
      ++per_worker[msg[0]];
    };
    int msg[2];
    for (int k = 0; k < n - 1; ++k) {
      MPI_Recv(msg, 2, MPI_INT, MPI_ANY_SOURCE, 5, d, MPI_STATUS_IGNORE);
      take(msg);
    }
    for (int k = 0; k < n - 1; ++k) {
      MPI_Status st;
      MPI_Recv(msg, 2, MPI_INT, MPI_ANY_SOURCE, 5, d, &st);
      Check(st.MPI_SOURCE == msg[0], "MPI_Recv status");
      take(msg);
    }
    std::vector<int> msgs(2 * (n - 1));
    std::vector<MPI_Request> reqs(n - 1);
    for (int k = 0; k < n - 1; ++k)
      MPI_Irecv(&msgs[2 * k], 2, MPI_INT, MPI_ANY_SOURCE, 5, d, &reqs[k]);
    MPI_Waitall(n - 1, reqs.data(), MPI_STATUSES_IGNORE);
    for (int k = 0; k < n - 1; ++k) take(&msgs[2 * k]);
    MPI_Barrier(d);
    for (int p = 1; p < n; ++p) {
      MPI_Recv(msg, 2, MPI_INT, p, 5, d, MPI_STATUS_IGNORE);
      take(msg);
    }
    for (int p = 1; p < n; ++p) Check(per_worker[p] == 4, "master/worker message count");
  } else {
    for (int k = 0; k < 4; ++k) {
      if (k == 3) MPI_Barrier(d);
      const int msg[2] = {rank, k};
      MPI_Ssend(msg, 2, MPI_INT, 0, 5, d);
    }
  }
  MPI_Comm_free(&d);

  // Neighbor collectives on E, a periodic ring: neighbor 0 is the left one, 1 the right one.
  MPI_Comm e;
  const int dims[1] = {n}, periods[1] = {1};
  MPI_Cart_create(w, 1, dims, periods, 0, &e);
  {
    int mine[3] = {rank, rank, rank}, both[6] = {};
    MPI_Neighbor_allgather(mine, 3, MPI_INT, both, 3, MPI_INT, e);
    Check(both[0] == left && both[5] == right, "MPI_Neighbor_allgather");
    int out[4] = {rank * 10, rank * 10, rank * 10 + 1, rank * 10 + 1}, in[4] = {};
    MPI_Neighbor_alltoall(out, 2, MPI_INT, in, 2, MPI_INT, e);
    // From the left its block for its right neighbour (index 1), from the right its block 0.
    Check(in[0] == left * 10 + 1 && in[3] == right * 10, "MPI_Neighbor_alltoall");
    const int rcv[2] = {1, 2}, rdsp[2] = {0, 1};
    int gv[3] = {};
    MPI_Neighbor_allgatherv(mine, 1, MPI_INT, gv, rcv, rdsp, MPI_INT, e);
    Check(gv[0] == left, "MPI_Neighbor_allgatherv");
    // v: 1 int to the left, 3 to the right; so 3 from the left, 1 from the right.
    const int scv[2] = {1, 3}, sdv[2] = {0, 1}, rcv2[2] = {3, 1}, rdv[2] = {0, 3};
    int sv[4] = {rank, rank, rank, rank}, rv[4] = {};
    MPI_Request rq;
    MPI_Ineighbor_alltoallv(sv, scv, sdv, MPI_INT, rv, rcv2, rdv, MPI_INT, e, &rq);
    MPI_Wait(&rq, MPI_STATUS_IGNORE);
    Check(rv[0] == left && rv[3] == right, "MPI_Ineighbor_alltoallv");
    // w: an int to the left, a double to the right; a double from the left, an int from the right.
    const int wc1[2] = {1, 1};
    const MPI_Aint sdw[2] = {0, 8}, rdw[2] = {0, 8};
    const MPI_Datatype swt[2] = {MPI_INT, MPI_DOUBLE}, rwt[2] = {MPI_DOUBLE, MPI_INT};
    char sw[16], rw[16];
    const int iv = rank;
    const double dv = rank + 0.5;
    std::memcpy(sw, &iv, 4);
    std::memcpy(sw + 8, &dv, 8);
    MPI_Neighbor_alltoallw(sw, wc1, sdw, swt, rw, wc1, rdw, rwt, e);
    double dl;
    int ir;
    std::memcpy(&dl, rw, 8);
    std::memcpy(&ir, rw + 8, 4);
    Check(dl == left + 0.5 && ir == right, "MPI_Neighbor_alltoallw");
  }
  MPI_Comm_free(&e);
  MPI_Comm f;
  MPI_Dist_graph_create_adjacent(w, 1, &left, MPI_UNWEIGHTED, 1, &right, MPI_UNWEIGHTED,
                                 MPI_INFO_NULL, 0, &f);
  {
    int out[4] = {rank, rank, rank, rank}, in[4] = {};
    MPI_Neighbor_alltoall(out, 4, MPI_INT, in, 4, MPI_INT, f);
    Check(in[0] == left && in[3] == left, "MPI_Neighbor_alltoall on a distributed graph");
  }
  MPI_Comm_free(&f);

  MPI_Win_create_dynamic(MPI_INFO_NULL, w, &wc);
  MPI_Win_free(&wa);
  MPI_Win_free(&wb);
  MPI_Win_free(&wc);
  MPI_Finalize();
  if (rank == 0) std::printf("mpi_more_calls: %d ranks, all results correct\n", n);
  return 0;
}
