/*
** allreduce_peer.c -- the peer of scripts/bench/allreduce.sh: a plain
** MPI_Allreduce(MPI_IN_PLACE, float, sum) loop over the same sizes as
** allreduce.lua, timed the same way (a barrier, then `iters` calls; the
** slowest rank's time counts). Prints "size_bytes seconds_per_call".
**   mpirun -np P ember_allreduce_peer [max_bytes]
*/
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  long max_bytes = argc > 1 ? atol(argv[1]) : 64L << 20;
  float *buf = calloc((size_t)max_bytes / 4, sizeof *buf);
  if (!buf) MPI_Abort(MPI_COMM_WORLD, 1);
  for (long bytes = 4096; bytes <= max_bytes; bytes *= 4) {
    int n = (int)(bytes / 4);
    int iters = bytes <= (1 << 16) ? 2000 : bytes <= (1 << 20) ? 200 : bytes <= (16 << 20) ? 20 : 8;
    for (int i = 0; i < 3; i++) MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double best = 1e30;
    for (int rep = 0; rep < 3; rep++) {
      MPI_Barrier(MPI_COMM_WORLD);
      double t0 = MPI_Wtime();
      for (int i = 0; i < iters; i++) MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      double t = (MPI_Wtime() - t0) / iters, slowest;
      MPI_Allreduce(&t, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      if (slowest < best) best = slowest;
    }
    if (rank == 0) printf("%ld %.9g\n", bytes, best);
  }
  free(buf);
  MPI_Finalize();
  return 0;
}
