/* The MPI job (shard.h). The only file that calls MPI: built with -DLINGEN_MPI (make MPI=1);
 * otherwise the process is the whole job and the collectives return at once. */
#define _GNU_SOURCE   /* sched_getaffinity, CPU_EQUAL */
#include "shard.h"

#include <stdio.h>

#ifdef LINGEN_MPI
#include <mpi.h>
#include <sched.h>
#include <stdlib.h>

#include "io/util.h"
#endif

void shard_range(long n, int rank, int size, long *first, long *count) {
    long base = n / size, extra = n % size;   /* the first n % size ranks take one more */
    *count = base + (rank < extra);
    *first = rank * base + (rank < extra ? rank : extra);
}

#ifdef LINGEN_MPI
static int rank = 0, size = 1, local_rank = 0, cores_shared = 1;

/* The ranks in node (this one included) that may run on exactly the cores this one may: all of
 * them when the launcher bound none (mpirun --bind-to none), only itself when it bound each to
 * cores of its own, those bound to the same socket when it bound by socket. */
static int same_cores(MPI_Comm node, int n) {
    cpu_set_t mine, *all = xcalloc(n, sizeof mine);
    CPU_ZERO(&mine);
    sched_getaffinity(0, sizeof mine, &mine);
    MPI_Allgather(&mine, sizeof mine, MPI_BYTE, all, sizeof mine, MPI_BYTE, node);
    int same = 0;
    for (int r = 0; r < n; r++) same += CPU_EQUAL(&mine, &all[r]) != 0;
    free(all);
    return same;
}

void shard_init(int *argc, char ***argv) {
    MPI_Init(argc, argv);   /* an MPI error ends the job with MPI's message */
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
    int local_size;
    MPI_Comm_rank(node, &local_rank);
    MPI_Comm_size(node, &local_size);
    cores_shared = same_cores(node, local_size);
    MPI_Comm_free(&node);
    if (rank > 0) freopen("/dev/null", "w", stdout);   /* rank 0 reports for the job */
}

int shard_finish(int rc) {
    MPI_Finalize();
    return rc;
}

int shard_rank(void) { return rank; }
int shard_size(void) { return size; }
int shard_local_rank(void) { return local_rank; }
int shard_cores_shared(void) { return cores_shared; }

int shard_agree(int rc) {
    if (size == 1) return rc;
    struct { int rc, rank; } mine = {rc, rank}, worst;   /* MAXLOC: the lowest rank of the largest code */
    MPI_Allreduce(&mine, &worst, 1, MPI_2INT, MPI_MAXLOC, MPI_COMM_WORLD);
    if (!worst.rc) return 0;
    char host[MPI_MAX_PROCESSOR_NAME] = "";
    int len;
    if (rank == worst.rank) MPI_Get_processor_name(host, &len);
    MPI_Bcast(host, sizeof host, MPI_CHAR, worst.rank, MPI_COMM_WORLD);
    if (rank == 0)
        fprintf(stderr, "lingen: rank %d of %d (on %s) failed: the job stops\n", worst.rank, size, host);
    return worst.rc;
}

int shard_max(int v) {
    int m = v;
    if (size > 1) MPI_Allreduce(&v, &m, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return m;
}

void shard_barrier(void) {
    if (size > 1) MPI_Barrier(MPI_COMM_WORLD);
}

long shard_gather(void *buf, long count, size_t bytes) {
    if (size == 1) return count;
    int mine = (int)count, *counts = NULL, *starts = NULL;
    long total = count;
    if (rank == 0) {
        counts = xcalloc(size, sizeof(int));
        starts = xcalloc(size, sizeof(int));
    }
    MPI_Gather(&mine, 1, MPI_INT, counts, 1, MPI_INT, 0, MPI_COMM_WORLD);
    for (int r = 0, at = 0; rank == 0 && r < size; at += counts[r++]) starts[r] = at;
    if (rank == 0) total = starts[size - 1] + counts[size - 1];
    MPI_Datatype item;   /* counts in items: a million CIFAR-10 images are 3 GB, past an int of bytes */
    MPI_Type_contiguous((int)bytes, MPI_BYTE, &item);
    MPI_Type_commit(&item);
    MPI_Gatherv(rank == 0 ? MPI_IN_PLACE : buf, mine, item, buf, counts, starts, item, 0, MPI_COMM_WORLD);
    MPI_Type_free(&item);
    free(counts);
    free(starts);
    return total;
}

#else   /* one process: the whole job */
void shard_init(int *argc, char ***argv) { (void)argc; (void)argv; }
int shard_finish(int rc) { return rc; }
int shard_rank(void) { return 0; }
int shard_size(void) { return 1; }
int shard_local_rank(void) { return 0; }
int shard_cores_shared(void) { return 1; }
int shard_agree(int rc) { return rc; }
int shard_max(int v) { return v; }
void shard_barrier(void) {}
long shard_gather(void *buf, long count, size_t bytes) { (void)buf; (void)bytes; return count; }
#endif
