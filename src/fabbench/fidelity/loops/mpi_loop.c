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
 * same library.
 * With --cuda (a build with -DFB_CUDA, linked with libcudart): the buffers are cudaMalloc'd on
 * device local rank % devices, selected before MPI_Init, and the same protocol runs on them
 * through a CUDA-aware MPI. Rank 0 names its device and whether the MPI says it is CUDA-aware
 * on stderr (Open MPI's MPIX_Query_cuda_support, MPICH's MPIX_GPU_query_support). Where a
 * rank finds no device, rank 0 prints one line "mpi_loop: no CUDA device: <CUDA's error
 * string>" and every rank exits 3 after MPI_Finalize (the GPU kit's cuda-mpi step, rehearsed on
 * a host without a GPU). --cuda in a build without FB_CUDA: exit 2.
 * With --staged too (--cuda --staged): the buffers stay on the device and each operation is
 * staged by hand: cudaMemcpy device -> pinned host (cudaMallocHost, allocated once per size),
 * the MPI call on the host buffers, cudaMemcpy host -> device; the GPU kit times it beside the
 * MPI call on the device buffers to see what a CUDA-aware MPI's own staging costs.
 * After each size's timed operations every rank checks its result (allreduce: the sum of the
 * ranks' inputs; sendrecv: the previous rank's input); a wrong one: a line, exit 4 at the end. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef FB_CUDA
#include <cuda_runtime.h>
#if defined(OPEN_MPI) && OPEN_MPI
#include <mpi-ext.h>
#endif
#endif

enum { SAMPLES = 25, CALIBRATE = 10, MAX_BATCH = 1000 };
static const double WARMUP_S = 0.02;

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static float input(long i, int rank) { return (float)((i + 7 * rank) % 5); }

#ifdef FB_CUDA
static cudaError_t cuda_error = cudaSuccess;
/* --staged: the pinned host buffers each operation goes through (NULL: not staged) */
static float *stage_send, *stage_recv;

/* Before MPI_Init (UCX and Open MPI look for the device's context there): the device of this
 * rank's local rank, as the launcher tells it; 0 devices where CUDA finds none. */
static int cuda_select(void) {
    const char *names[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID",
                           "LOCAL_RANK"};
    int local = 0, devices = 0;
    for (int i = 0; i < 4; i++)
        if (getenv(names[i])) {
            local = atoi(getenv(names[i]));
            break;
        }
    cuda_error = cudaGetDeviceCount(&devices);
    if (cuda_error != cudaSuccess || devices < 1) return 0;
    if ((cuda_error = cudaSetDevice(local % devices)) != cudaSuccess ||
        (cuda_error = cudaFree(0)) != cudaSuccess)
        return 0;
    return devices;
}
#endif

/* The send buffer holds input(i, rank), the receive buffer zeros; on the GPU with --cuda. */
static void buffers(int cuda, int staged, long count, int rank, float **send, float **recv) {
    size_t bytes = (size_t)count * sizeof(float);
    float *host = NULL;
    /* page-aligned, as OSU allocates its buffers (and fabbench: comm.base.page_aligned) */
    if (posix_memalign((void **)&host, 4096, bytes)) MPI_Abort(MPI_COMM_WORLD, 1);
    for (long i = 0; i < count; i++) host[i] = input(i, rank);
    if (!cuda) {
        *send = host;
        if (posix_memalign((void **)recv, 4096, bytes)) MPI_Abort(MPI_COMM_WORLD, 1);
        memset(*recv, 0, bytes);
        return;
    }
#ifdef FB_CUDA
    if (cudaMalloc((void **)send, bytes) != cudaSuccess ||
        cudaMalloc((void **)recv, bytes) != cudaSuccess ||
        cudaMemcpy(*send, host, bytes, cudaMemcpyHostToDevice) != cudaSuccess ||
        cudaMemset(*recv, 0, bytes) != cudaSuccess || cudaDeviceSynchronize() != cudaSuccess)
        MPI_Abort(MPI_COMM_WORLD, 1);
    if (staged && (cudaMallocHost((void **)&stage_send, bytes) != cudaSuccess ||
                   cudaMallocHost((void **)&stage_recv, bytes) != cudaSuccess))
        MPI_Abort(MPI_COMM_WORLD, 1);
#endif
    free(host);
}

/* How many elements of recv differ from what the op must leave there (then frees both). */
static long check_and_free(int cuda, int sendrecv, float *send, float *recv, long count,
                           int size, int prev) {
    float *got = recv;
#ifdef FB_CUDA
    if (cuda) {
        if (!(got = malloc((size_t)count * sizeof(float))) ||
            cudaMemcpy(got, recv, (size_t)count * sizeof(float), cudaMemcpyDeviceToHost) !=
                cudaSuccess)
            MPI_Abort(MPI_COMM_WORLD, 1);
        cudaFree(send);
        cudaFree(recv);
        if (stage_send) {
            cudaFreeHost(stage_send);
            cudaFreeHost(stage_recv);
            stage_send = stage_recv = NULL;
        }
    }
#endif
    long wrong = 0;
    for (long i = 0; i < count; i++) {
        float want = 0.0f;
        if (sendrecv)
            want = input(i, prev);
        else
            for (int r = 0; r < size; r++) want += input(i, r);
        wrong += got[i] != want;
    }
    if (!cuda) free(send);
    free(got);
    return wrong;
}

static void op_once(int sendrecv, float *send, float *recv, long count, int next, int prev) {
#ifdef FB_CUDA
    float *device_recv = recv;
    size_t bytes = (size_t)count * sizeof(float);
    if (stage_send) {
        if (cudaMemcpy(stage_send, send, bytes, cudaMemcpyDeviceToHost) != cudaSuccess)
            MPI_Abort(MPI_COMM_WORLD, 1);
        send = stage_send;
        recv = stage_recv;
    }
#endif
    if (sendrecv)
        MPI_Sendrecv(send, (int)count, MPI_FLOAT, next, 0, recv, (int)count, MPI_FLOAT, prev, 0,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    else
        MPI_Allreduce(send, recv, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
#ifdef FB_CUDA
    if (stage_send && cudaMemcpy(device_recv, recv, bytes, cudaMemcpyHostToDevice) != cudaSuccess)
        MPI_Abort(MPI_COMM_WORLD, 1);
#endif
}

int main(int argc, char **argv) {
    int cuda = 0, osu = 0, staged = 0, first = 2;
    for (int a = 2; a < argc && strncmp(argv[a], "--", 2) == 0; a++, first++) {
        if (strcmp(argv[a], "--cuda") == 0)
            cuda = 1;
        else if (strcmp(argv[a], "--osu") == 0)
            osu = 1;
        else if (strcmp(argv[a], "--staged") == 0)
            staged = 1;
    }
#ifdef FB_CUDA
    int devices = cuda ? cuda_select() : 0;
#endif
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int bad_flag = 0;
    for (int a = 2; a < first; a++)
        bad_flag |= strcmp(argv[a], "--cuda") != 0 && strcmp(argv[a], "--osu") != 0 &&
                    strcmp(argv[a], "--staged") != 0;
    if (argc < 2 || (strcmp(argv[1], "allreduce") && strcmp(argv[1], "sendrecv")) || bad_flag ||
        (staged && !cuda)) {
        if (rank == 0)
            fprintf(stderr, "usage: mpi_loop allreduce|sendrecv [--osu] [--cuda [--staged]] "
                            "BYTES...\n");
        MPI_Finalize();
        return 2;
    }
#ifndef FB_CUDA
    if (cuda) {
        if (rank == 0) fprintf(stderr, "mpi_loop: --cuda needs a build with -DFB_CUDA\n");
        MPI_Finalize();
        return 2;
    }
#else
    if (cuda) {
        int mine = devices > 0, all = 0;
        MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        if (!all) {
            if (rank == 0) {
                if (devices > 0)
                    fprintf(stderr, "mpi_loop: no CUDA device on another rank (rank 0 has %d)\n",
                            devices);
                else
                    fprintf(stderr, "mpi_loop: no CUDA device: %s\n",
                            cuda_error != cudaSuccess ? cudaGetErrorString(cuda_error)
                                                      : "cudaGetDeviceCount found 0 devices");
            }
            MPI_Finalize();
            return 3;
        }
        if (rank == 0) {
            int device = 0;
            struct cudaDeviceProp prop;
            cudaGetDevice(&device);
            cudaGetDeviceProperties(&prop, device);
            const char *aware = "unknown";
#if defined(MPIX_CUDA_AWARE_SUPPORT)
            aware = MPIX_Query_cuda_support() ? "yes" : "no";
#elif defined(MPIX_GPU_SUPPORT_CUDA)
            int gpu = 0;
            if (MPIX_GPU_query_support(MPIX_GPU_SUPPORT_CUDA, &gpu) == MPI_SUCCESS)
                aware = gpu ? "yes" : "no";
#endif
            fprintf(stderr, "mpi_loop: rank 0 on CUDA device %d of %d: %s; MPI CUDA-aware: %s\n",
                    device, devices, prop.name, aware);
        }
    }
#endif
    int sendrecv = strcmp(argv[1], "sendrecv") == 0;
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    long wrong_sizes = 0;
    for (int a = first; a < argc; a++) {
        long bytes = atol(argv[a]);
        long count = bytes / (long)sizeof(float);
        if (count < 1) count = 1;
        float *send, *recv;
        buffers(cuda, staged, count, rank, &send, &recv);
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
        } else {
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
                printf("%ld %.3f %d %d\n", count * (long)sizeof(float),
                       samples[SAMPLES / 2] * 1e6, SAMPLES, batch);
                fflush(stdout);
            }
        }
        long wrong = check_and_free(cuda, sendrecv, send, recv, count, size, prev), all;
        MPI_Allreduce(&wrong, &all, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
        if (all) {
            wrong_sizes++;
            if (rank == 0)
                fprintf(stderr, "mpi_loop: wrong result at %ld bytes: %ld elements differ\n",
                        count * (long)sizeof(float), all);
        }
    }
    MPI_Finalize();
    return wrong_sizes ? 4 : 0;
}
