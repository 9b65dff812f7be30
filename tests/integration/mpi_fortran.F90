! A plain Fortran MPI program (`use mpi`, Open MPI's mpif-h library), 2 ranks, checking its own
! results (MPI_Abort on a wrong one). Run under the agent by mpi_fortran_test, whose expectations
! follow the call order here. Built twice: as is, and with -DUSE_F08 (mpi_fortran_f08), which makes
! the same calls through `use mpi_f08` (Open MPI: mpi_send_f08_ and the like, which call the
! mpif-h functions ompi_send_f, ...), whose handles are derived types.
! On world: rank 0 sends rank 1 double(100) (Send/Recv); both exchange one double with
! Isend/Irecv + Waitall; rank 0 sends int(4) that rank 1 receives from MPI_ANY_SOURCE with
! MPI_STATUS_IGNORE; Bcast int(10) from 0; Allgather in place of int(5) per rank; Allreduce of
! double(1000); Barrier. Then Comm_split by rank, an Allreduce of one integer on it, Comm_free.
program mpi_fortran
#ifdef USE_F08
  use mpi_f08
#else
  use mpi
#endif
  implicit none
  integer :: ierr, rank, n, other, i
#ifdef USE_F08
  type(MPI_Comm) :: split
  type(MPI_Request) :: reqs(2)
#else
  integer :: split, reqs(2)
#endif
  double precision :: a(100), x, y, r(1000), s(1000)
  integer :: v(4), b(10), g(10), one, total
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, n, ierr)
  if (n /= 2) call MPI_Abort(MPI_COMM_WORLD, 2, ierr)
  other = 1 - rank
  if (rank == 0) then
    a = 7.0d0
    call MPI_Send(a, 100, MPI_DOUBLE_PRECISION, 1, 1, MPI_COMM_WORLD, ierr)
  else
    call MPI_Recv(a, 100, MPI_DOUBLE_PRECISION, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
    if (a(100) /= 7.0d0) call MPI_Abort(MPI_COMM_WORLD, 3, ierr)
  end if
  x = rank + 1
  call MPI_Isend(x, 1, MPI_DOUBLE_PRECISION, other, 2, MPI_COMM_WORLD, reqs(1), ierr)
  call MPI_Irecv(y, 1, MPI_DOUBLE_PRECISION, other, 2, MPI_COMM_WORLD, reqs(2), ierr)
  call MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE, ierr)
  if (y /= other + 1) call MPI_Abort(MPI_COMM_WORLD, 3, ierr)
  if (rank == 0) then
    v = 9
    call MPI_Send(v, 4, MPI_INTEGER, 1, 3, MPI_COMM_WORLD, ierr)
  else
    call MPI_Recv(v, 4, MPI_INTEGER, MPI_ANY_SOURCE, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
    if (v(4) /= 9) call MPI_Abort(MPI_COMM_WORLD, 3, ierr)
  end if
  b = 0
  if (rank == 0) b = 5
  call MPI_Bcast(b, 10, MPI_INTEGER, 0, MPI_COMM_WORLD, ierr)
  if (b(10) /= 5) call MPI_Abort(MPI_COMM_WORLD, 3, ierr)
  g = -1
  do i = 1, 5
    g(5 * rank + i) = rank
  end do
  call MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, g, 5, MPI_INTEGER, MPI_COMM_WORLD, ierr)
  if (g(1) /= 0 .or. g(10) /= 1) call MPI_Abort(MPI_COMM_WORLD, 3, ierr)
  s = 1.0d0
  call MPI_Allreduce(s, r, 1000, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
  if (r(1000) /= 2.0d0) call MPI_Abort(MPI_COMM_WORLD, 3, ierr)
  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  call MPI_Comm_split(MPI_COMM_WORLD, rank, 0, split, ierr)
  one = 1
  call MPI_Allreduce(one, total, 1, MPI_INTEGER, MPI_SUM, split, ierr)
  if (total /= 1) call MPI_Abort(MPI_COMM_WORLD, 3, ierr)
  call MPI_Comm_free(split, ierr)
  call MPI_Finalize(ierr)
#ifdef USE_F08
  if (rank == 0) print '(a)', 'mpi_fortran_f08: all results correct'
#else
  if (rank == 0) print '(a)', 'mpi_fortran: all results correct'
#endif
end program mpi_fortran
