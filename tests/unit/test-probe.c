/* Unit tests of probes (agent/probe.c): tcp and http attempts against
 * sockets opened here, and the state machine with a fake attempt and a
 * synthetic clock. Exec probes need a running unit: integration tests. */
/* The fixtures build spec structs from string literals. */
#pragma GCC diagnostic ignored "-Wdiscarded-qualifiers"
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../lib/tap.h"
#include "probe.h"
#include "util.h"

#define S 1000000000ull

/* A listening socket on 127.0.0.1 and an ephemeral port. */
static int listen_any(int *port)
{
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    listen(fd, 16) < 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &len) < 0)
		return -1;
	*port = ntohs(a.sin_port);
	return fd;
}

static void test_tcp(void)
{
	struct probe p = {.kind = PROBE_TCP, .timeout_s = 1};
	struct probe_ctx c = {0};
	char why[256];
	int port, fd = listen_any(&port);

	ok(fd >= 0, "listening on 127.0.0.1:%d", port);
	p.port = port;
	ok(probe_once(&p, &c, why, sizeof(why)) == PROBE_SUCCESS,
	   "tcp: connects to a listening port");
	close(fd);
	ok(probe_once(&p, &c, why, sizeof(why)) == PROBE_FAILURE &&
	       strstr(why, "refused"),
	   "tcp: a closed port fails (%s)", why);
	p.host = "127.0.0.1";
	ok(probe_once(&p, &c, why, sizeof(why)) == PROBE_FAILURE,
	   "tcp: explicit host");
	p.port = 0;
	p.port_name = "web";
	ok(probe_once(&p, &c, why, sizeof(why)) == PROBE_FAILURE &&
	       strstr(why, "\"web\"") && strstr(why, "named port"),
	   "tcp: an unresolved named port fails (%s)", why);
}

/* ---- a tiny HTTP server: one connection at a time ---- */

struct server {
	int fd, port;
	pthread_t th;
	char last_req[4096];
	pthread_mutex_t mu;
};

static void serve_one(struct server *sv, int cfd)
{
	char req[4096];
	size_t n = 0;
	ssize_t r;
	const char *resp;

	while (n < sizeof(req) - 1 &&
	       (r = read(cfd, req + n, sizeof(req) - 1 - n)) > 0) {
		n += (size_t)r;
		req[n] = '\0';
		if (strstr(req, "\r\n\r\n"))
			break;
	}
	req[n] = '\0';
	pthread_mutex_lock(&sv->mu);
	memcpy(sv->last_req, req, n + 1);
	pthread_mutex_unlock(&sv->mu);
	if (strstr(req, "GET /slow "))
		sleep(2); /* past the probe's 1 s timeout */
	if (strstr(req, "GET /fail "))
		resp = "HTTP/1.1 500 Internal Server Error\r\n"
		       "Content-Length: 4\r\nConnection: close\r\n\r\nboom";
	else if (strstr(req, "GET /moved "))
		resp = "HTTP/1.1 302 Found\r\nLocation: /fail\r\n"
		       "Content-Length: 0\r\nConnection: close\r\n\r\n";
	else
		resp = "HTTP/1.1 200 OK\r\n"
		       "Content-Length: 2\r\nConnection: close\r\n\r\nok";
	if (write(cfd, resp, strlen(resp)) < 0)
		return;
}

static void *server_main(void *arg)
{
	struct server *sv = arg;
	int cfd;

	while ((cfd = accept(sv->fd, NULL, NULL)) >= 0) {
		serve_one(sv, cfd);
		close(cfd);
	}
	return NULL;
}

static void last_req(struct server *sv, char *out, size_t n)
{
	pthread_mutex_lock(&sv->mu);
	snprintf(out, n, "%s", sv->last_req);
	pthread_mutex_unlock(&sv->mu);
}

static void test_http(void)
{
	struct server sv = {.mu = PTHREAD_MUTEX_INITIALIZER};
	struct kv hdrs[] = {{"X-Probe", "yes"}, {"Host", "example.test"}};
	struct probe p = {.kind = PROBE_HTTP,
			  .timeout_s = 1,
			  .path = "/healthz",
			  .http_headers = hdrs,
			  .n_http_headers = 2};
	struct probe_ctx c = {.default_host = "127.0.0.1"};
	char why[256], req[4096];
	uint64_t t0, el;

	sv.fd = listen_any(&sv.port);
	ok(sv.fd >= 0 && pthread_create(&sv.th, NULL, server_main, &sv) == 0,
	   "http server on :%d", sv.port);
	p.port = sv.port;
	ok(probe_once(&p, &c, why, sizeof(why)) == PROBE_SUCCESS,
	   "http: 200 succeeds (%s)", why);
	last_req(&sv, req, sizeof(req));
	ok(strstr(req, "GET /healthz HTTP/1.1\r\n") != NULL, "http: path sent");
	ok(strstr(req, "\r\nX-Probe: yes\r\n") != NULL, "http: header sent");
	ok(strstr(req, "\r\nHost: example.test\r\n") != NULL,
	   "http: Host header overrides");
	ok(strstr(req, "User-Agent: kube-probe/") != NULL,
	   "http: kube-probe user agent");
	p.path = "fail";
	ok(probe_once(&p, &c, why, sizeof(why)) == PROBE_FAILURE, "http: 500");
	is_str(why, "HTTP 500", "http: why names the status");
	p.path = "/moved";
	ok(probe_once(&p, &c, why, sizeof(why)) == PROBE_SUCCESS,
	   "http: 302 succeeds, not followed");
	last_req(&sv, req, sizeof(req));
	ok(strstr(req, "GET /moved ") != NULL, "http: redirect not followed");
	p.path = "/slow";
	t0 = now_ns();
	ok(probe_once(&p, &c, why, sizeof(why)) == PROBE_FAILURE &&
	       strstr(why, "timeout"),
	   "http: slow server times out (%s)", why);
	el = now_ns() - t0;
	ok(el >= 900000000ull && el < 2000000000ull,
	   "http: timeout honoured (%.2f s)", (double)el / S);
	p.port = 0;
	p.port_name = "metrics";
	ok(probe_once(&p, &c, why, sizeof(why)) == PROBE_FAILURE &&
	       strstr(why, "metrics"),
	   "http: unresolved named port (%s)", why);
	shutdown(sv.fd, SHUT_RDWR);
	pthread_join(sv.th, NULL);
	close(sv.fd);
	p.port = sv.port;
	p.path = "/";
	ok(probe_once(&p, &c, why, sizeof(why)) == PROBE_FAILURE &&
	       strstr(why, "Get http://127.0.0.1:"),
	   "http: connection refused fails (%s)", why);
}

static void test_exec_errors(void)
{
	char *cmd[] = {"true", NULL};
	struct probe p = {.kind = PROBE_EXEC, .timeout_s = 1};
	struct probe_ctx c = {.monitor_bin = "/nonexistent/cell-monitor",
			      .unit_dir = "/nonexistent/unit"};
	char why[256] = "";

	ok(probe_once(&p, &c, why, sizeof(why)) == PROBE_FAILURE &&
	       strstr(why, "no command"),
	   "exec: no command fails (%s)", why);
	p.exec_command = cmd;
	ok(probe_once(&p, &c, why, sizeof(why)) == PROBE_FAILURE &&
	       strstr(why, "exec true: "),
	   "exec: runtime_exec error is a failure (%s)", why);
}

/* ---- the state machine, with scripted results ---- */

struct script {
	const struct unit_spec *u;
	/* per probe: results to return in order ('s'/'f'), then repeats the
	 * last one */
	const char *live, *ready, *start;
	size_t n_live, n_ready, n_start; /* calls made */
};

static char next_result(const char *seq, size_t *n)
{
	size_t len = strlen(seq), i = *n < len ? *n : len - 1;

	(*n)++;
	return seq[i];
}

static enum probe_result fake(const struct probe *p, const struct probe_ctx *c,
			      char *why, size_t whysz)
{
	struct script *sc = c->opaque;
	char r;

	if (p == &sc->u->liveness)
		r = next_result(sc->live, &sc->n_live);
	else if (p == &sc->u->readiness)
		r = next_result(sc->ready, &sc->n_ready);
	else
		r = next_result(sc->start, &sc->n_start);
	if (r == 's')
		return PROBE_SUCCESS;
	snprintf(why, whysz, "HTTP 500");
	return PROBE_FAILURE;
}

static struct probe mk(int delay, int period, int succ, int fail)
{
	return (struct probe){.kind = PROBE_HTTP,
			      .port = 80,
			      .initial_delay_s = delay,
			      .timeout_s = 1,
			      .period_s = period,
			      .success_threshold = succ,
			      .failure_threshold = fail};
}

static void test_no_probes(void)
{
	struct unit_spec u = {.name = "u"};
	struct probe_ctx c = {.attempt = fake};
	struct unit_probes s;
	struct probe_outcome o;

	probes_init(&s, &u, 5 * S);
	ok(probes_next_due(&s) == 0, "no probes: nothing due");
	probes_run_due(&s, &u, &c, 5 * S, &o);
	ok(o.ready && o.started == 1 && !o.kill && !*o.why,
	   "no probes: started and ready");
}

static void test_readiness(void)
{
	struct unit_spec u = {.name = "u", .readiness = mk(5, 10, 2, 3)};
	struct script sc = {.u = &u, .ready = "sssfffffs"};
	struct probe_ctx c = {.attempt = fake, .opaque = &sc};
	struct unit_probes s;
	struct probe_outcome o;
	uint64_t t0 = 100 * S;
	/* ready after each run: s(1<2) s s f f f f f s */
	const bool want[] = {0, 1, 1, 1, 1, 0, 0, 0, 0};
	bool all = true;

	probes_init(&s, &u, t0);
	ok(probes_next_due(&s) == t0 + 5 * S, "readiness: initial delay");
	probes_run_due(&s, &u, &c, t0 + 4 * S, &o);
	ok(sc.n_ready == 0 && !o.ready && o.started == 1,
	   "readiness: not run before due; starts not ready");
	for (int i = 0; i < 9; i++) {
		uint64_t due = probes_next_due(&s);

		all = all && due == t0 + 5 * S + (uint64_t)i * 10 * S;
		probes_run_due(&s, &u, &c, due, &o);
		if (o.ready != want[i] || o.kill)
			printf("# run %d: ready %d want %d\n", i, o.ready,
			       want[i]);
		all = all && o.ready == want[i] && !o.kill;
	}
	ok(all && sc.n_ready == 9,
	   "readiness: toggles with success/failure thresholds, exact period");
	is_str(o.why, "Readiness probe failed: HTTP 500", "readiness: why");
	probes_run_due(&s, &u, &c, probes_next_due(&s) + 25 * S, &o);
	ok(sc.n_ready == 10 &&
	       probes_next_due(&s) == t0 + 5 * S + 9 * 10 * S + 25 * S + 10 * S,
	   "readiness: a late caller skips missed periods, runs once");
	ok(o.ready, "readiness: second success makes it ready again");
}

static void test_liveness(void)
{
	struct unit_spec u = {.name = "u", .liveness = mk(0, 3, 1, 3)};
	struct script sc = {.u = &u, .live = "sffsfff"};
	struct probe_ctx c = {.attempt = fake, .opaque = &sc};
	struct unit_probes s;
	struct probe_outcome o;
	bool nokill = true;

	probes_init(&s, &u, S);
	ok(probes_next_due(&s) == S, "liveness: due at once without a delay");
	for (int i = 0; i < 6; i++) {
		probes_run_due(&s, &u, &c, S + (uint64_t)i * 3 * S, &o);
		nokill = nokill && !o.kill && o.ready;
	}
	ok(nokill && sc.n_live == 6,
	   "liveness: fewer than 3 consecutive failures do not kill");
	probes_run_due(&s, &u, &c, 19 * S, &o);
	ok(o.kill && sc.n_live == 7, "liveness: third failure in a row kills");
	is_str(o.why, "Liveness probe failed: HTTP 500", "liveness: why");
	ok(!o.ready && probes_next_due(&s) == 0,
	   "liveness: after kill nothing runs, not ready");
	probes_run_due(&s, &u, &c, 100 * S, &o);
	ok(sc.n_live == 7 && o.kill, "liveness: kill is sticky until init");
	probes_init(&s, &u, 200 * S);
	sc.live = "s";
	probes_run_due(&s, &u, &c, 200 * S, &o);
	ok(!o.kill && o.ready && !*o.why, "liveness: init resets the state");
}

static void test_startup(void)
{
	struct unit_spec u = {.name = "u",
			      .startup = mk(2, 1, 1, 5),
			      .liveness = mk(10, 7, 1, 1),
			      .readiness = mk(0, 4, 1, 3)};
	struct script sc = {
	    .u = &u, .start = "fffs", .live = "s", .ready = "s"};
	struct probe_ctx c = {.attempt = fake, .opaque = &sc};
	struct unit_probes s;
	struct probe_outcome o;
	bool gated = true;

	probes_init(&s, &u, 0);
	ok(probes_next_due(&s) == 2 * S, "startup: initial delay");
	for (int i = 0; i < 3; i++) {
		probes_run_due(&s, &u, &c, (2 + (uint64_t)i) * S, &o);
		gated = gated && o.started == 0 && !o.ready && !o.kill;
	}
	ok(gated && sc.n_start == 3 && sc.n_live == 0 && sc.n_ready == 0,
	   "startup: liveness and readiness wait for startup");
	probes_run_due(&s, &u, &c, 5 * S, &o);
	ok(o.started == 1 && sc.n_start == 4, "startup: success starts");
	ok(sc.n_ready == 1 && o.ready,
	   "startup: readiness runs as soon as started");
	ok(sc.n_live == 0 && probes_next_due(&s) == 9 * S,
	   "startup: liveness keeps its initial delay from the run start");
	probes_run_due(&s, &u, &c, 9 * S, &o);
	ok(sc.n_ready == 2 && sc.n_live == 0 && probes_next_due(&s) == 10 * S,
	   "startup: readiness on its own period");
	probes_run_due(&s, &u, &c, 10 * S, &o);
	ok(sc.n_live == 1 && sc.n_start == 4 && !o.kill,
	   "startup: liveness runs, startup no more");

	/* A startup probe that never succeeds kills at its threshold. */
	sc = (struct script){.u = &u, .start = "f", .live = "s", .ready = "s"};
	probes_init(&s, &u, 0);
	for (int i = 0; i < 4; i++)
		probes_run_due(&s, &u, &c, (2 + (uint64_t)i) * S, &o);
	ok(!o.kill && o.started == 0, "startup: 4 failures of 5 do not kill");
	probes_run_due(&s, &u, &c, 6 * S, &o);
	ok(o.kill && o.started == 0 && !o.ready && sc.n_live == 0,
	   "startup: failure threshold kills");
	is_str(o.why, "Startup probe failed: HTTP 500", "startup: why");
}

int main(void)
{
	test_tcp();
	test_http();
	test_exec_errors();
	test_no_probes();
	test_readiness();
	test_liveness();
	test_startup();
	return tap_done();
}
