// SPDX-License-Identifier: Apache-2.0
/* The supervisor's side of the pod network (netsetup/, in-process). A pod
 * with a PodIP that is not hostNetwork gets its namespace before its first
 * unit starts; units join it (run.json's network namespace), exec joins
 * the unit's, probes dial the pod IP. After an agent restart the recorded
 * network is checked and kept, not built again. A new spec that changes
 * the pod IP or hostNetwork restarts the pod: once every unit has stopped
 * the old network is torn down and the new one set up. A change of
 * hostPorts only re-applies the rules (one atomic table replace).
 *
 * Seams: CELL_AGENT_NETNS (the namespace name, "pod"), CELL_NET_NETNS_DIR,
 * CELL_NET_STATE_DIR (as cell-net), CELL_AGENT_POD_NETWORK=off. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cleanup.h"
#include "log.h"
#include "netsetup.h"
#include "sup-internal.h"
#include "sysctl.h"
#include "util.h"

static void base_opts(struct net_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->name = getenv("CELL_AGENT_NETNS");
	o->netns_dir = getenv("CELL_NET_NETNS_DIR");
	o->state_dir = getenv("CELL_NET_STATE_DIR");
}

static bool host_network(const struct pod_spec *p)
{
	return p->ns_network == NS_NODE;
}

/* CELL_AGENT_POD_NETWORK=off: units share the cell's network even with a
 * PodIP. For tests that run the agent in a host's own namespace with the
 * controller's addresses (the pod network must never be built there);
 * tests/integration/test_agent_api.py sets it for every agent it starts
 * unless a test asks otherwise. */
static bool enabled(void)
{
	const char *v = getenv("CELL_AGENT_POD_NETWORK");

	return !v || strcmp(v, "off") != 0;
}

/* Does this spec put the units into a namespace of their own? */
static bool wants_netns(const struct pod_spec *p)
{
	return enabled() && p->pod_ip && *p->pod_ip && !host_network(p);
}

/* Everything setup depends on, as one string (a change means act). */
static char *net_key(const struct pod_spec *p, bool with_ports)
{
	char *k = xasprintf("%s|%d", wants_netns(p) ? p->pod_ip : "",
			    host_network(p));

	for (size_t i = 0; with_ports && i < p->n_units; i++)
		for (size_t j = 0; j < p->units[i].n_ports; j++) {
			const struct port *pt = &p->units[i].ports[j];
			char *n;
			if (pt->host_port <= 0)
				continue;
			n = xasprintf("%s|%d:%d/%s@%s", k, pt->host_port,
				      pt->container_port,
				      pt->protocol ? pt->protocol : "TCP",
				      pt->host_ip ? pt->host_ip : "");
			free(k);
			k = n;
		}
	return k;
}

/* hostPorts of every unit (SCTP is not forwarded: logged). */
static struct net_port *ports_of(const struct pod_spec *p, size_t *n)
{
	struct net_port *v = xcalloc(NET_MAX_PORTS, sizeof(*v));

	*n = 0;
	for (size_t i = 0; i < p->n_units; i++)
		for (size_t j = 0; j < p->units[i].n_ports; j++) {
			const struct port *pt = &p->units[i].ports[j];
			struct in_addr a;
			if (pt->host_port <= 0 || *n >= NET_MAX_PORTS)
				continue;
			if (pt->protocol && strcasecmp(pt->protocol, "TCP") &&
			    strcasecmp(pt->protocol, "UDP")) {
				log_warn("hostPort %d/%s: only TCP and UDP are "
					 "forwarded",
					 pt->host_port, pt->protocol);
				continue;
			}
			v[*n].host_port = (uint16_t)pt->host_port;
			v[*n].container_port = (uint16_t)pt->container_port;
			v[*n].udp =
			    pt->protocol && !strcasecmp(pt->protocol, "UDP");
			if (pt->host_ip && *pt->host_ip &&
			    inet_pton(AF_INET, pt->host_ip, &a) == 1)
				snprintf(v[*n].host_ip, sizeof(v[*n].host_ip),
					 "%s", pt->host_ip);
			(*n)++;
		}
	return v;
}

/* The pod's net.* sysctls into its namespace (runtime/sysctl.c), before any
 * unit starts; units write them again as they start, in the same place. */
static void apply_sysctls(const struct pod_spec *p, const char *netns)
{
	char **names = xcalloc(p->n_sysctls + 1, sizeof(char *));
	char **values = xcalloc(p->n_sysctls + 1, sizeof(char *));
	size_t n = 0;
	struct cerr e = {0};
	int fd;

	for (size_t i = 0; i < p->n_sysctls; i++)
		if (sysctl_namespace(p->sysctls[i].name) == SYSCTL_NET) {
			names[n] = p->sysctls[i].name;
			values[n++] = p->sysctls[i].value;
		}
	fd = n ? open(netns, O_RDONLY | O_CLOEXEC) : -1;
	if (n && (fd < 0 ||
		  sysctl_apply_in(fd, CLONE_NEWNET, names, values, n, &e) < 0))
		log_error("pod sysctls in %s: %s", netns,
			  fd < 0 ? strerror(errno) : e.msg);
	if (fd >= 0)
		close(fd);
	free(names);
	free(values);
}

static void forget(struct podnet *pn)
{
	free(pn->netns_path);
	free(pn->key);
	free(pn->base);
	pn->netns_path = pn->key = pn->base = NULL;
	pn->ready = false;
}

/* The network an earlier agent left is kept as found, even when the spec
 * in force wants another one (a spec that changed the pod IP was saved
 * and the agent killed before it restarted the pod): units re-adopted
 * from the records still run in it. The recheck after restore sees the
 * difference (podnet_differs) and restarts the pod, which tears it down
 * once those units have stopped (podnet_release). */
void podnet_restore(struct supervisor *s)
{
	struct net_opts o;
	struct net_info info = {0};
	struct cerr e = {0};
	int r;

	if (!s->has_spec || !enabled())
		return;
	base_opts(&o);
	r = net_check(&o, &info, &e);
	if (r < 0)
		log_warn("pod network: %s", e.msg);
	if (r <= 0)
		return;
	s->net.ready = true;
	s->net.netns_path = steal_ptr(&info.netns_path);
	if (wants_netns(&s->spec) && info.pod_ip &&
	    !strcmp(info.pod_ip, s->spec.pod_ip)) {
		log_info("pod network %s (%s) found and kept",
			 s->net.netns_path, info.pod_ip);
		s->net.key = net_key(&s->spec, true);
		s->net.base = net_key(&s->spec, false);
	} else {
		log_warn("pod network %s is for %s, not for the spec in force; "
			 "the pod restarts into a new one",
			 s->net.netns_path, info.pod_ip ? info.pod_ip : "?");
		s->net.base =
		    xasprintf("%s|0", info.pod_ip ? info.pod_ip : "?");
		s->net.key = xstrdup(s->net.base);
	}
	net_info_free(&info);
}

char *podnet_key(const struct pod_spec *p)
{
	return net_key(p, false);
}

bool podnet_differs(const struct supervisor *s, const char *run_key)
{
	char *want;
	bool differs;

	if (!s->has_spec)
		return false;
	want = net_key(&s->spec, false);
	differs = (run_key && *run_key && strcmp(run_key, want)) ||
		  (s->net.ready && s->net.base && strcmp(s->net.base, want));
	free(want);
	return differs;
}

bool podnet_changed(const struct supervisor *s, const struct pod_spec *next)
{
	char *a, *b;
	bool changed;

	if (!s->has_spec)
		return false;
	a = net_key(&s->spec, false);
	b = net_key(next, false);
	changed = strcmp(a, b) != 0;
	free(a);
	free(b);
	return changed;
}

void podnet_release(struct supervisor *s)
{
	struct net_opts o;
	struct cerr e = {0};
	char *want = s->has_spec ? net_key(&s->spec, false) : NULL;
	bool same = want && s->net.base && !strcmp(want, s->net.base);

	free(want);
	if (!s->net.ready || same)
		return; /* nothing, or the same network: kept */
	podimds_stop(s);
	base_opts(&o);
	if (net_teardown(&o, &e) < 0 && e.code != ENOENT)
		log_error("pod network: %s", e.msg);
	else
		log_info("pod network %s torn down", s->net.netns_path);
	forget(&s->net);
}

bool podnet_ensure(struct supervisor *s)
{
	struct net_opts o;
	struct net_info info = {0};
	struct cerr e = {0};
	struct net_port *ports;
	char *key;

	if (!wants_netns(&s->spec))
		return true;
	key = net_key(&s->spec, true);
	if (s->net.ready && s->net.key && !strcmp(key, s->net.key)) {
		free(key);
		return true;
	}
	base_opts(&o);
	o.pod_ip = s->spec.pod_ip;
	o.allow_metadata = s->o.pod_metadata_allow;
	ports = ports_of(&s->spec, &o.n_ports);
	o.ports = ports;
	if (net_setup(&o, &info, &e) < 0) {
		/* Units wait; the next tick tries again. */
		log_error("%s", e.msg);
		free(ports);
		free(key);
		return false;
	}
	log_info("pod network %s: %s on %s (primary %s %s)", info.netns_path,
		 info.pod_ip, info.host_veth, info.primary_if, info.primary_ip);
	free(ports);
	apply_sysctls(&s->spec, info.netns_path);
	forget(&s->net);
	s->net.ready = true;
	s->net.netns_path = steal_ptr(&info.netns_path);
	s->net.key = key;
	s->net.base = net_key(&s->spec, false);
	net_info_free(&info);
	podimds_tick(s, podnet_netns(s)); /* before the first unit starts */
	return true;
}

const char *podnet_netns(const struct supervisor *s)
{
	return s->has_spec && wants_netns(&s->spec) && s->net.ready
		   ? s->net.netns_path
		   : NULL;
}

char *podnet_pod_ip(const struct supervisor *s)
{
	return podnet_netns(s) ? xstrdup(s->spec.pod_ip) : NULL;
}

void podnet_free(struct podnet *pn)
{
	forget(pn);
}
