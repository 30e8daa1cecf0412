// SPDX-License-Identifier: Apache-2.0
/* Unit records: what the agent must remember of a unit across its own
 * restarts (restart count, run number, back-off, last states), one JSON
 * file per unit, written atomically. What a run itself did is in the run's
 * directory (the monitor's state.json and exit.json). */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "buf.h"
#include "cleanup.h"
#include "fsutil.h"
#include "jsonutil.h"
#include "pullproc.h"
#include "sup-internal.h"
#include "util.h"

#define RECORD_MAX (1u << 20)

void unit_state_clear(struct unit_state *st)
{
	free(st->reason);
	free(st->message);
	memset(st, 0, sizeof(*st));
}

void unit_state_copy(struct unit_state *dst, const struct unit_state *src)
{
	unit_state_clear(dst);
	*dst = *src;
	dst->reason = src->reason ? xstrdup(src->reason) : NULL;
	dst->message = src->message ? xstrdup(src->message) : NULL;
}

char *unit_run_dir(const struct unit_rec *u, int seq)
{
	return xasprintf("%s/%d", u->dir, seq);
}

void unit_rec_free(struct unit_rec *u)
{
	if (u->pull) /* its descriptors leave the epoll set as they close */
		pullproc_kill(u->pull);
	free(u->pull);
	free(u->name);
	free(u->fingerprint);
	free(u->net);
	free(u->podns);
	free(u->image);
	free(u->dir);
	strv_free(u->devices);
	strv_free(u->lazy_layers);
	unit_state_clear(&u->state);
	unit_state_clear(&u->last_state);
}

static json_t *state_json(const struct unit_state *st)
{
	json_t *j = json_object();

	json_object_set_new(j, "kind", json_integer(st->kind));
	if (st->reason)
		json_object_set_new(j, "reason", json_string(st->reason));
	if (st->message)
		json_object_set_new(j, "message", json_string(st->message));
	json_object_set_new(j, "startFailure", json_boolean(st->start_failure));
	json_object_set_new(j, "exitCode", json_integer(st->exit_code));
	json_object_set_new(j, "startedAt", json_integer(st->started_at_ns));
	json_object_set_new(j, "finishedAt", json_integer(st->finished_at_ns));
	return j;
}

static void state_from(const json_t *j, struct unit_state *st)
{
	long long v;

	unit_state_clear(st);
	if (!json_is_object(j))
		return;
	if (jint(j, "kind", 0, &v, NULL) == 0 && v >= 0 &&
	    v <= STATE_TERMINATED)
		st->kind = (enum unit_state_kind)v;
	st->reason = jstrdup(j, "reason");
	st->message = jstrdup(j, "message");
	st->start_failure = json_is_true(json_object_get(j, "startFailure"));
	if (jint(j, "exitCode", 0, &v, NULL) == 0)
		st->exit_code = (int)v;
	if (jint(j, "startedAt", 0, &v, NULL) == 0)
		st->started_at_ns = v;
	if (jint(j, "finishedAt", 0, &v, NULL) == 0)
		st->finished_at_ns = v;
}

/* Replaced, not synced (fs_replace): a record outlives the agent dying;
 * a machine that reboots has lost its units anyway, and the spec (synced)
 * restarts them. */
int record_save(const struct unit_rec *u, struct cerr *e)
{
	cleanup_json json_t *j = json_object();
	cleanup_free char *text = NULL, *path = NULL;

	json_object_set_new(j, "name", json_string(u->name));
	json_object_set_new(j, "init", json_boolean(u->is_init));
	json_object_set_new(j, "fingerprint",
			    json_string(u->fingerprint ? u->fingerprint : ""));
	json_object_set_new(j, "image", json_string(u->image ? u->image : ""));
	if (u->net)
		json_object_set_new(j, "podNet", json_string(u->net));
	if (u->podns)
		json_object_set_new(j, "podNs", json_string(u->podns));
	json_object_set_new(j, "phase", json_integer(u->phase));
	json_object_set_new(j, "restartCount", json_integer(u->restart_count));
	json_object_set_new(j, "seq", json_integer(u->seq));
	if (u->starting > u->seq)
		json_object_set_new(j, "starting", json_integer(u->starting));
	json_object_set_new(j, "backoff", json_integer(u->backoff_n));
	json_object_set_new(j, "state", state_json(&u->state));
	json_object_set_new(j, "lastState", state_json(&u->last_state));
	if (u->devices && u->devices[0]) {
		json_t *d = json_array();
		for (size_t i = 0; u->devices[i]; i++)
			json_array_append_new(d, json_string(u->devices[i]));
		json_object_set_new(j, "devices", d);
	}
	text = json_dumps(j, JSON_COMPACT);
	if (fs_mkdir_p(u->dir, 0700, e) < 0)
		return -1;
	path = xasprintf("%s/unit.json", u->dir);
	return fs_replace(path, text, strlen(text), 0600, e);
}

static json_t *record_read(const struct unit_rec *u, struct cerr *e)
{
	cleanup_free char *path = xasprintf("%s/unit.json", u->dir);
	json_t *j = NULL;
	struct buf b;
	const char *name;

	buf_init(&b, RECORD_MAX);
	if (fs_read_file(path, &b, e) == 0)
		j = json_parse_object(b.data, b.len, e);
	buf_free(&b);
	if (!j)
		return NULL;
	/* The record must be this unit's: same name, same kind. */
	name = json_string_value(json_object_get(j, "name"));
	if (!name || strcmp(name, u->name) ||
	    json_is_true(json_object_get(j, "init")) != u->is_init) {
		json_decref(j);
		cerr_set(e, ENOENT, "%s holds another unit's record", path);
		return NULL;
	}
	return j;
}

bool record_matches(const struct unit_rec *u, struct cerr *e)
{
	json_t *j = record_read(u, e);

	json_decref(j);
	return j != NULL;
}

int record_load(struct unit_rec *u, struct cerr *e)
{
	cleanup_json json_t *j = record_read(u, e);
	long long v;

	if (!j)
		return -1;
	free(u->fingerprint);
	u->fingerprint = jstrdup(j, "fingerprint");
	free(u->net);
	u->net = jstrdup(j, "podNet");
	free(u->podns);
	u->podns = jstrdup(j, "podNs");
	if (jint(j, "phase", 0, &v, NULL) == 0 && v >= 0 && v <= PH_FAILED)
		u->phase = (enum unit_phase)v;
	if (jint(j, "restartCount", 0, &v, NULL) == 0)
		u->restart_count = (int)v;
	if (jint(j, "seq", 0, &v, NULL) == 0)
		u->seq = (int)v;
	u->starting = 0;
	if (jint(j, "starting", 0, &v, NULL) == 0 && v > u->seq &&
	    v < INT32_MAX)
		u->starting = (int)v;
	if (jint(j, "backoff", 0, &v, NULL) == 0)
		u->backoff_n = (int)v;
	state_from(json_object_get(j, "state"), &u->state);
	state_from(json_object_get(j, "lastState"), &u->last_state);
	strv_free(u->devices);
	u->devices = NULL;
	if (jstrv(j, "devices", &u->devices, NULL) < 0)
		u->devices = NULL; /* a record of an older agent: none */
	return 0;
}
