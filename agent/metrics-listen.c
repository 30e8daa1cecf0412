// SPDX-License-Identifier: Apache-2.0
/* Serving the metrics: GET /rest/v1/metrics on the mutual-TLS API, and the
 * optional plain-HTTP listener for a node-local scraper (--metrics-listen
 * ADDR, off by default): a civetweb context of its own with two threads
 * that answers GET /metrics and GET /rest/v1/metrics and nothing else. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api-internal.h"
#include "metrics.h"
#include "util.h"

#define METRICS_MAX (16u << 20)

struct metrics_listener {
	struct mg_context *ctx;
	int port;
};

const char *metrics_route(const char *path)
{
	static const char *const known[] = {
	    "ping",	    "version", "status", "updatepod",
	    "logs",	    "file",    "deploy", "metrics",
	    "resizevolume", "exec",    "attach", "portforward"};
	size_t n = strcspn(path, "/");

	for (size_t i = 0; i < ARRAY_SIZE(known); i++)
		if (strlen(known[i]) == n && !strncmp(known[i], path, n))
			return known[i];
	return "other";
}

int api_metrics(struct mg_connection *c)
{
	struct buf b;
	int status;

	buf_init(&b, METRICS_MAX);
	metrics_render(&b);
	status =
	    reply(c, 200, METRICS_CONTENT_TYPE, b.data ? b.data : "", b.len);
	buf_free(&b);
	return status;
}

static int on_plain(struct mg_connection *c, void *cbdata)
{
	const struct mg_request_info *ri = mg_get_request_info(c);
	int status;

	(void)cbdata;
	if (strcmp(ri->local_uri, "/metrics") &&
	    strcmp(ri->local_uri, "/rest/v1/metrics"))
		status = reply_text(c, 404, "not found\n");
	else if (strcmp(ri->request_method, "GET"))
		status = reply_text(c, 405, "method not allowed\n");
	else
		status = api_metrics(c);
	metrics_api_request("plain-metrics", status);
	return status;
}

int metrics_listen(const char *addr, struct metrics_listener **out, char *err,
		   size_t errlen)
{
	struct metrics_listener *l = xcalloc(1, sizeof(*l));
	struct mg_callbacks cb = {0};
	char errtxt[256] = "";
	unsigned errcode = 0;
	struct mg_error_data ed = {.code = &errcode,
				   .text = errtxt,
				   .text_buffer_size = sizeof(errtxt)};
	const char *opts[] = {"listening_ports",
			      addr,
			      "num_threads",
			      "2",
			      "request_timeout_ms",
			      "5000",
			      "max_request_size",
			      "8192",
			      "enable_directory_listing",
			      "no",
			      NULL};
	struct mg_init_data init = {.callbacks = &cb,
				    .configuration_options = opts};
	struct mg_server_port ports[1];

	l->ctx = mg_start2(&init, &ed);
	if (!l->ctx) {
		snprintf(err, errlen, "metrics listener %s: %s", addr, errtxt);
		free(l);
		return -1;
	}
	mg_set_request_handler(l->ctx, "**", on_plain, l);
	if (mg_get_server_ports(l->ctx, 1, ports) == 1)
		l->port = ports[0].port;
	*out = l;
	return 0;
}

int metrics_listener_port(const struct metrics_listener *l)
{
	return l ? l->port : 0;
}

void metrics_listener_stop(struct metrics_listener *l)
{
	if (!l)
		return;
	mg_stop(l->ctx);
	free(l);
}
