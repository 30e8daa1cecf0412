// SPDX-License-Identifier: Apache-2.0
/* What netsetup's own files and tests share: the recorded state, the pure
 * rule plan, and the narrow kernel-facing steps (rtnetlink, libiptc,
 * /proc/sys, namespaces). */
#ifndef CELL_NET_INTERNAL_H
#define CELL_NET_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "netsetup.h"

#define NET_CHAIN_MASQ "CELL-MASQ"
#define NET_CHAIN_HOSTPORT "CELL-HOSTPORT"
#define NET_CHAIN_IMDS "CELL-IMDS" /* filter: the metadata block */
#define NET_STATE_MAX (64 * 1024)

/* ---- state.c: what setup created, so teardown removes exactly that ---- */

struct net_sysctl {
	char *path; /* beneath /proc/sys: "net/ipv4/ip_forward" */
	char *old;  /* the value before setup */
	char *set;  /* what setup wrote */
};

struct net_state {
	char *name, *netns_path, *pod_ip, *primary_if, *primary_ip, *host_veth;
	bool host_network;
	bool made_netns, made_veth, made_proxy, made_rules;
	bool allow_metadata; /* asked for: no block */
	bool made_block;     /* the metadata block (filter tables) is ours */
	struct net_sysctl *sysctls;
	size_t n_sysctls;
	char **private_cidrs;
	struct net_port *ports;
	size_t n_ports;
};

char *net_state_path(const struct net_opts *o);
char *net_state_to_json(const struct net_state *st);
/* Parse a state file's text (pure; capped at NET_STATE_MAX). */
int net_state_parse(const char *buf, size_t len, struct net_state *st,
		    struct cerr *e);
/* 0 loaded, ENOENT (returned as -1 with e->code) when absent. */
int net_state_load(const struct net_opts *o, struct net_state *st,
		   struct cerr *e);
int net_state_save(const struct net_opts *o, const struct net_state *st,
		   struct cerr *e);
void net_state_free(struct net_state *st);

/* ---- plan.c: the nat rules, as data (pure, unit-tested) ---- */

enum net_target { NT_RETURN, NT_MASQUERADE, NT_DNAT };

struct net_rule {
	const char *chain;
	uint32_t src, dst; /* network order; 0/0 = any */
	int src_plen, dst_plen;
	bool inv_src, inv_dst;
	char out_if[16];
	bool inv_out;
	int proto; /* 0, IPPROTO_TCP, IPPROTO_UDP */
	uint16_t dport;
	enum net_target target;
	uint32_t to_ip; /* DNAT */
	uint16_t to_port;
};

struct net_plan {
	struct net_rule *v;
	size_t n;
};

int net_plan_rules(const struct net_state *st, struct net_plan *p,
		   struct cerr *e);
void net_plan_free(struct net_plan *p);
/* One rule as iptables-save would print it (for show and tests). */
char *net_rule_text(const struct net_rule *r);

/* ---- ipt.c: the plan into the nat table, one libiptc commit ---- */

int net_ipt_apply(const struct net_plan *p, struct cerr *e);
int net_ipt_remove(struct cerr *e);
/* 1 when both chains exist, 0 when not. */
int net_ipt_present(struct cerr *e);
/* The metadata block for traffic in from veth: filter FORWARD, IPv4
 * (ipt.c) then IPv6 (ipt6.c), one commit each; apply again replaces. */
int net_block_apply(const char *veth, struct cerr *e);
int net_block_remove(struct cerr *e);
/* 1 when the IPv4 chain exists, 0 when not. */
int net_block_present(struct cerr *e);
int net_block6_apply(const char *veth, struct cerr *e);
int net_block6_remove(struct cerr *e);

/* ---- nl.c: rtnetlink over libmnl ---- */

struct nl;
/* A socket in the namespace of netns_fd (-1: the caller's). */
struct nl *nl_open(int netns_fd, struct cerr *e);
void nl_close(struct nl *n);
/* ENOENT when there is no such link. mac may be NULL. */
int nl_link_find(struct nl *n, const char *name, int *idx, uint8_t mac[6],
		 struct cerr *e);
int nl_link_name(struct nl *n, int idx, char name[16], struct cerr *e);
int nl_veth_add(struct nl *n, const char *name, const char *peer,
		int peer_netns_fd, struct cerr *e);
int nl_link_up(struct nl *n, int idx, struct cerr *e);
int nl_link_del(struct nl *n, int idx, struct cerr *e);
int nl_addr_add(struct nl *n, int idx, uint32_t ip, int plen, struct cerr *e);
/* add: create or replace; else delete (ESRCH/ENOENT are not errors). */
int nl_route(struct nl *n, bool add, uint32_t dst, int plen, uint32_t gw,
	     int oif, bool link_scope, struct cerr *e);
int nl_neigh(struct nl *n, bool add, int idx, uint32_t ip, const uint8_t *mac,
	     bool proxy, struct cerr *e);
/* 1 when the proxy entry for ip on idx exists. */
int nl_proxy_present(struct nl *n, int idx, uint32_t ip, struct cerr *e);
int nl_default_route(struct nl *n, int *oif, struct cerr *e);
int nl_first_addr(struct nl *n, int idx, uint32_t *ip, struct cerr *e);

/* ---- sys.c: sysctls and namespaces ---- */

/* Read /proc/sys/<path> (trailing newline dropped). */
char *net_sysctl_get(const char *path, struct cerr *e);
int net_sysctl_set(const char *path, const char *value, struct cerr *e);
/* Create a namespace kept by a bind mount at path (EEXIST when present). */
int net_netns_create(const char *dir, const char *path, struct cerr *e);
int net_netns_remove(const char *path, struct cerr *e);
/* True when path is a bind mount of a network namespace. */
bool net_netns_present(const char *path);

#endif
