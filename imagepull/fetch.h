// SPDX-License-Identifier: Apache-2.0
/* Shared state of one pull's layer pipelines (fetch.c, pull.c). */
#ifndef CELL_FETCH_H
#define CELL_FETCH_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "digest.h"
#include "pull-internal.h"

struct fetch;

/* One unique layer blob: a download into the spool, read by layer jobs. */
struct blob_job {
	struct fetch *fetch;
	const struct descriptor *desc;
	int first_layer; /* for progress events */
	bool needed;	 /* some layer must read it */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int fd;		/* reader fd on the spool or cached blob */
	uint64_t avail; /* bytes readable at fd */
	bool done, failed, cached;
	struct cerr err;
	/* writer side, owned by the download thread */
	int wfd;
	struct hasher hash;
	uint64_t written, reported;
};

/* One layer of the image, bottom first. */
struct layer_job {
	int index;
	const char *diff_id;
	struct blob_job *blob;
	bool needed; /* overlay: not yet in the cache */
	bool lazy;   /* overlay: an eStargz layer served through FUSE */
};

struct fetch {
	const struct cache *cache;
	const struct shared *shared; /* second tier, or NULL */
	struct registry *reg;
	bool validate;
	uint64_t reserve; /* free bytes unpacking leaves (pull_opts) */
	int n_layers;
	pthread_mutex_t mu; /* guards the fields below and emit */
	bool aborted;
	struct cerr first_err;
	pull_progress_fn progress;
	void *progress_arg;
	struct blob_job *blobs;
	int n_blobs;
};

void fetch_abort(struct fetch *f, const struct cerr *e);
void fetch_emit(struct fetch *f, const struct pull_event *ev);
void blob_job_run(struct fetch *f, struct blob_job *b);
int layer_unpack(struct fetch *f, struct layer_job *l, int rootfd,
		 enum unpack_mode mode, struct cerr *e);
/* The layer's lock into *lock, and tmp (relative to the cache) made
 * afresh for it: 1 when the layer is in the cache already, 0, or -1. */
int fetch_layer_claim(const struct cache *c, const char *diff_id,
		      const char *tmp, int *lock, struct cerr *e);
/* Unpack one layer into the cache in overlay form: tmp/layer-<diff-id>,
 * checked against its diff-id, then renamed into layers/ (a pull's layer
 * thread, and a lazy layer's promotion once its blob is whole). */
int fetch_overlay_layer(struct fetch *f, struct layer_job *l, struct cerr *e);

#endif
