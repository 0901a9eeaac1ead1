/* fabbench's MPI batch loop: n back-to-back operations of one kind, called once per sample by
 * the timing engine (fabbench.comm.batch_loop), so that a sample times the library and not the
 * Python interpreter's call into it (about 1-2 us per call through mpi4py, which is the whole
 * latency of a shared-memory allreduce of a few bytes). Handles arrive as Fortran integers
 * (mpi4py's py2f) and are converted here, which works with every MPI's C handle type.
 * Returns MPI_SUCCESS or the first error code (the communicator returns errors). */
#include <mpi.h>
#include <stdio.h>

enum { ALLREDUCE, ALLGATHER, REDUCE_SCATTER, BROADCAST, ALLTOALL, SENDRECV };

/* The MPI whose header this was compiled against, as "vendor major.minor", checked against the
 * library mpi4py loaded before the loop is used. */
const char *fb_mpi_header(void) {
    static char text[64];
#if defined(OMPI_MAJOR_VERSION)
    snprintf(text, sizeof text, "Open MPI %d.%d", OMPI_MAJOR_VERSION, OMPI_MINOR_VERSION);
#elif defined(MPICH_NUMVERSION)
    snprintf(text, sizeof text, "MPICH %d.%d", MPICH_NUMVERSION / 10000000,
             MPICH_NUMVERSION / 100000 % 100);
#else
    snprintf(text, sizeof text, "unknown %d.%d", MPI_VERSION, MPI_SUBVERSION);
#endif
    return text;
}

static int one(int op, MPI_Comm comm, const void *send, void *recv, int count,
               MPI_Datatype type, MPI_Op reduce, int dest, int source, int tag) {
    switch (op) {
    case ALLREDUCE:
        return MPI_Allreduce(send, recv, count, type, reduce, comm);
    case ALLGATHER:
        return MPI_Allgather(send, count, type, recv, count, type, comm);
    case REDUCE_SCATTER:
        return MPI_Reduce_scatter_block(send, recv, count, type, reduce, comm);
    case BROADCAST:
        return MPI_Bcast(recv, count, type, 0, comm);
    case ALLTOALL:
        return MPI_Alltoall(send, count, type, recv, count, type, comm);
    case SENDRECV:
        return MPI_Sendrecv(send, count, type, dest, tag, recv, count, type, source, tag, comm,
                            MPI_STATUS_IGNORE);
    default:
        return MPI_ERR_OP;
    }
}

/* n operations back to back (fabbench's default protocol: the caller times the batch). */
int fb_batch(int op, MPI_Fint fcomm, const void *send, void *recv, int count, MPI_Fint ftype,
             MPI_Fint fop, int dest, int source, int tag, long n) {
    MPI_Comm comm = MPI_Comm_f2c(fcomm);
    MPI_Datatype type = MPI_Type_f2c(ftype);
    MPI_Op reduce = MPI_Op_f2c(fop);
    int rc = MPI_SUCCESS;
    for (long i = 0; i < n && rc == MPI_SUCCESS; i++)
        rc = one(op, comm, send, recv, count, type, reduce, dest, source, tag);
    return rc;
}

/* OSU's protocol (--timing osu): each operation timed alone with MPI_Wtime, a barrier after it
 * (not timed); *spent gets the sum of the n operations' times. */
int fb_each(int op, MPI_Fint fcomm, const void *send, void *recv, int count, MPI_Fint ftype,
            MPI_Fint fop, int dest, int source, int tag, long n, double *spent) {
    MPI_Comm comm = MPI_Comm_f2c(fcomm);
    MPI_Datatype type = MPI_Type_f2c(ftype);
    MPI_Op reduce = MPI_Op_f2c(fop);
    int rc = MPI_SUCCESS;
    double sum = 0.0;
    for (long i = 0; i < n && rc == MPI_SUCCESS; i++) {
        double t0 = MPI_Wtime();
        rc = one(op, comm, send, recv, count, type, reduce, dest, source, tag);
        sum += MPI_Wtime() - t0;
        if (rc == MPI_SUCCESS)
            rc = MPI_Barrier(comm);
    }
    *spent = sum;
    return rc;
}
