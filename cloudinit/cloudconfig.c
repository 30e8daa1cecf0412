// SPDX-License-Identifier: Apache-2.0
/* One #cloud-config document: the YAML tree (yamltree.c) mapped onto
 * struct ci_config. Every problem names its line. A bad entry is dropped
 * whole (never applied half-way) and the rest of the document still
 * counts; unknown keys are warnings, never fatal. When several cloud-config
 * parts set the same key, the later one replaces the earlier, which is
 * cloud-init's default merge ("dict(replace)+list()+str()"). */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ci-internal.h"
#include "path.h"
#include "util.h"

#define TAG_BINARY "tag:yaml.org,2002:binary"

bool ci_hostname_ok(const char *s)
{
	size_t n = strlen(s), label = 0;

	if (n == 0 || n > 253 || s[0] == '.' || s[n - 1] == '.')
		return false;
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '.') {
			if (label == 0)
				return false;
			label = 0;
			continue;
		}
		if (!isalnum((unsigned char)s[i]) && s[i] != '-' && s[i] != '_')
			return false;
		if (++label > 63)
			return false;
	}
	return true;
}

/* ---- commands ---- */

static int one_cmd(struct ci_parse *ps, const struct ynode *n, const char *what,
		   struct ci_cmd *c)
{
	c->line = n->line;
	if (n->type == Y_SCALAR)
		return ci_cc_str(ps, n, what, &c->shell);
	if (n->type != Y_SEQ)
		return ERR(ps, n, "%s: a command is a string or a list, not %s",
			   what, ci_cc_type_name(n));
	if (n->n == 0)
		return ERR(ps, n, "%s: empty argument list", what);
	c->argv = xcalloc(n->n + 1, sizeof(char *));
	for (size_t i = 0; i < n->n; i++) {
		const struct ynode *a = n->kids[i];
		if (a->type != Y_SCALAR || strlen(a->value) != a->len)
			return ERR(ps, a, "%s: arguments must be strings",
				   what);
		c->argv[i] = xstrdup(a->value);
	}
	return 0;
}

static int cmds(struct ci_parse *ps, const struct ynode *n, const char *what,
		struct ci_cmd **vp, size_t *np, size_t *capp)
{
	const struct ynode *single[1] = {n};
	const struct ynode *const *items = single;
	size_t count = 1;

	/* The key replaces what an earlier part set. */
	for (size_t i = 0; i < *np; i++) {
		free((*vp)[i].shell);
		strv_free((*vp)[i].argv);
	}
	*np = 0;
	if (ynode_is_null(n))
		return 0;
	if (n->type == Y_SEQ) {
		items = (const struct ynode *const *)n->kids;
		count = n->n;
	} else if (n->type == Y_SCALAR) {
		WARN(ps, n, "%s should be a list; taking it as one command",
		     what);
	} else {
		ERR(ps, n, "%s must be a list, not %s", what,
		    ci_cc_type_name(n));
		return 0;
	}
	for (size_t i = 0; i < count; i++) {
		bool b;
		long long v;
		const struct ynode *it = items[i];
		/* cloud-init's shellify refuses a boolean or a number item
		 * (PyYAML's `false`, `42`): the module fails, nothing runs. */
		if (it->type == Y_SCALAR && it->plain && !ynode_is_null(it) &&
		    (ynode_bool(it, &b) == 0 || ynode_int(it, &v) == 0)) {
			ERR(ps, it,
			    "%s: '%s' is a %s, not a command (quote it); "
			    "cloud-init runs none of this list",
			    what, it->value,
			    ynode_bool(it, &b) == 0 ? "boolean" : "number");
			for (size_t k = 0; k < *np; k++) {
				free((*vp)[k].shell);
				strv_free((*vp)[k].argv);
			}
			*np = 0;
			return -1;
		}
	}
	for (size_t i = 0; i < count; i++) {
		struct ci_cmd c = {0};
		if (ynode_is_null(items[i]))
			continue;
		if (one_cmd(ps, items[i], what, &c) < 0 ||
		    (c.shell && !*c.shell)) {
			free(c.shell);
			strv_free(c.argv);
			continue;
		}
		*VEC_PUSH(*vp, *np, *capp) = c;
	}
	return 0;
}

/* ---- write_files ---- */

int ci_parse_mode(const struct ynode *n, mode_t *out, bool *decimal_warn)
{
	long long v;
	const char *s;
	unsigned long m = 0;
	bool digits = false;

	*decimal_warn = false;
	if (n->type != Y_SCALAR)
		return -1;
	if (ynode_int(n, &v) == 0) {
		/* A plain 644 is the decimal number 644 (01204), as in
		 * cloud-init: worth a warning when the digits read as octal
		 * and the number sets the sticky or set-id bits, which
		 * catches 644, 755, 600, 700 but not JSON's 420 (0644). */
		*decimal_warn = n->value[0] != '0' && v > 0777 &&
				strspn(n->value, "01234567") == n->len;
		if (v < 0 || v > 07777)
			return -1;
		*out = (mode_t)v;
		return 0;
	}
	/* A string is octal, as Python's int(s, 8): "0644", "644", "0o644". */
	s = n->value;
	while (isspace((unsigned char)*s))
		s++;
	if (s[0] == '0' && (s[1] == 'o' || s[1] == 'O'))
		s += 2;
	for (; *s && !isspace((unsigned char)*s); s++) {
		if (*s == '_' && digits)
			continue;
		if (*s < '0' || *s > '7' || m > 07777)
			return -1;
		m = m * 8 + (unsigned long)(*s - '0');
		digits = true;
	}
	while (isspace((unsigned char)*s))
		s++;
	if (!digits || *s || m > 07777)
		return -1;
	*out = (mode_t)m;
	return 0;
}

enum enc { ENC_PLAIN, ENC_B64, ENC_GZ, ENC_GZ_B64 };

static int encoding(struct ci_parse *ps, const struct ynode *n, enum enc *out)
{
	static const struct {
		const char *name;
		enum enc enc;
	} names[] = {
	    {"b64", ENC_B64},
	    {"base64", ENC_B64},
	    {"gz", ENC_GZ},
	    {"gzip", ENC_GZ},
	    {"gz+base64", ENC_GZ_B64},
	    {"gzip+base64", ENC_GZ_B64},
	    {"gz+b64", ENC_GZ_B64},
	    {"gzip+b64", ENC_GZ_B64},
	    {"text/plain", ENC_PLAIN},
	};
	char low[16];

	*out = ENC_PLAIN;
	if (ynode_is_null(n) || (n->type == Y_SCALAR && n->len == 0))
		return 0;
	if (n->type != Y_SCALAR)
		return ERR(ps, n, "encoding must be a string");
	if (n->len < sizeof(low)) {
		for (size_t i = 0; i <= n->len; i++)
			low[i] = (char)tolower((unsigned char)n->value[i]);
		for (size_t i = 0; i < ARRAY_SIZE(names); i++)
			if (!strcmp(low, names[i].name)) {
				*out = names[i].enc;
				return 0;
			}
	}
	/* cloud-init: "Unknown encoding type %s, assuming text/plain". */
	WARN(ps, n,
	     "unknown encoding '%.40s'; taking the content as plain text",
	     n->value);
	return 0;
}

/* Decode a file's content into f->data under the document's budget. */
static int content(struct ci_parse *ps, const struct ynode *n, enum enc enc,
		   struct ci_file *f)
{
	struct ci_config *c = ps->cfg;
	size_t room = CI_MAX_CONTENT_TOTAL - c->content_total;
	struct buf raw, out;
	struct cerr e = {0};
	int r = 0;

	if (room > CI_MAX_CONTENT_FILE)
		room = CI_MAX_CONTENT_FILE;
	buf_init(&raw, room);
	buf_init(&out, room);
	if (ynode_is_null(n))
		r = buf_append(&raw, "", 0, &e);
	else if (n->type != Y_SCALAR)
		r = cerr_set(&e, EINVAL, "must be a string, not %s",
			     ci_cc_type_name(n));
	else if (n->tag && !strcmp(n->tag, TAG_BINARY))
		r = ci_b64_decode(n->value, n->len, &raw, &e);
	else
		r = buf_append(&raw, n->value, n->len, &e);
	if (r == 0 && (enc == ENC_B64 || enc == ENC_GZ_B64)) {
		r = ci_b64_decode(raw.data, raw.len, &out, &e);
		buf_free(&raw);
		raw = out;
		buf_init(&out, room);
	}
	if (r == 0 && (enc == ENC_GZ || enc == ENC_GZ_B64))
		r = gunzip_buf(raw.data, raw.len, &out, &e);
	else if (r == 0)
		out = raw, buf_init(&raw, 0);
	buf_free(&raw);
	if (r < 0) {
		buf_free(&out);
		return ERR(ps, n, "content of /%s: %s", f->path, e.msg);
	}
	c->content_total += out.len;
	f->data = buf_steal(&out, &f->len);
	return 0;
}

static bool owner_ok(const char *s)
{
	const char *colon = strchr(s, ':');
	char user[64];
	size_t ul = colon ? (size_t)(colon - s) : strlen(s);

	if (ul == 0 || ul >= sizeof(user))
		return false;
	memcpy(user, s, ul);
	user[ul] = '\0';
	return (ci_name_ok(user) || strspn(user, "0123456789") == ul) &&
	       (!colon || ci_name_ok(colon + 1) ||
		(colon[1] &&
		 strspn(colon + 1, "0123456789") == strlen(colon + 1)));
}

/* The keys of one entry other than content; -1 on an error. */
static int file_keys(struct ci_parse *ps, const struct ynode *m,
		     struct ci_file *f)
{
	const struct ynode *n;
	char rel[PATH_MAX_INPUT], *s = NULL;
	struct cerr e = {0};
	bool warn = false;

	n = ynode_get(m, "path");
	if (!n || ci_cc_str(ps, n, "path", &s) < 0 || !s || !*s) {
		free(s);
		return ERR(ps, n ? n : m, "write_files entry without a path");
	}
	if (path_clean(s, rel, sizeof(rel), &e) < 0 || !rel[0]) {
		if (e.code)
			ERR(ps, n, "write_files: %s", e.msg);
		else
			ERR(ps, n, "write_files: path '%.200s' names the root",
			    s);
		free(s);
		return -1;
	}
	free(s);
	f->path = xstrdup(rel);
	if ((n = ynode_get(m, "owner")) &&
	    ci_cc_str(ps, n, "owner", &f->owner) < 0)
		return -1;
	if (f->owner && !owner_ok(f->owner))
		return ERR(ps, n, "owner '%.64s' is not user[:group]",
			   f->owner);
	f->mode = 0644;
	if ((n = ynode_get(m, "permissions")) && !ynode_is_null(n)) {
		if (ci_parse_mode(n, &f->mode, &warn) < 0)
			return ERR(ps, n,
				   "permissions '%.40s' are not an octal mode",
				   n->type == Y_SCALAR ? n->value
						       : ci_cc_type_name(n));
		if (warn)
			WARN(ps, n,
			     "permissions %s is the decimal number %s "
			     "(mode 0%o); write '0%s' for an octal mode",
			     n->value, n->value, (unsigned)f->mode, n->value);
	}
	if (ci_cc_opt_bool(ps, m, "append", &f->append) < 0 ||
	    ci_cc_opt_bool(ps, m, "defer", &f->defer) < 0)
		return -1;
	return 0;
}

static void file_entry(struct ci_parse *ps, const struct ynode *m,
		       const char *what, struct ci_file **vp, size_t *np,
		       size_t *capp)
{
	static const char *const known[] = {"path",  "content",	    "encoding",
					    "owner", "permissions", "append",
					    "defer", NULL};
	struct ci_file f = {.line = m->line};
	enum enc enc;

	if (m->type != Y_MAP) {
		ERR(ps, m, "%s entries must be mappings, not %s", what,
		    ci_cc_type_name(m));
		return;
	}
	for (size_t i = 0; i + 1 < m->n; i += 2) {
		const struct ynode *k = m->kids[i];
		bool found = false;
		for (const char *const *w = known; *w && !found; w++)
			found = k->type == Y_SCALAR && !strcmp(k->value, *w);
		if (!found)
			WARN(ps, k, "%s: unknown key '%.64s'; ignored", what,
			     k->type == Y_SCALAR ? k->value : "?");
	}
	if (file_keys(ps, m, &f) < 0 ||
	    encoding(ps, ynode_get(m, "encoding"), &enc) < 0 ||
	    content(ps, ynode_get(m, "content"), enc, &f) < 0) {
		free(f.path);
		free(f.owner);
		free(f.data);
		return;
	}
	*VEC_PUSH(*vp, *np, *capp) = f;
}

static void files(struct ci_parse *ps, const struct ynode *n, const char *what,
		  struct ci_file **vp, size_t *np, size_t *capp)
{
	for (size_t i = 0; i < *np; i++) {
		free((*vp)[i].path);
		free((*vp)[i].data);
		free((*vp)[i].owner);
	}
	*np = 0;
	if (ynode_is_null(n))
		return;
	if (n->type != Y_SEQ) {
		ERR(ps, n, "%s must be a list, not %s", what,
		    ci_cc_type_name(n));
		return;
	}
	for (size_t i = 0; i < n->n; i++)
		file_entry(ps, n->kids[i], what, vp, np, capp);
}

/* ---- the table of top-level keys ---- */

static void k_write_files(struct ci_parse *ps, const struct ynode *n)
{
	struct ci_config *c = ps->cfg;
	files(ps, n, "write_files", &c->files, &c->n_files, &c->cap_files);
}

static void k_milpa_files(struct ci_parse *ps, const struct ynode *n)
{
	struct ci_config *c = ps->cfg;
	files(ps, n, "milpa_files", &c->milpa, &c->n_milpa, &c->cap_milpa);
}

static void k_bootcmd(struct ci_parse *ps, const struct ynode *n)
{
	struct ci_config *c = ps->cfg;
	c->has_bootcmd = cmds(ps, n, "bootcmd", &c->bootcmd, &c->n_bootcmd,
			      &c->cap_bootcmd) == 0;
}

static void k_runcmd(struct ci_parse *ps, const struct ynode *n)
{
	struct ci_config *c = ps->cfg;
	c->has_runcmd = cmds(ps, n, "runcmd", &c->runcmd, &c->n_runcmd,
			     &c->cap_runcmd) == 0;
}

static void k_manage_hosts(struct ci_parse *ps, const struct ynode *n)
{
	bool b;

	if (n->type == Y_SCALAR && !strcmp(n->value, "localhost"))
		ps->cfg->manage_etc_hosts = 2;
	else if (n->type == Y_SCALAR && !strcmp(n->value, "template"))
		ps->cfg->manage_etc_hosts = 1;
	else if (ci_cc_bool(ps, n, "manage_etc_hosts", &b) == 0)
		ps->cfg->manage_etc_hosts = b;
}

static void host_key(struct ci_parse *ps, const struct ynode *n,
		     const char *what, char **slot)
{
	char *s;

	if (ci_cc_str(ps, n, what, &s) < 0)
		return;
	if (s && !ci_hostname_ok(s)) {
		ERR(ps, n, "%s '%.80s' is not a valid host name", what, s);
		free(s);
		return;
	}
	free(*slot);
	*slot = s;
}

static void k_hostname(struct ci_parse *ps, const struct ynode *n)
{
	host_key(ps, n, "hostname", &ps->cfg->hostname);
}

static void k_fqdn(struct ci_parse *ps, const struct ynode *n)
{
	host_key(ps, n, "fqdn", &ps->cfg->fqdn);
}

static void k_preserve(struct ci_parse *ps, const struct ynode *n)
{
	ci_cc_bool(ps, n, "preserve_hostname", &ps->cfg->preserve_hostname);
}

static void k_prefer_fqdn(struct ci_parse *ps, const struct ynode *n)
{
	ci_cc_bool(ps, n, "prefer_fqdn_over_hostname", &ps->cfg->prefer_fqdn);
}

static void k_ssh_keys(struct ci_parse *ps, const struct ynode *n)
{
	char **v;

	if (ci_cc_keys(ps, n, "ssh_authorized_keys", &v) < 0)
		return;
	strv_free(ps->cfg->ssh_keys);
	ps->cfg->ssh_keys = v;
}

static void k_final_message(struct ci_parse *ps, const struct ynode *n)
{
	char *s;

	if (ci_cc_str(ps, n, "final_message", &s) < 0)
		return;
	free(ps->cfg->final_message);
	ps->cfg->final_message = s;
}

static const struct {
	const char *key;
	void (*fn)(struct ci_parse *ps, const struct ynode *n);
} handlers[] = {
    {"write_files", k_write_files},
    {"milpa_files", k_milpa_files},
    {"bootcmd", k_bootcmd},
    {"runcmd", k_runcmd},
    {"hostname", k_hostname},
    {"fqdn", k_fqdn},
    {"preserve_hostname", k_preserve},
    {"prefer_fqdn_over_hostname", k_prefer_fqdn},
    {"users", ci_cc_users},
    {"groups", ci_cc_groups},
    {"ssh_authorized_keys", k_ssh_keys},
    {"final_message", k_final_message},
    {"manage_etc_hosts", k_manage_hosts},
};

/* Keys of canonical cloud-init that this one does not implement. */
static const char *const unsupported[] = {
    "apt",
    "apt_update",
    "apt_upgrade",
    "apt_reboot_if_required",
    "package_update",
    "package_upgrade",
    "package_reboot_if_required",
    "packages",
    "snap",
    "yum_repos",
    "zypper",
    "ntp",
    "timezone",
    "locale",
    "keyboard",
    "disable_root",
    "disable_root_opts",
    "ssh_pwauth",
    "ssh_deletekeys",
    "ssh_genkeytypes",
    "ssh_keys",
    "ssh_import_id",
    "ssh_quiet_keygen",
    "ssh_publish_hostkeys",
    "allow_public_ssh_keys",
    "no_ssh_fingerprints",
    "chpasswd",
    "password",
    "mounts",
    "mount_default_fields",
    "swap",
    "growpart",
    "resize_rootfs",
    "disk_setup",
    "fs_setup",
    "power_state",
    "manage_resolv_conf",
    "resolv_conf",
    "rsyslog",
    "phone_home",
    "ca_certs",
    "ca-certs",
    "byobu_by_default",
    "merge_how",
    "merge_type",
    "system_info",
    "datasource",
    "datasource_list",
    "cloud_init_modules",
    "cloud_config_modules",
    "cloud_final_modules",
    "vendor_data",
    "output",
    "random_seed",
    "user",
    "create_hostname_file",
    "ansible",
    "puppet",
    "chef",
    "salt_minion",
    "lxd",
    "landscape",
    "wireguard",
    "seed_random",
    "write_metadata",
    "set_passwords",
    "runcmd_timeout",
};

static void top_key(struct ci_parse *ps, const struct ynode *k,
		    const struct ynode *v, const struct ynode **seen)
{
	if (k->type != Y_SCALAR) {
		ERR(ps, k, "cloud-config keys must be strings");
		return;
	}
	for (size_t i = 0; i < ARRAY_SIZE(handlers); i++) {
		if (strcmp(k->value, handlers[i].key))
			continue;
		if (seen[i])
			WARN(ps, k,
			     "duplicate key '%s' (also on line %d); "
			     "the last one wins",
			     k->value, seen[i]->line);
		seen[i] = k;
		handlers[i].fn(ps, v);
		return;
	}
	for (size_t i = 0; i < ARRAY_SIZE(unsupported); i++)
		if (!strcmp(k->value, unsupported[i])) {
			WARN(ps, k,
			     "'%s' is not supported by cell-cloudinit; "
			     "ignored",
			     k->value);
			return;
		}
	WARN(ps, k, "unknown key '%.64s'; ignored", k->value);
}

void ci_cloud_config_parse(struct ci_parse *ps, const char *text, size_t len)
{
	const struct ynode *seen[ARRAY_SIZE(handlers)] = {0};
	struct ytree t;
	struct cerr e = {0};
	int line;

	if (ytree_parse(text, len, &t, &line, &e) < 0) {
		ci_problem_add(&ps->cfg->problems, CI_ERROR, ps->part, line,
			       "%s; this cloud-config is ignored", e.msg);
		ps->cfg->bad_yaml++;
		return;
	}
	if (t.root && !ynode_is_null(t.root) && t.root->type != Y_MAP &&
	    ++ps->cfg->bad_yaml)
		ERR(ps, t.root,
		    "cloud-config must be a mapping, not %s; "
		    "ignored",
		    ci_cc_type_name(t.root));
	else if (t.root && t.root->type == Y_MAP)
		for (size_t i = 0; i + 1 < t.root->n; i += 2)
			top_key(ps, t.root->kids[i], t.root->kids[i + 1], seen);
	ytree_free(&t);
}
