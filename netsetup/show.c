// SPDX-License-Identifier: Apache-2.0
/* `cell-net show`: the recorded setup, and whether each part is still in
 * the kernel. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "net-internal.h"
#include "util.h"

static const char *there(int present)
{
	return present > 0 ? "present" : present == 0 ? "MISSING" : "unknown";
}

static int proxy_state(const struct net_state *st)
{
	struct cerr e = {0};
	struct nl *n = nl_open(-1, &e);
	struct in_addr a;
	int idx, r = -1;

	if (n && inet_pton(AF_INET, st->pod_ip, &a) == 1 &&
	    nl_link_find(n, st->primary_if, &idx, NULL, &e) == 0)
		r = nl_proxy_present(n, idx, a.s_addr, &e);
	nl_close(n);
	return r;
}

static int veth_state(const struct net_state *st)
{
	struct cerr e = {0};
	struct nl *n = nl_open(-1, &e);
	int idx, r = -1;

	if (n)
		r = nl_link_find(n, st->host_veth, &idx, NULL, &e) == 0 ? 1
		    : e.code == ENOENT					? 0
									: -1;
	nl_close(n);
	return r;
}

static void show_rules(const struct net_state *st, FILE *out)
{
	struct cerr e = {0};
	struct net_plan p;

	fprintf(out, "  nat rules    %s\n", there(net_ipt_present(&e)));
	if (net_plan_rules(st, &p, &e) < 0) {
		fprintf(out, "    (cannot plan: %s)\n", e.msg);
		return;
	}
	fprintf(out,
		"    -A PREROUTING -j %s\n    -A OUTPUT -j %s\n"
		"    -A POSTROUTING -j %s\n",
		NET_CHAIN_HOSTPORT, NET_CHAIN_HOSTPORT, NET_CHAIN_MASQ);
	for (size_t i = 0; i < p.n; i++) {
		cleanup_free char *t = net_rule_text(&p.v[i]);
		fprintf(out, "    %s\n", t);
	}
	net_plan_free(&p);
}

static void show_block(const struct net_state *st, FILE *out)
{
	struct cerr e = {0};

	if (st->allow_metadata && !st->made_block) {
		fprintf(out, "  metadata     allowed (no block)\n");
		return;
	}
	fprintf(out,
		"  metadata     blocked (%s)\n    -A FORWARD -j %s\n"
		"    -A %s -d %s/32 -i %s -j REJECT\n"
		"    ip6: -A %s -d %s/128 -i %s -j REJECT\n",
		there(net_block_present(&e)), NET_CHAIN_IMDS, NET_CHAIN_IMDS,
		NET_IMDS_IP, st->host_veth, NET_CHAIN_IMDS, NET_IMDS_IP6,
		st->host_veth);
}

int net_show(const struct net_opts *o, FILE *out, struct cerr *e)
{
	struct net_state st;

	if (net_state_load(o, &st, e) < 0)
		return e->code == ENOENT
			   ? cerr_set(e, ENOENT, "no pod network named %s",
				      o->name ? o->name : NET_DEFAULT_NAME)
			   : -1;
	fprintf(out, "pod network %s\n", st.name);
	fprintf(out, "  primary      %s %s\n", st.primary_if,
		st.primary_ip ? st.primary_ip : "?");
	if (st.host_network) {
		fprintf(out,
			"  hostNetwork  units use the host's namespace; "
			"pod IP %s\n",
			st.primary_ip ? st.primary_ip : "?");
		net_state_free(&st);
		return 0;
	}
	fprintf(out, "  namespace    %s (%s)\n", st.netns_path,
		there(net_netns_present(st.netns_path)));
	fprintf(out,
		"  pod          %s/32 on %s, default via %s (permanent "
		"neighbour)\n",
		st.pod_ip, NET_POD_IFNAME, NET_GATEWAY);
	fprintf(out, "  host veth    %s (%s), route %s/32\n", st.host_veth,
		there(veth_state(&st)), st.pod_ip);
	fprintf(out, "  proxy neigh  %s on %s (%s)\n", st.pod_ip, st.primary_if,
		there(proxy_state(&st)));
	for (size_t i = 0; i < st.n_sysctls; i++)
		fprintf(out, "  sysctl       %s = %s (was %s)\n",
			st.sysctls[i].path, st.sysctls[i].set,
			st.sysctls[i].old);
	show_rules(&st, out);
	show_block(&st, out);
	net_state_free(&st);
	return 0;
}
