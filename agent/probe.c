/* Probes: one attempt of each kind, and the per-unit state machine with the
 * kubelet's rules (pkg/kubelet/prober/worker.go). See probe.h. */
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cleanup.h"
#include "probe.h"
#include "runtime.h"
#include "util.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

#define NS_PER_S 1000000000ull
#define PROBE_BODY_MAX (10u << 10) /* the kubelet reads 10 KiB of body */
#define PROBE_DEFAULT_HOST "127.0.0.1"

static int timeout_ms(const struct probe *p)
{
	/* Kubernetes' default and minimum is 1 s. */
	return (p->timeout_s > 0 ? p->timeout_s : 1) * 1000;
}

static const char *probe_host(const struct probe *p, const struct probe_ctx *c)
{
	if (p->host && *p->host)
		return p->host;
	if (c->default_host && *c->default_host)
		return c->default_host;
	return PROBE_DEFAULT_HOST;
}

/* A named port the unit does not declare stays unresolved (port 0). */
static bool port_ok(const struct probe *p, char *why, size_t whysz)
{
	if (p->port > 0 && p->port <= 65535)
		return true;
	if (p->port_name)
		snprintf(why, whysz, "port \"%s\": no such named port",
			 p->port_name);
	else
		snprintf(why, whysz, "invalid port %d", p->port);
	return false;
}

/* ================================ exec ================================ */

/* Wait for pid up to ms; on timeout it is killed (the command dies with its
 * `cell-monitor exec`, which sets PDEATHSIG) and reaped. Returns the wait
 * status, or -1 on timeout. */
static int wait_timeout(pid_t pid, int ms, bool *timed_out)
{
	cleanup_close int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
	uint64_t deadline = now_ns() + (uint64_t)ms * 1000000u;
	int status = 0, r = 1;

	*timed_out = false;
	while (pfd >= 0) {
		uint64_t t = now_ns();
		int left = t >= deadline ? 0 : (int)((deadline - t) / 1000000u);
		struct pollfd pf = {.fd = pfd, .events = POLLIN};

		r = poll(&pf, 1, left);
		if (r >= 0 || errno != EINTR)
			break;
	}
	/* Without a pidfd (old kernel) we cannot bound the wait: kill. */
	if (r == 0 || pfd < 0) {
		*timed_out = r == 0;
		kill(pid, SIGKILL);
	}
	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR)
			return -1;
	}
	return *timed_out || pfd < 0 ? -1 : status;
}

static enum probe_result probe_exec(const struct probe *p,
				    const struct probe_ctx *c, char *why,
				    size_t whysz)
{
	struct exec_opts o = {.argv = p->exec_command,
			      .stdin_fd = -1,
			      .stdout_fd = -1,
			      .stderr_fd = -1};
	struct cerr e = {0};
	bool timed_out;
	pid_t pid;
	int st;

	if (!p->exec_command || !p->exec_command[0]) {
		snprintf(why, whysz, "exec: no command");
		return PROBE_FAILURE;
	}
	if (!c->monitor_bin || !c->unit_dir) {
		snprintf(why, whysz, "exec: no unit to run in");
		return PROBE_FAILURE;
	}
	pid = runtime_exec(c->monitor_bin, c->unit_dir, &o, &e);
	if (pid < 0) {
		snprintf(why, whysz, "exec %s: %s", p->exec_command[0], e.msg);
		return PROBE_FAILURE;
	}
	st = wait_timeout(pid, timeout_ms(p), &timed_out);
	if (timed_out) {
		snprintf(why, whysz, "command timed out after %ds",
			 timeout_ms(p) / 1000);
		return PROBE_FAILURE;
	}
	if (st < 0) {
		snprintf(why, whysz, "exec %s: cannot wait for it",
			 p->exec_command[0]);
		return PROBE_FAILURE;
	}
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return PROBE_SUCCESS;
	snprintf(why, whysz, "command %s exited with %d", p->exec_command[0],
		 WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
	return PROBE_FAILURE;
}

/* ================================ http ================================ */

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init_once(void)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* The body is read (so the server sees a normal exchange) but dropped past
 * the kubelet's 10 KiB; stopping there ends the transfer early. */
static size_t body_cb(char *ptr, size_t size, size_t n, void *u)
{
	size_t *seen = u;

	*seen += size * n;
	return *seen > PROBE_BODY_MAX ? 0 : size * n;
}

static char *http_url(const struct probe *p, const struct probe_ctx *c)
{
	const char *host = probe_host(p, c);
	bool https = p->scheme && !strcasecmp(p->scheme, "HTTPS");
	bool v6 = strchr(host, ':') != NULL;
	const char *path = p->path && *p->path ? p->path : "/";

	return xasprintf("%s://%s%s%s:%d%s%s", https ? "https" : "http",
			 v6 ? "[" : "", host, v6 ? "]" : "", p->port,
			 *path == '/' ? "" : "/", path);
}

/* User headers replace curl's own of the same name; an empty value must be
 * written "Name;" or curl would drop the header. */
static struct curl_slist *http_headers(const struct probe *p)
{
	struct curl_slist *l = NULL;

	bool accept = false;

	for (size_t i = 0; i < p->n_http_headers; i++) {
		const struct kv *h = &p->http_headers[i];
		cleanup_free char *line = NULL;

		if (!h->name || !*h->name)
			continue;
		accept = accept || !strcasecmp(h->name, "Accept");
		if (h->value && *h->value)
			line = xasprintf("%s: %s", h->name, h->value);
		else
			line = xasprintf("%s;", h->name);
		l = curl_slist_append(l, line);
	}
	/* The kubelet's default Accept (curl would send its own too). */
	if (!accept)
		l = curl_slist_append(l, "Accept: */*");
	return l;
}

static void http_setup(CURL *h, const struct probe *p, const char *url,
		       struct curl_slist *hdrs, size_t *seen, char *errbuf)
{
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L); /* threaded agent */
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)timeout_ms(p));
	curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
	/* A probe talks to the unit, never through the agent's proxy. */
	curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
	/* As the kubelet: HTTPS probes do not verify certificates. */
	curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
	curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
	curl_easy_setopt(h, CURLOPT_FORBID_REUSE, 1L);
	curl_easy_setopt(h, CURLOPT_USERAGENT, "kube-probe/cell");
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, body_cb);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, seen);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
}

static enum probe_result probe_http(const struct probe *p,
				    const struct probe_ctx *c, char *why,
				    size_t whysz)
{
	char errbuf[CURL_ERROR_SIZE] = "";
	cleanup_free char *url = NULL;
	struct curl_slist *hdrs;
	size_t seen = 0;
	long code = 0;
	CURLcode rc;
	CURL *h;

	if (!port_ok(p, why, whysz))
		return PROBE_FAILURE;
	pthread_once(&curl_once, curl_init_once);
	h = curl_easy_init();
	if (!h) {
		snprintf(why, whysz, "curl_easy_init failed");
		return PROBE_FAILURE;
	}
	url = http_url(p, c);
	hdrs = http_headers(p);
	http_setup(h, p, url, hdrs, &seen, errbuf);
	rc = curl_easy_perform(h);
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
	curl_easy_cleanup(h);
	curl_slist_free_all(hdrs);
	/* Cutting the body short is ours, not the server's failure. */
	if (rc != CURLE_OK && !(rc == CURLE_WRITE_ERROR && code > 0)) {
		if (rc == CURLE_OPERATION_TIMEDOUT)
			snprintf(why, whysz, "Get %s: timeout after %ds", url,
				 timeout_ms(p) / 1000);
		else
			snprintf(why, whysz, "Get %s: %s", url,
				 *errbuf ? errbuf : curl_easy_strerror(rc));
		return PROBE_FAILURE;
	}
	if (code >= 200 && code < 400)
		return PROBE_SUCCESS;
	snprintf(why, whysz, "HTTP %ld", code);
	return PROBE_FAILURE;
}

/* ================================ tcp ================================= */

/* Connect to one address before deadline; 0 when connected, else errno. */
static int tcp_try(const struct addrinfo *ai, uint64_t deadline)
{
	cleanup_close int fd = socket(
	    ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
	    ai->ai_protocol);
	int err = 0;
	socklen_t len = sizeof(err);

	if (fd < 0)
		return errno;
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
		return 0;
	if (errno != EINPROGRESS)
		return errno;
	for (;;) {
		uint64_t t = now_ns();
		int left = t >= deadline ? 0 : (int)((deadline - t) / 1000000u);
		struct pollfd pf = {.fd = fd, .events = POLLOUT};
		int r = poll(&pf, 1, left);

		if (r == 0)
			return ETIMEDOUT;
		if (r > 0)
			break;
		if (errno != EINTR)
			return errno;
	}
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
		return errno;
	return err;
}

static enum probe_result probe_tcp(const struct probe *p,
				   const struct probe_ctx *c, char *why,
				   size_t whysz)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_NUMERICSERV};
	const char *host = probe_host(p, c);
	uint64_t deadline = now_ns() + (uint64_t)timeout_ms(p) * 1000000u;
	struct addrinfo *res = NULL;
	char port[16];
	int err = ECONNREFUSED, g;

	if (!port_ok(p, why, whysz))
		return PROBE_FAILURE;
	snprintf(port, sizeof(port), "%d", p->port);
	g = getaddrinfo(host, port, &hints, &res);
	if (g != 0) {
		snprintf(why, whysz, "dial tcp %s:%s: %s", host, port,
			 gai_strerror(g));
		return PROBE_FAILURE;
	}
	for (const struct addrinfo *ai = res; ai; ai = ai->ai_next) {
		err = tcp_try(ai, deadline);
		if (err == 0 || err == ETIMEDOUT)
			break;
	}
	freeaddrinfo(res);
	if (err == 0)
		return PROBE_SUCCESS;
	snprintf(why, whysz, "dial tcp %s:%s: %s", host, port,
		 err == ETIMEDOUT ? "i/o timeout" : strerror(err));
	return PROBE_FAILURE;
}

enum probe_result probe_once(const struct probe *p, const struct probe_ctx *c,
			     char *why, size_t whysz)
{
	if (whysz)
		*why = '\0';
	switch (p->kind) {
	case PROBE_EXEC:
		return probe_exec(p, c, why, whysz);
	case PROBE_HTTP:
		return probe_http(p, c, why, whysz);
	case PROBE_TCP:
		return probe_tcp(p, c, why, whysz);
	case PROBE_NONE:
		break;
	}
	snprintf(why, whysz, "no probe handler");
	return PROBE_FAILURE;
}

/* =========================== the state machine ========================== */

static uint64_t secs(int s)
{
	return s > 0 ? (uint64_t)s * NS_PER_S : 0;
}

static uint64_t period_ns(const struct probe *p)
{
	/* Kubernetes' default period; a zero would spin. */
	return secs(p->period_s > 0 ? p->period_s : 10);
}

static int fail_threshold(const struct probe *p)
{
	return p->failure_threshold > 0 ? p->failure_threshold : 3;
}

static void schedule_first(struct probe_state *ps, const struct probe *p,
			   uint64_t start, uint64_t now)
{
	uint64_t due = start + secs(p->initial_delay_s);

	ps->scheduled = true;
	ps->next_due_ns = due > now ? due : now;
}

void probes_init(struct unit_probes *s, const struct unit_spec *u,
		 uint64_t now_ns)
{
	memset(s, 0, sizeof(*s));
	s->started_at_ns = now_ns;
	/* The kubelet's initial results: liveness succeeds, readiness and
	 * startup fail until a probe says otherwise. */
	s->liveness.ok = true;
	s->started = u->startup.kind == PROBE_NONE;
	if (!s->started) {
		schedule_first(&s->startup, &u->startup, now_ns, now_ns);
		return;
	}
	if (u->liveness.kind != PROBE_NONE)
		schedule_first(&s->liveness, &u->liveness, now_ns, now_ns);
	if (u->readiness.kind != PROBE_NONE)
		schedule_first(&s->readiness, &u->readiness, now_ns, now_ns);
}

uint64_t probes_next_due(const struct unit_probes *s)
{
	const struct probe_state *all[] = {&s->startup, &s->liveness,
					   &s->readiness};
	uint64_t best = 0;

	if (s->kill)
		return 0;
	for (size_t i = 0; i < ARRAY_SIZE(all); i++) {
		if (all[i]->scheduled &&
		    (best == 0 || all[i]->next_due_ns < best))
			best = all[i]->next_due_ns;
	}
	return best;
}

/* Run one probe if due and fold the result into its thresholds. Next due is a
 * fixed rate from the previous due time (like the kubelet's ticker), skipping
 * periods the caller missed. */
static void run_one(struct unit_probes *s, struct probe_state *ps,
		    const struct probe *p, const char *label,
		    const struct probe_ctx *c, uint64_t now)
{
	probe_attempt_fn fn = c->attempt ? c->attempt : probe_once;
	char why[200] = "";
	uint64_t per = period_ns(p);

	if (!ps->scheduled || ps->next_due_ns > now)
		return;
	ps->next_due_ns += per;
	if (ps->next_due_ns <= now)
		ps->next_due_ns = now + per;
	if (fn(p, c, why, sizeof(why)) == PROBE_SUCCESS) {
		ps->failures = 0;
		if (++ps->successes >= p->success_threshold)
			ps->ok = true;
		return;
	}
	ps->successes = 0;
	snprintf(s->why, sizeof(s->why), "%s probe failed: %s", label,
		 *why ? why : "unknown error");
	if (++ps->failures >= fail_threshold(p))
		ps->ok = false;
}

static void startup_step(struct unit_probes *s, const struct unit_spec *u,
			 const struct probe_ctx *c, uint64_t now)
{
	run_one(s, &s->startup, &u->startup, "Startup", c, now);
	if (s->startup.ok) {
		/* Done for this run: liveness and readiness take over, with
		 * their initial delays still counted from the start. */
		s->started = true;
		s->startup.scheduled = false;
		if (u->liveness.kind != PROBE_NONE)
			schedule_first(&s->liveness, &u->liveness,
				       s->started_at_ns, now);
		if (u->readiness.kind != PROBE_NONE)
			schedule_first(&s->readiness, &u->readiness,
				       s->started_at_ns, now);
	} else if (s->startup.failures >= fail_threshold(&u->startup)) {
		s->kill = true;
	}
}

void probes_run_due(struct unit_probes *s, const struct unit_spec *u,
		    const struct probe_ctx *c, uint64_t now_ns,
		    struct probe_outcome *out)
{
	if (!s->kill && !s->started)
		startup_step(s, u, c, now_ns);
	if (!s->kill && s->started) {
		run_one(s, &s->liveness, &u->liveness, "Liveness", c, now_ns);
		if (!s->liveness.ok)
			s->kill = true;
	}
	if (!s->kill && s->started)
		run_one(s, &s->readiness, &u->readiness, "Readiness", c,
			now_ns);
	probes_outcome(s, u, out);
}

void probes_outcome(const struct unit_probes *s, const struct unit_spec *u,
		    struct probe_outcome *out)
{
	out->started = s->started ? 1 : 0;
	out->kill = s->kill;
	if (!s->started || s->kill)
		out->ready = false;
	else if (u->readiness.kind == PROBE_NONE)
		out->ready = true;
	else
		out->ready = s->readiness.ok;
	snprintf(out->why, sizeof(out->why), "%s", s->why);
}
