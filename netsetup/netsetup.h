// SPDX-License-Identifier: Apache-2.0
/* netsetup: the pod's network around the cell's secondary IP. A network
 * namespace kept by a bind mount (so `ip netns` sees it), a veth pair whose
 * pod end carries PodIP/32 behind a link-local gateway, a proxy neighbour
 * entry on the primary interface, ip_forward, masquerade to outside the
 * VPC's private ranges and hostPort DNAT, in the project's own nat chains.
 * Everything is done over rtnetlink (libmnl), /proc/sys and libiptc; a
 * state file records what setup created so that teardown removes exactly
 * that. See docs/netsetup.md. */
#ifndef CELL_NETSETUP_H
#define CELL_NETSETUP_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "err.h"

#define NET_DEFAULT_NAME "pod"
#define NET_DEFAULT_NETNS_DIR "/var/run/netns"
#define NET_DEFAULT_STATE_DIR "/run/cell-net"
#define NET_GATEWAY "169.254.1.1"
#define NET_POD_IFNAME "eth0"
#define NET_MAX_PORTS 256
#define NET_MAX_CIDRS 64
/* The instance metadata service (EC2's addresses; GCE and Azure use the
 * same IPv4 one). */
#define NET_IMDS_IP "169.254.169.254"
#define NET_IMDS_IP6 "fd00:ec2::254"
#define NET_IMDS_PORT 80

struct net_port {
	uint16_t host_port, container_port;
	bool udp;	  /* else TCP */
	char host_ip[16]; /* "" = only the primary IP */
};

struct net_opts {
	const char *name;	/* namespace name; NET_DEFAULT_NAME */
	const char *netns_dir;	/* NET_DEFAULT_NETNS_DIR */
	const char *state_dir;	/* NET_DEFAULT_STATE_DIR */
	const char *pod_ip;	/* the secondary IP; required unless host_net */
	const char *primary_ip; /* NULL: the primary interface's address */
	const char *primary_if; /* NULL: the default route's interface */
	const char *host_veth;	/* NULL: "veth-" + name, cut to 15 bytes */
	bool host_network;	/* no namespace: units use the host's */
	char **private_cidrs;	/* kept unmasqueraded besides RFC 1918 */
	const struct net_port *ports;
	size_t n_ports;
	/* No metadata block: the pod reaches the metadata service (and the
	 * cell's user data, its key, the role's credentials) as the cell
	 * does. Off by default; a later setup may change it. */
	bool allow_metadata;
};

/* What setup made (or found), for callers and `cell-net show`. */
struct net_info {
	char *netns_path; /* NULL for host_network */
	char *pod_ip;	  /* the primary IP for host_network */
	char *primary_ip, *primary_if;
	char *host_veth;
	bool found; /* everything was already in place */
};

/* Set up, or with an existing state file check and re-apply (no change
 * when nothing drifted). On failure what this call created is undone. */
int net_setup(const struct net_opts *o, struct net_info *out, struct cerr *e);
/* Is the recorded setup of `name` still in place (namespace mount, veth)?
 * 1 yes, 0 no state or gone, -1 error. Fills out when 1. */
int net_check(const struct net_opts *o, struct net_info *out, struct cerr *e);
/* Remove what setup recorded, restore sysctls it changed. ENOENT when there
 * is no state for the name. */
int net_teardown(const struct net_opts *o, struct cerr *e);
/* Print the recorded setup and whether each part is still there. */
int net_show(const struct net_opts *o, FILE *out, struct cerr *e);
void net_info_free(struct net_info *i);

/* A listening TCP socket (close-on-exec) at NET_IMDS_IP:NET_IMDS_PORT
 * inside the namespace at netns_path, whose lo gets that address first:
 * the pod's requests to the metadata service end at this socket (the
 * agent's filtering proxy) and never leave the pod. Without a listener
 * they are refused inside the pod. */
int net_imds_listen(const char *netns_path, struct cerr *e);

/* The interface of the default route (lowest metric, main table) and its
 * first IPv4 address, in the caller's network namespace. */
int net_primary(char **ifname, char **ip, struct cerr *e);

/* "10.0.0.0/8" → address and prefix length; EINVAL when malformed. */
int net_parse_cidr(const char *s, uint32_t *addr, int *plen, struct cerr *e);
/* "8080:80/udp@10.0.0.5" (hostPort:containerPort[/tcp|/udp][@hostIP]). */
int net_parse_port(const char *s, struct net_port *p, struct cerr *e);

#endif
