/* One job over the processes (ranks) of an MPI job: `make MPI=1`, then mpirun or srun. sample
 * and eval give each rank a contiguous share of the images; rank 0 gathers the results and
 * speaks for the job. Every rank calls the collective functions below at the same points, and
 * a rank that failed says so at the next of them (shard_agree), so no rank waits for one that
 * has given up. Without MPI (the default build) the process is rank 0 of 1 and each function
 * is trivial. */
#ifndef LINGEN_SHARD_H
#define LINGEN_SHARD_H
#include <stddef.h>

/* Start MPI (before the command parses its options); ranks other than 0 send stdout to
 * /dev/null: one report for the job. shard_finish stops MPI and returns rc. */
void shard_init(int *argc, char ***argv);
int  shard_finish(int rc);

int shard_rank(void);
int shard_size(void);
/* This rank's place among the ranks on its node (those that share its memory and GPUs). */
int shard_local_rank(void);
/* The ranks on this node, this one included, that may run on the same cores as this one (its CPU
 * affinity): they divide those cores between them. */
int shard_cores_shared(void);

/* Rank `rank` of `size` takes items [*first, *first + *count) of n: contiguous, in rank order,
 * shares differing by at most one. */
void shard_range(long n, int rank, int size, long *first, long *count);

/* Collective. Every rank passes its status (0, or the exit code of its failure, whose message
 * it has printed); all get the largest. When some rank failed, rank 0 says which and where. */
int shard_agree(int rc);
/* Collective: the largest v of any rank. */
int shard_max(int v);
void shard_barrier(void);
/* Collective: each rank's `count` items of `size` bytes at buf, gathered into rank 0's buf in
 * rank order (rank 0's own come first, where they already are: rank 0's buf must hold every
 * rank's items). Returns the items rank 0 now holds (another rank: its own count). */
long shard_gather(void *buf, long count, size_t size);
#endif
