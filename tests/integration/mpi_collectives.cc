// A plain MPI program (no profiler code) that calls every collective the agent's MPI surface
// records, with rank-dependent, known sizes, and checks every result itself: it exits non-zero
// (MPI_Abort) when any result differs from the closed-form expectation. Run under the agent by
// mpi_collectives_test, which checks the recorded calls against the same sizes (the golden
// table in mpi_collectives_test.cc must follow the call order here).
//
// Per iteration on MPI_COMM_WORLD (kIters iterations), collectives in this order:
//   0 Allreduce  1 Bcast  2 Reduce  3 Allgather  4 Allgatherv  5 Gather  6 Gatherv  7 Scatter
//   8 Scatterv  9 Reduce_scatter_block  10 Reduce_scatter  11 Alltoall  12 Alltoallv  13 Barrier
//   14 Scan  15 Exscan  16 Iallreduce(+Wait)  17 Ibcast(+Test loop)  18 Ibarrier(+Waitall)
// and point-to-point: Irecv, Isend (completed by the Waitall of 18), Send/Recv ring, Sendrecv,
// Issend/Irecv, Ssend/Recv, Sendrecv_replace, and two starts of persistent Send_init/Recv_init.
// Then on a split communicator (rank % 2): one Allreduce.
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

int g_rank = 0;

void Check(bool ok, const char* what, int iter) {
  if (ok) return;
  std::fprintf(stderr, "rank %d iteration %d: wrong result of %s\n", g_rank, iter, what);
  MPI_Abort(MPI_COMM_WORLD, 3);
}

constexpr int kIters = 2;

void Iteration(int it, int rank, int n) {
  MPI_Comm w = MPI_COMM_WORLD;
  const int left = (rank - 1 + n) % n, right = (rank + 1) % n;
  bool ok;

  // 0 Allreduce int[1000] sum: element i = sum_r (r + i + it).
  std::vector<int> a(1000), b(1000);
  for (int i = 0; i < 1000; ++i) a[i] = rank + i + it;
  MPI_Allreduce(a.data(), b.data(), 1000, MPI_INT, MPI_SUM, w);
  ok = true;
  for (int i = 0; i < 1000; ++i) ok &= b[i] == n * (i + it) + n * (n - 1) / 2;
  Check(ok, "MPI_Allreduce", it);

  // 1 Bcast double[257] from root 1.
  std::vector<double> d(257, -1.0);
  if (rank == 1 % n)
    for (int i = 0; i < 257; ++i) d[i] = 0.5 * i + it;
  MPI_Bcast(d.data(), 257, MPI_DOUBLE, 1 % n, w);
  ok = true;
  for (int i = 0; i < 257; ++i) ok &= d[i] == 0.5 * i + it;
  Check(ok, "MPI_Bcast", it);

  // 2 Reduce long[64] max to root 0.
  std::vector<long> l(64), lm(64, 0);
  for (int i = 0; i < 64; ++i) l[i] = long(rank) * 1000 + i;
  MPI_Reduce(l.data(), lm.data(), 64, MPI_LONG, MPI_MAX, 0, w);
  if (rank == 0) {
    ok = true;
    for (int i = 0; i < 64; ++i) ok &= lm[i] == long(n - 1) * 1000 + i;
    Check(ok, "MPI_Reduce", it);
  }

  // 3 Allgather int[10].
  std::vector<int> s10(10), g(10 * n);
  for (int i = 0; i < 10; ++i) s10[i] = rank * 100 + i;
  MPI_Allgather(s10.data(), 10, MPI_INT, g.data(), 10, MPI_INT, w);
  ok = true;
  for (int r = 0; r < n; ++r)
    for (int i = 0; i < 10; ++i) ok &= g[r * 10 + i] == r * 100 + i;
  Check(ok, "MPI_Allgather", it);

  // 4 Allgatherv: rank r contributes r+1 ints of value r.
  std::vector<int> counts(n), displs(n);
  int total = 0;
  for (int r = 0; r < n; ++r) counts[r] = r + 1, displs[r] = total, total += r + 1;
  std::vector<int> mine(rank + 1, rank), gv(total, -1);
  MPI_Allgatherv(mine.data(), rank + 1, MPI_INT, gv.data(), counts.data(), displs.data(), MPI_INT,
                 w);
  ok = true;
  for (int r = 0; r < n; ++r)
    for (int i = 0; i < r + 1; ++i) ok &= gv[displs[r] + i] == r;
  Check(ok, "MPI_Allgatherv", it);

  // 5 Gather float[3] to root 2.
  const int groot = 2 % n;
  float f3[3] = {float(rank), float(rank) + 0.25f, float(rank) + 0.5f};
  std::vector<float> fg(3 * n, -1.f);
  MPI_Gather(f3, 3, MPI_FLOAT, fg.data(), 3, MPI_FLOAT, groot, w);
  if (rank == groot) {
    ok = true;
    for (int r = 0; r < n; ++r) ok &= fg[3 * r] == float(r) && fg[3 * r + 2] == float(r) + 0.5f;
    Check(ok, "MPI_Gather", it);
  }

  // 6 Gatherv to root 0: rank r sends r+1 ints of value 10r.
  std::vector<int> mine10(rank + 1, 10 * rank), gv0(total, -1);
  MPI_Gatherv(mine10.data(), rank + 1, MPI_INT, gv0.data(), counts.data(), displs.data(), MPI_INT,
              0, w);
  if (rank == 0) {
    ok = true;
    for (int r = 0; r < n; ++r)
      for (int i = 0; i < r + 1; ++i) ok &= gv0[displs[r] + i] == 10 * r;
    Check(ok, "MPI_Gatherv", it);
  }

  // 7 Scatter int[5] per rank from root 3.
  const int sroot = 3 % n;
  std::vector<int> src(5 * n), r5(5, -1);
  for (int i = 0; i < 5 * n; ++i) src[i] = i + it;
  MPI_Scatter(src.data(), 5, MPI_INT, r5.data(), 5, MPI_INT, sroot, w);
  ok = true;
  for (int i = 0; i < 5; ++i) ok &= r5[i] == 5 * rank + i + it;
  Check(ok, "MPI_Scatter", it);

  // 8 Scatterv from root 0: rank r receives r+2 ints.
  std::vector<int> vcounts(n), vdispls(n);
  int vtotal = 0;
  for (int r = 0; r < n; ++r) vcounts[r] = r + 2, vdispls[r] = vtotal, vtotal += r + 2;
  std::vector<int> vsrc(vtotal), vr(rank + 2, -1);
  for (int i = 0; i < vtotal; ++i) vsrc[i] = 7 * i;
  MPI_Scatterv(vsrc.data(), vcounts.data(), vdispls.data(), MPI_INT, vr.data(), rank + 2, MPI_INT,
               0, w);
  ok = true;
  for (int i = 0; i < rank + 2; ++i) ok &= vr[i] == 7 * (vdispls[rank] + i);
  Check(ok, "MPI_Scatterv", it);

  // 9 Reduce_scatter_block int, 6 per rank, sum: element j of the full vector = sum_r (r + j).
  std::vector<int> rsb(6 * n), rsbo(6, -1);
  for (int j = 0; j < 6 * n; ++j) rsb[j] = rank + j;
  MPI_Reduce_scatter_block(rsb.data(), rsbo.data(), 6, MPI_INT, MPI_SUM, w);
  ok = true;
  for (int i = 0; i < 6; ++i) ok &= rsbo[i] == n * (6 * rank + i) + n * (n - 1) / 2;
  Check(ok, "MPI_Reduce_scatter_block", it);

  // 10 Reduce_scatter, recvcounts r+1 (the same `counts`), sum of ones -> n everywhere.
  std::vector<int> ones(total, 1), rso(rank + 1, -1);
  MPI_Reduce_scatter(ones.data(), rso.data(), counts.data(), MPI_INT, MPI_SUM, w);
  ok = true;
  for (int i = 0; i < rank + 1; ++i) ok &= rso[i] == n;
  Check(ok, "MPI_Reduce_scatter", it);

  // 11 Alltoall int[2] per peer: block to peer p holds 100*rank + p.
  std::vector<int> at(2 * n), ar(2 * n, -1);
  for (int p = 0; p < n; ++p) at[2 * p] = at[2 * p + 1] = 100 * rank + p;
  MPI_Alltoall(at.data(), 2, MPI_INT, ar.data(), 2, MPI_INT, w);
  ok = true;
  for (int p = 0; p < n; ++p) ok &= ar[2 * p] == 100 * p + rank && ar[2 * p + 1] == 100 * p + rank;
  Check(ok, "MPI_Alltoall", it);

  // 12 Alltoallv: rank sends p+1 ints to peer p, so receives rank+1 from everyone.
  std::vector<int> sc(n), sd(n), rc(n), rd(n);
  int st = 0;
  for (int p = 0; p < n; ++p) sc[p] = p + 1, sd[p] = st, st += p + 1;
  for (int p = 0; p < n; ++p) rc[p] = rank + 1, rd[p] = p * (rank + 1);
  std::vector<int> avs(st), avr(n * (rank + 1), -1);
  for (int p = 0; p < n; ++p)
    for (int i = 0; i < p + 1; ++i) avs[sd[p] + i] = 1000 * rank + p;
  MPI_Alltoallv(avs.data(), sc.data(), sd.data(), MPI_INT, avr.data(), rc.data(), rd.data(),
                MPI_INT, w);
  ok = true;
  for (int p = 0; p < n; ++p)
    for (int i = 0; i < rank + 1; ++i) ok &= avr[rd[p] + i] == 1000 * p + rank;
  Check(ok, "MPI_Alltoallv", it);

  // 13 Barrier.
  MPI_Barrier(w);

  // 14 Scan / 15 Exscan int[3] sum of (rank + 1).
  int sv[3] = {rank + 1, rank + 1, rank + 1}, so[3] = {-1, -1, -1}, eo[3] = {-1, -1, -1};
  MPI_Scan(sv, so, 3, MPI_INT, MPI_SUM, w);
  Check(so[0] == (rank + 1) * (rank + 2) / 2 && so[2] == so[0], "MPI_Scan", it);
  MPI_Exscan(sv, eo, 3, MPI_INT, MPI_SUM, w);
  if (rank > 0) Check(eo[0] == rank * (rank + 1) / 2 && eo[1] == eo[0], "MPI_Exscan", it);

  // 16 Iallreduce double[128] sum + Wait.
  std::vector<double> x(128, rank + 1.0), y(128, 0);
  MPI_Request req;
  MPI_Iallreduce(x.data(), y.data(), 128, MPI_DOUBLE, MPI_SUM, w, &req);
  MPI_Wait(&req, MPI_STATUS_IGNORE);
  Check(y[0] == n * (n + 1) / 2.0 && y[127] == y[0], "MPI_Iallreduce", it);

  // 17 Ibcast int[33] from root 0, completed by a Test loop.
  std::vector<int> ib(33, rank == 0 ? 42 + it : -1);
  MPI_Ibcast(ib.data(), 33, MPI_INT, 0, w, &req);
  int flag = 0;
  while (!flag) MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
  Check(ib[0] == 42 + it && ib[32] == 42 + it, "MPI_Ibcast", it);

  // Point-to-point ring: Irecv from left, Isend to right (int[100]), then 18 Ibarrier; one
  // Waitall completes all three.
  std::vector<int> pin(100, -1), pout(100, rank);
  MPI_Request reqs[3];
  MPI_Irecv(pin.data(), 100, MPI_INT, left, 5, w, &reqs[0]);
  MPI_Isend(pout.data(), 100, MPI_INT, right, 5, w, &reqs[1]);
  MPI_Ibarrier(w, &reqs[2]);
  MPI_Waitall(3, reqs, MPI_STATUSES_IGNORE);
  Check(pin[0] == left && pin[99] == left, "MPI_Irecv/Isend", it);

  // Blocking ring: even ranks send first.
  char msg[50], got[50];
  for (int i = 0; i < 50; ++i) msg[i] = char('a' + rank);
  if (rank % 2 == 0) {
    MPI_Send(msg, 50, MPI_CHAR, right, 6, w);
    MPI_Recv(got, 50, MPI_CHAR, left, 6, w, MPI_STATUS_IGNORE);
  } else {
    MPI_Recv(got, 50, MPI_CHAR, left, 6, w, MPI_STATUS_IGNORE);
    MPI_Send(msg, 50, MPI_CHAR, right, 6, w);
  }
  Check(got[0] == char('a' + left) && got[49] == got[0], "MPI_Send/Recv", it);

  int s7[7], r7[7];
  for (int i = 0; i < 7; ++i) s7[i] = rank * 7 + i;
  MPI_Sendrecv(s7, 7, MPI_INT, right, 7, r7, 7, MPI_INT, left, 7, w, MPI_STATUS_IGNORE);
  Check(r7[0] == left * 7 && r7[6] == left * 7 + 6, "MPI_Sendrecv", it);

  // The synchronous-mode sends: Issend to the right with an Irecv from the left, a blocking
  // Ssend/Recv ring (even ranks send first), then Sendrecv_replace.
  std::vector<int> qin(30, -1), qout(30, rank);
  MPI_Request q[2];
  MPI_Irecv(qin.data(), 30, MPI_INT, left, 8, w, &q[0]);
  MPI_Issend(qout.data(), 30, MPI_INT, right, 8, w, &q[1]);
  MPI_Waitall(2, q, MPI_STATUSES_IGNORE);
  Check(qin[0] == left && qin[29] == left, "MPI_Issend/Irecv", it);
  char smsg[20], sgot[20];
  for (int i = 0; i < 20; ++i) smsg[i] = char('A' + rank);
  if (rank % 2 == 0) {
    MPI_Ssend(smsg, 20, MPI_CHAR, right, 9, w);
    MPI_Recv(sgot, 20, MPI_CHAR, left, 9, w, MPI_STATUS_IGNORE);
  } else {
    MPI_Recv(sgot, 20, MPI_CHAR, left, 9, w, MPI_STATUS_IGNORE);
    MPI_Ssend(smsg, 20, MPI_CHAR, right, 9, w);
  }
  Check(sgot[0] == char('A' + left) && sgot[19] == sgot[0], "MPI_Ssend/Recv", it);
  int rep[3] = {rank, rank, rank};
  MPI_Sendrecv_replace(rep, 3, MPI_INT, right, 10, left, 10, w, MPI_STATUS_IGNORE);
  Check(rep[0] == left && rep[2] == left, "MPI_Sendrecv_replace", it);

  // Persistent requests, as halo exchanges use them: a Recv_init from the left and a Send_init
  // to the right (int[16]) started twice (MPI_Startall, then MPI_Start each), completed by a
  // Waitall each time, then freed.
  std::vector<int> hin(16, -1), hout(16, rank + 100);
  MPI_Request pr[2];
  MPI_Recv_init(hin.data(), 16, MPI_INT, left, 11, w, &pr[0]);
  MPI_Send_init(hout.data(), 16, MPI_INT, right, 11, w, &pr[1]);
  MPI_Startall(2, pr);
  MPI_Waitall(2, pr, MPI_STATUSES_IGNORE);
  Check(hin[0] == left + 100 && hin[15] == left + 100, "MPI_Send_init/Recv_init", it);
  hin.assign(16, -1);
  MPI_Start(&pr[1]);
  MPI_Start(&pr[0]);
  MPI_Waitall(2, pr, MPI_STATUSES_IGNORE);
  Check(hin[0] == left + 100 && hin[15] == left + 100, "MPI_Start", it);
  MPI_Request_free(&pr[0]);
  MPI_Request_free(&pr[1]);
}

// The remaining non-blocking collectives, each group completed by a different function:
// seq 2*19 + 0..12 on MPI_COMM_WORLD, in this order:
//   Iallgather, Iscan (Waitany)  Ireduce, Ialltoall (Waitsome)  Igather, Iexscan (Testall)
//   Iscatter, Ireduce_scatter_block (Testany)
//   Ialltoallv, Iallgatherv, Igatherv, Iscatterv, Ireduce_scatter (Testsome)
void Completions(int rank, int n) {
  MPI_Comm w = MPI_COMM_WORLD;
  MPI_Request r[5];
  bool ok;

  std::vector<int> ag(n, -1);
  int one = 1, scan = -1;
  MPI_Iallgather(&rank, 1, MPI_INT, ag.data(), 1, MPI_INT, w, &r[0]);
  MPI_Iscan(&one, &scan, 1, MPI_INT, MPI_SUM, w, &r[1]);
  for (int k = 0; k < 2; ++k) {
    int idx = -1;
    MPI_Waitany(2, r, &idx, MPI_STATUS_IGNORE);
    Check(idx == 0 || idx == 1, "MPI_Waitany index", 0);
  }
  ok = scan == rank + 1;
  for (int p = 0; p < n; ++p) ok &= ag[p] == p;
  Check(ok, "MPI_Iallgather/Iscan", 0);

  double d4[4] = {1.0 * rank, 1, 2, 3}, d4o[4] = {0, 0, 0, 0};
  std::vector<int> a2a(n, rank), a2ao(n, -1);
  MPI_Ireduce(d4, d4o, 4, MPI_DOUBLE, MPI_SUM, 0, w, &r[0]);
  MPI_Ialltoall(a2a.data(), 1, MPI_INT, a2ao.data(), 1, MPI_INT, w, &r[1]);
  for (int done = 0; done < 2;) {
    int oc = 0, idx[2];
    MPI_Waitsome(2, r, &oc, idx, MPI_STATUSES_IGNORE);
    if (oc != MPI_UNDEFINED) done += oc;
  }
  ok = rank != 0 || (d4o[0] == n * (n - 1) / 2.0 && d4o[3] == 3.0 * n);
  for (int p = 0; p < n; ++p) ok &= a2ao[p] == p;
  Check(ok, "MPI_Ireduce/Ialltoall", 0);

  int g2[2] = {rank, -rank}, ex = -1;
  std::vector<int> g2o(2 * n, 99);
  MPI_Igather(g2, 2, MPI_INT, g2o.data(), 2, MPI_INT, 1 % n, w, &r[0]);
  MPI_Iexscan(&one, &ex, 1, MPI_INT, MPI_SUM, w, &r[1]);
  for (int flag = 0; !flag;) MPI_Testall(2, r, &flag, MPI_STATUSES_IGNORE);
  ok = rank == 0 || ex == rank;
  if (rank == 1 % n)
    for (int p = 0; p < n; ++p) ok &= g2o[2 * p] == p && g2o[2 * p + 1] == -p;
  Check(ok, "MPI_Igather/Iexscan", 0);

  std::vector<int> sc(3 * n), sco(3, -1), rsb(2 * n, 1), rsbo(2, -1);
  for (int i = 0; i < 3 * n; ++i) sc[i] = i;
  MPI_Iscatter(sc.data(), 3, MPI_INT, sco.data(), 3, MPI_INT, 2 % n, w, &r[0]);
  MPI_Ireduce_scatter_block(rsb.data(), rsbo.data(), 2, MPI_INT, MPI_SUM, w, &r[1]);
  for (int done = 0; done < 2;) {
    int idx = -1, flag = 0;
    MPI_Testany(2, r, &idx, &flag, MPI_STATUS_IGNORE);
    if (flag && idx != MPI_UNDEFINED) ++done;
  }
  Check(sco[0] == 3 * rank && sco[2] == 3 * rank + 2 && rsbo[0] == n && rsbo[1] == n,
        "MPI_Iscatter/Ireduce_scatter_block", 0);

  // v-variants: rank r sends/receives r+1 elements where a count depends on the receiver.
  std::vector<int> cnt(n), dsp(n), rcnt(n), rdsp(n);
  int tot = 0;
  for (int p = 0; p < n; ++p) cnt[p] = p + 1, dsp[p] = tot, tot += p + 1;
  for (int p = 0; p < n; ++p) rcnt[p] = rank + 1, rdsp[p] = p * (rank + 1);
  std::vector<int> avs(tot), avr(n * (rank + 1), -1), agv(tot, -1), gvv(tot, -1),
      scv(rank + 1, -1), rs(tot, 1), rso(rank + 1, -1), mine(rank + 1, rank);
  for (int p = 0; p < n; ++p)
    for (int i = 0; i < p + 1; ++i) avs[dsp[p] + i] = 10 * rank + p;
  std::vector<int> scsrc(tot);
  for (int i = 0; i < tot; ++i) scsrc[i] = 5 * i;
  MPI_Ialltoallv(avs.data(), cnt.data(), dsp.data(), MPI_INT, avr.data(), rcnt.data(),
                 rdsp.data(), MPI_INT, w, &r[0]);
  MPI_Iallgatherv(mine.data(), rank + 1, MPI_INT, agv.data(), cnt.data(), dsp.data(), MPI_INT, w,
                  &r[1]);
  MPI_Igatherv(mine.data(), rank + 1, MPI_INT, gvv.data(), cnt.data(), dsp.data(), MPI_INT, 0, w,
               &r[2]);
  MPI_Iscatterv(scsrc.data(), cnt.data(), dsp.data(), MPI_INT, scv.data(), rank + 1, MPI_INT, 3 % n,
                w, &r[3]);
  MPI_Ireduce_scatter(rs.data(), rso.data(), cnt.data(), MPI_INT, MPI_SUM, w, &r[4]);
  for (int done = 0; done < 5;) {
    int oc = 0, idx[5];
    MPI_Testsome(5, r, &oc, idx, MPI_STATUSES_IGNORE);
    if (oc != MPI_UNDEFINED) done += oc;
  }
  ok = scv[0] == 5 * dsp[rank] && rso[0] == n && rso[rank] == n;
  for (int p = 0; p < n; ++p) {
    ok &= avr[rdsp[p]] == 10 * p + rank;
    ok &= agv[dsp[p]] == p && agv[dsp[p] + p] == p;
    if (rank == 0) ok &= gvv[dsp[p]] == p;
  }
  Check(ok, "MPI_I*v / Ireduce_scatter", 0);
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, n = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  g_rank = rank;
  for (int it = 0; it < kIters; ++it) Iteration(it, rank, n);
  Completions(rank, n);

  // Two duplicates of world: the first used only by ranks 0 and 1 (one message), the second by
  // every rank (Allreduce int[4]); every rank must give the second the same unique id.
  MPI_Comm dup_a, dup_b;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup_a);
  MPI_Comm_dup(MPI_COMM_WORLD, &dup_b);
  int token = rank;
  if (rank == 0) MPI_Send(&token, 1, MPI_INT, 1, 9, dup_a);
  if (rank == 1) MPI_Recv(&token, 1, MPI_INT, 0, 9, dup_a, MPI_STATUS_IGNORE);
  int dv[4] = {1, 1, 1, 1}, dout[4] = {};
  MPI_Allreduce(dv, dout, 4, MPI_INT, MPI_SUM, dup_b);
  Check(dout[0] == n && dout[3] == n, "MPI_Allreduce on a dup", 0);
  MPI_Comm_free(&dup_a);
  MPI_Comm_free(&dup_b);

  // A sub-communicator: ranks of equal parity; Allreduce int[16] of world ranks.
  MPI_Comm half;
  MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
  int hv[16], ho[16];
  for (int i = 0; i < 16; ++i) hv[i] = rank;
  MPI_Allreduce(hv, ho, 16, MPI_INT, MPI_SUM, half);
  int expect = 0;
  for (int r = rank % 2; r < n; r += 2) expect += r;
  Check(ho[0] == expect && ho[15] == expect, "MPI_Allreduce on split", 0);
  MPI_Comm_free(&half);

  MPI_Finalize();
  if (rank == 0) std::printf("mpi_collectives: %d ranks, all results correct\n", n);
  return 0;
}
