// SPDX-License-Identifier: Apache-2.0
/* The `users` and `groups` keys of a #cloud-config, in every shape that
 * cloud-init accepts: a list of names and mappings, a comma-separated
 * string, or a mapping of name to settings. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ci-internal.h"
#include "path.h"
#include "util.h"

static const char *const user_keys[] = {
    "name",	     "gecos",
    "homedir",	     "shell",
    "primary_group", "groups",
    "system",	     "no_create_home",
    "lock_passwd",   "lock-passwd",
    "passwd",	     "hashed_passwd",
    "sudo",	     "ssh_authorized_keys",
    "uid",	     NULL,
};

static const char *const user_unsupported[] = {
    "plain_text_passwd", "expiredate",	      "inactive",      "selinux_user",
    "ssh_import_id",	 "ssh_redirect_user", "no_user_group", "no_log_init",
    "create_groups",	 "snapuser",	      "doas",	       NULL,
};

static bool in(const char *s, const char *const *list)
{
	for (; *list; list++)
		if (!strcmp(s, *list))
			return true;
	return false;
}

static int field(struct ci_parse *ps, const struct ynode *m, const char *key,
		 char **out)
{
	const struct ynode *n = ynode_get(m, key);

	if (!n)
		return 0;
	if (ci_cc_str(ps, n, key, out) < 0)
		return -1;
	if (*out && !ci_field_ok(*out))
		return ERR(ps, n, "%s must not contain ':' or a line break",
			   key);
	return 0;
}

static int abs_path(struct ci_parse *ps, const struct ynode *m, const char *key,
		    char **out)
{
	char rel[PATH_MAX_INPUT];
	struct cerr e = {0};

	if (field(ps, m, key, out) < 0)
		return -1;
	if (*out &&
	    (**out != '/' || path_clean(*out, rel, sizeof(rel), &e) < 0))
		return ERR(ps, ynode_get(m, key),
			   "%s '%.100s' must be an "
			   "absolute path without '..'",
			   key, *out);
	return 0;
}

static int names(struct ci_parse *ps, const struct ynode *n, const char *what,
		 char ***out)
{
	if (!n)
		return 0;
	if (ci_cc_list(ps, n, what, true, out) < 0)
		return -1;
	for (char **g = *out; g && *g; g++)
		if (!ci_name_ok(*g))
			return ERR(ps, n, "%s: '%.40s' is not a valid name",
				   what, *g);
	return 0;
}

static int sudo_rules(struct ci_parse *ps, const struct ynode *n,
		      struct ci_user *u)
{
	bool b;

	if (!n || ynode_is_null(n))
		return 0;
	if (n->type == Y_SCALAR && n->plain && ynode_bool(n, &b) == 0) {
		if (!b)
			return 0; /* sudo: false means no rule */
		return ERR(ps, n,
			   "sudo: true is not a rule; write e.g. "
			   "\"ALL=(ALL) NOPASSWD:ALL\"");
	}
	if (ci_cc_list(ps, n, "sudo", false, &u->sudo) < 0)
		return -1;
	for (char **r = u->sudo; r && *r; r++)
		if (strpbrk(*r, "\n\r"))
			return ERR(ps, n, "sudo: a rule must be one line");
	return 0;
}

static int uid_key(struct ci_parse *ps, const struct ynode *n, long long *out)
{
	long long v;
	int64_t w;

	*out = -1;
	if (!n || ynode_is_null(n))
		return 0;
	if (n->type == Y_SCALAR && ynode_int(n, &v) == 0 && v >= 0 &&
	    v < 0x7fffffff) {
		*out = v;
		return 0;
	}
	if (n->type == Y_SCALAR &&
	    parse_int64(n->value, 0, 0x7ffffffe, &w, NULL) == 0) {
		*out = w;
		return 0;
	}
	return ERR(ps, n, "uid must be a number from 0 to 2147483646");
}

static int bools(struct ci_parse *ps, const struct ynode *m, struct ci_user *u)
{
	u->lock_passwd = true; /* cloud-init locks passwords by default */
	if (ci_cc_opt_bool(ps, m, "lock-passwd", &u->lock_passwd) < 0 ||
	    ci_cc_opt_bool(ps, m, "lock_passwd", &u->lock_passwd) < 0 ||
	    ci_cc_opt_bool(ps, m, "system", &u->system) < 0 ||
	    ci_cc_opt_bool(ps, m, "no_create_home", &u->no_create_home) < 0)
		return -1;
	return 0;
}

static void warn_keys(struct ci_parse *ps, const struct ynode *m)
{
	for (size_t i = 0; i + 1 < m->n; i += 2) {
		const struct ynode *k = m->kids[i];
		const char *s = k->type == Y_SCALAR ? k->value : "?";
		if (in(s, user_keys))
			continue;
		if (in(s, user_unsupported))
			WARN(ps, k, "users: '%s' is not supported; ignored", s);
		else
			WARN(ps, k, "users: unknown key '%.64s'; ignored", s);
	}
}

static int user_map(struct ci_parse *ps, const struct ynode *m,
		    struct ci_user *u)
{
	const struct ynode *pw = ynode_get(m, "hashed_passwd");

	warn_keys(ps, m);
	if (!u->name && field(ps, m, "name", &u->name) < 0)
		return -1;
	if (!u->name)
		return ERR(ps, m, "users entry without a name");
	if (field(ps, m, "gecos", &u->gecos) < 0 ||
	    abs_path(ps, m, "homedir", &u->homedir) < 0 ||
	    abs_path(ps, m, "shell", &u->shell) < 0 ||
	    field(ps, m, "primary_group", &u->primary_group) < 0 ||
	    field(ps, m, pw ? "hashed_passwd" : "passwd", &u->passwd) < 0 ||
	    !(u->passwd_hashed = pw != NULL, 1) ||
	    names(ps, ynode_get(m, "groups"), "groups", &u->groups) < 0 ||
	    sudo_rules(ps, ynode_get(m, "sudo"), u) < 0 ||
	    uid_key(ps, ynode_get(m, "uid"), &u->uid) < 0 ||
	    bools(ps, m, u) < 0)
		return -1;
	if (ynode_get(m, "ssh_authorized_keys") &&
	    ci_cc_keys(ps, ynode_get(m, "ssh_authorized_keys"),
		       "ssh_authorized_keys", &u->keys) < 0)
		return -1;
	if (u->primary_group && !ci_name_ok(u->primary_group))
		return ERR(ps, m, "primary_group '%.40s' is not a valid name",
			   u->primary_group);
	return 0;
}

/* One user from a name (with settings in m, or none). */
static void user_add(struct ci_parse *ps, const struct ynode *at,
		     const char *name, const struct ynode *m)
{
	struct ci_config *c = ps->cfg;
	struct ci_user u = {.line = at->line, .uid = -1, .lock_passwd = true};

	if (name && !strcmp(name, "default")) {
		/* Made from the image's cloud.cfg when the module runs. */
		c->default_user = true;
		return;
	}
	if (name)
		u.name = xstrdup(name);
	if (m && m->type != Y_MAP) {
		bool yes = true;
		if (!ynode_is_null(m) && ynode_bool(m, &yes) < 0) {
			ERR(ps, m, "users: settings of '%s' must be a mapping",
			    name);
			ci_user_free(&u);
			return;
		}
		if (!yes) {
			ci_user_free(&u);
			return;
		}
		m = NULL;
	}
	if ((m && user_map(ps, m, &u) < 0) || !ci_name_ok(u.name)) {
		if (u.name && !ci_name_ok(u.name))
			ERR(ps, at, "users: '%.40s' is not a valid user name",
			    u.name);
		ci_user_free(&u);
		return;
	}
	*VEC_PUSH(c->users, c->n_users, c->cap_users) = u;
}

static int by_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void users_clear(struct ci_config *c)
{
	for (size_t i = 0; i < c->n_users; i++)
		ci_user_free(&c->users[i]);
	c->n_users = 0;
}

void ci_cc_users(struct ci_parse *ps, const struct ynode *n)
{
	char **v = NULL;

	users_clear(ps->cfg);
	ps->cfg->default_user = false;
	if (ynode_is_null(n))
		return;
	if (n->type == Y_SCALAR) {
		if (ci_cc_list(ps, n, "users", true, &v) < 0)
			return;
		for (char **s = v; *s; s++)
			user_add(ps, n, *s, NULL);
		strv_free(v);
	} else if (n->type == Y_MAP) {
		for (size_t i = 0; i + 1 < n->n; i += 2)
			if (n->kids[i]->type == Y_SCALAR)
				user_add(ps, n->kids[i], n->kids[i]->value,
					 n->kids[i + 1]);
	} else {
		for (size_t i = 0; i < n->n; i++) {
			const struct ynode *it = n->kids[i];
			if (ynode_is_null(it))
				continue;
			if (it->type == Y_SCALAR)
				user_add(ps, it, it->value, NULL);
			else if (it->type == Y_MAP)
				user_add(ps, it, NULL, it);
			else
				ERR(ps, it,
				    "users entries must be names or "
				    "mappings");
		}
	}
}

static void group_add(struct ci_parse *ps, const struct ynode *at,
		      const char *name, const struct ynode *members)
{
	struct ci_config *c = ps->cfg;
	struct ci_group g = {.line = at->line};

	if (!ci_name_ok(name)) {
		ERR(ps, at, "groups: '%.40s' is not a valid group name", name);
		return;
	}
	if (members && names(ps, members, "group members", &g.members) < 0) {
		strv_free(g.members);
		return;
	}
	g.name = xstrdup(name);
	*VEC_PUSH(c->groups, c->n_groups, c->cap_groups) = g;
}

static void group_map(struct ci_parse *ps, const struct ynode *m)
{
	for (size_t i = 0; i + 1 < m->n; i += 2) {
		if (m->kids[i]->type != Y_SCALAR) {
			ERR(ps, m->kids[i], "groups: names must be strings");
			continue;
		}
		group_add(ps, m->kids[i], m->kids[i]->value, m->kids[i + 1]);
	}
}

void ci_cc_groups(struct ci_parse *ps, const struct ynode *n)
{
	struct ci_config *c = ps->cfg;
	char **v = NULL;

	for (size_t i = 0; i < c->n_groups; i++) {
		free(c->groups[i].name);
		strv_free(c->groups[i].members);
	}
	c->n_groups = 0;
	if (ynode_is_null(n))
		return;
	if (n->type == Y_SCALAR) {
		if (ci_cc_list(ps, n, "groups", true, &v) < 0)
			return;
		for (char **s = v; *s; s++)
			group_add(ps, n, *s, NULL);
		strv_free(v);
		return;
	}
	if (n->type == Y_MAP) {
		group_map(ps, n);
		return;
	}
	for (size_t i = 0; i < n->n; i++) {
		const struct ynode *it = n->kids[i];
		if (it->type == Y_SCALAR && !ynode_is_null(it))
			group_add(ps, it, it->value, NULL);
		else if (it->type == Y_MAP)
			group_map(ps, it);
		else if (!ynode_is_null(it))
			ERR(ps, it, "groups entries must be names or mappings");
	}
}

/* The distribution's default user: system_info.default_user of a cloud.cfg
 * (a mapping with a name), read as a users entry; its groups are sorted,
 * as cloud-init's uniq_merge_sorted leaves them. */
int ci_cc_default_user(const char *text, size_t len, struct ci_user *out)
{
	struct ci_config cfg = {0};
	struct ci_parse ps = {.cfg = &cfg};
	struct ytree t = {0};
	struct cerr e = {0};
	const struct ynode *si, *du;
	int line, r = -1;

	if (ytree_parse(text, len, &t, &line, &e) < 0)
		return -1;
	si = t.root ? ynode_get(t.root, "system_info") : NULL;
	du = si ? ynode_get(si, "default_user") : NULL;
	if (du && du->type == Y_MAP && ynode_get(du, "name")) {
		user_add(&ps, du, NULL, du);
		if (cfg.n_users == 1) {
			*out = cfg.users[0];
			cfg.n_users = 0;
			if (out->groups)
				qsort(out->groups, strv_len(out->groups),
				      sizeof(char *), by_str);
			r = 0;
		}
	}
	ci_config_free(&cfg);
	ytree_free(&t);
	return r;
}
