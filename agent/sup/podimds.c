// SPDX-License-Identifier: Apache-2.0
/* The metadata proxy of a pod that Kip launched with an instance profile
 * (annotation pod.elotl.co/instance-profile): cell-imds, a child of the
 * supervisor thread, serving a socket at 169.254.169.254:80 inside the
 * pod's namespace (netsetup's net_imds_listen). Every other pod reaches
 * no metadata service at all (cell-net's block); with --pod-metadata
 * allow there is neither block nor proxy.
 *
 * Nothing is recorded: the child dies with the supervisor thread
 * (PDEATHSIG), its socket with it, and the next agent starts a new one.
 * A child that exits is started again after 1 s, doubling to 30 s.
 *
 * Seams: CELL_AGENT_IMDS_URL (the service it asks; http://169.254.169.254
 * by default). */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cleanup.h"
#include "imdsreq.h"
#include "log.h"
#include "netsetup.h"
#include "procspawn.h"
#include "pullproc.h"
#include "sup-internal.h"
#include "util.h"

#define INSTANCE_PROFILE "pod.elotl.co/instance-profile"
#define BACKOFF_MIN_NS 1000000000ull
#define BACKOFF_MAX_NS 30000000000ull
#define STEADY_NS 60000000000ull /* up this long: the back-off resets */

static bool has_profile(const struct pod_spec *p)
{
	for (size_t i = 0; i < p->n_annotations; i++)
		if (!strcmp(p->annotations[i].name, INSTANCE_PROFILE) &&
		    p->annotations[i].value && *p->annotations[i].value)
			return true;
	return false;
}

/* The namespace the proxy should serve now, or NULL for none. */
static const char *wanted(const struct supervisor *s, const char *ns)
{
	if (s->o.pod_metadata_allow || !ns || !has_profile(&s->spec))
		return NULL;
	return ns;
}

void podimds_stop(struct supervisor *s)
{
	struct podimds *m = &s->imds;

	if (!m->pid)
		return;
	spawn_signal(m->pidfd, SIGKILL);
	spawn_wait(m->pidfd, false);
	close(m->pidfd);
	log_info("metadata proxy for %s stopped", m->netns);
	free(m->netns);
	m->netns = NULL;
	m->pid = 0;
	m->pidfd = -1;
	m->backoff_ns = m->not_before_ns = 0; /* asked for: no failure */
}

static void start(struct supervisor *s, const char *ns)
{
	struct podimds *m = &s->imds;
	cleanup_free char *bin = pullproc_beside_self("cell-imds");
	cleanup_free char *url = xstrdup(getenv("CELL_AGENT_IMDS_URL")
					     ? getenv("CELL_AGENT_IMDS_URL")
					     : IMDS_UPSTREAM);
	char *argv[] = {bin, (char *)"--upstream", url, NULL};
	struct cerr e = {0};
	int fd = net_imds_listen(ns, &e);
	int stdio[3] = {fd, -1, log_get_fd()};

	m->not_before_ns = now_ns() + m->backoff_ns;
	m->backoff_ns = m->backoff_ns ? m->backoff_ns * 2 : BACKOFF_MIN_NS;
	if (m->backoff_ns > BACKOFF_MAX_NS)
		m->backoff_ns = BACKOFF_MAX_NS;
	if (fd >= 0) {
		m->pidfd = spawn_pidfd(argv, NULL, stdio, SPAWN_DIE_WITH_US,
				       &m->pid, &e);
		close(fd); /* the child's now */
	}
	if (fd < 0 || m->pidfd < 0) {
		log_error("metadata proxy for %s: %s", ns, e.msg);
		m->pid = 0;
		m->pidfd = -1;
		return;
	}
	m->netns = xstrdup(ns);
	m->started_ns = now_ns();
	log_info("metadata proxy for %s started (pid %d, instance profile)", ns,
		 (int)m->pid);
}

void podimds_tick(struct supervisor *s, const char *netns)
{
	struct podimds *m = &s->imds;
	const char *ns = wanted(s, netns);
	int code;

	if (m->pid && (code = spawn_wait(m->pidfd, true)) != -2) {
		log_warn("metadata proxy (pid %d) exited (%d)", (int)m->pid,
			 code);
		close(m->pidfd);
		free(m->netns);
		m->netns = NULL;
		m->pid = 0;
		m->pidfd = -1;
		if (now_ns() - m->started_ns > STEADY_NS)
			m->backoff_ns = 0;
	}
	if (m->pid && (!ns || strcmp(ns, m->netns)))
		podimds_stop(s);
	if (!ns || m->pid || now_ns() < m->not_before_ns)
		return;
	start(s, ns);
}
