/* filterbench_range.h - filterbench --range (filterbench_range.c): kv's
 * range filter (<kv/range_filter.h>) over empty ranges of several widths,
 * measured false-positive rate beside the expected one. */
#ifndef KV_TOOLS_FILTERBENCH_RANGE_H
#define KV_TOOLS_FILTERBENCH_RANGE_H

/* Runs the --range mode on filterbench's whole command line (which holds
 * --range); returns the exit code: 0, 1 (a false negative, a filter that
 * could not be built, no memory, a file not written), 2 (bad arguments). */
int filterbench_range(int argc, char **argv);

#endif /* KV_TOOLS_FILTERBENCH_RANGE_H */
