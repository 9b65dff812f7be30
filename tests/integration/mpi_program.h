// The start every plain MPI test program shares: MPI_Init, this rank and the world size (a
// program that needs a given size aborts otherwise), and a result check that aborts the job
// naming the rank. Test-only; header-only so that the mpicxx genrules need no library.
#ifndef PROFAGENT_TESTS_INTEGRATION_MPI_PROGRAM_H_
#define PROFAGENT_TESTS_INTEGRATION_MPI_PROGRAM_H_

#include <mpi.h>

#include <cstdio>

namespace mpi_program {

inline int& RankForMessages() {
  static int rank = 0;
  return rank;
}

// Aborts the job (exit code 3) when `ok` is false: the program checks its own results.
inline void Check(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "rank %d: wrong result of %s\n", RankForMessages(), what);
  MPI_Abort(MPI_COMM_WORLD, 3);
}

struct World {
  int rank = 0, size = 0;
};

// MPI_Init; `need` > 0: the program runs on exactly that many ranks (else exit code 2).
inline World Start(int* argc, char*** argv, int need, const char* program) {
  MPI_Init(argc, argv);
  World w;
  MPI_Comm_rank(MPI_COMM_WORLD, &w.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &w.size);
  RankForMessages() = w.rank;
  if (need > 0 && w.size != need) {
    if (w.rank == 0) std::fprintf(stderr, "%s needs %d ranks\n", program, need);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  return w;
}

}  // namespace mpi_program

#endif  // PROFAGENT_TESTS_INTEGRATION_MPI_PROGRAM_H_
