// SPDX-License-Identifier: Apache-2.0
/* The state file, <state dir>/<name>.json: what setup created and the
 * sysctl values it replaced. Teardown trusts nothing else, so it removes
 * exactly what setup made; after an agent restart the agent finds the pod
 * network here instead of building it again. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>

#include "buf.h"
#include "cleanup.h"
#include "fsutil.h"
#include "jsonutil.h"
#include "net-internal.h"
#include "util.h"

char *net_state_path(const struct net_opts *o)
{
	return xasprintf("%s/%s.json",
			 o->state_dir ? o->state_dir : NET_DEFAULT_STATE_DIR,
			 o->name ? o->name : NET_DEFAULT_NAME);
}

static json_t *jstring_or_null(const char *s)
{
	return s ? json_string(s) : json_null();
}

static json_t *ports_json(const struct net_state *st)
{
	json_t *a = json_array();

	for (size_t i = 0; i < st->n_ports; i++) {
		const struct net_port *p = &st->ports[i];
		json_array_append_new(
		    a, json_pack("{s:i,s:i,s:s,s:s}", "hostPort",
				 (int)p->host_port, "containerPort",
				 (int)p->container_port, "protocol",
				 p->udp ? "udp" : "tcp", "hostIP", p->host_ip));
	}
	return a;
}

/* The record's strings and flags, for the writer and the reader. */
#define NS_OFF(f) offsetof(struct net_state, f)
struct state_field {
	const char *key;
	size_t off;
};
static const struct state_field state_strs[] = {
    {"name", NS_OFF(name)},
    {"netns", NS_OFF(netns_path)},
    {"podIP", NS_OFF(pod_ip)},
    {"primaryInterface", NS_OFF(primary_if)},
    {"primaryIP", NS_OFF(primary_ip)},
    {"hostVeth", NS_OFF(host_veth)},
};
static const struct state_field state_bools[] = {
    {"hostNetwork", NS_OFF(host_network)},
    {"madeNetns", NS_OFF(made_netns)},
    {"madeVeth", NS_OFF(made_veth)},
    {"madeProxyNeigh", NS_OFF(made_proxy)},
    {"madeRules", NS_OFF(made_rules)},
    {"allowMetadata", NS_OFF(allow_metadata)},
    {"madeMetadataBlock", NS_OFF(made_block)},
};
#define NS_STR(st, i) ((char **)((char *)(st) + state_strs[i].off))
#define NS_BOOL(st, i) ((bool *)((char *)(st) + state_bools[i].off))

char *net_state_to_json(const struct net_state *st)
{
	cleanup_json json_t *j = json_object();
	json_t *sc = json_array(), *pc = json_array();

	for (size_t i = 0; i < ARRAY_SIZE(state_strs); i++)
		json_object_set_new(j, state_strs[i].key,
				    jstring_or_null(*NS_STR(st, i)));
	for (size_t i = 0; i < ARRAY_SIZE(state_bools); i++)
		json_object_set_new(j, state_bools[i].key,
				    json_boolean(*NS_BOOL(st, i)));
	for (size_t i = 0; i < st->n_sysctls; i++)
		json_array_append_new(sc, json_pack("{s:s,s:s,s:s}", "path",
						    st->sysctls[i].path, "old",
						    st->sysctls[i].old, "set",
						    st->sysctls[i].set));
	json_object_set_new(j, "sysctls", sc);
	for (size_t i = 0; st->private_cidrs && st->private_cidrs[i]; i++)
		json_array_append_new(pc, json_string(st->private_cidrs[i]));
	json_object_set_new(j, "privateCIDRs", pc);
	json_object_set_new(j, "ports", ports_json(st));
	return json_dumps(j, JSON_INDENT(1) | JSON_SORT_KEYS);
}

static bool jbool(const json_t *o, const char *k)
{
	return json_is_true(json_object_get(o, k));
}

static int sysctl_fn(const json_t *v, const char *at, void *ctx, void *elem,
		     struct cerr *e)
{
	struct net_sysctl *s = elem;

	s->path = jstrdup(v, "path");
	s->old = jstrdup(v, "old");
	s->set = jstrdup(v, "set");
	if (!s->path || !s->old || !s->set || strstr(s->path, "..") ||
	    s->path[0] == '/')
		return jbad(e, at, NULL, "bad entry");
	return 0;
}

static int port_fn(const json_t *v, const char *at, void *ctx, void *elem,
		   struct cerr *e)
{
	struct net_port *p = elem;
	long long hp, cp;
	const char *proto = jstr(v, "protocol");
	const char *hip = jstr(v, "hostIP");
	struct in_addr ia;

	if (jint(v, "hostPort", 0, &hp, e) < 0 ||
	    jint(v, "containerPort", 0, &cp, e) < 0 || hp < 1 || hp > 65535 ||
	    cp < 1 || cp > 65535 || !proto ||
	    (strcmp(proto, "tcp") && strcmp(proto, "udp")) || !hip ||
	    strlen(hip) >= sizeof(p->host_ip) ||
	    (*hip && inet_pton(AF_INET, hip, &ia) != 1))
		return jbad(e, at, NULL, "bad entry");
	p->host_port = (uint16_t)hp;
	p->container_port = (uint16_t)cp;
	p->udp = !strcmp(proto, "udp");
	snprintf(p->host_ip, sizeof(p->host_ip), "%s", hip);
	return 0;
}

/* The lists are always written: absent is as bad as too long. */
static int parse_lists(const json_t *j, struct net_state *st, struct cerr *e)
{
	if (jget_list(j, "", "sysctls", NET_MAX_CIDRS, sizeof(*st->sysctls),
		      (void **)&st->sysctls, &st->n_sysctls, sysctl_fn, NULL,
		      e) <= 0 ||
	    jget_list(j, "", "ports", NET_MAX_PORTS, sizeof(*st->ports),
		      (void **)&st->ports, &st->n_ports, port_fn, NULL, e) <= 0)
		return -1;
	return 0;
}

int net_state_parse(const char *buf, size_t len, struct net_state *st,
		    struct cerr *e)
{
	cleanup_json json_t *j = NULL;

	memset(st, 0, sizeof(*st));
	if (len > NET_STATE_MAX)
		return cerr_set(e, EFBIG, "state file over %d bytes",
				NET_STATE_MAX);
	if (!(j = json_parse_object(buf, len, e)))
		return -1;
	for (size_t i = 0; i < ARRAY_SIZE(state_strs); i++)
		*NS_STR(st, i) = jstrdup(j, state_strs[i].key);
	for (size_t i = 0; i < ARRAY_SIZE(state_bools); i++)
		*NS_BOOL(st, i) = jbool(j, state_bools[i].key);
	if (!st->name || !st->primary_if || parse_lists(j, st, e) < 0 ||
	    jstrv(j, "privateCIDRs", &st->private_cidrs, e) < 0 ||
	    strv_len(st->private_cidrs) > NET_MAX_CIDRS) {
		if (!e->code)
			cerr_set(e, EINVAL, "missing or bad fields");
		net_state_free(st);
		return -1;
	}
	if (!st->host_network && (!st->netns_path || !st->pod_ip ||
				  !st->host_veth || !st->primary_ip)) {
		net_state_free(st);
		return cerr_set(e, EINVAL, "missing pod network fields");
	}
	return 0;
}

int net_state_load(const struct net_opts *o, struct net_state *st,
		   struct cerr *e)
{
	cleanup_free char *path = net_state_path(o);
	struct buf b;
	int r;

	buf_init(&b, NET_STATE_MAX);
	if (fs_read_file(path, &b, e) < 0) {
		buf_free(&b);
		return -1;
	}
	r = net_state_parse(b.data, b.len, st, e);
	buf_free(&b);
	if (r < 0)
		return cerr_prefix(e, "%s", path);
	return 0;
}

int net_state_save(const struct net_opts *o, const struct net_state *st,
		   struct cerr *e)
{
	cleanup_free char *path = net_state_path(o);
	cleanup_free char *text = net_state_to_json(st);

	if (fs_mkdir_p(o->state_dir ? o->state_dir : NET_DEFAULT_STATE_DIR,
		       0700, e) < 0)
		return -1;
	return fs_write_atomic(path, text, strlen(text), 0600, e);
}

void net_state_free(struct net_state *st)
{
	free(st->name);
	free(st->netns_path);
	free(st->pod_ip);
	free(st->primary_if);
	free(st->primary_ip);
	free(st->host_veth);
	for (size_t i = 0; i < st->n_sysctls; i++) {
		free(st->sysctls[i].path);
		free(st->sysctls[i].old);
		free(st->sysctls[i].set);
	}
	free(st->sysctls);
	strv_free(st->private_cidrs);
	free(st->ports);
	memset(st, 0, sizeof(*st));
}
