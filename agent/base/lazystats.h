// SPDX-License-Identifier: Apache-2.0
/* The lazy eStargz layers' counters (docs/imagepull.md "Lazy pulling",
 * "Counters"): each layer's server (a cell-pull --lazy-layer child, which
 * parses registry data and may be hostile) writes
 * <image cache>/lazy/<algo>-<hex>/stats every few seconds and at its
 * exit; the agent's scrape reads them (bounded, strict) and keeps totals
 * that never go back when a layer's directory is removed or a new server
 * starts counting again from 0. */
#ifndef CELL_LAZYSTATS_H
#define CELL_LAZYSTATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LAZYSTATS_FILE_MAX 512 /* a longer file is refused */
#define LAZYSTATS_LAYERS_MAX 256
/* last_failure's text at most, its NUL included. */
#define LAZYSTATS_FAILURE_MAX 160

struct lazystats {
	uint64_t demand_bytes, background_bytes;
	uint64_t demand_fetches, demand_ns;
	uint64_t refused;
	uint64_t failed_reads; /* reads the server answered with EIO */
};

/* Parse one stats file: exactly the lines "pid N", "demand_bytes N",
 * "background_bytes N", "demand_fetches N", "demand_ns N", "refused N",
 * each once, in any order, N decimal digits without sign or leading
 * zeros (but "0"), at most 2^63-1; and at most once each "failed_reads
 * N" (absent: 0, a server older than the line) and "last_failure TEXT"
 * (only with failed_reads at least 1; TEXT 1 to LAZYSTATS_FAILURE_MAX - 1
 * bytes of printable ASCII, the first no space). Each line ends in '\n'.
 * Anything else (another key, a key twice or missing, spaces, a NUL, a
 * byte over 0x7e in TEXT, a longer file): -1, out, pid and failure
 * untouched. failure (LAZYSTATS_FAILURE_MAX bytes, or NULL) gets TEXT, or
 * "" when there is none. Pure (fuzzed by fuzz-lazystats.c). */
int lazystats_parse(const char *buf, size_t n, struct lazystats *out,
		    uint64_t *pid, char *failure);

/* Where the layers are: <image cache>/lazy (set once at start; NULL: no
 * lazy counters). */
void lazystats_set_dir(const char *image_cache);
/* Read every layer's file now and return the totals since the agent
 * started (the scrape thread, under its own turn-taking). */
void lazystats_totals(struct lazystats *out);
/* One layer's file now ("<algo>-<hex>", its directory's name): 0 with
 * its counts and last failure (LAZYSTATS_FAILURE_MAX bytes, "" when
 * none), -1 when it is not there or refused. */
int lazystats_layer(const char *name, struct lazystats *st, char *failure);

#endif
