/* hashbench.h - filterbench --hashes (hashbench.c): the hash shoot-out. */
#ifndef KV_TOOLS_HASHBENCH_H
#define KV_TOOLS_HASHBENCH_H

/* Runs the experiment with filterbench's command line (which holds
 * --hashes); returns the exit code: 0, 1 (a fault: a contender missed a
 * key it added; out of memory), 2 (bad arguments). */
int filterbench_hashes(int argc, char **argv);

#endif /* KV_TOOLS_HASHBENCH_H */
