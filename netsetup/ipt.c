// SPDX-License-Identifier: Apache-2.0
/* The rule plan into the kernel's nat table through libiptc. libiptc reads
 * the whole table, we edit the copy (our chains created when missing,
 * flushed and refilled; the jumps into them added once), and one
 * iptc_commit replaces the table atomically: a packet sees the old rules or
 * the new ones, never half. Other chains and rules are not touched.
 *
 * libiptc speaks the legacy xtables interface, so `iptables-legacy-save`
 * shows these rules; an nft-based `iptables` does not. */
#include <arpa/inet.h>
#include <errno.h>
#include <libiptc/libiptc.h>
#include <linux/netfilter/nf_nat.h>
#include <linux/netfilter/xt_tcpudp.h>
#include <linux/netfilter_ipv4/ipt_REJECT.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "net-internal.h"
#include "util.h"

static void iptc_freep(struct xtc_handle **h)
{
	if (*h)
		iptc_free(*h);
}
#define cleanup_iptc _cleanup_(iptc_freep)

/* Where each chain is jumped to from, and whether at the top. */
static const struct {
	const char *from, *to;
	bool first;
} jumps[] = {
    {"PREROUTING", NET_CHAIN_HOSTPORT, true},
    {"OUTPUT", NET_CHAIN_HOSTPORT, true},
    {"POSTROUTING", NET_CHAIN_MASQ, false},
};

static int fail(struct cerr *e, const char *what)
{
	int err = errno;
	return cerr_set(e, err ? err : EIO, "iptables nat: %s: %s", what,
			iptc_strerror(err));
}

static struct xtc_handle *open_nat(struct cerr *e)
{
	struct xtc_handle *h = iptc_init("nat");

	if (!h)
		fail(e, "open the table");
	return h;
}

static void mask_of(struct in_addr *m, int plen)
{
	m->s_addr = plen ? htonl(~0u << (32 - plen)) : 0;
}

static size_t put_match(unsigned char *p, const struct net_rule *r)
{
	struct xt_entry_match *m = (struct xt_entry_match *)p;
	size_t size;

	if (r->proto == IPPROTO_TCP) {
		struct xt_tcp *t;
		size = XT_ALIGN(sizeof(*m) + sizeof(*t));
		t = (struct xt_tcp *)m->data;
		t->spts[1] = 0xffff;
		t->dpts[0] = t->dpts[1] = r->dport;
		snprintf(m->u.user.name, sizeof(m->u.user.name), "tcp");
	} else {
		struct xt_udp *u;
		size = XT_ALIGN(sizeof(*m) + sizeof(*u));
		u = (struct xt_udp *)m->data;
		u->spts[1] = 0xffff;
		u->dpts[0] = u->dpts[1] = r->dport;
		snprintf(m->u.user.name, sizeof(m->u.user.name), "udp");
	}
	m->u.user.match_size = (uint16_t)size;
	return size;
}

static size_t put_target(unsigned char *p, const struct net_rule *r)
{
	struct xt_entry_target *t = (struct xt_entry_target *)p;
	struct nf_nat_ipv4_multi_range_compat *nat;
	size_t size;

	if (r->target == NT_RETURN) {
		size = XT_ALIGN(sizeof(struct xt_standard_target));
		snprintf(t->u.user.name, sizeof(t->u.user.name), "RETURN");
		t->u.user.target_size = (uint16_t)size;
		return size;
	}
	if (r->target == NT_DNAT) {
		/* Revision 2 (nf_nat_range2), what iptables 1.8 writes and
		 * prints; revision 0 shows as "[unsupported revision]". */
		struct nf_nat_range2 *rg;
		size = XT_ALIGN(sizeof(*t) + sizeof(*rg));
		rg = (struct nf_nat_range2 *)t->data;
		rg->flags = NF_NAT_RANGE_MAP_IPS | NF_NAT_RANGE_PROTO_SPECIFIED;
		rg->min_addr.ip = rg->max_addr.ip = r->to_ip;
		rg->min_proto.tcp.port = rg->max_proto.tcp.port =
		    htons(r->to_port);
		t->u.user.revision = 2;
	} else {
		size = XT_ALIGN(sizeof(*t) + sizeof(*nat));
		nat = (struct nf_nat_ipv4_multi_range_compat *)t->data;
		nat->rangesize = 1;
	}
	snprintf(t->u.user.name, sizeof(t->u.user.name), "%s",
		 r->target == NT_DNAT ? "DNAT" : "MASQUERADE");
	t->u.user.target_size = (uint16_t)size;
	return size;
}

/* An ipt_entry for one rule (caller frees). */
static struct ipt_entry *entry_of(const struct net_rule *r)
{
	size_t cap = 1024, off = XT_ALIGN(sizeof(struct ipt_entry));
	struct ipt_entry *en = xcalloc(1, cap);

	en->ip.src.s_addr = r->src;
	mask_of(&en->ip.smsk, r->src_plen);
	en->ip.dst.s_addr = r->dst;
	mask_of(&en->ip.dmsk, r->dst_plen);
	if (r->inv_src)
		en->ip.invflags |= IPT_INV_SRCIP;
	if (r->inv_dst)
		en->ip.invflags |= IPT_INV_DSTIP;
	if (r->out_if[0]) {
		size_t n = strlen(r->out_if);
		memcpy(en->ip.outiface, r->out_if, n);
		memset(en->ip.outiface_mask, 0xff, n + 1);
		if (r->inv_out)
			en->ip.invflags |= IPT_INV_VIA_OUT;
	}
	en->ip.proto = (uint16_t)r->proto;
	if (r->proto)
		off += put_match((unsigned char *)en + off, r);
	en->target_offset = (uint16_t)off;
	off += put_target((unsigned char *)en + off, r);
	en->next_offset = (uint16_t)off;
	return en;
}

static unsigned int jump_index(struct xtc_handle *h, const char *from,
			       const char *to, bool *found)
{
	unsigned int i = 0;

	*found = false;
	for (const struct ipt_entry *en = iptc_first_rule(from, h); en;
	     en = iptc_next_rule(en, h), i++) {
		const char *t = iptc_get_target(en, h);
		if (t && !strcmp(t, to)) {
			*found = true;
			return i;
		}
	}
	return 0;
}

static struct ipt_entry *jump_entry(const char *to)
{
	size_t off = XT_ALIGN(sizeof(struct ipt_entry));
	size_t size = XT_ALIGN(sizeof(struct xt_standard_target));
	struct ipt_entry *en = xcalloc(1, off + size);
	struct xt_entry_target *t =
	    (struct xt_entry_target *)((unsigned char *)en + off);

	snprintf(t->u.user.name, sizeof(t->u.user.name), "%s", to);
	t->u.user.target_size = (uint16_t)size;
	en->target_offset = (uint16_t)off;
	en->next_offset = (uint16_t)(off + size);
	return en;
}

static int ensure_chains(struct xtc_handle *h, struct cerr *e)
{
	const char *chains[] = {NET_CHAIN_HOSTPORT, NET_CHAIN_MASQ};

	for (size_t i = 0; i < 2; i++) {
		if (iptc_is_chain(chains[i], h)) {
			if (!iptc_flush_entries(chains[i], h))
				return fail(e, chains[i]);
		} else if (!iptc_create_chain(chains[i], h)) {
			return fail(e, chains[i]);
		}
	}
	for (size_t i = 0; i < sizeof(jumps) / sizeof(jumps[0]); i++) {
		bool found;
		cleanup_free struct ipt_entry *en = NULL;
		jump_index(h, jumps[i].from, jumps[i].to, &found);
		if (found)
			continue;
		en = jump_entry(jumps[i].to);
		if (!(jumps[i].first
			  ? iptc_insert_entry(jumps[i].from, en, 0, h)
			  : iptc_append_entry(jumps[i].from, en, h)))
			return fail(e, jumps[i].from);
	}
	return 0;
}

int net_ipt_apply(const struct net_plan *p, struct cerr *e)
{
	cleanup_iptc struct xtc_handle *h = open_nat(e);

	if (!h || ensure_chains(h, e) < 0)
		return -1;
	for (size_t i = 0; i < p->n; i++) {
		cleanup_free struct ipt_entry *en = entry_of(&p->v[i]);
		if (!iptc_append_entry(p->v[i].chain, en, h))
			return fail(e, p->v[i].chain);
	}
	if (!iptc_commit(h))
		return fail(e, "commit");
	return 0;
}

int net_ipt_remove(struct cerr *e)
{
	cleanup_iptc struct xtc_handle *h = open_nat(e);
	const char *chains[] = {NET_CHAIN_HOSTPORT, NET_CHAIN_MASQ};

	if (!h)
		return -1;
	for (size_t i = 0; i < sizeof(jumps) / sizeof(jumps[0]); i++) {
		bool found;
		unsigned int n =
		    jump_index(h, jumps[i].from, jumps[i].to, &found);
		for (; found;
		     n = jump_index(h, jumps[i].from, jumps[i].to, &found))
			if (!iptc_delete_num_entry(jumps[i].from, n, h))
				return fail(e, jumps[i].from);
	}
	for (size_t i = 0; i < 2; i++)
		if (iptc_is_chain(chains[i], h) &&
		    (!iptc_flush_entries(chains[i], h) ||
		     !iptc_delete_chain(chains[i], h)))
			return fail(e, chains[i]);
	if (!iptc_commit(h))
		return fail(e, "commit");
	return 0;
}

int net_ipt_present(struct cerr *e)
{
	cleanup_iptc struct xtc_handle *h = open_nat(e);

	if (!h)
		return -1;
	return iptc_is_chain(NET_CHAIN_HOSTPORT, h) &&
	       iptc_is_chain(NET_CHAIN_MASQ, h);
}

/* ---- the metadata block (filter table) ----
 *
 *   -A FORWARD -j CELL-IMDS                                    (first)
 *   -A CELL-IMDS -d 169.254.169.254/32 -i <veth> -j REJECT
 *
 * In the cell's FORWARD chain, not the pod's OUTPUT: a unit given
 * NET_ADMIN can rewrite its own namespace's rules but never the cell's.
 * REJECT (icmp-port-unreachable), not DROP: an SDK that probes the
 * service fails at once instead of waiting out its timeout. The cell's
 * own processes (cell-boot, cell-cloudinit, the agent and its metadata
 * proxy) send from the cell and never pass FORWARD. */

/* Full-size labels: libiptc reads chain names as char[32]. */
static const xt_chainlabel IMDS = NET_CHAIN_IMDS, FWD = "FORWARD";

static int fail_filter(struct cerr *e, const char *what)
{
	int err = errno;
	return cerr_set(e, err ? err : EIO, "iptables filter: %s: %s", what,
			iptc_strerror(err));
}

static struct ipt_entry *block_entry(const char *veth)
{
	size_t off = XT_ALIGN(sizeof(struct ipt_entry));
	size_t size = XT_ALIGN(sizeof(struct xt_entry_target) +
			       sizeof(struct ipt_reject_info));
	struct ipt_entry *en = xcalloc(1, off + size);
	struct xt_entry_target *t =
	    (struct xt_entry_target *)((unsigned char *)en + off);
	size_t n = strlen(veth);

	inet_pton(AF_INET, NET_IMDS_IP, &en->ip.dst);
	mask_of(&en->ip.dmsk, 32);
	memcpy(en->ip.iniface, veth, n);
	memset(en->ip.iniface_mask, 0xff, n + 1);
	((struct ipt_reject_info *)t->data)->with = IPT_ICMP_PORT_UNREACHABLE;
	snprintf(t->u.user.name, sizeof(t->u.user.name), "REJECT");
	t->u.user.target_size = (uint16_t)size;
	en->target_offset = (uint16_t)off;
	en->next_offset = (uint16_t)(off + size);
	return en;
}

static struct xtc_handle *open_filter(struct cerr *e)
{
	struct xtc_handle *h = iptc_init("filter");

	if (!h)
		fail_filter(e, "open the table");
	return h;
}

int net_block_apply(const char *veth, struct cerr *e)
{
	cleanup_iptc struct xtc_handle *h = open_filter(e);
	cleanup_free struct ipt_entry *rule = NULL, *jump = NULL;
	bool found;

	if (!h)
		return -1;
	if (iptc_is_chain(IMDS, h) ? !iptc_flush_entries(IMDS, h)
				   : !iptc_create_chain(IMDS, h))
		return fail_filter(e, NET_CHAIN_IMDS);
	rule = block_entry(veth);
	if (!iptc_append_entry(IMDS, rule, h))
		return fail_filter(e, NET_CHAIN_IMDS);
	jump_index(h, FWD, NET_CHAIN_IMDS, &found);
	jump = jump_entry(NET_CHAIN_IMDS);
	if (!found && !iptc_insert_entry(FWD, jump, 0, h))
		return fail_filter(e, FWD);
	if (!iptc_commit(h))
		return fail_filter(e, "commit");
	return net_block6_apply(veth, e);
}

int net_block_remove(struct cerr *e)
{
	cleanup_iptc struct xtc_handle *h = open_filter(e);
	bool found;
	unsigned int n;

	if (!h)
		return -1;
	for (n = jump_index(h, FWD, NET_CHAIN_IMDS, &found); found;
	     n = jump_index(h, FWD, NET_CHAIN_IMDS, &found))
		if (!iptc_delete_num_entry(FWD, n, h))
			return fail_filter(e, FWD);
	if (iptc_is_chain(IMDS, h) &&
	    (!iptc_flush_entries(IMDS, h) || !iptc_delete_chain(IMDS, h)))
		return fail_filter(e, NET_CHAIN_IMDS);
	if (!iptc_commit(h))
		return fail_filter(e, "commit");
	return net_block6_remove(e);
}

int net_block_present(struct cerr *e)
{
	cleanup_iptc struct xtc_handle *h = open_filter(e);

	if (!h)
		return -1;
	return iptc_is_chain(IMDS, h);
}
