// SPDX-License-Identifier: Apache-2.0
/* Between the API's files: api.c (civetweb and the TLS gate, start and
 * stop), routes.c (the HTTP endpoints) and streams.c (the websocket
 * streams). Nothing outside the API includes this. */
#ifndef CELL_API_INTERNAL_H
#define CELL_API_INTERNAL_H

#include <civetweb.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "api.h"
#include "path.h"

#define API_PREFIX "/rest/v1/"
#define UNIT_NAME_MAX 253
#define IO_CHUNK 32768

struct api {
	struct mg_context *ctx;
	struct api_backend b;
	int port;
	bool plain;
	char *ca, *crt, *key;
	char *version;
	char *packages_dir;
	char *unpack_bin;
	int pkgdirfd;
	struct tls_gate *gate; /* NULL with plain HTTP */
	atomic_int streams;
	uint64_t ping_ns, silence_ns;
	pthread_mutex_t resize_mu;
};

/* ---- routes.c: replies, routes, queries ---- */

/* The whole reply in one write; returns status. */
int reply(struct mg_connection *c, int status, const char *ctype,
	  const void *body, size_t len);
int reply_text(struct mg_connection *c, int status, const char *text);
/* A plain-text error whose status comes from e->code (api_http_status). */
int reply_err(struct mg_connection *c, const struct cerr *e);
int reply_errf(struct mg_connection *c, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* A request's route: the path below /rest/v1/ and its query, which may
 * arrive the normal way or, from the controller's log-follow URL, inside
 * the path with its '?' percent-encoded (civetweb has decoded it by
 * then). */
struct route {
	char path[PATH_MAX_INPUT];
	const char *q1; /* the query found inside the path, or NULL */
	const char *q2; /* the query string proper, or NULL */
};

int route_parse(const struct mg_request_info *ri, struct route *r);
/* exec, attach, portforward (with or without a trailing '/'). */
bool is_stream_route(const char *p);
bool unit_name_ok(const char *u);

/* The parameters of a logs/<unit> request. */
struct logq {
	char unit[UNIT_NAME_MAX + 1];
	int64_t lines, bytes;
	bool follow, metadata, previous;
};

int logq_parse(const struct route *r, struct logq *q, struct cerr *e);
/* The backend's log file of a unit (owned), or NULL: ENOENT when there is
 * none, EIO when the backend failed. */
char *log_path(struct api *a, const char *unit, bool previous, struct cerr *e);
/* The pod IP that port-forward dials (none known: localhost). */
void status_pod_ip(struct api *a, char *out, size_t n);
/* 1 running, 0 not, -1 unknown (no such unit, or the backend cannot say). */
int status_unit_running(struct api *a, const char *unit);

/* GET metrics: the Prometheus text (agent/base/metrics.h). */
int api_metrics(struct mg_connection *c);
/* The metrics' route label of a path below /rest/v1/: its first component
 * when it names one of the routes, else "other" (the label's values stay
 * few). */
const char *route_label(const char *path);

/* civetweb's request handler for every URI. */
int on_request(struct mg_connection *c, void *cbdata);

/* ---- streams.c: civetweb's websocket handlers ---- */

int ws_connect(const struct mg_connection *cc, void *cbdata);
void ws_ready(struct mg_connection *c, void *cbdata);
int ws_data(struct mg_connection *c, int bits, char *p, size_t n, void *cbdata);
void ws_on_close(const struct mg_connection *c, void *cbdata);

#endif
