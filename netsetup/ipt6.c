// SPDX-License-Identifier: Apache-2.0
/* The metadata block's IPv6 half (ipt.c has the IPv4 one and says why
 * the block sits in the cell's FORWARD chain): through libip6tc,
 *
 *   -A FORWARD -j CELL-IMDS                                    (first)
 *   -A CELL-IMDS -d fd00:ec2::254/128 -i <veth> -j REJECT
 *
 * The pod gets no IPv6 route from cell-net, but a unit with NET_ADMIN can
 * add one through the veth's link-local peer, and a cell that forwards
 * IPv6 (another network agent turned it on) would carry it. */
#include <arpa/inet.h>
#include <errno.h>
#include <libiptc/libip6tc.h>
#include <linux/netfilter_ipv6/ip6t_REJECT.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "log.h"
#include "net-internal.h"
#include "util.h"

/* Full-size labels: libiptc reads chain names as char[32]. */
static const xt_chainlabel IMDS = NET_CHAIN_IMDS, FWD = "FORWARD";

static void ip6tc_freep(struct xtc_handle **h)
{
	if (*h)
		ip6tc_free(*h);
}
#define cleanup_ip6tc _cleanup_(ip6tc_freep)

static int fail6(struct cerr *e, const char *what)
{
	int err = errno;
	return cerr_set(e, err ? err : EIO, "ip6tables filter: %s: %s", what,
			ip6tc_strerror(err));
}

static struct ip6t_entry *entry6(const char *veth, bool jump)
{
	size_t off = XT_ALIGN(sizeof(struct ip6t_entry));
	size_t size = jump ? XT_ALIGN(sizeof(struct xt_standard_target))
			   : XT_ALIGN(sizeof(struct xt_entry_target) +
				      sizeof(struct ip6t_reject_info));
	struct ip6t_entry *en = xcalloc(1, off + size);
	struct xt_entry_target *t =
	    (struct xt_entry_target *)((unsigned char *)en + off);

	if (!jump) {
		size_t n = strlen(veth);
		inet_pton(AF_INET6, NET_IMDS_IP6, &en->ipv6.dst);
		memset(&en->ipv6.dmsk, 0xff, sizeof(en->ipv6.dmsk));
		memcpy(en->ipv6.iniface, veth, n);
		memset(en->ipv6.iniface_mask, 0xff, n + 1);
		((struct ip6t_reject_info *)t->data)->with =
		    IP6T_ICMP6_PORT_UNREACH;
	}
	snprintf(t->u.user.name, sizeof(t->u.user.name), "%s",
		 jump ? NET_CHAIN_IMDS : "REJECT");
	t->u.user.target_size = (uint16_t)size;
	en->target_offset = (uint16_t)off;
	en->next_offset = (uint16_t)(off + size);
	return en;
}

static bool has_jump6(struct xtc_handle *h, unsigned int *at)
{
	unsigned int i = 0;

	for (const struct ip6t_entry *en = ip6tc_first_rule(FWD, h); en;
	     en = ip6tc_next_rule(en, h), i++) {
		const char *t = ip6tc_get_target(en, h);
		if (t && !strcmp(t, NET_CHAIN_IMDS)) {
			*at = i;
			return true;
		}
	}
	return false;
}

/* A cell without IPv6 (ipv6.disable=1, no ip6_tables) has nothing to
 * block: the pod has no IPv6 route either. */
static struct xtc_handle *open6(struct cerr *e)
{
	struct xtc_handle *h = ip6tc_init("filter");

	if (!h && (errno == EAFNOSUPPORT || errno == ENOENT ||
		   errno == ENOPROTOOPT)) {
		log_warn("ip6tables filter: %s; the IPv6 metadata block is "
			 "skipped",
			 ip6tc_strerror(errno));
		return NULL;
	}
	if (!h)
		fail6(e, "open the table");
	return h;
}

int net_block6_apply(const char *veth, struct cerr *e)
{
	cleanup_ip6tc struct xtc_handle *h = open6(e);
	cleanup_free struct ip6t_entry *rule = NULL, *jump = NULL;
	unsigned int at;

	if (!h)
		return e->code ? -1 : 0;
	if (ip6tc_is_chain(IMDS, h) ? !ip6tc_flush_entries(IMDS, h)
				    : !ip6tc_create_chain(IMDS, h))
		return fail6(e, NET_CHAIN_IMDS);
	rule = entry6(veth, false);
	if (!ip6tc_append_entry(IMDS, rule, h))
		return fail6(e, NET_CHAIN_IMDS);
	jump = entry6(veth, true);
	if (!has_jump6(h, &at) && !ip6tc_insert_entry(FWD, jump, 0, h))
		return fail6(e, FWD);
	if (!ip6tc_commit(h))
		return fail6(e, "commit");
	return 0;
}

int net_block6_remove(struct cerr *e)
{
	cleanup_ip6tc struct xtc_handle *h = open6(e);
	unsigned int at;

	if (!h)
		return e->code ? -1 : 0;
	while (has_jump6(h, &at))
		if (!ip6tc_delete_num_entry(FWD, at, h))
			return fail6(e, FWD);
	if (ip6tc_is_chain(IMDS, h) &&
	    (!ip6tc_flush_entries(IMDS, h) || !ip6tc_delete_chain(IMDS, h)))
		return fail6(e, NET_CHAIN_IMDS);
	if (!ip6tc_commit(h))
		return fail6(e, "commit");
	return 0;
}
