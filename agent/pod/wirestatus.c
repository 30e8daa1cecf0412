// SPDX-License-Identifier: Apache-2.0
/* PodStatusReply out (WIRE.md): struct pod_status as the controller's JSON.
 * The decoder of PodParameters is wire.c. Strings from units (messages,
 * termination logs) may be any bytes: they go out as valid UTF-8. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "podspec.h"
#include "jsonutil.h"
#include "util.h"

/* Length of the valid UTF-8 sequence at s (jansson's rules: no overlongs,
 * no surrogates, nothing above U+10FFFF), or 0. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
	size_t len;
	uint32_t cp;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		len = 2, cp = s[0] & 0x1f;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		len = 3, cp = s[0] & 0x0f;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		len = 4, cp = s[0] & 0x07;
	else
		return 0;
	if (len > n)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
	    cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

/* Status strings come from outside (a unit's termination message is
 * whatever it wrote): invalid UTF-8 becomes U+FFFD, as Go's encoder would
 * do, instead of making jansson refuse the string. */
static char *utf8_lossy(const char *in)
{
	const unsigned char *s = (const unsigned char *)in;
	size_t n = strlen(in), o = 0;
	char *out = xmalloc(n * 3 + 1);

	for (size_t i = 0; i < n;) {
		size_t l = utf8_len(s + i, n - i);
		if (l) {
			memcpy(out + o, s + i, l);
			o += l;
			i += l;
		} else {
			memcpy(out + o, "\xef\xbf\xbd", 3);
			o += 3;
			i++;
		}
	}
	out[o] = '\0';
	return out;
}

static json_t *jstring(const char *s)
{
	json_t *j = json_string(s ? s : "");

	if (!j) {
		cleanup_free char *fixed = utf8_lossy(s);
		j = json_string(fixed);
	}
	if (!j)
		abort(); /* out of memory */
	return j;
}

static bool utf8_valid(const char *in)
{
	const unsigned char *s = (const unsigned char *)in;
	size_t n = strlen(in);

	for (size_t i = 0, l; i < n; i += l)
		if (!(l = utf8_len(s + i, n - i)))
			return false;
	return true;
}

/* json_object_set_new that cannot fail quietly. The key is made valid UTF-8
 * first: jansson refuses other keys and consumes the value when it does. */
static void jset(json_t *o, const char *key, json_t *v)
{
	cleanup_free char *fixed = utf8_valid(key) ? NULL : utf8_lossy(key);

	if (!v || json_object_set_new(o, fixed ? fixed : key, v) < 0)
		abort(); /* out of memory */
}

/* RFC 3339 UTC with second precision, the way Go's time.RFC3339 prints it;
 * a zero time is null (Go's Time would otherwise say 0001-01-01). */
static json_t *jtime(int64_t ns)
{
	struct tm tm;
	char buf[64];
	time_t secs;

	if (ns == 0)
		return json_null();
	secs = (time_t)(ns / 1000000000 - (ns % 1000000000 < 0));
	if (!gmtime_r(&secs, &tm) ||
	    !strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm))
		return json_null();
	return json_string(buf);
}

static json_t *state_json(const struct unit_state *st)
{
	json_t *o = json_object(), *in = json_object();

	switch (st->kind) {
	case STATE_WAITING:
		jset(in, "reason", jstring(st->reason));
		jset(in, "startFailure", json_boolean(st->start_failure));
		jset(o, "waiting", in);
		return o;
	case STATE_RUNNING:
		jset(in, "startedAt", jtime(st->started_at_ns));
		/* A warning of its start (docs/agent-wire.md). */
		if (st->message)
			jset(in, "message", jstring(st->message));
		jset(o, "running", in);
		return o;
	case STATE_TERMINATED:
		jset(in, "exitCode", json_integer(st->exit_code));
		jset(in, "finishedAt", jtime(st->finished_at_ns));
		jset(in, "reason", jstring(st->reason));
		jset(in, "message", jstring(st->message));
		jset(in, "startedAt", jtime(st->started_at_ns));
		jset(o, "terminated", in);
		return o;
	case STATE_NONE:
	default:
		json_decref(in);
		return o;
	}
}

static json_t *unit_status_json(const struct unit_status *u)
{
	json_t *o = json_object();
	/* Kip decodes restartCount into an int32. */
	int rc = u->restart_count < 0 ? 0 : u->restart_count;

	jset(o, "name", jstring(u->name));
	jset(o, "image", jstring(u->image));
	jset(o, "ready", json_boolean(u->ready));
	jset(o, "started",
	     u->started < 0 ? json_null() : json_boolean(u->started));
	jset(o, "restartCount", json_integer(rc));
	jset(o, "state", state_json(&u->state));
	jset(o, "lastState", state_json(&u->last_state));
	if (u->devices && u->devices[0]) { /* cellctl status -o wide */
		json_t *d = json_array();
		for (size_t i = 0; u->devices[i]; i++)
			json_array_append_new(d, json_string(u->devices[i]));
		jset(o, "devices", d);
	}
	return o;
}

static json_t *statuses_json(const struct unit_status *u, size_t n)
{
	json_t *a = json_array();

	for (size_t i = 0; u && i < n; i++)
		if (json_array_append_new(a, unit_status_json(&u[i])) < 0)
			abort();
	return a;
}

/* A resourceUsage value: Kip decodes a map[string]float64, so anything but
 * a finite number would make it drop the whole reply. Integral values are
 * written as integers, others as reals; text that is no number is NULL. */
static json_t *usage_number(const char *s)
{
	char *end;
	long long i;
	double d;

	if (!s || !*s || strspn(s, "0123456789+-.eE") != strlen(s))
		return NULL;
	errno = 0;
	i = strtoll(s, &end, 10);
	if (!*end && !errno)
		return json_integer(i);
	errno = 0;
	d = strtod(s, &end);
	if (*end || !isfinite(d))
		return NULL;
	if (d == floor(d) && fabs(d) < 9223372036854775808.0)
		return json_integer((json_int_t)d);
	return json_real(d);
}

static json_t *usage_json(const struct pod_status *s)
{
	json_t *o = json_object();

	for (size_t i = 0; s->usage && i < s->n_usage; i++) {
		json_t *v =
		    s->usage[i].name ? usage_number(s->usage[i].value) : NULL;
		if (v)
			jset(o, s->usage[i].name, v);
	}
	return o;
}

char *wire_status_json(const struct pod_status *s)
{
	cleanup_json json_t *root = json_object();
	json_t *usage;
	char *txt;

	jset(root, "unitStatus", statuses_json(s->units, s->n_units));
	jset(root, "initUnitStatus",
	     statuses_json(s->init_units, s->n_init_units));
	usage = s->n_usage ? usage_json(s) : NULL;
	if (usage && json_object_size(usage))
		jset(root, "resourceUsage", usage);
	else if (usage)
		json_decref(usage);
	jset(root, "podIP", jstring(s->pod_ip));
	txt = json_dumps(root, JSON_COMPACT);
	if (!txt)
		abort(); /* out of memory */
	return txt;
}
