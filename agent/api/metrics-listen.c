// SPDX-License-Identifier: Apache-2.0
/* Serving the metrics: GET /rest/v1/metrics on the mutual-TLS API, and the
 * optional plain-HTTP listener for a node-local scraper (--metrics-listen
 * ADDR, off by default): a civetweb context of its own with two threads
 * that answers GET /metrics and GET /rest/v1/metrics and nothing else.
 *
 * It is unauthenticated, so it listens on loopback unless an address is
 * spelled out ("9102" is 127.0.0.1:9102), and it has an authorization
 * handler that allows every request: without one civetweb looks for a
 * global password file and for ".htpasswd" in its document root on every
 * request (files a scraper should never make the agent open). */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api-internal.h"
#include "cleanup.h"
#include "metrics.h"
#include "util.h"

struct metrics_listener {
	struct mg_context *ctx;
	int port;
};

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

/* Nothing to check: the listener only ever serves the metrics. Being
 * there at all keeps civetweb from opening password files. */
static int allow_all(struct mg_connection *c, void *cbdata)
{
	(void)c;
	(void)cbdata;
	return 1;
}

/* A port number, digits only (parse_int64 would take a sign or spaces). */
static bool is_port(const char *s)
{
	int64_t v;

	if (!*s || strspn(s, "0123456789") != strlen(s))
		return false;
	return parse_int64(s, 0, 65535, &v, &(struct cerr){0}) == 0;
}

static char *bad_addr(const char *addr, struct cerr *e)
{
	cerr_set(e, EINVAL, "%s: not PORT, A.B.C.D:PORT or [IPv6]:PORT", addr);
	return NULL;
}

/* civetweb's listening_ports for addr: "PORT" is loopback's; "A.B.C.D:PORT"
 * and "[V6]:PORT" as given. Anything else (a list, civetweb's 's'/'r'
 * suffixes, a host name) is refused rather than passed on. */
char *metrics_listen_spec(const char *addr, struct cerr *e)
{
	const char *colon = strrchr(addr, ':');
	char host[INET6_ADDRSTRLEN + 2];
	unsigned char bin[sizeof(struct in6_addr)];
	size_t hl;

	if (is_port(addr))
		return xasprintf("127.0.0.1:%s", addr);
	if (!colon || !is_port(colon + 1))
		return bad_addr(addr, e);
	hl = (size_t)(colon - addr);
	if (hl >= sizeof(host))
		return bad_addr(addr, e);
	memcpy(host, addr, hl);
	host[hl] = '\0';
	if (hl > 2 && host[0] == '[' && host[hl - 1] == ']') {
		host[hl - 1] = '\0';
		if (inet_pton(AF_INET6, host + 1, bin) == 1)
			return xstrdup(addr);
	} else if (inet_pton(AF_INET, host, bin) == 1)
		return xstrdup(addr);
	return bad_addr(addr, e);
}

int metrics_listen(const char *addr, struct metrics_listener **out,
		   struct cerr *e)
{
	cleanup_free char *spec = metrics_listen_spec(addr, e);
	struct mg_callbacks cb = {0};
	char errtxt[256] = "";
	unsigned errcode = 0;
	struct mg_error_data ed = {.code = &errcode,
				   .text = errtxt,
				   .text_buffer_size = sizeof(errtxt)};
	const char *opts[] = {"listening_ports",
			      spec,
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
	struct metrics_listener *l;

	if (!spec)
		return cerr_prefix(e, "metrics listener");
	l = xcalloc(1, sizeof(*l));
	l->ctx = mg_start2(&init, &ed);
	if (!l->ctx) {
		free(l);
		return cerr_set(e, EADDRNOTAVAIL, "metrics listener %s: %s",
				spec, errtxt);
	}
	/* Before the request handler: no request is served without it. */
	mg_set_auth_handler(l->ctx, "**", allow_all, l);
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
