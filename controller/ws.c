// SPDX-License-Identifier: Apache-2.0
/* Websocket streams to a cell (exec, attach, port-forward, log follow).
 * Debian 12's libcurl (7.88) is built without its websocket support, so
 * libcurl only makes the connection (CURLOPT_CONNECT_ONLY: TCP, TLS with
 * the same CA, client certificate and MilpaNode name check as every other
 * call) and this file speaks RFC 6455 over curl_easy_send/recv: the
 * upgrade request, masked client frames, answers to pings. Every data
 * message is text: a channel digit and standard base64 (WIRE.md). */
#include <curl/curl.h>
#include <errno.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include "base64.h"
#include "cleanup.h"
#include "ctl-internal.h"
#include "util.h"

#define WS_GUID "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
#define HEAD_MAX 8192

enum {
	OP_CONT = 0,
	OP_TEXT = 1,
	OP_BIN = 2,
	OP_CLOSE = 8,
	OP_PING = 9,
	OP_PONG = 10
};

struct ws {
	CURL *curl;
	int fd;
	struct buf rx;	/* bytes read, not yet parsed */
	struct buf msg; /* a fragmented message being assembled */
	bool closed;
};

/* ---- frames (pure) ---- */

int ws_frame_parse(const uint8_t *p, size_t n, struct ws_frame *f,
		   struct cerr *e)
{
	size_t h = 2;
	uint64_t len;

	if (n < 2)
		return 0;
	memset(f, 0, sizeof(*f));
	f->fin = p[0] & 0x80;
	f->opcode = p[0] & 0x0f;
	f->masked = p[1] & 0x80;
	if (p[0] & 0x70)
		return cerr_set(e, EPROTO, "websocket: reserved bits set");
	if ((f->opcode > OP_BIN && f->opcode < OP_CLOSE) || f->opcode > OP_PONG)
		return cerr_set(e, EPROTO, "websocket: opcode %d", f->opcode);
	len = p[1] & 0x7f;
	if (len == 126) {
		if (n < 4)
			return 0;
		len = (uint64_t)p[2] << 8 | p[3];
		h = 4;
	} else if (len == 127) {
		if (n < 10)
			return 0;
		len = 0;
		for (int i = 0; i < 8; i++)
			len = len << 8 | p[2 + i];
		h = 10;
		if (len >> 63)
			return cerr_set(e, EPROTO, "websocket: bad length");
	}
	if (f->opcode >= OP_CLOSE && (len > 125 || !f->fin))
		return cerr_set(e, EPROTO, "websocket: bad control frame");
	if (len > WS_FRAME_MAX)
		return cerr_set(e, EFBIG, "websocket: frame of %llu bytes",
				(unsigned long long)len);
	if (f->masked) {
		if (n < h + 4)
			return 0;
		memcpy(f->mask, p + h, 4);
		h += 4;
	}
	f->hdr_len = h;
	f->len = len;
	return n - h >= len ? 1 : 0;
}

int ws_frame_build(int opcode, const void *p, size_t n, const uint8_t mask[4],
		   struct buf *out, struct cerr *e)
{
	uint8_t h[14];
	size_t hl = 2, start;

	h[0] = 0x80 | (uint8_t)opcode;
	if (n < 126) {
		h[1] = 0x80 | (uint8_t)n;
	} else if (n <= 0xffff) {
		h[1] = 0x80 | 126;
		h[2] = (uint8_t)(n >> 8);
		h[3] = (uint8_t)n;
		hl = 4;
	} else {
		h[1] = 0x80 | 127;
		for (int i = 0; i < 8; i++)
			h[2 + i] = (uint8_t)((uint64_t)n >> (56 - 8 * i));
		hl = 10;
	}
	memcpy(h + hl, mask, 4);
	hl += 4;
	if (buf_append(out, h, hl, e) < 0)
		return -1;
	start = out->len;
	if (buf_append(out, p, n, e) < 0)
		return -1;
	for (size_t i = 0; i < n; i++)
		out->data[start + i] ^= mask[i & 3];
	return 0;
}

int ws_msg_decode(const char *p, size_t n, int *ch, struct buf *payload,
		  struct cerr *e)
{
	if (n < 1 || p[0] < '0' || p[0] > '9')
		return cerr_set(e, EPROTO, "stream message without a channel");
	*ch = p[0] - '0';
	buf_reset(payload);
	if (b64_decode(p + 1, n - 1, B64_PADDED, payload, e) < 0)
		return cerr_prefix(e, "stream message on channel %d", *ch);
	return 0;
}

/* ---- the connection ---- */

static int send_all(struct ws *w, const void *p, size_t n, struct cerr *e)
{
	const char *s = p;

	while (n) {
		size_t sent = 0;
		CURLcode rc = curl_easy_send(w->curl, s, n, &sent);
		struct pollfd pfd = {.fd = w->fd, .events = POLLOUT};

		if (rc == CURLE_AGAIN) {
			if (poll(&pfd, 1, 10000) <= 0)
				return cerr_set(e, ETIMEDOUT, "websocket send");
			continue;
		}
		if (rc != CURLE_OK)
			return cerr_set(e, EPIPE, "websocket send: %s",
					curl_easy_strerror(rc));
		s += sent;
		n -= sent;
	}
	return 0;
}

/* Read what is available now (never blocks): 1 when something came, 0
 * when nothing, -1 on error; closed on EOF. Reads until CURLE_AGAIN so no
 * bytes stay buffered inside TLS while we poll the socket. */
static int fill(struct ws *w, struct cerr *e)
{
	char tmp[16384];
	int got = 0;

	for (;;) {
		size_t n = 0;
		CURLcode rc = curl_easy_recv(w->curl, tmp, sizeof(tmp), &n);

		if (rc == CURLE_AGAIN)
			return got;
		if (rc != CURLE_OK)
			return cerr_set(e, ECONNRESET, "websocket: %s",
					curl_easy_strerror(rc));
		if (n == 0) {
			w->closed = true;
			return 1;
		}
		if (buf_append(&w->rx, tmp, n, e) < 0)
			return -1;
		got = 1;
	}
}

static int wait_readable(struct ws *w, int timeout_ms)
{
	struct pollfd pfd = {.fd = w->fd, .events = POLLIN};
	int r = poll(&pfd, 1, timeout_ms);

	return r < 0 && errno == EINTR ? 0 : r;
}

static int send_frame(struct ws *w, int op, const void *p, size_t n,
		      struct cerr *e)
{
	struct buf b;
	uint8_t mask[4];
	int r;

	if (RAND_bytes(mask, 4) != 1)
		return cerr_set(e, EIO, "websocket: no random mask");
	buf_init(&b, 0);
	r = ws_frame_build(op, p, n, mask, &b, e);
	if (r == 0)
		r = send_all(w, b.data, b.len, e);
	buf_free(&b);
	return r;
}

static int upgrade(struct ws *w, struct ctl_cell *c, const char *path,
		   struct cerr *e)
{
	uint8_t key_raw[16], sha[SHA_DIGEST_LENGTH];
	cleanup_free char *key = NULL, *accept = NULL, *req = NULL,
			  *both = NULL;
	char *end, *hdr;
	uint64_t deadline = now_ns() + 10000000000ull;

	if (RAND_bytes(key_raw, sizeof(key_raw)) != 1)
		return cerr_set(e, EIO, "websocket: no random key");
	key = b64_encode_str(key_raw, sizeof(key_raw));
	both = xasprintf("%s%s", key, WS_GUID);
	SHA1((const unsigned char *)both, strlen(both), sha);
	accept = b64_encode_str(sha, sizeof(sha));
	/* Kip's dialer sends this Content-Type on every stream. */
	req = xasprintf("GET /rest/v1/%s HTTP/1.1\r\nHost: %s:%d\r\n"
			"Upgrade: websocket\r\nConnection: Upgrade\r\n"
			"Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n"
			"Content-Type: application/x-www-form-urlencoded\r\n"
			"\r\n",
			path, CTL_SERVER_NAME, c->port, key);
	if (send_all(w, req, strlen(req), e) < 0)
		return -1;
	while (!(end = memmem(w->rx.data ? w->rx.data : "", w->rx.len,
			      "\r\n\r\n", 4))) {
		int64_t left = (int64_t)(deadline - now_ns()) / 1000000;
		if (w->closed || left <= 0)
			return cerr_set(e, ETIMEDOUT,
					"websocket %s: no upgrade reply", path);
		if (wait_readable(w, (int)left) > 0 && fill(w, e) < 0)
			return -1;
	}
	*end = 0;
	if (strncmp(w->rx.data, "HTTP/1.1 101", 12) != 0) {
		char *eol = strstr(w->rx.data, "\r\n");
		if (eol)
			*eol = 0;
		return cerr_set(e, EREMOTEIO, "websocket %s: %s", path,
				w->rx.data);
	}
	hdr = strcasestr(w->rx.data, "\r\nSec-WebSocket-Accept:");
	if (!hdr)
		return cerr_set(e, EPROTO, "websocket %s: no accept", path);
	hdr += 23;
	hdr += strspn(hdr, " \t");
	if (strncmp(hdr, accept, strlen(accept)) != 0)
		return cerr_set(e, EPROTO, "websocket %s: wrong accept", path);
	size_t used = (size_t)(end + 4 - w->rx.data);
	memmove(w->rx.data, w->rx.data + used, w->rx.len - used);
	w->rx.len -= used;
	return 0;
}

int ws_open(struct ctl_cell *c, const char *path, struct ws **out,
	    struct cerr *e)
{
	cleanup_free char *url = xasprintf("%srest/v1/%s", c->base, path);
	struct ws *w = xcalloc(1, sizeof(*w));
	curl_socket_t s;
	CURLcode rc;

	buf_init(&w->rx, WS_FRAME_MAX + HEAD_MAX);
	buf_init(&w->msg, WS_FRAME_MAX);
	w->fd = -1;
	w->curl = curl_easy_init();
	if (!w->curl) {
		ws_close(w);
		return cerr_set(e, ENOMEM, "curl_easy_init");
	}
	cell_curl_setup(c, w->curl, url, e);
	curl_easy_setopt(w->curl, CURLOPT_CONNECT_ONLY, 1L);
	curl_easy_setopt(w->curl, CURLOPT_TIMEOUT_MS, 10000L);
	rc = curl_easy_perform(w->curl);
	if (rc != CURLE_OK ||
	    curl_easy_getinfo(w->curl, CURLINFO_ACTIVESOCKET, &s) != CURLE_OK) {
		cerr_set(e, ECONNREFUSED, "connect %s:%d: %s", c->host, c->port,
			 curl_easy_strerror(rc));
		ws_close(w);
		return -1;
	}
	w->fd = (int)s;
	if (upgrade(w, c, path, e) < 0) {
		ws_close(w);
		return -1;
	}
	*out = w;
	return 0;
}

void ws_close(struct ws *w)
{
	struct curl_slist *ct = NULL;

	if (!w)
		return;
	if (w->curl) {
		if (w->fd >= 0 && !w->closed) {
			struct cerr e = {0};
			uint8_t code[2] = {1000 >> 8, 1000 & 0xff};
			send_frame(w, OP_CLOSE, code, 2, &e);
		}
		curl_easy_getinfo(w->curl, CURLINFO_PRIVATE, (char **)&ct);
		curl_easy_cleanup(w->curl);
		curl_slist_free_all(ct);
	}
	buf_free(&w->rx);
	buf_free(&w->msg);
	free(w);
}

int ws_fd(const struct ws *w)
{
	return w->fd;
}

int ws_send_text(struct ws *w, const char *p, size_t n, struct cerr *e)
{
	return send_frame(w, OP_TEXT, p, n, e);
}

int ws_send_chan(struct ws *w, int ch, const void *p, size_t n, struct cerr *e)
{
	cleanup_free char *b = b64_encode_str(p, n);
	size_t bl = strlen(b);
	cleanup_free char *m = xmalloc(bl + 2);

	m[0] = (char)('0' + ch);
	memcpy(m + 1, b, bl + 1);
	return send_frame(w, OP_TEXT, m, bl + 1, e);
}

/* One frame out of rx: 1 when a whole data message is in w->msg, 0 when
 * more is needed (or a control frame was handled), -1 on error. */
static int take_frame(struct ws *w, struct cerr *e)
{
	struct ws_frame f;
	uint8_t *p = (uint8_t *)w->rx.data;
	int r = ws_frame_parse(p, w->rx.len, &f, e);
	size_t total;
	int done = 0;

	if (r <= 0)
		return r;
	if (f.masked)
		for (uint64_t i = 0; i < f.len; i++)
			p[f.hdr_len + i] ^= f.mask[i & 3];
	switch (f.opcode) {
	case OP_PING:
		if (send_frame(w, OP_PONG, p + f.hdr_len, f.len, e) < 0)
			return -1;
		break;
	case OP_PONG:
		break;
	case OP_CLOSE:
		w->closed = true;
		break;
	case OP_TEXT:
	case OP_BIN:
		buf_reset(&w->msg);
		/* fall through */
	default:
		if (buf_append(&w->msg, p + f.hdr_len, f.len, e) < 0)
			return -1;
		done = f.fin;
	}
	total = f.hdr_len + f.len;
	memmove(w->rx.data, w->rx.data + total, w->rx.len - total);
	w->rx.len -= total;
	return done ? 1 : 2;
}

int ws_recv(struct ws *w, int timeout_ms, int *ch, struct buf *payload,
	    struct cerr *e)
{
	uint64_t deadline = timeout_ms < 0
				? UINT64_MAX
				: now_ns() + (uint64_t)timeout_ms * 1000000;

	for (;;) {
		int r;

		while ((r = take_frame(w, e)) == 2)
			;
		if (r < 0)
			return -1;
		if (r == 1)
			return ws_msg_decode(w->msg.data, w->msg.len, ch,
					     payload, e) < 0
				   ? -1
				   : WS_MSG;
		if (w->closed)
			return WS_CLOSED;
		r = fill(w, e);
		if (r < 0)
			return -1;
		if (r > 0)
			continue;
		int64_t left = timeout_ms < 0
				   ? -1
				   : (int64_t)(deadline - now_ns()) / 1000000;
		if (timeout_ms == 0 || (timeout_ms > 0 && left <= 0))
			return WS_NONE;
		if (wait_readable(w, left > 3600000 ? 3600000 : (int)left) < 0)
			return cerr_sys(e, "poll");
	}
}
