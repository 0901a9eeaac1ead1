/* Reference loop for fabbench's fidelity benchmark: plain MPI_Allreduce, nothing else.
 * Usage: mpi_allreduce BYTES...   prints "bytes p50_us samples batch" per size (rank 0).
 * Timing as plain as OSU/nccl-tests: warm-up, then samples of back-to-back operations; each
 * sample's time is the slowest rank's; the median sample is reported. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    enum { SAMPLES = 25 };
    for (int a = 1; a < argc; a++) {
        long bytes = atol(argv[a]);
        long count = bytes / (long)sizeof(float);
        float *send = malloc(count * sizeof(float)), *recv = malloc(count * sizeof(float));
        for (long i = 0; i < count; i++) send[i] = (float)(i % 5);
        /* calibrate: a batch that takes about 5 ms, at most 1000 operations */
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (int i = 0; i < 10; i++) MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        double one = (MPI_Wtime() - t0) / 10, slowest;
        MPI_Allreduce(&one, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        int batch = (int)(0.005 / slowest);
        if (batch < 1) batch = 1;
        if (batch > 1000) batch = 1000;
        double samples[SAMPLES];
        for (int s = 0; s < SAMPLES; s++) {
            MPI_Barrier(MPI_COMM_WORLD);
            t0 = MPI_Wtime();
            for (int i = 0; i < batch; i++)
                MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            double t = (MPI_Wtime() - t0) / batch;
            MPI_Allreduce(&t, &samples[s], 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        }
        qsort(samples, SAMPLES, sizeof(double), cmp);
        if (rank == 0) printf("%ld %.3f %d %d\n", count * (long)sizeof(float), samples[SAMPLES / 2] * 1e6, SAMPLES, batch);
        free(send);
        free(recv);
    }
    MPI_Finalize();
    return 0;
}
