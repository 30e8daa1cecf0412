// SPDX-License-Identifier: Apache-2.0
/* The cell's primary address: the IPv4 address of the interface that
 * carries the default route. Kip compares a hostNetwork pod's podIP with
 * the instance's private IP, which is this address; cell-net needs the
 * same answer for the pod network. */
#ifndef CELL_NETADDR_H
#define CELL_NETADDR_H

#include <stddef.h>

#include "err.h"

/* The interface of the default IPv4 route in the text of /proc/net/route
 * (the one with the lowest metric when there are several). 0 and ifname
 * set, or -1 when there is none. Pure: tests feed it text. */
int net_default_route_iface(const char *route_text, char *ifname, size_t n);

/* The primary IPv4 address as text: the first IPv4 address of the default
 * route's interface; with no default route, the first IPv4 address of an
 * interface that is up and not loopback. ENOENT when there is none. */
int net_primary_ipv4(char *out, size_t n, struct cerr *e);

#endif
