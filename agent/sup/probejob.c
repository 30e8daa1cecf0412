// SPDX-License-Identifier: Apache-2.0
/* Probe attempts on their own threads (see probejob.h). */
#include "probejob.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "log.h"
#include "metrics.h"
#include "util.h"

/* Enough for OpenSSL's handshake and getaddrinfo; resident only as used. */
#define PROBE_STACK (512u << 10)

static char *dup_or_null(const char *s)
{
	return s ? xstrdup(s) : NULL;
}

static void probe_copy(struct probe *d, const struct probe *s)
{
	*d = *s;
	d->exec_command = s->exec_command ? strv_dup(s->exec_command) : NULL;
	d->path = dup_or_null(s->path);
	d->host = dup_or_null(s->host);
	d->scheme = dup_or_null(s->scheme);
	d->port_name = dup_or_null(s->port_name);
	d->http_headers = NULL;
	if (s->n_http_headers) {
		d->http_headers =
		    xcalloc(s->n_http_headers, sizeof(*d->http_headers));
		for (size_t i = 0; i < s->n_http_headers; i++) {
			d->http_headers[i].name =
			    dup_or_null(s->http_headers[i].name);
			d->http_headers[i].value =
			    dup_or_null(s->http_headers[i].value);
		}
	}
}

struct probe_job *probe_job_new(const char *unit, bool is_init, int seq,
				enum probe_which w, const struct probe *p,
				const struct probe_ctx *c)
{
	struct probe_job *j = xcalloc(1, sizeof(*j));

	j->unit = xstrdup(unit);
	j->is_init = is_init;
	j->seq = seq;
	j->which = w;
	probe_copy(&j->probe, p);
	j->monitor_bin = dup_or_null(c->monitor_bin);
	j->unit_dir = dup_or_null(c->unit_dir);
	j->default_host = dup_or_null(c->default_host);
	return j;
}

void probe_job_free(struct probe_job *j)
{
	if (!j)
		return;
	free(j->unit);
	probe_free(&j->probe);
	free(j->monitor_bin);
	free(j->unit_dir);
	free(j->default_host);
	free(j);
}

int probe_runner_init(struct probe_runner *r, struct cerr *e)
{
	memset(r, 0, sizeof(*r));
	pthread_mutex_init(&r->mu, NULL);
	pthread_cond_init(&r->idle, NULL);
	r->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (r->evfd < 0)
		return cerr_sys(e, "probe runner eventfd");
	return 0;
}

/* A result is in: append it, wake the supervisor. All under the lock, so
 * that once running drops to 0 no thread touches the runner again. */
static void finish(struct probe_runner *r, struct probe_job *j, bool ran)
{
	struct probe_job **tail;
	uint64_t one = 1;

	pthread_mutex_lock(&r->mu);
	for (tail = &r->done; *tail; tail = &(*tail)->next)
		;
	*tail = j;
	if (write(r->evfd, &one, sizeof(one)) < 0)
		log_warn("probe runner eventfd: %m");
	if (ran && --r->running == 0)
		pthread_cond_broadcast(&r->idle);
	pthread_mutex_unlock(&r->mu);
}

static void *attempt(void *arg)
{
	struct probe_job *j = arg;
	struct probe_ctx c = {.monitor_bin = j->monitor_bin,
			      .unit_dir = j->unit_dir,
			      .default_host = j->default_host};

	uint64_t t0 = now_ns();

	j->result = probe_once(&j->probe, &c, j->why, sizeof(j->why));
	metrics_probe(j->unit, (int)j->which, j->result == PROBE_SUCCESS,
		      now_ns() - t0);
	finish(j->runner, j, true);
	return NULL;
}

void probe_runner_start(struct probe_runner *r, struct probe_job *j)
{
	pthread_attr_t a;
	pthread_t th;
	int rc;

	j->runner = r;
	j->next = NULL;
	pthread_mutex_lock(&r->mu);
	r->running++;
	pthread_mutex_unlock(&r->mu);
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&a, PROBE_STACK);
	rc = pthread_create(&th, &a, attempt, j);
	pthread_attr_destroy(&a);
	if (rc == 0)
		return;
	/* No thread: the attempt fails (the thresholds decide), rather
	 * than run here and block the supervisor. */
	snprintf(j->why, sizeof(j->why), "cannot start a probe thread: %s",
		 strerror(rc));
	j->result = PROBE_FAILURE;
	pthread_mutex_lock(&r->mu);
	r->running--;
	pthread_mutex_unlock(&r->mu);
	finish(r, j, false);
}

struct probe_job *probe_runner_take(struct probe_runner *r)
{
	struct probe_job *l;
	uint64_t v;

	if (read(r->evfd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		log_warn("probe runner eventfd: %m");
	pthread_mutex_lock(&r->mu);
	l = r->done;
	r->done = NULL;
	pthread_mutex_unlock(&r->mu);
	return l;
}

void probe_runner_fini(struct probe_runner *r)
{
	struct probe_job *l;

	pthread_mutex_lock(&r->mu);
	while (r->running)
		pthread_cond_wait(&r->idle, &r->mu);
	l = r->done;
	r->done = NULL;
	pthread_mutex_unlock(&r->mu);
	while (l) {
		struct probe_job *n = l->next;
		probe_job_free(l);
		l = n;
	}
	if (r->evfd >= 0)
		close(r->evfd);
	pthread_cond_destroy(&r->idle);
	pthread_mutex_destroy(&r->mu);
}
