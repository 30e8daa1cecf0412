// SPDX-License-Identifier: Apache-2.0
#include "netaddr.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "fsutil.h"

#define ROUTE_FILE_MAX (1u << 20)

int net_default_route_iface(const char *text, char *ifname, size_t n)
{
	unsigned long best = (unsigned long)-1;
	int found = -1;

	/* "Iface Destination Gateway Flags RefCnt Use Metric Mask …", hex,
	 * one route per line after a header. */
	for (const char *l = text; l && *l;
	     l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
		char name[IFNAMSIZ + 1];
		unsigned long dst, gw, flags, metric, mask;
		int refcnt, use;

		if (sscanf(l, "%16s %lx %lx %lx %d %d %lu %lx", name, &dst, &gw,
			   &flags, &refcnt, &use, &metric, &mask) != 8)
			continue;
		/* RTF_UP (1) set, destination and mask 0: the default. */
		if (dst != 0 || mask != 0 || !(flags & 1))
			continue;
		if (found == 0 && metric >= best)
			continue;
		if (strlen(name) >= n)
			continue;
		memcpy(ifname, name, strlen(name) + 1);
		best = metric;
		found = 0;
	}
	return found;
}

/* The first IPv4 address of ifname, or of any up, non-loopback interface
 * when ifname is NULL. */
static int first_ipv4(const char *ifname, char *out, size_t n)
{
	struct ifaddrs *ifs = NULL;
	int r = -1;

	if (getifaddrs(&ifs) < 0)
		return -1;
	for (struct ifaddrs *i = ifs; i && r < 0; i = i->ifa_next) {
		if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET)
			continue;
		if (ifname ? strcmp(i->ifa_name, ifname) != 0
			   : (i->ifa_flags & IFF_LOOPBACK) ||
				 !(i->ifa_flags & IFF_UP))
			continue;
		if (inet_ntop(
			AF_INET,
			&((struct sockaddr_in *)(void *)i->ifa_addr)->sin_addr,
			out, (socklen_t)n))
			r = 0;
	}
	freeifaddrs(ifs);
	return r;
}

int net_primary_ipv4(char *out, size_t n, struct cerr *e)
{
	char ifname[IFNAMSIZ + 1];
	struct buf b;
	struct cerr ignore = {0};
	int have;

	buf_init(&b, ROUTE_FILE_MAX);
	have = fs_read_file("/proc/net/route", &b, &ignore) == 0 &&
	       net_default_route_iface(b.data ? b.data : "", ifname,
				       sizeof(ifname)) == 0;
	buf_free(&b);
	if (have && first_ipv4(ifname, out, n) == 0)
		return 0;
	if (first_ipv4(NULL, out, n) == 0)
		return 0;
	return cerr_set(e, ENOENT, "no IPv4 address on this host");
}
