// SPDX-License-Identifier: Apache-2.0
/* The REST API on civetweb: start and stop. Connections come from the TLS
 * gate (tls.c) once their handshake is done; civetweb's workers then run
 * the handlers of routes.c (HTTP) and streams.c (websockets).
 *
 * Threads: civetweb's workers run the handlers. A websocket stream also
 * has a pump thread of its own (streams.c); the worker stays in civetweb's
 * read loop and hands the client's frames over. */

#include "api-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "deploy.h"
#include "fsutil.h"
#include "log.h"
#include "pullproc.h"
#include "tls.h"
#include "util.h"

#define DEFAULT_THREADS 32
#define PING_EVERY_MS 10000
#define SILENT_DROP_MS 15000

static int on_log(const struct mg_connection *c, const char *msg)
{
	(void)c;
	/* Failed handshakes land here; they are the refusals we want. */
	log_debug("civetweb: %s", msg);
	return 1;
}

/* Every client has proved its certificate at the gate: nothing more to
 * check. Without a handler civetweb looks for a .htpasswd on the disk
 * (a stat per request, and a file someone could plant). */
static int authorized(struct mg_connection *c, void *cbdata)
{
	(void)c;
	(void)cbdata;
	return 1;
}

static int check_file(const char *path, struct cerr *e)
{
	if (access(path, R_OK) < 0)
		return cerr_sys(e, "boot file %s", path);
	return 0;
}

static int start_civetweb(struct api *a, const struct api_opts *o,
			  struct cerr *e)
{
	char threads[16];
	struct mg_callbacks cb = {.log_message = on_log};
	const char *opts[40];
	int n = 0;
	char errtxt[256] = "";
	unsigned errcode = 0;
	struct mg_error_data ed = {.code = &errcode,
				   .text = errtxt,
				   .text_buffer_size = sizeof(errtxt)};
	struct mg_init_data init = {.callbacks = &cb, .user_data = a};

	snprintf(threads, sizeof(threads), "%d",
		 o->num_threads > 0 ? o->num_threads : DEFAULT_THREADS);
#define OPT(k, v) (opts[n++] = (k), opts[n++] = (v))
	/* Connections come from the gate (agent/api/tls.c) once their handshake
	 * is done, and only after the handlers below are set: civetweb
	 * listens on nothing. */
	OPT("listening_ports", "");
	OPT("num_threads", threads);
	OPT("request_timeout_ms", "15000");
	OPT("enable_keep_alive", "yes");
	OPT("keep_alive_timeout_ms", "30000");
	OPT("websocket_timeout_ms", "1000");
	OPT("tcp_nodelay", "1");
	OPT("max_request_size", "16384");
	OPT("decode_url", "yes");
	OPT("enable_directory_listing", "no");
	OPT("connection_queue", "64");
#undef OPT
	opts[n] = NULL;
	init.configuration_options = opts;
	a->ctx = mg_start2(&init, &ed);
	if (!a->ctx)
		return cerr_set(e, EIO, "start civetweb: %s", errtxt);
	mg_set_auth_handler(a->ctx, "**", authorized, a);
	mg_set_request_handler(a->ctx, "**", on_request, a);
	mg_set_websocket_handler(a->ctx, "**", ws_connect, ws_ready, ws_data,
				 ws_on_close, a);
	return 0;
}

static int hand_over(void *arg, int fd, void *ssl)
{
	struct api *a = arg;

	return mg_hand_over_tls(a->ctx, fd, ssl);
}

static int start_gate(struct api *a, const struct api_opts *o, struct cerr *e)
{
	struct tls_gate_opts g = {
	    .bind_addr = o->bind_addr,
	    .port = o->port,
	    .files = {.ca = a->ca, .crt = a->crt, .key = a->key},
	    .handshake_ms = o->handshake_ms,
	    .per_source = o->per_source,
	    .plain = a->plain,
	    .hand_over = hand_over,
	    .arg = a,
	};

	if (tls_gate_start(&g, &a->gate, e) < 0)
		return cerr_prefix(e, "start the HTTPS server on port %d",
				   o->port);
	a->port = tls_gate_port(a->gate);
	return 0;
}

static void init_library(void)
{
	mg_init_library(MG_FEATURES_TLS | MG_FEATURES_WEBSOCKET);
}

int api_start(const struct api_opts *o, const struct api_backend *b,
	      struct api **out, struct cerr *e)
{
	struct api *a = xcalloc(1, sizeof(*a));
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	a->b = *b;
	a->pkgdirfd = -1;
	a->plain = o->insecure_plain_http;
	a->ping_ns =
	    (uint64_t)(o->ws_ping_ms > 0 ? o->ws_ping_ms : PING_EVERY_MS) *
	    1000000;
	a->silence_ns = (uint64_t)(o->ws_silence_ms > 0 ? o->ws_silence_ms
							: SILENT_DROP_MS) *
			1000000;
	a->version = xstrdup(o->version ? o->version : CELL_VERSION);
	a->packages_dir = xstrdup(o->packages_dir);
	a->unpack_bin = o->unpack_bin ? xstrdup(o->unpack_bin)
				      : pullproc_beside_self("cell-unpack");
	a->ca = xasprintf("%s/ca.crt", o->boot_dir);
	a->crt = xasprintf("%s/server.crt", o->boot_dir);
	a->key = xasprintf("%s/server.key", o->boot_dir);
	pthread_mutex_init(&a->resize_mu, NULL);
	if (!a->plain &&
	    (check_file(a->ca, e) < 0 || check_file(a->crt, e) < 0 ||
	     check_file(a->key, e) < 0))
		goto fail;
	if (fs_mkdir_p(a->packages_dir, 0755, e) < 0)
		goto fail;
	a->pkgdirfd = open(a->packages_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (a->pkgdirfd < 0) {
		cerr_sys(e, "open %s", a->packages_dir);
		goto fail;
	}
	if (deploy_cleanup(a->pkgdirfd, e) < 0)
		goto fail;
	pthread_once(&once, init_library);
	if (start_civetweb(a, o, e) < 0)
		goto fail;
	if (start_gate(a, o, e) < 0)
		goto fail;
	*out = a;
	return 0;
fail:
	api_stop(a);
	return cerr_prefix(e, "api");
}

void api_stop(struct api *a)
{
	if (!a)
		return;
	tls_gate_stop(a->gate);
	if (a->ctx)
		mg_stop(a->ctx);
	if (a->pkgdirfd >= 0)
		close(a->pkgdirfd);
	pthread_mutex_destroy(&a->resize_mu);
	free(a->ca);
	free(a->crt);
	free(a->key);
	free(a->version);
	free(a->packages_dir);
	free(a->unpack_bin);
	free(a);
}

int api_port(const struct api *a)
{
	return a->port;
}
