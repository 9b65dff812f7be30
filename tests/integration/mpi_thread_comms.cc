// Communicators created by threads at once (MPI_THREAD_MULTIPLE), 3 ranks: each of 3 threads
// duplicates its own parent communicator, in a different order on every rank (rank-dependent
// delays), then broadcasts (t + 1) * 1000 bytes on its duplicate twice. Last, on the main
// thread, a split that leaves rank 0 out (MPI_COMM_NULL) and a duplicate of world, with an
// allreduce on it. Prints "ok" when every result is right; "skip" when the library does not
// provide MPI_THREAD_MULTIPLE.
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

namespace {
int g_errors = 0;

void Check(int rc, const char* what) {
  if (rc != MPI_SUCCESS) {
    fprintf(stderr, "%s failed: %d\n", what, rc);
    ++g_errors;
  }
}
}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (provided < MPI_THREAD_MULTIPLE) {
    if (rank == 0) printf("skip\n");
    MPI_Finalize();
    return 0;
  }
  constexpr int kThreads = 3;
  MPI_Comm parents[kThreads];
  for (int t = 0; t < kThreads; ++t) Check(MPI_Comm_dup(MPI_COMM_WORLD, &parents[t]), "dup");
  std::vector<std::thread> threads;
  std::vector<int> bad(kThreads, 0);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      // Rank r creates in the order r, r+1, r+2 (mod 3): no two ranks alike.
      std::this_thread::sleep_for(
          std::chrono::milliseconds(30 * ((t - rank + 3 * kThreads) % kThreads)));
      MPI_Comm mine;
      if (MPI_Comm_dup(parents[t], &mine) != MPI_SUCCESS) {
        bad[t] = 1;
        return;
      }
      std::vector<char> buf(size_t(t + 1) * 1000);
      for (int i = 0; i < 2; ++i) {
        for (size_t k = 0; k < buf.size(); ++k) buf[k] = rank == 0 ? char(t + i) : 0;
        if (MPI_Bcast(buf.data(), int(buf.size()), MPI_CHAR, 0, mine) != MPI_SUCCESS) bad[t] = 1;
        for (char c : buf) bad[t] |= c != char(t + i);
      }
      MPI_Comm_free(&mine);
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) g_errors += bad[t];
  MPI_Comm part;
  Check(MPI_Comm_split(MPI_COMM_WORLD, rank == 0 ? MPI_UNDEFINED : 0, rank, &part), "split");
  if ((part == MPI_COMM_NULL) != (rank == 0)) ++g_errors;
  if (part != MPI_COMM_NULL) MPI_Comm_free(&part);
  MPI_Comm last;
  Check(MPI_Comm_dup(MPI_COMM_WORLD, &last), "dup");
  int one = 1, sum = 0;
  Check(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, last), "allreduce");
  if (sum != size) ++g_errors;
  MPI_Comm_free(&last);
  for (int t = 0; t < kThreads; ++t) MPI_Comm_free(&parents[t]);
  int errors = 0;
  MPI_Allreduce(&g_errors, &errors, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) printf(errors == 0 ? "ok\n" : "errors %d\n", errors);
  MPI_Finalize();
  return errors == 0 ? 0 : 1;
}
