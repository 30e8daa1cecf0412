// SPDX-License-Identifier: Apache-2.0
/* Meta-data from each cloud into struct ci_meta: NoCloud's YAML, Azure's
 * JSON document, GCE's ssh-keys attribute, and single values (EC2, GCE).
 * Pure functions over buffers, like the user-data parser. */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ci-internal.h"
#include "cleanup.h"
#include "jsonutil.h"
#include "util.h"

void ci_meta_free(struct ci_meta *m)
{
	free(m->instance_id);
	free(m->hostname);
	free(m->local_ipv4);
	free(m->public_ipv4);
	strv_free(m->keys);
	memset(m, 0, sizeof(*m));
}

char *ci_meta_value(const char *p, size_t n)
{
	while (n && isspace((unsigned char)*p))
		p++, n--;
	while (n && isspace((unsigned char)p[n - 1]))
		n--;
	if (!n || n > CI_MAX_METADATA || memchr(p, '\n', n) ||
	    memchr(p, '\0', n))
		return NULL;
	return xstrndup(p, n);
}

void ci_meta_add_key(struct ci_meta *m, const char *key, size_t len)
{
	char *k = ci_meta_value(key, len);
	size_t n = strv_len(m->keys);

	if (!k || n >= CI_MAX_KEYS) {
		free(k);
		return;
	}
	for (size_t i = 0; i < n; i++)
		if (!strcmp(m->keys[i], k)) {
			free(k);
			return;
		}
	m->keys = xrealloc(m->keys, (n + 2) * sizeof(char *));
	m->keys[n] = k;
	m->keys[n + 1] = NULL;
}

/* An IPv4 address, or NULL (with the value dropped). */
static char *ipv4(char *s)
{
	struct in_addr a;

	if (s && inet_pton(AF_INET, s, &a) != 1) {
		free(s);
		return NULL;
	}
	return s;
}

static char *yvalue(const struct ynode *map, const char *key)
{
	const struct ynode *n = ynode_get(map, key);

	if (!n || n->type != Y_SCALAR || ynode_is_null(n))
		return NULL;
	return ci_meta_value(n->value, n->len);
}

static void nocloud_keys(const struct ynode *n, struct ci_meta *m)
{
	if (!n)
		return;
	if (n->type == Y_SCALAR && !ynode_is_null(n)) {
		/* One string may hold several keys, one per line. */
		const char *p = n->value, *end = p + n->len;
		while (p < end) {
			const char *nl = memchr(p, '\n', (size_t)(end - p));
			size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
			ci_meta_add_key(m, p, len);
			p += len + 1;
		}
		return;
	}
	/* A list of keys, or a mapping of names to keys (EC2's layout). */
	for (size_t i = n->type == Y_MAP ? 1 : 0; i < n->n;
	     i += n->type == Y_MAP ? 2 : 1)
		nocloud_keys(n->kids[i]->type == Y_SEQ ? NULL : n->kids[i], m);
}

int ci_meta_parse_nocloud(const char *p, size_t n, struct ci_meta *m,
			  struct cerr *e)
{
	struct ytree t;
	int line;

	if (n > CI_MAX_METADATA)
		return cerr_set(e, EFBIG, "meta-data over %u bytes",
				CI_MAX_METADATA);
	if (ytree_parse(p, n, &t, &line, e) < 0)
		return cerr_prefix(e, "meta-data line %d", line);
	if (t.root && t.root->type != Y_MAP && !ynode_is_null(t.root)) {
		ytree_free(&t);
		return cerr_set(e, EINVAL, "meta-data is not a mapping");
	}
	m->instance_id = yvalue(t.root, "instance-id");
	if (!m->instance_id)
		m->instance_id = yvalue(t.root, "instance_id");
	m->hostname = yvalue(t.root, "local-hostname");
	if (!m->hostname)
		m->hostname = yvalue(t.root, "hostname");
	m->local_ipv4 = ipv4(yvalue(t.root, "local-ipv4"));
	m->public_ipv4 = ipv4(yvalue(t.root, "public-ipv4"));
	nocloud_keys(ynode_get(t.root, "public-keys"), m);
	if (!ynode_get(t.root, "public-keys"))
		nocloud_keys(ynode_get(t.root, "public_keys"), m);
	ytree_free(&t);
	return 0;
}

static char *jvalue(json_t *obj, const char *key)
{
	const char *s = jstr(obj, key);
	return s ? ci_meta_value(s, strlen(s)) : NULL;
}

int ci_meta_parse_azure(const char *p, size_t n, struct ci_meta *m,
			struct cerr *e)
{
	cleanup_json json_t *root = json_parse_object(p, n, e);
	json_t *compute, *ifs, *addr, *keys, *k;
	size_t i;

	if (!root)
		return cerr_prefix(e, "Azure instance meta-data");
	compute = json_object_get(root, "compute");
	if (!json_is_object(compute))
		return cerr_set(e, EINVAL,
				"Azure instance meta-data has no "
				"\"compute\" object");
	m->instance_id = jvalue(compute, "vmId");
	m->hostname =
	    jvalue(json_object_get(compute, "osProfile"), "computerName");
	if (!m->hostname)
		m->hostname = jvalue(compute, "name");
	keys = json_object_get(compute, "publicKeys");
	json_array_foreach(keys, i, k)
	{
		const char *d = jstr(k, "keyData");
		if (d)
			ci_meta_add_key(m, d, strlen(d));
	}
	ifs = json_object_get(json_object_get(root, "network"), "interface");
	addr = json_array_get(
	    json_object_get(json_object_get(json_array_get(ifs, 0), "ipv4"),
			    "ipAddress"),
	    0);
	m->local_ipv4 = ipv4(jvalue(addr, "privateIpAddress"));
	m->public_ipv4 = ipv4(jvalue(addr, "publicIpAddress"));
	return 0;
}

/* Keys made by the Google guest tools end in `google-ssh {"userName":…,
 * "expireOn":"2018-04-05T15:30:00+0000"}`; an expired one is skipped, as
 * cloud-init does. */
static bool gce_expired(const char *key, time_t now)
{
	const char *j = strstr(key, "google-ssh {");
	json_t *o;
	const char *when;
	struct tm tm = {0};
	bool expired = false;

	if (!j)
		return false;
	o = json_loads(j + 11, JSON_DISABLE_EOF_CHECK, NULL);
	when = jstr(o, "expireOn");
	if (when) {
		const char *end = strptime(when, "%Y-%m-%dT%H:%M:%S%z", &tm);
		long off = tm.tm_gmtoff;
		/* Unparseable: treat as expired, the safe side. */
		expired = !end || timegm(&tm) - off <= now;
	}
	json_decref(o);
	return expired;
}

void ci_meta_parse_gce_keys(const char *p, size_t n, const char *user,
			    time_t now, struct ci_meta *m)
{
	const char *end = p + n;

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
		const char *colon = memchr(p, ':', len);
		size_t ulen = colon ? (size_t)(colon - p) : 0;
		char *line = xstrndup(p, len);
		const char *key = line + ulen + 1;

		p += len + 1;
		if (!colon) {
			free(line);
			continue;
		}
		line[ulen] = '\0';
		/* Keys of other users would give them the default user's
		 * account: only "<user>:" and "cloudinit:" count. */
		if ((!strcmp(line, user) || !strcmp(line, "cloudinit")) &&
		    !gce_expired(key, now))
			ci_meta_add_key(m, key, strlen(key));
		free(line);
	}
}

char *ci_instance_dir_name(const char *iid)
{
	size_t n = strlen(iid);
	char *s;

	if (n > 128)
		n = 128;
	s = xstrndup(iid, n);
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)s[i]) && !strchr("._-", s[i]))
			s[i] = '_';
	/* "." and ".." would name the wrong directory. */
	if (s[0] == '.' || !s[0]) {
		char *t = xasprintf("_%s", s);
		free(s);
		s = t;
	}
	return s;
}

/* Azure's instance document: network.interface[0].ipv4.ipAddress[0] and
 * [1] privateIpAddress, the primary and the first secondary IP. */
int ci_meta_parse_azure_ips(const char *p, size_t n, char **pri, char **sec,
			    struct cerr *e)
{
	cleanup_json json_t *j = json_parse_object(p, n, e);
	json_t *ifs, *addrs;

	*pri = *sec = NULL;
	if (!j)
		return cerr_prefix(e, "Azure instance document");
	ifs = json_object_get(json_object_get(j, "network"), "interface");
	addrs = json_object_get(json_object_get(json_array_get(ifs, 0), "ipv4"),
				"ipAddress");
	for (size_t i = 0; i < 2 && i < json_array_size(addrs); i++) {
		char *v = jstrdup(json_array_get(addrs, i), "privateIpAddress");
		char *ip = v ? ipv4(v) : NULL;
		*(i ? sec : pri) = ip;
	}
	if (!*pri)
		return cerr_set(e, EPROTO,
				"Azure instance document: no private IPv4 "
				"address");
	return 0;
}
