// SPDX-License-Identifier: Apache-2.0
/* The verbs that ask one cell one thing: pki, ping, version, status, logs,
 * file, delete. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cleanup.h"
#include "ctl-internal.h"
#include "util.h"

#define LOG_MAX (64u << 20)

static const struct option only_globals[] = {GLOBAL_OPTS, {NULL, 0, NULL, 0}};

/* For verbs with no options of their own. */
static int plain_opts(int argc, char **argv, struct ctl_global *g,
		      const char *usage)
{
	int c;

	optind = 1;
	while ((c = ctl_getopt(argc, argv, "+ho:", only_globals, g)) != -1) {
		if (c == G_HELP) {
			fputs(usage, stdout);
			return 0;
		}
		return ctl_usage(usage);
	}
	return -1;
}

/* ---- pki ---- */

static const char pki_usage[] =
    "usage: cellctl pki init DIR [--force]\n"
    "       cellctl pki cell DIR [--boot-dir BOOT]\n"
    "  init: a CA (ca.crt, ca.key) and the controller's client certificate\n"
    "        (client.crt, client.key) in DIR: ECDSA P-256, CN/SAN MilpaNode,\n"
    "        clientAuth; keys are SEC1 PEM, mode 0600\n"
    "  cell: a cell's server certificate (server.crt, server.key, "
    "serverAuth)\n"
    "        from DIR's CA; --boot-dir also writes ca.crt, server.crt and\n"
    "        server.key into BOOT (a cell's /tmp/itzo)\n";

int cmd_pki(int argc, char **argv, struct ctl_global *g)
{
	static const struct option lo[] = {
	    GLOBAL_OPTS,
	    {"force", no_argument, NULL, 'f'},
	    {"boot-dir", required_argument, NULL, 'b'},
	    {NULL, 0, NULL, 0}};
	const char *boot = NULL;
	bool force = false;
	struct cerr e = {0};
	int c, r;

	optind = 1;
	while ((c = ctl_getopt(argc, argv, "hfo:", lo, g)) != -1) {
		if (c == G_HELP) {
			fputs(pki_usage, stdout);
			return 0;
		} else if (c == 'f') {
			force = true;
		} else if (c == 'b') {
			boot = optarg;
		} else {
			return ctl_usage(pki_usage);
		}
	}
	if (argc - optind != 2)
		return ctl_usage(pki_usage);
	if (!strcmp(argv[optind], "init"))
		r = pki_init(argv[optind + 1], force, &e);
	else if (!strcmp(argv[optind], "cell"))
		r = pki_cell(argv[optind + 1], boot, &e);
	else
		return ctl_usage(pki_usage);
	return r < 0 ? ctl_fail("pki", &e) : 0;
}

/* ---- ping, version, metrics ---- */

int cmd_ping(int argc, char **argv, struct ctl_global *g)
{
	static const char usage[] =
	    "usage: cellctl ping --cell ADDR [--pki DIR]\n"
	    "  GET ping with Kip's 3 s timeout; prints pong\n";
	struct ctl_cell cell;
	struct cerr e = {0};
	int r = plain_opts(argc, argv, g, usage);

	if (r >= 0)
		return r;
	if (optind != argc)
		return ctl_usage(usage);
	if (ctl_open_cell(g, NULL, &cell, &e) < 0)
		return ctl_fail("ping", &e);
	r = cell_ping(&cell, &e);
	cell_free(&cell);
	if (r < 0)
		return ctl_fail("ping", &e);
	puts("pong");
	return 0;
}

/* GET path and print the body (at most max bytes) as it is, with a
 * newline when nl. */
static int get_verb(int argc, char **argv, struct ctl_global *g,
		    const char *usage, const char *path, size_t max, bool nl)
{
	struct ctl_cell cell;
	struct cerr e = {0};
	struct buf b;
	int r = plain_opts(argc, argv, g, usage);

	if (r >= 0)
		return r;
	if (ctl_open_cell(g, NULL, &cell, &e) < 0)
		return ctl_fail(path, &e);
	buf_init(&b, max);
	r = cell_get_ok(&cell, path, 0, &b, &e);
	cell_free(&cell);
	if (r == 0 && b.len)
		fwrite(b.data, 1, b.len, stdout);
	if (r == 0 && nl)
		putchar('\n');
	buf_free(&b);
	return r < 0 ? ctl_fail(path, &e) : 0;
}

int cmd_version(int argc, char **argv, struct ctl_global *g)
{
	return get_verb(argc, argv, g, "usage: cellctl version --cell ADDR\n",
			"version", 4096, true);
}

/* The agent's Prometheus text (GET /rest/v1/metrics), as is. */
int cmd_metrics(int argc, char **argv, struct ctl_global *g)
{
	return get_verb(argc, argv, g,
			"usage: cellctl metrics --cell ADDR\n"
			"  the agent's metrics (Prometheus text)\n",
			"metrics", 16u << 20, false);
}

/* ---- status ---- */

static const char *state_name(const json_t *u, const char *key, char *detail,
			      size_t n)
{
	const json_t *st = json_object_get(u, key), *x;

	detail[0] = 0;
	if ((x = json_object_get(st, "running")) && !json_is_null(x)) {
		snprintf(detail, n, "since %s",
			 json_string_value(json_object_get(x, "startedAt"))
			     ?: "?");
		return "Running";
	}
	if ((x = json_object_get(st, "terminated")) && !json_is_null(x)) {
		snprintf(detail, n, "%s, exit %lld",
			 json_string_value(json_object_get(x, "reason")) ?: "",
			 json_integer_value(json_object_get(x, "exitCode")));
		return "Terminated";
	}
	if ((x = json_object_get(st, "waiting")) && !json_is_null(x)) {
		snprintf(detail, n, "%s",
			 json_string_value(json_object_get(x, "reason")) ?: "");
		return "Waiting";
	}
	return "-";
}

/* The CDI devices a unit got (the agent's "devices"), for -o wide. */
static void print_devices(const json_t *devs)
{
	json_t *d;
	size_t i;

	if (!json_array_size(devs))
		return;
	printf(" devices=");
	json_array_foreach(devs, i, d)
	    printf("%s%s", i ? "," : "", json_string_value(d) ?: "");
}

static void status_rows(const json_t *list, const char *prefix, bool wide,
			const json_t *usage)
{
	json_t *u;
	size_t i;
	char detail[256];

	json_array_foreach(list, i, u)
	{
		const char *name =
		    json_string_value(json_object_get(u, "name")) ?: "";
		const char *st = state_name(u, "state", detail, sizeof(detail));
		cleanup_free char *full = xasprintf("%s%s", prefix, name);
		printf("%-20s %-11s %-6s %-9lld %s", full, st,
		       json_is_true(json_object_get(u, "ready")) ? "true"
								 : "false",
		       json_integer_value(json_object_get(u, "restartCount")),
		       detail);
		if (wide) {
			cleanup_free char *ck = xasprintf("%s.cpuUsage", name);
			cleanup_free char *mk =
			    xasprintf("%s.memoryUsage", name);
			printf("  image=%s cpu=%.0fns mem=%.0f",
			       json_string_value(json_object_get(u, "image"))
				   ?: "",
			       json_number_value(json_object_get(usage, ck)),
			       json_number_value(json_object_get(usage, mk)));
			print_devices(json_object_get(u, "devices"));
		}
		putchar('\n');
	}
}

int cmd_status(int argc, char **argv, struct ctl_global *g)
{
	static const char usage[] =
	    "usage: cellctl status --cell ADDR [-o json|yaml|wide]\n"
	    "  the pod's units: state, readiness, restarts (GET status)\n";
	struct ctl_cell cell;
	struct cerr e = {0};
	json_t *st;
	int r = plain_opts(argc, argv, g, usage);
	const char *o;

	if (r >= 0)
		return r;
	o = g->output ? g->output : "";
	if (*o && strcmp(o, "json") && strcmp(o, "yaml") && strcmp(o, "wide"))
		return ctl_usage(usage);
	if (ctl_open_cell(g, NULL, &cell, &e) < 0)
		return ctl_fail("status", &e);
	st = cell_status(&cell, &e);
	cell_free(&cell);
	if (!st)
		return ctl_fail("status", &e);
	if (!strcmp(o, "json")) {
		print_json(stdout, st);
	} else if (!strcmp(o, "yaml")) {
		print_yaml(stdout, st);
	} else {
		const json_t *ru = json_object_get(st, "resourceUsage");
		printf("%-20s %-11s %-6s %-9s %s\n", "UNIT", "STATE", "READY",
		       "RESTARTS", "DETAIL");
		status_rows(json_object_get(st, "initUnitStatus"),
			    "init:", !strcmp(o, "wide"), ru);
		status_rows(json_object_get(st, "unitStatus"), "",
			    !strcmp(o, "wide"), ru);
		if (!strcmp(o, "wide"))
			printf("pod IP %s\n",
			       json_string_value(json_object_get(st, "podIP"))
				   ?: "");
	}
	json_decref(st);
	return 0;
}

/* ---- logs, file ---- */

static int follow_logs(struct ctl_cell *c, const char *unit, struct cerr *e)
{
	/* Kip's follow URL: Go's url.URL{Path: "…?follow=1…"} escapes the
	 * '?' into the path. */
	cleanup_free char *path =
	    xasprintf("logs/%s%%3Ffollow=1&metadata=0", unit);
	struct ws *w;
	struct buf p;
	int ch, r;

	if (ws_open(c, path, &w, e) < 0)
		return -1;
	buf_init(&p, 0);
	while ((r = ws_recv(w, -1, &ch, &p, e)) == WS_MSG) {
		FILE *f = ch == 2 ? stderr : stdout;
		fwrite(p.data ? p.data : "", 1, p.len, f);
		fflush(f);
	}
	buf_free(&p);
	ws_close(w);
	return r < 0 ? -1 : 0;
}

static int tail_opts(int argc, char **argv, struct ctl_global *g,
		     const char *usage, bool *follow, int64_t *lines,
		     int64_t *bytes, const char **unit, struct cerr *e)
{
	static const struct option lo[] = {
	    GLOBAL_OPTS,
	    {"follow", no_argument, NULL, 'f'},
	    {"tail", required_argument, NULL, 't'},
	    {"bytes", required_argument, NULL, 'B'},
	    {"container", required_argument, NULL, 'c'},
	    {"unit", required_argument, NULL, 'c'},
	    {NULL, 0, NULL, 0}};
	int c;

	optind = 1;
	while ((c = ctl_getopt(argc, argv, "hfo:c:", lo, g)) != -1) {
		if (c == G_HELP)
			return fputs(usage, stdout), 0;
		if (c == 'f' && follow)
			*follow = true;
		else if (c == 't' &&
			 parse_int64(optarg, 0, INT32_MAX, lines, e) == 0)
			;
		else if (c == 'B' &&
			 parse_int64(optarg, 0, INT32_MAX, bytes, e) == 0)
			;
		else if (c == 'c' && unit)
			*unit = optarg;
		else
			return ctl_usage(usage);
	}
	return -1;
}

int cmd_logs(int argc, char **argv, struct ctl_global *g)
{
	static const char usage[] =
	    "usage: cellctl logs [UNIT] --cell ADDR [-f] [--tail N] "
	    "[--bytes N]\n"
	    "  a unit's log (the first unit when none is named); -f follows\n"
	    "  it over a websocket until the unit or the cell goes away\n";
	bool follow = false;
	int64_t lines = 0, bytes = 0;
	const char *unit = "";
	struct ctl_cell cell;
	struct cerr e = {0};
	struct buf b;
	int r =
	    tail_opts(argc, argv, g, usage, &follow, &lines, &bytes, &unit, &e);

	if (r >= 0)
		return r;
	if (argc - optind > 1)
		return ctl_usage(usage);
	if (optind < argc)
		unit = argv[optind];
	if (ctl_open_cell(g, NULL, &cell, &e) < 0)
		return ctl_fail("logs", &e);
	if (follow) {
		r = follow_logs(&cell, unit, &e);
		cell_free(&cell);
		return r < 0 ? ctl_fail("logs", &e) : 0;
	}
	cleanup_free char *path =
	    lines || bytes ? xasprintf("logs/%s?lines=%lld&bytes=%lld", unit,
				       (long long)lines, (long long)bytes)
			   : xasprintf("logs/%s", unit);
	buf_init(&b, LOG_MAX);
	r = cell_get_ok(&cell, path, 0, &b, &e);
	cell_free(&cell);
	if (r == 0)
		fwrite(b.data ? b.data : "", 1, b.len, stdout);
	buf_free(&b);
	return r < 0 ? ctl_fail("logs", &e) : 0;
}

static char *query_escape(const char *s)
{
	struct buf b;
	struct cerr e = {0};
	char *out;

	buf_init(&b, 0);
	for (; *s; s++) {
		char t[4];
		if ((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		    (*s >= '0' && *s <= '9') || strchr("-_.~/", *s)) {
			buf_append(&b, s, 1, &e);
		} else {
			snprintf(t, sizeof(t), "%%%02X", (unsigned char)*s);
			buf_append(&b, t, 3, &e);
		}
	}
	buf_append(&b, "", 0, &e);
	out = buf_steal(&b, NULL);
	return out ? out : xstrdup("");
}

int cmd_file(int argc, char **argv, struct ctl_global *g)
{
	static const char usage[] =
	    "usage: cellctl file PATH --cell ADDR [--tail N] [--bytes N]\n"
	    "  the end of a file on the cell (the agent's default: the last\n"
	    "  4096 bytes)\n";
	int64_t lines = 0, bytes = 0;
	struct ctl_cell cell;
	struct cerr e = {0};
	struct buf b;
	int r = tail_opts(argc, argv, g, usage, NULL, &lines, &bytes, NULL, &e);

	if (r >= 0)
		return r;
	if (argc - optind != 1)
		return ctl_usage(usage);
	cleanup_free char *q = query_escape(argv[optind]);
	cleanup_free char *path = xasprintf("file/?path=%s", q);
	if (lines) {
		char *p2 = xasprintf("%s&lines=%lld", path, (long long)lines);
		free(path);
		path = p2;
	}
	if (bytes) {
		char *p2 = xasprintf("%s&bytes=%lld", path, (long long)bytes);
		free(path);
		path = p2;
	}
	if (ctl_open_cell(g, NULL, &cell, &e) < 0)
		return ctl_fail("file", &e);
	buf_init(&b, LOG_MAX);
	r = cell_get_ok(&cell, path, 0, &b, &e);
	cell_free(&cell);
	if (r == 0)
		fwrite(b.data ? b.data : "", 1, b.len, stdout);
	buf_free(&b);
	return r < 0 ? ctl_fail("file", &e) : 0;
}
