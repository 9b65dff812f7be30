// A plain MPI program, 2 ranks: 20 MPI_Allreduce calls, then rank 1 calls MPI_Abort (error code
// 7) while rank 0 waits in a barrier, which mpirun then ends. With the argument `segv`, rank 1
// crashes instead (a write through a null pointer), under Open MPI's own SIGSEGV handler.
#include <cstring>

#include "tests/integration/mpi_program.h"

int main(int argc, char** argv) {
  const mpi_program::World w = mpi_program::Start(&argc, &argv, 2, "mpi_abort");
  double x = w.rank, y = 0;
  for (int i = 0; i < 20; ++i) MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  mpi_program::Check(y == 1.0, "MPI_Allreduce");
  if (w.rank == 1 && argc > 1 && std::strcmp(argv[1], "segv") == 0) {
    std::fprintf(stderr, "rank 1: crashing\n");
    volatile int* volatile nowhere = nullptr;
    *nowhere = 1;
  }
  if (w.rank == 1) {
    std::fprintf(stderr, "rank 1: giving up\n");
    MPI_Abort(MPI_COMM_WORLD, 7);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  return 0;
}
