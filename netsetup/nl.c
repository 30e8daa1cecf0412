// SPDX-License-Identifier: Apache-2.0
/* rtnetlink over libmnl: links, addresses, routes and neighbours. Every
 * request asks for an ACK so that a refusal comes back as an errno; dumps
 * are filtered here rather than trusting the kernel to filter. A socket is
 * bound to the namespace it was created in, which is how the pod's side is
 * configured without moving the calling thread for longer than a socket()
 * call. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <libmnl/libmnl.h>
#include <linux/if_link.h>
#include <linux/neighbour.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>
#include <net/if.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"
#include "net-internal.h"
#include "util.h"

/* Requests are small; a dump's datagrams are at most a page or two (the
 * kernel sizes them by its own buffer), 32 KiB holds any. */
#define REQ_SIZE 1024
#define RECV_SIZE 32768

struct nl {
	struct mnl_socket *s;
	unsigned int seq, portid;
};

static int open_here(struct nl *n, struct cerr *e)
{
	n->s = mnl_socket_open2(NETLINK_ROUTE, SOCK_CLOEXEC);
	if (!n->s)
		return cerr_sys(e, "netlink socket");
	if (mnl_socket_bind(n->s, 0, MNL_SOCKET_AUTOPID) < 0)
		return cerr_sys(e, "netlink bind");
	n->portid = mnl_socket_get_portid(n->s);
	n->seq = (unsigned int)time(NULL);
	return 0;
}

struct nl *nl_open(int netns_fd, struct cerr *e)
{
	struct nl *n = xcalloc(1, sizeof(*n));
	cleanup_close int self = -1;
	int r;

	if (netns_fd < 0) {
		if (open_here(n, e) == 0)
			return n;
		nl_close(n);
		return NULL;
	}
	/* Only this thread moves, and only for the socket() call. */
	self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	if (self < 0 || setns(netns_fd, CLONE_NEWNET) < 0) {
		cerr_sys(e, "enter the pod's network namespace");
		nl_close(n);
		return NULL;
	}
	r = open_here(n, e);
	if (setns(self, CLONE_NEWNET) < 0)
		abort(); /* a thread stuck in the pod's namespace is a bug */
	if (r < 0) {
		nl_close(n);
		return NULL;
	}
	return n;
}

void nl_close(struct nl *n)
{
	if (!n)
		return;
	if (n->s)
		mnl_socket_close(n->s);
	free(n);
}

/* Send one request and read until its ACK (or the end of a dump). */
static int talk(struct nl *n, struct nlmsghdr *h, mnl_cb_t cb, void *data,
		struct cerr *e)
{
	char buf[RECV_SIZE] __attribute__((aligned(8)));
	ssize_t len;
	int r;

	h->nlmsg_seq = ++n->seq;
	h->nlmsg_flags |= NLM_F_ACK;
	if (mnl_socket_sendto(n->s, h, h->nlmsg_len) < 0)
		return cerr_sys(e, "netlink send");
	for (;;) {
		len = mnl_socket_recvfrom(n->s, buf, sizeof(buf));
		if (len < 0)
			return cerr_sys(e, "netlink receive");
		r = mnl_cb_run(buf, (size_t)len, h->nlmsg_seq, n->portid, cb,
			       data);
		if (r < 0)
			return cerr_sys(e, "netlink");
		if (r == MNL_CB_STOP)
			return 0;
	}
}

static struct nlmsghdr *req(char *buf, uint16_t type, uint16_t flags)
{
	struct nlmsghdr *h = mnl_nlmsg_put_header(buf);

	h->nlmsg_type = type;
	h->nlmsg_flags = NLM_F_REQUEST | flags;
	return h;
}

/* ---- links ---- */

struct link_q {
	const char *name; /* match by name, or */
	int idx;	  /* by index */
	bool found;
	int got_idx;
	char got_name[IFNAMSIZ];
	uint8_t mac[6];
};

static int link_cb(const struct nlmsghdr *h, void *data)
{
	struct link_q *q = data;
	struct ifinfomsg *ifi = mnl_nlmsg_get_payload(h);
	struct nlattr *a;
	const char *name = NULL;
	const void *mac = NULL;

	mnl_attr_for_each(a, h, sizeof(*ifi))
	{
		if (mnl_attr_get_type(a) == IFLA_IFNAME &&
		    mnl_attr_validate(a, MNL_TYPE_NUL_STRING) == 0)
			name = mnl_attr_get_str(a);
		else if (mnl_attr_get_type(a) == IFLA_ADDRESS &&
			 mnl_attr_get_payload_len(a) == 6)
			mac = mnl_attr_get_payload(a);
	}
	if (!name || (q->name && strcmp(name, q->name)) ||
	    (!q->name && ifi->ifi_index != q->idx))
		return MNL_CB_OK;
	q->found = true;
	q->got_idx = ifi->ifi_index;
	snprintf(q->got_name, sizeof(q->got_name), "%s", name);
	if (mac)
		memcpy(q->mac, mac, 6);
	return MNL_CB_OK;
}

static int link_query(struct nl *n, struct link_q *q, struct cerr *e)
{
	char buf[REQ_SIZE] __attribute__((aligned(8)));
	struct nlmsghdr *h = req(buf, RTM_GETLINK, NLM_F_DUMP);
	struct ifinfomsg *ifi = mnl_nlmsg_put_extra_header(h, sizeof(*ifi));

	ifi->ifi_family = AF_UNSPEC;
	return talk(n, h, link_cb, q, e);
}

int nl_link_find(struct nl *n, const char *name, int *idx, uint8_t mac[6],
		 struct cerr *e)
{
	struct link_q q = {.name = name};

	if (link_query(n, &q, e) < 0)
		return -1;
	if (!q.found)
		return cerr_set(e, ENOENT, "no link %s", name);
	*idx = q.got_idx;
	if (mac)
		memcpy(mac, q.mac, 6);
	return 0;
}

int nl_link_name(struct nl *n, int idx, char name[16], struct cerr *e)
{
	struct link_q q = {.idx = idx};

	if (link_query(n, &q, e) < 0)
		return -1;
	if (!q.found)
		return cerr_set(e, ENOENT, "no link with index %d", idx);
	memcpy(name, q.got_name, IFNAMSIZ);
	return 0;
}

int nl_veth_add(struct nl *n, const char *name, const char *peer,
		int peer_netns_fd, struct cerr *e)
{
	char buf[REQ_SIZE] __attribute__((aligned(8)));
	struct nlmsghdr *h = req(buf, RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL);
	struct ifinfomsg *ifi = mnl_nlmsg_put_extra_header(h, sizeof(*ifi));
	struct nlattr *linfo, *data, *pinfo;
	struct ifinfomsg *pifi;

	ifi->ifi_family = AF_UNSPEC;
	mnl_attr_put_strz(h, IFLA_IFNAME, name);
	linfo = mnl_attr_nest_start(h, IFLA_LINKINFO);
	mnl_attr_put_strz(h, IFLA_INFO_KIND, "veth");
	data = mnl_attr_nest_start(h, IFLA_INFO_DATA);
	pinfo = mnl_attr_nest_start(h, VETH_INFO_PEER);
	/* The peer's ifinfomsg comes first inside VETH_INFO_PEER. */
	pifi = mnl_nlmsg_put_extra_header(h, sizeof(*pifi));
	memset(pifi, 0, sizeof(*pifi));
	pifi->ifi_family = AF_UNSPEC;
	mnl_attr_put_strz(h, IFLA_IFNAME, peer);
	if (peer_netns_fd >= 0)
		mnl_attr_put_u32(h, IFLA_NET_NS_FD, (uint32_t)peer_netns_fd);
	mnl_attr_nest_end(h, pinfo);
	mnl_attr_nest_end(h, data);
	mnl_attr_nest_end(h, linfo);
	if (talk(n, h, NULL, NULL, e) < 0)
		return cerr_prefix(e, "create veth %s", name);
	return 0;
}

int nl_link_up(struct nl *n, int idx, struct cerr *e)
{
	char buf[REQ_SIZE] __attribute__((aligned(8)));
	struct nlmsghdr *h = req(buf, RTM_NEWLINK, 0);
	struct ifinfomsg *ifi = mnl_nlmsg_put_extra_header(h, sizeof(*ifi));

	ifi->ifi_family = AF_UNSPEC;
	ifi->ifi_index = idx;
	ifi->ifi_flags = IFF_UP;
	ifi->ifi_change = IFF_UP;
	if (talk(n, h, NULL, NULL, e) < 0)
		return cerr_prefix(e, "link %d up", idx);
	return 0;
}

int nl_link_del(struct nl *n, int idx, struct cerr *e)
{
	char buf[REQ_SIZE] __attribute__((aligned(8)));
	struct nlmsghdr *h = req(buf, RTM_DELLINK, 0);
	struct ifinfomsg *ifi = mnl_nlmsg_put_extra_header(h, sizeof(*ifi));

	ifi->ifi_family = AF_UNSPEC;
	ifi->ifi_index = idx;
	if (talk(n, h, NULL, NULL, e) < 0)
		return cerr_prefix(e, "delete link %d", idx);
	return 0;
}

/* ---- addresses ---- */

int nl_addr_add(struct nl *n, int idx, uint32_t ip, int plen, struct cerr *e)
{
	char buf[REQ_SIZE] __attribute__((aligned(8)));
	struct nlmsghdr *h =
	    req(buf, RTM_NEWADDR, NLM_F_CREATE | NLM_F_REPLACE);
	struct ifaddrmsg *ifa = mnl_nlmsg_put_extra_header(h, sizeof(*ifa));

	ifa->ifa_family = AF_INET;
	ifa->ifa_prefixlen = (uint8_t)plen;
	ifa->ifa_scope = RT_SCOPE_UNIVERSE;
	ifa->ifa_index = (uint32_t)idx;
	mnl_attr_put_u32(h, IFA_LOCAL, ip);
	mnl_attr_put_u32(h, IFA_ADDRESS, ip);
	if (talk(n, h, NULL, NULL, e) < 0)
		return cerr_prefix(e, "add address");
	return 0;
}

struct addr_q {
	int idx;
	uint32_t ip;
	bool found;
};

static int addr_cb(const struct nlmsghdr *h, void *data)
{
	struct addr_q *q = data;
	struct ifaddrmsg *ifa = mnl_nlmsg_get_payload(h);
	struct nlattr *a;

	if (q->found || ifa->ifa_family != AF_INET ||
	    (int)ifa->ifa_index != q->idx)
		return MNL_CB_OK;
	mnl_attr_for_each(a, h, sizeof(*ifa))
	{
		if (mnl_attr_get_type(a) == IFA_LOCAL &&
		    mnl_attr_validate(a, MNL_TYPE_U32) == 0) {
			q->ip = mnl_attr_get_u32(a);
			q->found = true;
		}
	}
	return MNL_CB_OK;
}

int nl_first_addr(struct nl *n, int idx, uint32_t *ip, struct cerr *e)
{
	char buf[REQ_SIZE] __attribute__((aligned(8)));
	struct nlmsghdr *h = req(buf, RTM_GETADDR, NLM_F_DUMP);
	struct ifaddrmsg *ifa = mnl_nlmsg_put_extra_header(h, sizeof(*ifa));
	struct addr_q q = {.idx = idx};

	ifa->ifa_family = AF_INET;
	if (talk(n, h, addr_cb, &q, e) < 0)
		return -1;
	if (!q.found)
		return cerr_set(e, EADDRNOTAVAIL,
				"interface %d has no IPv4 address", idx);
	*ip = q.ip;
	return 0;
}

/* ---- routes ---- */

int nl_route(struct nl *n, bool add, uint32_t dst, int plen, uint32_t gw,
	     int oif, bool link_scope, struct cerr *e)
{
	char buf[REQ_SIZE] __attribute__((aligned(8)));
	struct nlmsghdr *h =
	    add ? req(buf, RTM_NEWROUTE, NLM_F_CREATE | NLM_F_REPLACE)
		: req(buf, RTM_DELROUTE, 0);
	struct rtmsg *rt = mnl_nlmsg_put_extra_header(h, sizeof(*rt));
	char a[INET_ADDRSTRLEN];

	rt->rtm_family = AF_INET;
	rt->rtm_dst_len = (uint8_t)plen;
	rt->rtm_table = RT_TABLE_MAIN;
	rt->rtm_protocol = RTPROT_BOOT;
	rt->rtm_scope = link_scope ? RT_SCOPE_LINK : RT_SCOPE_UNIVERSE;
	rt->rtm_type = RTN_UNICAST;
	if (plen)
		mnl_attr_put_u32(h, RTA_DST, dst);
	if (gw)
		mnl_attr_put_u32(h, RTA_GATEWAY, gw);
	mnl_attr_put_u32(h, RTA_OIF, (uint32_t)oif);
	if (talk(n, h, NULL, NULL, e) == 0)
		return 0;
	if (!add &&
	    (e->code == ESRCH || e->code == ENOENT || e->code == ENODEV)) {
		cerr_clear(e);
		return 0;
	}
	inet_ntop(AF_INET, &dst, a, sizeof(a));
	return cerr_prefix(e, "%s route %s/%d", add ? "add" : "delete", a,
			   plen);
}

struct route_q {
	int oif;
	uint32_t metric;
	bool found;
};

static int route_cb(const struct nlmsghdr *h, void *data)
{
	struct route_q *q = data;
	struct rtmsg *rt = mnl_nlmsg_get_payload(h);
	struct nlattr *a;
	uint32_t table = rt->rtm_table, metric = 0;
	int oif = 0;

	if (rt->rtm_family != AF_INET || rt->rtm_dst_len != 0 ||
	    rt->rtm_type != RTN_UNICAST)
		return MNL_CB_OK;
	mnl_attr_for_each(a, h, sizeof(*rt))
	{
		if (mnl_attr_validate(a, MNL_TYPE_U32) < 0)
			continue;
		if (mnl_attr_get_type(a) == RTA_OIF)
			oif = (int)mnl_attr_get_u32(a);
		else if (mnl_attr_get_type(a) == RTA_PRIORITY)
			metric = mnl_attr_get_u32(a);
		else if (mnl_attr_get_type(a) == RTA_TABLE)
			table = mnl_attr_get_u32(a);
	}
	if (table != RT_TABLE_MAIN || !oif || (q->found && metric >= q->metric))
		return MNL_CB_OK;
	q->found = true;
	q->oif = oif;
	q->metric = metric;
	return MNL_CB_OK;
}

int nl_default_route(struct nl *n, int *oif, struct cerr *e)
{
	char buf[REQ_SIZE] __attribute__((aligned(8)));
	struct nlmsghdr *h = req(buf, RTM_GETROUTE, NLM_F_DUMP);
	struct rtmsg *rt = mnl_nlmsg_put_extra_header(h, sizeof(*rt));
	struct route_q q = {0};

	rt->rtm_family = AF_INET;
	if (talk(n, h, route_cb, &q, e) < 0)
		return -1;
	if (!q.found)
		return cerr_set(e, ENETUNREACH, "no IPv4 default route");
	*oif = q.oif;
	return 0;
}

/* ---- neighbours ---- */

int nl_neigh(struct nl *n, bool add, int idx, uint32_t ip, const uint8_t *mac,
	     bool proxy, struct cerr *e)
{
	char buf[REQ_SIZE] __attribute__((aligned(8)));
	struct nlmsghdr *h =
	    add ? req(buf, RTM_NEWNEIGH, NLM_F_CREATE | NLM_F_REPLACE)
		: req(buf, RTM_DELNEIGH, 0);
	struct ndmsg *nd = mnl_nlmsg_put_extra_header(h, sizeof(*nd));

	nd->ndm_family = AF_INET;
	nd->ndm_ifindex = idx;
	nd->ndm_state = NUD_PERMANENT;
	nd->ndm_flags = proxy ? NTF_PROXY : 0;
	mnl_attr_put_u32(h, NDA_DST, ip);
	if (mac)
		mnl_attr_put(h, NDA_LLADDR, 6, mac);
	if (talk(n, h, NULL, NULL, e) == 0)
		return 0;
	if (!add && (e->code == ENOENT || e->code == ESRCH)) {
		cerr_clear(e);
		return 0;
	}
	return cerr_prefix(e, "%s %sneighbour", add ? "add" : "delete",
			   proxy ? "proxy " : "");
}

struct proxy_q {
	int idx;
	uint32_t ip;
	bool found;
};

static int proxy_cb(const struct nlmsghdr *h, void *data)
{
	struct proxy_q *q = data;
	struct ndmsg *nd = mnl_nlmsg_get_payload(h);
	struct nlattr *a;

	if (nd->ndm_family != AF_INET || nd->ndm_ifindex != q->idx ||
	    !(nd->ndm_flags & NTF_PROXY))
		return MNL_CB_OK;
	mnl_attr_for_each(a, h, sizeof(*nd))
	{
		if (mnl_attr_get_type(a) == NDA_DST &&
		    mnl_attr_validate(a, MNL_TYPE_U32) == 0 &&
		    mnl_attr_get_u32(a) == q->ip)
			q->found = true;
	}
	return MNL_CB_OK;
}

int nl_proxy_present(struct nl *n, int idx, uint32_t ip, struct cerr *e)
{
	char buf[REQ_SIZE] __attribute__((aligned(8)));
	struct nlmsghdr *h = req(buf, RTM_GETNEIGH, NLM_F_DUMP);
	struct ndmsg *nd = mnl_nlmsg_put_extra_header(h, sizeof(*nd));
	struct proxy_q q = {.idx = idx, .ip = ip};

	nd->ndm_family = AF_INET;
	nd->ndm_flags = NTF_PROXY;
	if (talk(n, h, proxy_cb, &q, e) < 0)
		return -1;
	return q.found ? 1 : 0;
}
