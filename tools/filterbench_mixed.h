/* filterbench_mixed.h - filterbench --mixed (filterbench_mixed.c): threads
 * doing 50% adds and 50% queries on one filter, lock-free against a mutex
 * and a read-write lock. */
#ifndef KV_FILTERBENCH_MIXED_H
#define KV_FILTERBENCH_MIXED_H

/* Runs the --mixed mode on filterbench's whole command line (which holds
 * --mixed); returns the exit code: 0, 1 (a fault or no memory), 2 (bad
 * arguments). */
int filterbench_mixed(int argc, char **argv);

#endif /* KV_FILTERBENCH_MIXED_H */
