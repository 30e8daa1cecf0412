// SPDX-License-Identifier: Apache-2.0
/* Setup, check, teardown and show of a pod network. Setup is a list of
 * idempotent steps; each step that creates something is written to the
 * state file before the next one runs, so that a teardown (or the undo of
 * a failed setup, or the next agent after a crash) knows exactly what is
 * ours. Running setup again over an existing state re-applies the same
 * values: nothing changes. */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cleanup.h"
#include "fsutil.h"
#include "log.h"
#include "net-internal.h"
#include "util.h"

static void nl_closep(struct nl **n)
{
	nl_close(*n);
}
#define cleanup_nl _cleanup_(nl_closep)

static const char *name_of(const struct net_opts *o)
{
	return o->name ? o->name : NET_DEFAULT_NAME;
}

static int check_name(const char *n, struct cerr *e)
{
	size_t len = strlen(n);

	if (!len || len > 64 || n[0] == '.' || n[0] == '-')
		return cerr_set(e, EINVAL, "bad namespace name '%s'", n);
	for (size_t i = 0; i < len; i++)
		if (!isalnum((unsigned char)n[i]) && !strchr("._-", n[i]))
			return cerr_set(e, EINVAL,
					"bad namespace name '%s' (letters, "
					"digits, '.', '_', '-')",
					n);
	return 0;
}

static int parse_ip(const char *s, const char *what, uint32_t *out,
		    struct cerr *e)
{
	struct in_addr a;

	if (!s || inet_pton(AF_INET, s, &a) != 1)
		return cerr_set(e, EINVAL, "%s '%s' is not an IPv4 address",
				what, s ? s : "");
	*out = a.s_addr;
	return 0;
}

static char *ip_text(uint32_t ip)
{
	char s[INET_ADDRSTRLEN];

	inet_ntop(AF_INET, &ip, s, sizeof(s));
	return xstrdup(s);
}

int net_primary(char **ifname, char **ip, struct cerr *e)
{
	cleanup_nl struct nl *n = nl_open(-1, e);
	char name[16];
	uint32_t a;
	int idx;

	if (!n || nl_default_route(n, &idx, e) < 0 ||
	    nl_link_name(n, idx, name, e) < 0 ||
	    nl_first_addr(n, idx, &a, e) < 0)
		return cerr_prefix(e, "primary interface");
	*ifname = xstrdup(name);
	*ip = ip_text(a);
	return 0;
}

/* The primary interface and IP: given, or found by the default route. */
static int resolve_primary(const struct net_opts *o, struct net_state *st,
			   struct cerr *e)
{
	cleanup_nl struct nl *n = NULL;
	uint32_t a;
	int idx;

	if (!o->primary_if) {
		if (net_primary(&st->primary_if, &st->primary_ip, e) < 0)
			return -1;
		if (o->primary_ip) {
			free(st->primary_ip);
			st->primary_ip = xstrdup(o->primary_ip);
		}
		return 0;
	}
	st->primary_if = xstrdup(o->primary_if);
	if (o->primary_ip) {
		st->primary_ip = xstrdup(o->primary_ip);
		return 0;
	}
	if (!(n = nl_open(-1, e)) ||
	    nl_link_find(n, o->primary_if, &idx, NULL, e) < 0 ||
	    nl_first_addr(n, idx, &a, e) < 0)
		return cerr_prefix(e, "primary interface %s", o->primary_if);
	st->primary_ip = ip_text(a);
	return 0;
}

static int save(const struct net_opts *o, const struct net_state *st,
		struct cerr *e)
{
	if (net_state_save(o, st, e) < 0)
		return cerr_prefix(e, "save state");
	return 0;
}

/* ---- the steps ---- */

static int step_sysctl(const struct net_opts *o, struct net_state *st,
		       const char *path, const char *want, struct cerr *e)
{
	cleanup_free char *cur = NULL;
	struct net_sysctl *s;

	for (size_t i = 0; i < st->n_sysctls; i++)
		if (!strcmp(st->sysctls[i].path, path))
			return net_sysctl_set(path, want, e);
	if (!(cur = net_sysctl_get(path, e)))
		return -1;
	if (!strcmp(cur, want))
		return 0; /* not ours: teardown leaves it */
	st->sysctls =
	    xrealloc(st->sysctls, (st->n_sysctls + 1) * sizeof(*st->sysctls));
	s = &st->sysctls[st->n_sysctls++];
	s->path = xstrdup(path);
	s->old = steal_ptr(&cur);
	s->set = xstrdup(want);
	if (save(o, st, e) < 0)
		return -1;
	return net_sysctl_set(path, want, e);
}

static int step_netns(const struct net_opts *o, struct net_state *st,
		      struct cerr *e)
{
	const char *dir = o->netns_dir ? o->netns_dir : NET_DEFAULT_NETNS_DIR;

	if (st->made_netns && net_netns_present(st->netns_path))
		return 0;
	if (st->made_netns) /* a stale file of ours, e.g. after a crash */
		net_netns_remove(st->netns_path, e);
	if (net_netns_create(dir, st->netns_path, e) < 0)
		return -1;
	st->made_netns = true;
	return save(o, st, e);
}

static int step_veth(const struct net_opts *o, struct net_state *st,
		     struct nl *host, int nsfd, struct cerr *e)
{
	int idx;

	if (nl_link_find(host, st->host_veth, &idx, NULL, e) == 0) {
		if (!st->made_veth)
			return cerr_set(e, EEXIST,
					"link %s exists and is not cell-net's",
					st->host_veth);
		return 0;
	}
	if (e->code != ENOENT)
		return -1;
	cerr_clear(e);
	/* Recorded before the kernel call: a crash in between leaves a
	 * record that teardown can act on. */
	st->made_veth = true;
	if (save(o, st, e) < 0)
		return -1;
	return nl_veth_add(host, st->host_veth, NET_POD_IFNAME, nsfd, e);
}

static int step_host_side(struct net_state *st, struct nl *host, uint32_t pod,
			  uint8_t mac[6], struct cerr *e)
{
	int idx;

	if (nl_link_find(host, st->host_veth, &idx, mac, e) < 0 ||
	    nl_link_up(host, idx, e) < 0 ||
	    nl_route(host, true, pod, 32, 0, idx, true, e) < 0)
		return cerr_prefix(e, "host end %s", st->host_veth);
	return 0;
}

static int step_pod_side(int nsfd, uint32_t pod, const uint8_t mac[6],
			 struct cerr *e)
{
	cleanup_nl struct nl *n = nl_open(nsfd, e);
	uint32_t gw;
	int lo, eth;

	inet_pton(AF_INET, NET_GATEWAY, &gw);
	if (!n || nl_link_find(n, "lo", &lo, NULL, e) < 0 ||
	    nl_link_up(n, lo, e) < 0 ||
	    nl_link_find(n, NET_POD_IFNAME, &eth, NULL, e) < 0 ||
	    nl_link_up(n, eth, e) < 0 || nl_addr_add(n, eth, pod, 32, e) < 0 ||
	    nl_route(n, true, gw, 32, 0, eth, true, e) < 0 ||
	    nl_neigh(n, true, eth, gw, mac, false, e) < 0 ||
	    nl_route(n, true, 0, 0, gw, eth, false, e) < 0)
		return cerr_prefix(e, "pod end");
	return 0;
}

static int step_proxy(const struct net_opts *o, struct net_state *st,
		      struct nl *host, uint32_t pod, struct cerr *e)
{
	int idx;

	if (nl_link_find(host, st->primary_if, &idx, NULL, e) < 0)
		return cerr_prefix(e, "primary interface");
	if (!st->made_proxy) {
		if (nl_proxy_present(host, idx, pod, e) != 0)
			return e->code ? -1
				       : cerr_set(e, EEXIST,
						  "a proxy neighbour for %s on "
						  "%s exists and is not "
						  "cell-net's",
						  st->pod_ip, st->primary_if);
		st->made_proxy = true;
		if (save(o, st, e) < 0)
			return -1;
	}
	return nl_neigh(host, true, idx, pod, NULL, true, e);
}

static int step_rules(const struct net_opts *o, struct net_state *st,
		      struct cerr *e)
{
	struct net_plan p;
	int r;

	if (net_plan_rules(st, &p, e) < 0)
		return -1;
	if (!st->made_rules) {
		st->made_rules = true;
		if (save(o, st, e) < 0) {
			net_plan_free(&p);
			return -1;
		}
	}
	r = net_ipt_apply(&p, e);
	net_plan_free(&p);
	return r;
}

/* The metadata block, or its removal when a later setup allows the
 * service (recorded before the kernel call, as the nat rules are). */
static int step_block(const struct net_opts *o, struct net_state *st,
		      struct cerr *e)
{
	if (st->allow_metadata) {
		if (!st->made_block)
			return 0;
		if (net_block_remove(e) < 0)
			return -1;
		st->made_block = false;
		return save(o, st, e);
	}
	if (!st->made_block) {
		st->made_block = true;
		if (save(o, st, e) < 0)
			return -1;
	}
	return net_block_apply(st->host_veth, e);
}

static int run_steps(const struct net_opts *o, struct net_state *st,
		     struct cerr *e)
{
	cleanup_nl struct nl *host = NULL;
	cleanup_close int nsfd = -1;
	uint8_t mac[6];
	uint32_t pod = 0;

	if (parse_ip(st->pod_ip, "pod IP", &pod, e) < 0 ||
	    step_sysctl(o, st, "net/ipv4/ip_forward", "1", e) < 0 ||
	    step_netns(o, st, e) < 0)
		return -1;
	nsfd = open(st->netns_path, O_RDONLY | O_CLOEXEC);
	if (nsfd < 0)
		return cerr_sys(e, "open %s", st->netns_path);
	if (!(host = nl_open(-1, e)) || step_veth(o, st, host, nsfd, e) < 0 ||
	    step_host_side(st, host, pod, mac, e) < 0 ||
	    step_pod_side(nsfd, pod, mac, e) < 0 ||
	    step_proxy(o, st, host, pod, e) < 0 || step_rules(o, st, e) < 0 ||
	    step_block(o, st, e) < 0)
		return -1;
	return 0;
}

/* ---- undo ---- */

static void keep_first(struct cerr *first, struct cerr *e)
{
	if (e->code && !first->code)
		*first = *e;
	cerr_clear(e);
}

static void undo_links(struct net_state *st, struct cerr *first)
{
	cleanup_nl struct nl *host = NULL;
	struct cerr e = {0};
	uint32_t pod = 0;
	int idx;

	if (!(host = nl_open(-1, &e))) {
		keep_first(first, &e);
		return;
	}
	if (st->made_proxy && parse_ip(st->pod_ip, "pod IP", &pod, &e) == 0 &&
	    nl_link_find(host, st->primary_if, &idx, NULL, &e) == 0 &&
	    nl_neigh(host, false, idx, pod, NULL, true, &e) == 0)
		st->made_proxy = false;
	if (e.code == ENOENT)
		st->made_proxy = false, cerr_clear(&e);
	keep_first(first, &e);
	if (st->made_veth &&
	    nl_link_find(host, st->host_veth, &idx, NULL, &e) == 0 &&
	    nl_link_del(host, idx, &e) == 0)
		st->made_veth = false;
	if (e.code == ENOENT)
		st->made_veth = false, cerr_clear(&e);
	keep_first(first, &e);
}

static void undo_sysctls(struct net_state *st, struct cerr *first)
{
	for (size_t i = st->n_sysctls; i-- > 0;) {
		struct net_sysctl *s = &st->sysctls[i];
		struct cerr e = {0};
		cleanup_free char *cur = net_sysctl_get(s->path, &e);

		if (cur && strcmp(cur, s->set))
			log_warn("sysctl %s is %s now, not %s; left as it is",
				 s->path, cur, s->set);
		else if (cur)
			net_sysctl_set(s->path, s->old, &e);
		keep_first(first, &e);
	}
}

/* Undo what st records, in reverse order. */
static int undo(const struct net_opts *o, struct net_state *st, struct cerr *e)
{
	struct cerr first = {0}, e2 = {0};
	cleanup_free char *path = net_state_path(o);

	if (st->made_block && net_block_remove(&e2) == 0)
		st->made_block = false;
	keep_first(&first, &e2);
	if (st->made_rules && net_ipt_remove(&e2) == 0)
		st->made_rules = false;
	keep_first(&first, &e2);
	undo_links(st, &first);
	if (st->made_netns && net_netns_remove(st->netns_path, &e2) == 0)
		st->made_netns = false;
	keep_first(&first, &e2);
	if (first.code) {
		/* Keep the record of what is left, for another try. */
		if (net_state_save(o, st, &e2) < 0)
			log_warn("save state: %s", e2.msg);
		*e = first;
		return -1;
	}
	undo_sysctls(st, &first);
	if (unlink(path) < 0 && errno != ENOENT)
		log_warn("remove %s: %m", path);
	if (first.code) {
		*e = first;
		return -1;
	}
	return 0;
}

/* ---- the entry points ---- */

static void fill_info(const struct net_state *st, struct net_info *out,
		      bool found)
{
	memset(out, 0, sizeof(*out));
	out->netns_path = st->netns_path ? xstrdup(st->netns_path) : NULL;
	out->pod_ip = xstrdup(st->host_network ? st->primary_ip : st->pod_ip);
	out->primary_ip = xstrdup(st->primary_ip);
	out->primary_if = xstrdup(st->primary_if);
	out->host_veth = st->host_veth ? xstrdup(st->host_veth) : NULL;
	out->found = found;
}

static int same_request(const struct net_opts *o, const struct net_state *st,
			struct cerr *e)
{
	if (st->host_network != o->host_network ||
	    (!o->host_network && (!o->pod_ip || strcmp(o->pod_ip, st->pod_ip))))
		return cerr_set(e, EEXIST,
				"pod network %s is set up for %s; tear it "
				"down first",
				st->name,
				st->host_network ? "the host network"
						 : st->pod_ip);
	return 0;
}

/* The parts a later setup may change: hostPorts, private CIDRs, the
 * metadata block. */
static void take_rules_opts(const struct net_opts *o, struct net_state *st)
{
	st->allow_metadata = o->allow_metadata;
	strv_free(st->private_cidrs);
	st->private_cidrs = NULL;
	free(st->ports);
	for (size_t i = 0; o->private_cidrs && o->private_cidrs[i]; i++) {
		size_t n = strv_len(st->private_cidrs);
		st->private_cidrs =
		    xrealloc(st->private_cidrs, (n + 2) * sizeof(char *));
		st->private_cidrs[n] = xstrdup(o->private_cidrs[i]);
		st->private_cidrs[n + 1] = NULL;
	}
	st->ports = xcalloc(o->n_ports + 1, sizeof(*st->ports));
	if (o->n_ports)
		memcpy(st->ports, o->ports, o->n_ports * sizeof(*st->ports));
	st->n_ports = o->n_ports;
}

static void fresh_state(const struct net_opts *o, struct net_state *st)
{
	const char *name = name_of(o);

	memset(st, 0, sizeof(*st));
	st->name = xstrdup(name);
	st->host_network = o->host_network;
	if (o->host_network)
		return;
	st->pod_ip = xstrdup(o->pod_ip);
	st->netns_path = xasprintf(
	    "%s/%s", o->netns_dir ? o->netns_dir : NET_DEFAULT_NETNS_DIR, name);
	st->host_veth = o->host_veth ? xstrdup(o->host_veth)
				     : xasprintf("veth-%.10s", name);
	take_rules_opts(o, st);
}

static int check_opts(const struct net_opts *o, struct cerr *e)
{
	uint32_t a;
	int plen;

	if (check_name(name_of(o), e) < 0)
		return -1;
	if (o->host_network)
		return 0;
	if (parse_ip(o->pod_ip, "pod IP", &a, e) < 0 ||
	    (o->primary_ip && parse_ip(o->primary_ip, "primary IP", &a, e) < 0))
		return -1;
	if (o->host_veth && (!*o->host_veth || strlen(o->host_veth) > 15))
		return cerr_set(e, EINVAL, "bad veth name '%s'", o->host_veth);
	if (o->n_ports > NET_MAX_PORTS ||
	    strv_len(o->private_cidrs) > NET_MAX_CIDRS)
		return cerr_set(e, EINVAL, "too many ports or CIDRs");
	for (size_t i = 0; o->private_cidrs && o->private_cidrs[i]; i++)
		if (net_parse_cidr(o->private_cidrs[i], &a, &plen, e) < 0)
			return -1;
	return 0;
}

int net_setup(const struct net_opts *o, struct net_info *out, struct cerr *e)
{
	struct net_state st;
	struct cerr e2 = {0};
	bool existed;
	int r;

	if (check_opts(o, e) < 0)
		return -1;
	existed = net_state_load(o, &st, e) == 0;
	if (!existed && e->code != ENOENT)
		return -1;
	cerr_clear(e);
	if (existed && same_request(o, &st, e) < 0) {
		net_state_free(&st);
		return -1;
	}
	if (existed && !st.host_network)
		take_rules_opts(o, &st);
	if (!existed) {
		fresh_state(o, &st);
		if (resolve_primary(o, &st, e) < 0 || save(o, &st, e) < 0) {
			net_state_free(&st);
			return -1;
		}
	}
	r = st.host_network ? 0 : run_steps(o, &st, e);
	if (r < 0 && !existed && undo(o, &st, &e2) < 0)
		log_warn("undo a failed setup: %s", e2.msg);
	if (r == 0)
		fill_info(&st, out, existed);
	net_state_free(&st);
	return r < 0 ? cerr_prefix(e, "set up pod network %s", name_of(o)) : 0;
}

static bool veth_present(const struct net_state *st)
{
	cleanup_nl struct nl *n = NULL;
	struct cerr e = {0};
	int idx;

	n = nl_open(-1, &e);
	return n && nl_link_find(n, st->host_veth, &idx, NULL, &e) == 0;
}

int net_check(const struct net_opts *o, struct net_info *out, struct cerr *e)
{
	struct net_state st;
	int r;

	if (check_name(name_of(o), e) < 0)
		return -1;
	if (net_state_load(o, &st, e) < 0) {
		if (e->code != ENOENT)
			return -1;
		cerr_clear(e);
		return 0;
	}
	r = st.host_network ||
	    (net_netns_present(st.netns_path) && veth_present(&st));
	if (r)
		fill_info(&st, out, true);
	net_state_free(&st);
	return r;
}

int net_teardown(const struct net_opts *o, struct cerr *e)
{
	struct net_state st;
	int r;

	if (check_name(name_of(o), e) < 0)
		return -1;
	if (net_state_load(o, &st, e) < 0)
		return e->code == ENOENT
			   ? cerr_set(e, ENOENT, "no pod network named %s",
				      name_of(o))
			   : -1;
	r = undo(o, &st, e);
	net_state_free(&st);
	return r < 0 ? cerr_prefix(e, "tear down pod network %s", name_of(o))
		     : 0;
}

void net_info_free(struct net_info *i)
{
	free(i->netns_path);
	free(i->pod_ip);
	free(i->primary_ip);
	free(i->primary_if);
	free(i->host_veth);
	memset(i, 0, sizeof(*i));
}
