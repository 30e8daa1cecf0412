// SPDX-License-Identifier: Apache-2.0
/* The nat rules as data: a pure function of the recorded state, so the
 * rule set is checked without privilege and ipt.c only translates. Two
 * chains of our own:
 *
 *   CELL-HOSTPORT (from PREROUTING and OUTPUT, first):
 *     -d <primary|hostIP> -p tcp|udp --dport H -j DNAT --to <pod>:C
 *   CELL-MASQ (from POSTROUTING):
 *     -s <pod> -d <pod> -j MASQUERADE      hairpin: the pod to its hostPort
 *     ! -s <pod> -j RETURN
 *     ! -o <primary if> -j RETURN
 *     -d 10/8, 172.16/12, 192.168/16, extra -j RETURN    inside the VPC
 *     -j MASQUERADE */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include "net-internal.h"
#include "util.h"

static const char *const rfc1918[] = {"10.0.0.0/8", "172.16.0.0/12",
				      "192.168.0.0/16"};

int net_parse_cidr(const char *s, uint32_t *addr, int *plen, struct cerr *e)
{
	char ip[INET_ADDRSTRLEN];
	const char *slash = strchr(s, '/');
	size_t n = slash ? (size_t)(slash - s) : strlen(s);
	int64_t len = 32;
	struct in_addr a;
	uint32_t mask;

	if (n == 0 || n >= sizeof(ip))
		return cerr_set(e, EINVAL, "'%s': not an IPv4 CIDR", s);
	memcpy(ip, s, n);
	ip[n] = '\0';
	if (inet_pton(AF_INET, ip, &a) != 1 ||
	    (slash && parse_int64(slash + 1, 0, 32, &len, e) < 0))
		return cerr_set(e, EINVAL, "'%s': not an IPv4 CIDR", s);
	mask = len ? htonl(~0u << (32 - len)) : 0;
	*addr = a.s_addr & mask;
	*plen = (int)len;
	return 0;
}

static int parse_u16(const char *s, size_t n, uint16_t *out, struct cerr *e)
{
	char t[8];
	int64_t v;

	if (n == 0 || n >= sizeof(t))
		return cerr_set(e, EINVAL, "bad port");
	memcpy(t, s, n);
	t[n] = '\0';
	if (parse_int64(t, 1, 65535, &v, e) < 0)
		return cerr_set(e, EINVAL, "bad port '%s'", t);
	*out = (uint16_t)v;
	return 0;
}

int net_parse_port(const char *s, struct net_port *p, struct cerr *e)
{
	const char *colon = strchr(s, ':'), *at = strchr(s, '@');
	const char *end = at ? at : s + strlen(s);
	const char *slash = memchr(s, '/', (size_t)(end - s));
	const char *cend = slash ? slash : end;
	struct in_addr a;

	memset(p, 0, sizeof(*p));
	if (!colon || colon > cend ||
	    parse_u16(s, (size_t)(colon - s), &p->host_port, e) < 0 ||
	    parse_u16(colon + 1, (size_t)(cend - colon - 1), &p->container_port,
		      e) < 0)
		return cerr_set(e, EINVAL,
				"'%s': want hostPort:containerPort[/tcp|/udp]"
				"[@hostIP]",
				s);
	if (slash) {
		size_t n = (size_t)(end - slash - 1);
		if (n == 3 && !strncmp(slash + 1, "udp", 3))
			p->udp = true;
		else if (!(n == 3 && !strncmp(slash + 1, "tcp", 3)))
			return cerr_set(e, EINVAL,
					"'%s': protocol must be tcp or udp", s);
	}
	if (at) {
		if (strlen(at + 1) >= sizeof(p->host_ip) ||
		    inet_pton(AF_INET, at + 1, &a) != 1)
			return cerr_set(e, EINVAL, "'%s': bad hostIP", s);
		snprintf(p->host_ip, sizeof(p->host_ip), "%s", at + 1);
	}
	return 0;
}

static struct net_rule *add(struct net_plan *p, const char *chain,
			    enum net_target t)
{
	struct net_rule *r;

	p->v = xrealloc(p->v, (p->n + 1) * sizeof(*p->v));
	r = &p->v[p->n++];
	memset(r, 0, sizeof(*r));
	r->chain = chain;
	r->target = t;
	return r;
}

static int ip_of(const char *s, const char *what, uint32_t *out, struct cerr *e)
{
	struct in_addr a;

	if (!s || inet_pton(AF_INET, s, &a) != 1)
		return cerr_set(e, EINVAL, "%s '%s' is not an IPv4 address",
				what, s ? s : "");
	*out = a.s_addr;
	return 0;
}

static int plan_ports(const struct net_state *st, uint32_t pod,
		      struct net_plan *p, struct cerr *e)
{
	uint32_t primary = 0;

	if (ip_of(st->primary_ip, "primary IP", &primary, e) < 0)
		return -1;
	for (size_t i = 0; i < st->n_ports; i++) {
		const struct net_port *pt = &st->ports[i];
		uint32_t dsts[2] = {primary, 0};

		if (pt->host_ip[0] &&
		    ip_of(pt->host_ip, "hostIP", &dsts[1], e) < 0)
			return -1;
		for (int k = 0; k < 2; k++) {
			struct net_rule *r;
			if (!dsts[k] || (k == 1 && dsts[1] == primary))
				continue;
			r = add(p, NET_CHAIN_HOSTPORT, NT_DNAT);
			r->dst = dsts[k];
			r->dst_plen = 32;
			r->proto = pt->udp ? IPPROTO_UDP : IPPROTO_TCP;
			r->dport = pt->host_port;
			r->to_ip = pod;
			r->to_port = pt->container_port;
		}
	}
	return 0;
}

int net_plan_rules(const struct net_state *st, struct net_plan *p,
		   struct cerr *e)
{
	uint32_t pod = 0;
	struct net_rule *r;

	memset(p, 0, sizeof(*p));
	if (ip_of(st->pod_ip, "pod IP", &pod, e) < 0 ||
	    plan_ports(st, pod, p, e) < 0)
		goto fail;
	if (!st->primary_if || strlen(st->primary_if) >= sizeof(r->out_if)) {
		cerr_set(e, EINVAL, "bad primary interface name");
		goto fail;
	}
	r = add(p, NET_CHAIN_MASQ, NT_MASQUERADE);
	r->src = r->dst = pod;
	r->src_plen = r->dst_plen = 32;
	r = add(p, NET_CHAIN_MASQ, NT_RETURN);
	r->src = pod;
	r->src_plen = 32;
	r->inv_src = true;
	r = add(p, NET_CHAIN_MASQ, NT_RETURN);
	snprintf(r->out_if, sizeof(r->out_if), "%s", st->primary_if);
	r->inv_out = true;
	for (size_t i = 0; i < 3 + strv_len(st->private_cidrs); i++) {
		const char *c = i < 3 ? rfc1918[i] : st->private_cidrs[i - 3];
		r = add(p, NET_CHAIN_MASQ, NT_RETURN);
		if (net_parse_cidr(c, &r->dst, &r->dst_plen, e) < 0)
			goto fail;
	}
	add(p, NET_CHAIN_MASQ, NT_MASQUERADE);
	return 0;
fail:
	net_plan_free(p);
	return -1;
}

void net_plan_free(struct net_plan *p)
{
	free(p->v);
	memset(p, 0, sizeof(*p));
}

static void addr_text(char *o, size_t n, uint32_t a, int plen)
{
	char s[INET_ADDRSTRLEN];

	inet_ntop(AF_INET, &a, s, sizeof(s));
	if (plen == 32)
		snprintf(o, n, "%s", s);
	else
		snprintf(o, n, "%s/%d", s, plen);
}

char *net_rule_text(const struct net_rule *r)
{
	char src[40] = "", dst[40] = "", a[INET_ADDRSTRLEN];
	char s1[64] = "", d1[64] = "", o1[40] = "", p1[40] = "", t[64];

	if (r->src_plen) {
		addr_text(src, sizeof(src), r->src, r->src_plen);
		snprintf(s1, sizeof(s1), "%s-s %s ", r->inv_src ? "! " : "",
			 src);
	}
	if (r->dst_plen) {
		addr_text(dst, sizeof(dst), r->dst, r->dst_plen);
		snprintf(d1, sizeof(d1), "%s-d %s ", r->inv_dst ? "! " : "",
			 dst);
	}
	if (r->out_if[0])
		snprintf(o1, sizeof(o1), "%s-o %s ", r->inv_out ? "! " : "",
			 r->out_if);
	if (r->proto) {
		const char *pn = r->proto == IPPROTO_UDP ? "udp" : "tcp";
		snprintf(p1, sizeof(p1), "-p %s -m %s --dport %u ", pn, pn,
			 r->dport);
	}
	if (r->target == NT_DNAT) {
		inet_ntop(AF_INET, &r->to_ip, a, sizeof(a));
		snprintf(t, sizeof(t), "DNAT --to-destination %s:%u", a,
			 r->to_port);
	} else {
		snprintf(t, sizeof(t), "%s",
			 r->target == NT_RETURN ? "RETURN" : "MASQUERADE");
	}
	return xasprintf("-A %s %s%s%s%s-j %s", r->chain, s1, d1, o1, p1, t);
}
