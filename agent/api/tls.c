// SPDX-License-Identifier: Apache-2.0
/* The agent's TLS: the server's SSL_CTX, set up here so nothing depends
 * on civetweb's own option handling, and the handshake gate.
 *
 * The gate owns the listening socket. One thread accepts and runs every
 * handshake non-blocking in an epoll loop; a connection reaches civetweb
 * (mg_hand_over_tls, our patch to it) only once its client has proved a
 * certificate. So a peer that connects and sends nothing, or stalls half
 * way, costs a file descriptor and a few hundred bytes for at most
 * handshake_ms, never a worker. Per source address at most per_source
 * handshakes are in progress, at most max_pending in all; past a cap a new
 * connection pushes out a silent one (or else the oldest), so a flood, from
 * elsewhere or from the controller's own address, cannot keep the
 * controller's handshake from completing. */
#include "tls.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "log.h"
#include "metrics.h"
#include "util.h"

static int tls_fail(char *err, size_t errlen, const char *what,
		    const char *path)
{
	char ossl[256] = "";
	unsigned long code = ERR_get_error();

	if (code)
		ERR_error_string_n(code, ossl, sizeof(ossl));
	snprintf(err, errlen, "%s %s: %s", what, path,
		 ossl[0] ? ossl : "failed");
	ERR_clear_error();
	return -1;
}

/* A client's own certificate must say it is for clients: an extended key
 * usage with clientAuth. OpenSSL's purpose check lets a certificate with
 * no EKU at all through; the controller's certificates always carry one
 * (Kip's pkg/certs), and docs/agent.md promises the check. */
static int verify_client(int ok, X509_STORE_CTX *st)
{
	X509 *x;

	if (!ok || X509_STORE_CTX_get_error_depth(st) != 0)
		return ok;
	x = X509_STORE_CTX_get_current_cert(st);
	if (!(X509_get_extension_flags(x) & EXFLAG_XKUSAGE) ||
	    !(X509_get_extended_key_usage(x) & XKU_SSL_CLIENT)) {
		X509_STORE_CTX_set_error(st, X509_V_ERR_INVALID_PURPOSE);
		return 0;
	}
	return 1;
}

/* The server's certificate and key, TLS 1.2 or later, and a client
 * certificate that chains to ca.crt, demanded during the handshake (a
 * client without one never reaches a handler). */
int tls_ctx_setup(void *ssl_ctx, const struct tls_files *f, char *err,
		  size_t errlen)
{
	SSL_CTX *ctx = ssl_ctx;
	STACK_OF(X509_NAME) * names;
	static const unsigned char sid[] = "cell-agent";

	if (!SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION))
		return tls_fail(err, errlen, "set", "TLS 1.2 minimum");
	if (SSL_CTX_use_certificate_chain_file(ctx, f->crt) != 1)
		return tls_fail(err, errlen, "load certificate", f->crt);
	if (SSL_CTX_use_PrivateKey_file(ctx, f->key, SSL_FILETYPE_PEM) != 1)
		return tls_fail(err, errlen, "load key", f->key);
	if (SSL_CTX_check_private_key(ctx) != 1)
		return tls_fail(err, errlen, "key does not match", f->crt);
	if (SSL_CTX_load_verify_locations(ctx, f->ca, NULL) != 1)
		return tls_fail(err, errlen, "load CA", f->ca);
	names = SSL_load_client_CA_file(f->ca);
	if (!names)
		return tls_fail(err, errlen, "read CA names from", f->ca);
	SSL_CTX_set_client_CA_list(ctx, names);
	SSL_CTX_set_verify(ctx,
			   SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT,
			   verify_client);
	SSL_CTX_set_purpose(ctx, X509_PURPOSE_SSL_CLIENT);
	SSL_CTX_set_verify_depth(ctx, 4);
	/* Resumed sessions need an id context once peers are verified. */
	SSL_CTX_set_session_id_context(ctx, sid, sizeof(sid) - 1);
	/* No TLS 1.3 tickets: they would be written behind the back of a
	 * stream's pump thread; the controller does not resume anyway. */
	SSL_CTX_set_num_tickets(ctx, 0);
	return 0;
}

/* ======================================================================
 * the handshake gate
 * ====================================================================== */

struct pending {
	int fd;
	SSL *ssl;
	int idx;    /* in gate.p */
	bool heard; /* the peer has sent something */
	uint64_t deadline;
	struct in6_addr src; /* IPv4 as v4-mapped */
};

struct tls_gate {
	SSL_CTX *ctx;
	int lfd, stopfd, epfd, port;
	uint64_t handshake_ns;
	int per_source, max_pending;
	int (*hand_over)(void *arg, int fd, void *ssl);
	void *arg;
	bool plain;
	struct pending **p; /* handshakes in progress */
	int n;
	uint64_t paused_until; /* accept paused (out of descriptors) */
	pthread_t thread;
	bool started;
};

static void gate_remove(struct tls_gate *g, struct pending *p)
{
	epoll_ctl(g->epfd, EPOLL_CTL_DEL, p->fd, NULL);
	g->p[p->idx] = g->p[--g->n];
	g->p[p->idx]->idx = p->idx;
}

static void gate_drop(struct tls_gate *g, struct pending *p, const char *why)
{
	char addr[INET6_ADDRSTRLEN] = "?";

	inet_ntop(AF_INET6, &p->src, addr, sizeof(addr));
	log_debug("tls: closed a connection from %s: %s", addr, why);
	gate_remove(g, p);
	SSL_free(p->ssl);
	close(p->fd);
	free(p);
}

/* The handshake in progress that should give way first (of one source,
 * or of all): a silent peer before one that has spoken, then the
 * oldest. */
static struct pending *gate_oldest(struct tls_gate *g,
				   const struct in6_addr *src, int *count)
{
	struct pending *old = NULL;

	*count = 0;
	for (int i = 0; i < g->n; i++) {
		if (src && memcmp(&g->p[i]->src, src, sizeof(*src)) != 0)
			continue;
		(*count)++;
		if (!old || g->p[i]->heard < old->heard ||
		    (g->p[i]->heard == old->heard &&
		     g->p[i]->deadline < old->deadline))
			old = g->p[i];
	}
	return old;
}

static void gate_make_room(struct tls_gate *g, const struct in6_addr *src)
{
	int count;
	struct pending *old = gate_oldest(g, src, &count);

	if (count >= g->per_source) {
		metrics_handshake_failure("limit");
		gate_drop(g, old, "too many handshakes from this address");
	}
	old = gate_oldest(g, NULL, &count);
	if (count >= g->max_pending) {
		metrics_handshake_failure("limit");
		gate_drop(g, old, "too many handshakes in progress");
	}
}

static void gate_watch(struct tls_gate *g, struct pending *p, uint32_t ev)
{
	struct epoll_event e = {.events = ev, .data.ptr = p};

	epoll_ctl(g->epfd, EPOLL_CTL_MOD, p->fd, &e);
}

static void gate_refusal(struct tls_gate *g, struct pending *p, int err)
{
	char why[256] = "";
	unsigned long code = ERR_peek_error();
	long vr = SSL_get_verify_result(p->ssl);

	if (vr != X509_V_OK)
		snprintf(why, sizeof(why), "certificate: %s",
			 X509_verify_cert_error_string(vr));
	else if (code)
		ERR_error_string_n(code, why, sizeof(why));
	else
		snprintf(why, sizeof(why), "handshake failed (%s)",
			 err == SSL_ERROR_SYSCALL ? "connection lost" : "TLS");
	ERR_clear_error();
	metrics_handshake_failure("failed");
	gate_drop(g, p, why);
}

/* One more step of p's handshake; done, it goes to the workers. */
static void gate_step(struct tls_gate *g, struct pending *p, uint32_t ev)
{
	int r, err;

	if (ev & EPOLLIN)
		p->heard = true;
	ERR_clear_error();
	r = SSL_accept(p->ssl);
	if (r == 1) {
		gate_remove(g, p);
		if (!g->hand_over(g->arg, p->fd, p->ssl)) {
			log_warn(
			    "tls: every worker is busy; closed a connection");
			SSL_free(p->ssl);
			close(p->fd);
		}
		free(p);
		return;
	}
	err = SSL_get_error(p->ssl, r);
	if (err == SSL_ERROR_WANT_READ)
		gate_watch(g, p, EPOLLIN);
	else if (err == SSL_ERROR_WANT_WRITE)
		gate_watch(g, p, EPOLLOUT);
	else
		gate_refusal(g, p, err);
}

static void peer_addr(const struct sockaddr_storage *ss, struct in6_addr *a)
{
	memset(a, 0, sizeof(*a));
	if (ss->ss_family == AF_INET6) {
		*a = ((const struct sockaddr_in6 *)ss)->sin6_addr;
	} else if (ss->ss_family == AF_INET) {
		a->s6_addr[10] = a->s6_addr[11] = 0xff;
		memcpy(&a->s6_addr[12],
		       &((const struct sockaddr_in *)ss)->sin_addr, 4);
	}
}

static void gate_admit(struct tls_gate *g, int fd,
		       const struct sockaddr_storage *ss)
{
	struct pending *p;
	struct epoll_event e = {.events = EPOLLIN};
	int on = 1;

	/* What civetweb would have set on a socket it accepted itself. */
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
	setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on));
	if (g->plain) {
		if (!g->hand_over(g->arg, fd, NULL))
			close(fd);
		return;
	}
	p = xcalloc(1, sizeof(*p));
	e.data.ptr = p;
	peer_addr(ss, &p->src);
	gate_make_room(g, &p->src);
	p->fd = fd;
	p->ssl = SSL_new(g->ctx);
	p->deadline = now_ns() + g->handshake_ns;
	if (!p->ssl || SSL_set_fd(p->ssl, fd) != 1 ||
	    epoll_ctl(g->epfd, EPOLL_CTL_ADD, fd, &e) < 0) {
		log_warn("tls: cannot take a connection (out of memory?)");
		SSL_free(p->ssl);
		close(fd);
		free(p);
		return;
	}
	p->idx = g->n;
	g->p[g->n++] = p;
}

static void gate_pause(struct tls_gate *g, bool pause)
{
	struct epoll_event e = {.events = pause ? 0 : EPOLLIN,
				.data.ptr = &g->lfd};

	epoll_ctl(g->epfd, EPOLL_CTL_MOD, g->lfd, &e);
	g->paused_until = pause ? now_ns() + 100000000u : 0;
}

static void gate_accept(struct tls_gate *g)
{
	for (;;) {
		struct sockaddr_storage ss;
		socklen_t len = sizeof(ss);
		int fd = accept4(g->lfd, (struct sockaddr *)&ss, &len,
				 SOCK_NONBLOCK | SOCK_CLOEXEC);
		int count;

		if (fd >= 0) {
			gate_admit(g, fd, &ss);
			continue;
		}
		if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
		    errno == ENOMEM) {
			/* Out of descriptors: the oldest handshake gives way;
			 * with none to give, accepting pauses a moment. */
			struct pending *old = gate_oldest(g, NULL, &count);

			if (old) {
				gate_drop(g, old, "out of file descriptors");
				continue;
			}
			log_warn("tls: accept: %s", strerror(errno));
			gate_pause(g, true);
			return;
		}
		if (errno != EINTR && errno != ECONNABORTED && errno != EPROTO)
			return;
	}
}

static void gate_expire(struct tls_gate *g, uint64_t now)
{
	for (int i = g->n - 1; i >= 0; i--)
		if (i < g->n && g->p[i]->deadline <= now) {
			metrics_handshake_failure("timeout");
			gate_drop(g, g->p[i], "handshake took too long");
		}
	if (g->paused_until && now >= g->paused_until)
		gate_pause(g, false);
}

static int gate_timeout_ms(const struct tls_gate *g, uint64_t now)
{
	uint64_t next = g->paused_until ? g->paused_until : UINT64_MAX;

	for (int i = 0; i < g->n; i++)
		if (g->p[i]->deadline < next)
			next = g->p[i]->deadline;
	if (next == UINT64_MAX)
		return -1;
	return next <= now ? 0 : (int)((next - now) / 1000000u) + 1;
}

static void *gate_loop(void *arg)
{
	struct tls_gate *g = arg;
	struct epoll_event ev[64];

	for (;;) {
		int n =
		    epoll_wait(g->epfd, ev, 64, gate_timeout_ms(g, now_ns()));

		bool accept = false;

		for (int i = 0; i < n; i++) {
			if (ev[i].data.ptr == &g->stopfd)
				return NULL;
			if (ev[i].data.ptr == &g->lfd)
				accept = true;
			else
				gate_step(g, ev[i].data.ptr, ev[i].events);
		}
		/* Accepting may push out a connection whose event is still in
		 * ev (a step frees only its own): so it comes after them. */
		if (accept)
			gate_accept(g);
		gate_expire(g, now_ns());
	}
}

static int gate_listen(struct tls_gate *g, const struct tls_gate_opts *o,
		       struct cerr *e)
{
	struct sockaddr_storage ss = {0};
	struct sockaddr_in *v4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&ss;
	socklen_t len = sizeof(*v4);
	int on = 1;

	v4->sin_family = AF_INET;
	v4->sin_port = htons((uint16_t)o->port);
	if (o->bind_addr &&
	    inet_pton(AF_INET, o->bind_addr, &v4->sin_addr) != 1) {
		v6->sin6_family = AF_INET6;
		v6->sin6_port = htons((uint16_t)o->port);
		len = sizeof(*v6);
		if (inet_pton(AF_INET6, o->bind_addr, &v6->sin6_addr) != 1)
			return cerr_set(e, EINVAL, "bind address %s",
					o->bind_addr);
	}
	g->lfd =
	    socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (g->lfd < 0)
		return cerr_sys(e, "socket");
	setsockopt(g->lfd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
	if (bind(g->lfd, (struct sockaddr *)&ss, len) < 0)
		return cerr_sys(e, "bind port %d", o->port);
	if (listen(g->lfd, 1024) < 0)
		return cerr_sys(e, "listen");
	len = sizeof(ss);
	if (getsockname(g->lfd, (struct sockaddr *)&ss, &len) < 0)
		return cerr_sys(e, "getsockname");
	g->port =
	    ntohs(ss.ss_family == AF_INET6 ? v6->sin6_port : v4->sin_port);
	return 0;
}

static int gate_setup(struct tls_gate *g, const struct tls_gate_opts *o,
		      struct cerr *e)
{
	char err[512] = "";
	struct epoll_event le = {.events = EPOLLIN, .data.ptr = &g->lfd};
	struct epoll_event se = {.events = EPOLLIN, .data.ptr = &g->stopfd};

	if (!g->plain) {
		g->ctx = SSL_CTX_new(TLS_server_method());
		if (!g->ctx)
			return cerr_set(e, ENOMEM, "SSL_CTX_new");
		if (tls_ctx_setup(g->ctx, &o->files, err, sizeof(err)) < 0)
			return cerr_set(e, EINVAL, "%s", err);
	}
	if (gate_listen(g, o, e) < 0)
		return -1;
	g->stopfd = eventfd(0, EFD_CLOEXEC);
	g->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (g->stopfd < 0 || g->epfd < 0)
		return cerr_sys(e, "eventfd/epoll");
	if (epoll_ctl(g->epfd, EPOLL_CTL_ADD, g->lfd, &le) < 0 ||
	    epoll_ctl(g->epfd, EPOLL_CTL_ADD, g->stopfd, &se) < 0)
		return cerr_sys(e, "epoll_ctl");
	return 0;
}

int tls_gate_start(const struct tls_gate_opts *o, struct tls_gate **out,
		   struct cerr *e)
{
	struct tls_gate *g = xcalloc(1, sizeof(*g));
	int rc;

	g->lfd = g->stopfd = g->epfd = -1;
	g->handshake_ns = (uint64_t)(o->handshake_ms > 0 ? o->handshake_ms
							 : TLS_HANDSHAKE_MS) *
			  1000000u;
	g->per_source = o->per_source > 0 ? o->per_source : TLS_PER_SOURCE;
	g->max_pending = o->max_pending > 0 ? o->max_pending : TLS_MAX_PENDING;
	g->hand_over = o->hand_over;
	g->arg = o->arg;
	g->plain = o->plain;
	g->p = xcalloc((size_t)g->max_pending, sizeof(*g->p));
	if (gate_setup(g, o, e) < 0)
		goto fail;
	rc = pthread_create(&g->thread, NULL, gate_loop, g);
	if (rc) {
		cerr_set(e, rc, "start the TLS thread");
		goto fail;
	}
	g->started = true;
	*out = g;
	return 0;
fail:
	tls_gate_stop(g);
	return -1;
}

int tls_gate_port(const struct tls_gate *g)
{
	return g->port;
}

void tls_gate_stop(struct tls_gate *g)
{
	uint64_t one = 1;

	if (!g)
		return;
	if (g->started) {
		if (write(g->stopfd, &one, sizeof(one)) < 0)
			log_warn("tls: stop: %s", strerror(errno));
		pthread_join(g->thread, NULL);
	}
	while (g->n > 0)
		gate_drop(g, g->p[0], "stopping");
	free(g->p);
	if (g->lfd >= 0)
		close(g->lfd);
	if (g->stopfd >= 0)
		close(g->stopfd);
	if (g->epfd >= 0)
		close(g->epfd);
	SSL_CTX_free(g->ctx);
	free(g);
}
