// SPDX-License-Identifier: Apache-2.0
/* A lazy layer's failed reads on its units' status (issue 29; docs/
 * agent-supervisor.md "Lazy layers"). A unit whose rootfs overlay has a
 * lazily served eStargz layer below it reads through that layer's server;
 * when the registry stalls or fails, the server answers the read with EIO
 * and records why in its stats file (imagepull/lazy.c, parsed strictly by
 * agent/base/lazystats.c). The supervisor shows that line as the running
 * unit's `running.message` (an extension Kip ignores), and as its
 * `terminated.message` ("lazy pull: …") when the unit ends without a
 * termination message of its own; and logs it once per layer.
 *
 * Which layers: the lowerdir of the overlay at <run>/rootfs in
 * /proc/self/mountinfo (the pull names a lazy layer there as
 * lazy/<algo>-<hex>/mnt), found once per run, so an agent restarted
 * after a kill -9 finds them as the one that started the run did. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buf.h"
#include "cleanup.h"
#include "fsutil.h"
#include "lazystats.h"
#include "log.h"
#include "sup-internal.h"
#include "util.h"

#define MOUNTINFO_MAX (16u << 20)
/* How often the running units' layers are looked at. */
#define LAZYFAIL_EVERY_NS (500 * 1000000ull)
#define LAYERS_MAX 128 /* an overlay has at most 500 lowers; lazy far fewer */

/* "<algo>-<hex>": a lazy layer's directory name, nothing else. */
static bool layer_name_ok(const char *s, size_t n)
{
	const char *dash = memchr(s, '-', n);

	if (!dash || dash == s || n - (size_t)(dash - s) < 2 || n >= 80)
		return false;
	for (const char *p = s; p < s + n; p++)
		if (!(p == dash || (*p >= 'a' && *p <= 'z') ||
		      (*p >= '0' && *p <= '9')))
			return false;
	return true;
}

/* One lowerdir entry: the layer's name when it ends in lazy/<name>/mnt. */
static char *lazy_lower(const char *d)
{
	size_t n = strlen(d);
	const char *name, *slash;

	if (n < 10 || strcmp(d + n - 4, "/mnt"))
		return NULL;
	n -= 4;
	slash = d + n;
	name = slash;
	while (name > d && name[-1] != '/')
		name--;
	if (name - d < 5 || memcmp(name - 5, "lazy/", 5) ||
	    (name - d > 5 && name[-6] != '/'))
		return NULL;
	if (!layer_name_ok(name, (size_t)(slash - name)))
		return NULL;
	return xstrndup(name, (size_t)(slash - name));
}

static void add_layers(char *opts, char ***out, size_t *n)
{
	char *save = NULL, *o;

	for (o = strtok_r(opts, ",", &save); o;
	     o = strtok_r(NULL, ",", &save)) {
		char *s2 = NULL, *d;

		if (strncmp(o, "lowerdir=", 9))
			continue;
		fs_mountinfo_unescape(o);
		for (d = strtok_r(o + 9, ":", &s2); d && *n < LAYERS_MAX;
		     d = strtok_r(NULL, ":", &s2)) {
			char *name = lazy_lower(d);

			if (!name)
				continue;
			*out = xrealloc(*out, (*n + 2) * sizeof(**out));
			(*out)[(*n)++] = name;
			(*out)[*n] = NULL;
		}
	}
}

char **lazyfail_layers_parse(char *mountinfo, const char *mp)
{
	char **out = xcalloc(1, sizeof(*out)), *save = NULL, *line;
	size_t n = 0;

	for (line = strtok_r(mountinfo, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		char *f[6], *sep = strstr(line, " - "), *s2 = NULL;
		size_t k = 0;

		if (!sep)
			continue;
		*sep = '\0';
		for (char *t = strtok_r(line, " ", &s2); t && k < 6;
		     t = strtok_r(NULL, " ", &s2))
			f[k++] = t;
		if (k < 5)
			continue;
		fs_mountinfo_unescape(f[4]);
		if (strcmp(f[4], mp))
			continue;
		/* "overlay <source> <super options>": the last mount at mp
		 * is the one a process sees there. */
		s2 = NULL;
		char *type = strtok_r(sep + 3, " ", &s2);
		char *src = type ? strtok_r(NULL, " ", &s2) : NULL;
		char *opts = src ? strtok_r(NULL, " ", &s2) : NULL;

		if (!type || strcmp(type, "overlay"))
			continue;
		strv_free(out);
		out = xcalloc(1, sizeof(*out));
		n = 0;
		if (opts)
			add_layers(opts, &out, &n);
	}
	return out;
}

/* The run's lazy layers, from the mount table (once per run; not read at
 * all while the cache has no lazy layer, which is a unit start's cost). */
static void find_layers(const struct supervisor *s, struct unit_rec *u)
{
	cleanup_free char *run = unit_run_dir(u, u->seq);
	cleanup_free char *lazy = xasprintf("%s/lazy", s->o.image_cache);
	cleanup_free char *real = NULL, *mp = NULL;
	struct cerr e = {0};
	struct buf b;

	if (u->lazy_seq == u->seq)
		return;
	strv_free(u->lazy_layers);
	u->lazy_layers = NULL;
	u->lazy_seq = u->seq;
	u->lazy_base = 0;
	if (access(lazy, F_OK) < 0)
		return;
	real = realpath(run, NULL);
	if (!real)
		return;
	mp = xasprintf("%s/rootfs", real);
	buf_init(&b, MOUNTINFO_MAX);
	if (fs_read_file("/proc/self/mountinfo", &b, &e) < 0)
		log_warn("unit %s: lazy layers: %s", u->name, e.msg);
	else if (b.data)
		u->lazy_layers = lazyfail_layers_parse(b.data, mp);
	buf_free(&b);
	if (u->lazy_layers && !u->lazy_layers[0]) {
		strv_free(u->lazy_layers);
		u->lazy_layers = NULL;
	}
}

/* Failed reads of the run's layers, summed, and the cause of the first
 * layer (top first) that has one. */
static uint64_t failures(const struct unit_rec *u, char *why,
			 const char **layer)
{
	uint64_t sum = 0;

	why[0] = '\0';
	for (size_t i = 0; u->lazy_layers && u->lazy_layers[i]; i++) {
		char w[LAZYSTATS_FAILURE_MAX];
		struct lazystats st;

		if (lazystats_layer(u->lazy_layers[i], &st, w) < 0)
			continue;
		sum += st.failed_reads;
		if (w[0] && !why[0]) {
			snprintf(why, LAZYSTATS_FAILURE_MAX, "%s", w);
			*layer = u->lazy_layers[i];
		}
	}
	return sum;
}

void lazyfail_run_started(const struct supervisor *s, struct unit_rec *u)
{
	char why[LAZYSTATS_FAILURE_MAX];
	const char *layer = NULL;

	find_layers(s, u);
	/* Failures before this run are not its own. */
	u->lazy_base = failures(u, why, &layer);
}

/* Once per layer in the agent's log (for the agent's life). */
static void log_once(struct supervisor *s, const char *layer, const char *why)
{
	size_t n = strv_len(s->lazy_logged);

	for (size_t i = 0; i < n; i++)
		if (!strcmp(s->lazy_logged[i], layer))
			return;
	log_warn("lazy layer %s: reads fail: %s", layer, why);
	s->lazy_logged = xrealloc(s->lazy_logged, (n + 2) * sizeof(char *));
	s->lazy_logged[n] = xstrdup(layer);
	s->lazy_logged[n + 1] = NULL;
}

/* The cause when the run's layers failed reads since it started, else
 * false. */
static bool run_failed(struct supervisor *s, struct unit_rec *u, char *why)
{
	const char *layer = NULL;
	uint64_t sum;

	find_layers(s, u);
	if (!u->lazy_layers)
		return false;
	sum = failures(u, why, &layer);
	if (sum < u->lazy_base) /* a new server counts from 0 */
		u->lazy_base = 0;
	if (sum == u->lazy_base || !why[0])
		return false;
	log_once(s, layer, why);
	return true;
}

void lazyfail_tick(struct supervisor *s)
{
	uint64_t now = s->ops->now();

	if (now - s->lazy_checked_ns < LAZYFAIL_EVERY_NS)
		return;
	s->lazy_checked_ns = now;
	for (size_t i = 0; i < s->n_units; i++) {
		struct unit_rec *u = &s->units[i];
		char why[LAZYSTATS_FAILURE_MAX];
		struct cerr e = {0};

		if (u->phase != PH_RUNNING || u->state.kind != STATE_RUNNING ||
		    !run_failed(s, u, why))
			continue;
		if (u->state.message && !strcmp(u->state.message, why))
			continue;
		free(u->state.message);
		u->state.message = xstrdup(why);
		if (record_save(u, &e) < 0)
			log_warn("unit %s: %s", u->name, e.msg);
	}
}

char *lazyfail_exit_message(struct supervisor *s, struct unit_rec *u)
{
	char why[LAZYSTATS_FAILURE_MAX];

	if (!run_failed(s, u, why))
		return NULL;
	return xasprintf("lazy pull: %s", why);
}
