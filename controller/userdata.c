// SPDX-License-Identifier: Apache-2.0
/* The boot files a cell needs (ca.crt, server.crt, server.key, and
 * optionally itzo_version, itzo_url, cell_config.yaml), delivered the two
 * ways Kip delivers them: as #cloud-config user data with write_files
 * under /tmp/itzo (pkg/util/cloudinitfile: owner root, permissions "0400",
 * at most 16,000 bytes), or as one SSM parameter "config" holding a YAML
 * map of the same files, cut into config_0, config_1, … of at most 4096
 * bytes at UTF-8 boundaries when larger (pkg/server/cloud/aws
 * processInChunks). Kip keeps only the cloud-config keys its struct knows;
 * cellctl keeps the user's whole document. */
#include <errno.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "ctl-internal.h"
#include "fsutil.h"
#include "util.h"

#define FILE_MAX (1u << 20)

static int read_text(const char *path, char **out, struct cerr *e)
{
	struct buf b;

	buf_init(&b, FILE_MAX);
	if (fs_read_file(path, &b, e) < 0) {
		buf_free(&b);
		return cerr_prefix(e, "%s", path);
	}
	buf_append(&b, "", 0, e);
	*out = buf_steal(&b, NULL);
	return 0;
}

/* Kip prefixes a bare semantic version with "v". */
static char *agent_version(const char *v)
{
	regex_t re;
	bool semver;

	if (!strcmp(v, "latest") || v[0] == 'v')
		return xstrdup(v);
	regcomp(&re,
		"^(0|[1-9][0-9]*)\\.(0|[1-9][0-9]*)\\.(0|[1-9][0-9]*)"
		"(-[0-9A-Za-z.-]+)?(\\+[0-9A-Za-z.-]+)?$",
		REG_EXTENDED | REG_NOSUB);
	semver = regexec(&re, v, 0, NULL, 0) == 0;
	regfree(&re);
	return semver ? xasprintf("v%s", v) : xstrdup(v);
}

/* A string as YAML: a literal block when it spans lines, else quoted. */
static void yaml_scalar(struct buf *b, const char *s, int indent)
{
	struct cerr e = {0};
	size_t n = strlen(s);

	if (n && strchr(s, '\n') && s[0] != ' ' && !strstr(s, "\r")) {
		bool keep = n >= 2 && s[n - 1] == '\n' && s[n - 2] == '\n';
		buf_append(b,
			   s[n - 1] == '\n' ? (keep ? "|+\n" : "|\n") : "|-\n",
			   keep || s[n - 1] != '\n' ? 3 : 2, &e);
		for (const char *l = s; *l;) {
			const char *nl = strchr(l, '\n');
			size_t len = nl ? (size_t)(nl - l) : strlen(l);
			if (len)
				for (int i = 0; i < indent; i++)
					buf_append(b, " ", 1, &e);
			buf_append(b, l, len, &e);
			buf_append(b, "\n", 1, &e);
			l += len + (nl ? 1 : 0);
		}
		return;
	}
	json_t *j = json_string(s);
	cleanup_free char *q = json_dumps(j, JSON_ENCODE_ANY);
	json_decref(j);
	buf_append(b, q, strlen(q), &e);
	buf_append(b, "\n", 1, &e);
}

/* A flat map as go-yaml writes map[string]string: keys sorted. */
static char *yaml_map(const json_t *m)
{
	struct buf b;
	struct cerr e = {0};
	const char **keys = xcalloc(json_object_size(m) + 1, sizeof(char *));
	size_t n = 0;
	const char *k;
	json_t *v;
	char *out;

	json_object_foreach((json_t *)m, k, v)
	{
		keys[n++] = k;
	}
	for (size_t i = 1; i < n; i++) /* insertion sort: a handful of keys */
		for (size_t j = i; j > 0 && strcmp(keys[j - 1], keys[j]) > 0;
		     j--) {
			const char *t = keys[j];
			keys[j] = keys[j - 1];
			keys[j - 1] = t;
		}
	buf_init(&b, 0);
	for (size_t i = 0; i < n; i++) {
		json_t *kj = json_string(keys[i]);
		cleanup_free char *q = json_dumps(kj, JSON_ENCODE_ANY);
		json_decref(kj);
		buf_append(&b, q, strlen(q), &e);
		buf_append(&b, ": ", 2, &e);
		yaml_scalar(&b, json_string_value(json_object_get(m, keys[i])),
			    2);
	}
	free(keys);
	buf_append(&b, "", 0, &e);
	out = buf_steal(&b, NULL);
	return out ? out : xstrdup("");
}

static int cell_config(const char *path, json_t *params, struct cerr *e)
{
	json_t *doc = kdoc_load(path, e), *v;
	const char *k;

	if (!doc)
		return -1;
	if (!json_is_object(doc)) {
		json_decref(doc);
		return cerr_set(e, EINVAL, "%s: not a map", path);
	}
	json_object_foreach(doc, k, v)
	{
		if (!json_is_string(v)) {
			/* k lives in doc: the message first */
			cerr_set(e, EINVAL,
				 "%s: %s: values must be strings (quote them)",
				 path, k);
			json_decref(doc);
			return -1;
		}
	}
	cleanup_free char *text = yaml_map(doc);
	json_decref(doc);
	json_object_set_new(params, "cell_config.yaml", json_string(text));
	return 0;
}

json_t *boot_params(const struct boot_files *b, struct cerr *e)
{
	static const char *const pki[] = {"ca.crt", "server.crt", "server.key"};
	json_t *p = json_object();

	for (size_t i = 0; i < ARRAY_SIZE(pki); i++) {
		cleanup_free char *path =
		    xasprintf("%s/%s", b->pki_dir, pki[i]);
		cleanup_free char *text = NULL;
		if (read_text(path, &text, e) < 0) {
			json_decref(p);
			cerr_prefix(e,
				    "boot files (`cellctl pki cell %s` "
				    "makes server.crt)",
				    b->pki_dir);
			return NULL;
		}
		json_object_set_new(p, pki[i], json_string(text));
	}
	if (b->agent_version && *b->agent_version) {
		cleanup_free char *v = agent_version(b->agent_version);
		json_object_set_new(p, "itzo_version", json_string(v));
	}
	if (b->agent_url && *b->agent_url)
		json_object_set_new(p, "itzo_url", json_string(b->agent_url));
	if (b->cell_config && cell_config(b->cell_config, p, e) < 0) {
		json_decref(p);
		return NULL;
	}
	return p;
}

int userdata_build(const struct boot_files *b, struct buf *out, struct cerr *e)
{
	json_t *params = boot_params(b, e), *doc = NULL, *wf, *v;
	const char *k, *dir = b->boot_dir ? b->boot_dir : "/tmp/itzo";
	char *text = NULL;
	size_t len = 0;
	FILE *f;

	buf_init(out, 0); /* freeable on every path */
	if (!params)
		return -1;
	doc = b->cloud_init ? kdoc_load(b->cloud_init, e) : json_object();
	if (!doc || (!json_is_object(doc) && !json_is_null(doc))) {
		json_decref(params);
		json_decref(doc);
		return doc ? cerr_set(e, EINVAL, "%s: not a map", b->cloud_init)
			   : -1;
	}
	if (json_is_null(doc)) {
		json_decref(doc);
		doc = json_object();
	}
	wf = json_object_get(doc, "write_files");
	if (!json_is_array(wf)) {
		wf = json_array();
		json_object_set_new(doc, "write_files", wf);
	}
	json_object_foreach(params, k, v)
	{
		cleanup_free char *path = xasprintf("%s/%s", dir, k);
		json_array_append_new(
		    wf, json_pack("{s:O,s:s,s:s,s:s}", "content", v, "owner",
				  "root", "path", path, "permissions", "0400"));
	}
	json_decref(params);
	f = open_memstream(&text, &len);
	fputs("#cloud-config\n", f);
	print_yaml(f, doc);
	fclose(f);
	json_decref(doc);
	buf_append(out, text, len, e);
	free(text);
	if (len > USERDATA_MAX)
		return cerr_set(e, EFBIG,
				"user data is %zu bytes, over the clouds' "
				"limit of %d",
				len, USERDATA_MAX);
	return 0;
}

json_t *ssm_payload_build(const struct boot_files *b, struct cerr *e)
{
	json_t *params = boot_params(b, e), *out;
	cleanup_free char *text = NULL;
	size_t n, i = 0;
	const char *p;

	if (!params)
		return NULL;
	text = yaml_map(params);
	json_decref(params);
	out = json_object();
	n = strlen(text);
	if (n <= SSM_CHUNK_MAX) {
		json_object_set_new(out, "config", json_string(text));
		return out;
	}
	for (p = text; n; i++) {
		size_t c = n;
		if (c > SSM_CHUNK_MAX) {
			c = SSM_CHUNK_MAX;
			/* Not inside a UTF-8 sequence (Go: utf8.RuneStart). */
			while (c >= SSM_CHUNK_MAX - 4 &&
			       ((unsigned char)p[c] & 0xc0) == 0x80)
				c--;
		}
		char name[32];
		snprintf(name, sizeof(name), "config_%zu", i);
		json_object_set_new(out, name, json_stringn(p, c));
		p += c;
		n -= c;
	}
	return out;
}
