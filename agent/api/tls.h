// SPDX-License-Identifier: Apache-2.0
/* The agent's TLS: the server's SSL_CTX (certificate, key, client CA,
 * what a client certificate must carry) and the handshake gate, which
 * accepts connections and completes their handshakes in one event loop,
 * so an idle or slow peer never holds one of civetweb's workers. */
#ifndef CELL_AGENT_TLS_H
#define CELL_AGENT_TLS_H

#include <stdbool.h>
#include <stddef.h>

#include "err.h"

struct tls_files {
	const char *ca;	 /* client certificates chain to this */
	const char *crt; /* the server's chain */
	const char *key;
};

/* Configure ctx (an SSL_CTX *) from f; on failure err holds what failed
 * and OpenSSL's reason. A client certificate must chain to f->ca and
 * carry the clientAuth extended key usage. */
int tls_ctx_setup(void *ctx, const struct tls_files *f, char *err,
		  size_t errlen);

/* Defaults of the gate's bounds (docs/agent.md "Failure behaviour"). Past
 * a cap, a new connection pushes out a silent one (or else the oldest). */
#define TLS_HANDSHAKE_MS 3000 /* a whole handshake, from accept */
#define TLS_PER_SOURCE 32     /* handshakes in progress per address */
#define TLS_MAX_PENDING 512   /* handshakes in progress in all */

struct tls_gate_opts {
	const char *bind_addr; /* NULL = all IPv4 interfaces */
	int port;	       /* 0 = any (tests) */
	struct tls_files files;
	int handshake_ms, per_source, max_pending; /* 0 = the defaults */
	/* Tests only (--insecure-plain-http): no TLS at all; a connection is
	 * handed over as it is accepted (ssl NULL). */
	bool plain;
	/* Takes a connection whose handshake is done (fd, SSL *); returns 1
	 * when it took both, 0 when it did not (the gate closes them). */
	int (*hand_over)(void *arg, int fd, void *ssl);
	void *arg;
};

struct tls_gate;

int tls_gate_start(const struct tls_gate_opts *o, struct tls_gate **out,
		   struct cerr *e);
/* The port actually bound. */
int tls_gate_port(const struct tls_gate *g);
/* Stops the loop, closes every connection still in its handshake. */
void tls_gate_stop(struct tls_gate *g);

#endif
