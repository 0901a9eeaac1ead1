/* fabbench's fidelity reference: a plain MPI loop, nothing else (no Python, no threads).
 * Usage: mpi_loop OP BYTES...   OP is allreduce or sendrecv (a ring: send to rank+1, receive
 * from rank-1, as fabbench's sendrecv). Rank 0 prints "bytes p50_us samples batch" per size.
 * The protocol every reference loop shares (fabbench.fidelity.loops), fabbench's own timing
 * engine's in its essentials (and OSU's and nccl-tests'): 10 calibration operations; 20 ms of
 * warm-up; a batch of back-to-back operations that takes FABBENCH_LOOP_BATCH_S seconds
 * (default 0.005; 1..1000 operations); 25 samples, each after a barrier; a sample's time is
 * the slowest rank's time per operation; the median sample is printed.
 * With --osu before the sizes: OSU's own protocol instead. allreduce as osu_allreduce: per size
 * 200 skipped + 1000 timed single operations (10 + 100 above 8 KiB), a barrier after each, each
 * rank's mean time, and the mean over the ranks printed: OSU's "Avg Latency". sendrecv as
 * osu_bibw with a window of one message each way (-W 1): 10 skipped + 100 timed operations
 * (2 + 20 above 8 KiB) back to back after one barrier, none among them, each timed; the mean
 * over the ranks of each rank's mean printed (osu_bibw prints 2 * bytes / rank 0's mean). The
 * fidelity benchmark prints it beside OSU's binary to show what the two protocols make of the
 * same library. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { SAMPLES = 25, CALIBRATE = 10, MAX_BATCH = 1000 };
static const double WARMUP_S = 0.02;

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void op_once(int sendrecv, float *send, float *recv, long count, int next, int prev) {
    if (sendrecv)
        MPI_Sendrecv(send, (int)count, MPI_FLOAT, next, 0, recv, (int)count, MPI_FLOAT, prev, 0,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    else
        MPI_Allreduce(send, recv, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc < 2 || (strcmp(argv[1], "allreduce") && strcmp(argv[1], "sendrecv"))) {
        if (rank == 0) fprintf(stderr, "usage: mpi_loop allreduce|sendrecv [--osu] BYTES...\n");
        MPI_Finalize();
        return 2;
    }
    int sendrecv = strcmp(argv[1], "sendrecv") == 0;
    int first = 2, osu = argc > 2 && strcmp(argv[2], "--osu") == 0;
    if (osu) first = 3;
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    for (int a = first; a < argc; a++) {
        long bytes = atol(argv[a]);
        long count = bytes / (long)sizeof(float);
        if (count < 1) count = 1;
        /* page-aligned, as OSU allocates its buffers (and fabbench: comm.base.page_aligned) */
        float *send, *recv;
        if (posix_memalign((void **)&send, 4096, count * sizeof(float)) ||
            posix_memalign((void **)&recv, 4096, count * sizeof(float)))
            MPI_Abort(MPI_COMM_WORLD, 1);
        for (long i = 0; i < count; i++) send[i] = (float)((i + 7 * rank) % 5);
        memset(recv, 0, count * sizeof(float));
        if (osu) {
            int large = bytes > 8192;
            int skip = sendrecv ? (large ? 2 : 10) : (large ? 10 : 200);
            int iters = sendrecv ? (large ? 20 : 100) : (large ? 100 : 1000);
            double timer = 0.0, sum = 0.0;
            MPI_Barrier(MPI_COMM_WORLD);
            for (int i = 0; i < iters + skip; i++) {
                double t0 = MPI_Wtime();
                op_once(sendrecv, send, recv, count, next, prev);
                double t1 = MPI_Wtime();
                if (!sendrecv) MPI_Barrier(MPI_COMM_WORLD); /* osu_bibw has none */
                if (i >= skip) timer += t1 - t0;
            }
            double mine = timer * 1e6 / iters;
            MPI_Reduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
            if (rank == 0) {
                printf("%ld %.3f %d 1\n", count * (long)sizeof(float), sum / size, iters);
                fflush(stdout);
            }
            free(send);
            free(recv);
            continue;
        }
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (int i = 0; i < CALIBRATE; i++) op_once(sendrecv, send, recv, count, next, prev);
        double one = (MPI_Wtime() - t0) / CALIBRATE, slowest;
        MPI_Allreduce(&one, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        const char *batch_env = getenv("FABBENCH_LOOP_BATCH_S");
        double batch_s = batch_env ? atof(batch_env) : 0.005;
        int warmup = (int)(WARMUP_S / slowest);
        for (int i = 0; i < warmup; i++) op_once(sendrecv, send, recv, count, next, prev);
        int batch = (int)(batch_s / slowest);
        if (batch < 1) batch = 1;
        if (batch > MAX_BATCH) batch = MAX_BATCH;
        double samples[SAMPLES];
        for (int s = 0; s < SAMPLES; s++) {
            MPI_Barrier(MPI_COMM_WORLD);
            t0 = MPI_Wtime();
            for (int i = 0; i < batch; i++) op_once(sendrecv, send, recv, count, next, prev);
            double t = (MPI_Wtime() - t0) / batch;
            MPI_Allreduce(&t, &samples[s], 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        }
        qsort(samples, SAMPLES, sizeof(double), cmp);
        if (rank == 0) {
            printf("%ld %.3f %d %d\n", count * (long)sizeof(float), samples[SAMPLES / 2] * 1e6,
                   SAMPLES, batch);
            fflush(stdout);
        }
        free(send);
        free(recv);
    }
    MPI_Finalize();
    return 0;
}
