// SPDX-License-Identifier: Apache-2.0
/* The modules, in canonical cloud-init's order, and the table that says
 * how often each runs. A failing module is logged and the others still
 * run; the report counts the failures for the exit code.
 *
 *   boothooks, bootcmd                      every boot
 *   write_files, milpa_files, hostname,     once per instance; the marker
 *   users_groups, ssh_authorized_keys,      is set after success, so a
 *   write_files_deferred                    failure is retried next boot
 *   scripts_user (scripts and runcmd)       at most once per instance: the
 *                                           marker is set before running,
 *                                           as cloud-init's semaphores
 *   final_message                           every boot (cloud-init's too) */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ci-internal.h"
#include "cleanup.h"
#include "fsutil.h"
#include "log.h"
#include "path.h"
#include "util.h"

/* ---- hostname ---- */

static char *first_label(const char *s)
{
	return xstrndup(s, strcspn(s, "."));
}

int ci_hostname_pick(const struct ci_config *cfg, const struct ci_meta *m,
		     char **shortname, char **fqdn)
{
	const char *h = cfg->hostname;

	*shortname = *fqdn = NULL;
	if (cfg->fqdn) {
		*fqdn = xstrdup(cfg->fqdn);
		*shortname = h ? first_label(h) : first_label(cfg->fqdn);
		return 0;
	}
	/* cloud-init falls back to the meta-data's local hostname. */
	if (!h && m && m->hostname && ci_hostname_ok(m->hostname))
		h = m->hostname;
	if (!h)
		return -1;
	*shortname = first_label(h);
	*fqdn = strchr(h, '.') ? xstrdup(h) : NULL;
	return 0;
}

/* /etc/hosts with Debian's "127.0.1.1 fqdn short" line put in place of
 * the old one (or after 127.0.0.1); other lines stay as they were. */
char *ci_hosts_update(const char *old, size_t len, const char *fqdn,
		      const char *shortname)
{
	cleanup_free char *entry =
	    fqdn && strcmp(fqdn, shortname)
		? xasprintf("127.0.1.1\t%s %s\n", fqdn, shortname)
		: xasprintf("127.0.1.1\t%s\n", shortname);
	struct buf b;
	bool placed = false;
	const char *p = old, *end = old + len;

	if (!len)
		return xasprintf("127.0.0.1\tlocalhost\n%s"
				 "::1\tlocalhost ip6-localhost ip6-loopback\n",
				 entry);
	buf_init(&b, 0);
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t n = nl ? (size_t)(nl - p) + 1 : (size_t)(end - p);
		bool ours = str_has_prefix(p, "127.0.1.1") &&
			    (p[9] == ' ' || p[9] == '\t');

		if (!ours)
			buf_append(&b, p, n, NULL);
		if (!nl && !ours)
			buf_append(&b, "\n", 1, NULL);
		if (!placed && (ours || str_has_prefix(p, "127.0.0.1"))) {
			buf_append(&b, entry, strlen(entry), NULL);
			placed = true;
		}
		p += n;
	}
	if (!placed)
		buf_append(&b, entry, strlen(entry), NULL);
	return buf_steal(&b, NULL);
}

/* One /etc/hosts line as cloud-init's HostsConf holds it. */
struct hline {
	char **f;   /* fields; NULL for a blank or comment-only line */
	char *tail; /* the comment after the fields, or the whole line */
};

static void hline_parse(struct hline *h, const char *line, size_t n)
{
	cleanup_free char *s = xstrndup(line, n);
	char *t = s + strspn(s, " \t\r\v\f"), *hash, *end;
	size_t k = 0;

	end = t + strlen(t);
	while (end > t && strchr(" \t\r\v\f", end[-1]))
		*--end = '\0';
	hash = strchr(t, '#');
	memset(h, 0, sizeof(*h));
	if (!*t || hash == t) {
		h->tail = xstrndup(line, n);
		return;
	}
	h->tail = xstrdup(hash ? hash : "");
	if (hash)
		*hash = '\0';
	h->f = xcalloc(strlen(t) / 2 + 2, sizeof(char *));
	for (char *p = t; *p;) {
		size_t w;
		p += strspn(p, " \t\r\v\f");
		w = strcspn(p, " \t\r\v\f");
		if (w)
			h->f[k++] = xstrndup(p, w);
		p += w;
	}
	if (!k) { /* only spaces before the comment */
		free(h->f);
		h->f = NULL;
		free(h->tail);
		h->tail = xstrndup(line, n);
	}
}

static bool hline_is(const struct hline *h, const char *ip)
{
	return h->f && h->f[0] && !strcmp(h->f[0], ip);
}

/* cloud-init's update_etc_hosts (manage_etc_hosts: localhost): unless a
 * "127.0.1.1 FQDN … HOSTNAME …" entry is there, every 127.0.1.1 line is
 * removed and they come back at the end, followed by "127.0.1.1 FQDN
 * HOSTNAME"; the file is rewritten as HostsConf prints it (fields joined by
 * tabs). NULL when nothing changes. */
char *ci_hosts_canonical(const char *old, size_t len, bool existed,
			 const char *fqdn, const char *shortname)
{
	struct hline *v = NULL, *mine = NULL;
	size_t n = 0, cap = 0, nm = 0, mcap = 0;
	bool need = true;
	struct buf b;

	for (const char *p = old, *end = old + len; p < end;) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t ln = nl ? (size_t)(nl - p) : (size_t)(end - p);
		struct hline h;
		hline_parse(&h, p, ln);
		if (hline_is(&h, "127.0.1.1")) {
			bool alias = false;
			for (char **a = h.f + 1; *a && a[1]; a++)
				alias |= !strcmp(a[1], shortname);
			if (h.f[1] && !strcmp(h.f[1], fqdn) && alias)
				need = false;
			h.tail = (free(h.tail), xstrdup(""));
			*VEC_PUSH(mine, nm, mcap) = h;
		} else {
			*VEC_PUSH(v, n, cap) = h;
		}
		p += ln + (nl ? 1 : 0);
	}
	buf_init(&b, 0);
	if (need) {
		struct hline *add = VEC_PUSH(mine, nm, mcap);
		add->f = xcalloc(4, sizeof(char *));
		add->f[0] = xstrdup("127.0.1.1");
		add->f[1] = xstrdup(fqdn);
		add->f[2] = xstrdup(shortname);
		add->tail = xstrdup("");
		if (!existed) {
			cleanup_free char *h = ci_header("Added");
			buf_append(&b, h, strlen(h), NULL);
			buf_append(&b, "\n", 1, NULL);
		}
	}
	for (size_t i = 0; i < n + nm; i++) {
		struct hline *h = i < n ? &v[i] : &mine[i - n];
		for (char **f = h->f; f && *f; f++) {
			if (f != h->f)
				buf_append(&b, "\t", 1, NULL);
			buf_append(&b, *f, strlen(*f), NULL);
		}
		buf_append(&b, h->tail, strlen(h->tail), NULL);
		buf_append(&b, "\n", 1, NULL);
		strv_free(h->f);
		free(h->tail);
	}
	buf_append(&b, "\n", 1, NULL); /* "%s\n" % hosts */
	free(v);
	free(mine);
	if (!need) {
		buf_free(&b);
		return NULL;
	}
	return buf_steal(&b, NULL);
}

static int hostname_files(const struct ci_ctx *c, const char *name,
			  const char *fqdn, const char *shortname,
			  bool touch_hosts, struct cerr *e)
{
	struct buf hosts;
	cleanup_free char *line = xasprintf("%s\n", name);
	cleanup_free char *text = NULL;

	if (ci_write_file(c->rootfd, "etc/hostname", line, strlen(line), 0644,
			  NULL, e) < 0)
		return -1;
	if (!touch_hosts)
		return 0;
	buf_init(&hosts, 1u << 20);
	if (ci_read_file(c->rootfd, "etc/hosts", &hosts, e) < 0) {
		if (e->code != ENOENT) {
			buf_free(&hosts);
			return -1;
		}
		cerr_clear(e);
	}
	if (c->cfg->manage_etc_hosts == 2)
		text = ci_hosts_canonical(hosts.data ? hosts.data : "",
					  hosts.len, hosts.data != NULL,
					  fqdn ? fqdn : shortname, shortname);
	else
		text = ci_hosts_update(hosts.data ? hosts.data : "", hosts.len,
				       fqdn, shortname);
	buf_free(&hosts);
	if (!text)
		return 0;
	return ci_write_file(c->rootfd, "etc/hosts", text, strlen(text), 0644,
			     NULL, e);
}

static int mod_hostname(const struct ci_ctx *c)
{
	cleanup_free char *shortname = NULL, *fqdn = NULL;
	const char *name;
	struct cerr e = {0};

	if (ci_hostname_pick(c->cfg, c->meta, &shortname, &fqdn) < 0)
		return 0;
	name = c->cfg->prefer_fqdn && fqdn ? fqdn : shortname;
	if (strlen(name) > 64) {
		ci_log(LOG_ERROR, "hostname: '%s' is over 64 characters", name);
		return -1;
	}
	if (hostname_files(c, name, fqdn, shortname,
			   !c->o->canonical_hosts || c->cfg->manage_etc_hosts,
			   &e) < 0) {
		ci_log(LOG_ERROR, "hostname: %s", e.msg);
		return -1;
	}
	/* Only a real boot (or a test in its own UTS namespace that says
	 * so) may change the running system's name. */
	if ((c->host_root || c->o->set_hostname) &&
	    sethostname(name, strlen(name)) < 0) {
		ci_log(LOG_ERROR, "hostname: sethostname %s: %s", name,
		       strerror(errno));
		return -1;
	}
	ci_log(LOG_INFO, "hostname: %s (fqdn %s)", name, fqdn ? fqdn : "-");
	return 0;
}

static bool want_hostname(const struct ci_ctx *c)
{
	return !c->cfg->preserve_hostname &&
	       (c->cfg->hostname || c->cfg->fqdn ||
		(c->meta && c->meta->hostname));
}

/* ---- commands and scripts ---- */

char *ci_shellify(const struct ci_cmd *v, size_t n)
{
	struct buf b;

	buf_init(&b, 0);
	buf_append(&b, "#!/bin/sh\n", 10, NULL);
	for (size_t i = 0; i < n; i++) {
		if (v[i].shell) {
			buf_append(&b, v[i].shell, strlen(v[i].shell), NULL);
			buf_append(&b, "\n", 1, NULL);
			continue;
		}
		/* Each argument in single quotes, a quote as '\'' */
		for (char *const *a = v[i].argv; a && *a; a++) {
			if (a != v[i].argv)
				buf_append(&b, " ", 1, NULL);
			buf_append(&b, "'", 1, NULL);
			for (const char *p = *a; *p; p++) {
				if (*p == '\'')
					buf_append(&b, "'\\''", 4, NULL);
				else
					buf_append(&b, p, 1, NULL);
			}
			buf_append(&b, "'", 1, NULL);
		}
		buf_append(&b, "\n", 1, NULL);
	}
	return buf_steal(&b, NULL);
}

/* Save a script under the state dir (a record, as cloud-init keeps) and
 * run it from there; chrooted commands need it inside the root, so it is
 * copied to ROOT/run/cell-cloudinit/ for the run. With via_sh it runs as
 * `/bin/sh FILE`, else as the file itself (a body without #! still gets a
 * shell: the kernel cannot run it). */
static int run_script(const struct ci_ctx *c, const char *kind,
		      const struct ci_script *s, bool via_sh, struct cerr *e)
{
	cleanup_free char *rel = xasprintf("%s/%s", kind, s->name);
	cleanup_free char *tmp = xasprintf("run/cell-cloudinit/%s", rel);
	cleanup_free char *path = NULL;
	bool chrooted = c->o->chroot_commands && !c->host_root;
	char *argv[3] = {NULL, NULL, NULL};
	int status, r;

	if (ci_write_file(c->st->instfd, rel, s->body, s->len, 0700, NULL, e) <
	    0)
		return -1;
	if (chrooted &&
	    ci_write_file(c->rootfd, tmp, s->body, s->len, 0700, NULL, e) < 0)
		return -1;
	path = chrooted ? xasprintf("/%s", tmp)
			: xasprintf("%s/instances/%s/%s", c->state_dir,
				    c->st->iid_dir, rel);
	via_sh |= !str_has_prefix(s->body, "#!");
	argv[0] = via_sh ? (char *)"/bin/sh" : path;
	argv[1] = via_sh ? path : NULL;
	r = ci_exec(c, rel, NULL, argv, &status, e);
	if (r == 0)
		r = ci_exec_status(rel, status, e);
	if (chrooted) {
		struct cerr ignored;
		const char *base;
		int dfd =
		    path_open_parent(c->rootfd, tmp, false, &base, &ignored);
		if (dfd >= 0) {
			unlinkat(dfd, base, 0);
			close(dfd);
		}
	}
	return r;
}

/* bootcmd as cloud-init runs it: all items in one script (shellify),
 * `/bin/sh FILE`, its exit status the module's. */
static int mod_bootcmd(const struct ci_ctx *c)
{
	cleanup_free char *body =
	    ci_shellify(c->cfg->bootcmd, c->cfg->n_bootcmd);
	struct ci_script s = {(char *)"bootcmd", body, strlen(body)};
	struct cerr e = {0};

	if (run_script(c, "bootcmd", &s, true, &e) < 0) {
		ci_log(LOG_ERROR, "%s", e.msg);
		return -1;
	}
	return 0;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(((const struct ci_script *)a)->name,
		      ((const struct ci_script *)b)->name);
}

/* cloud-init's scripts-user: the user-data scripts and the runcmd script
 * share one directory and run in name order (part-001 < runcmd <
 * setup.sh); runcmd, written later, replaces a part of that name. */
static int mod_scripts_user(const struct ci_ctx *c)
{
	size_t n = 0;
	struct ci_script *v =
	    xcalloc(c->cfg->n_scripts + 1, sizeof(struct ci_script));
	cleanup_free char *runcmd = NULL;
	int failed = 0;

	if (c->cfg->has_runcmd)
		runcmd = ci_shellify(c->cfg->runcmd, c->cfg->n_runcmd);
	for (size_t i = 0; i < c->cfg->n_scripts; i++)
		if (!runcmd || strcmp(c->cfg->scripts[i].name, "runcmd"))
			v[n++] = c->cfg->scripts[i];
	if (runcmd)
		v[n++] = (struct ci_script){(char *)"runcmd", runcmd,
					    strlen(runcmd)};
	qsort(v, n, sizeof(*v), by_name);
	for (size_t i = 0; i < n; i++) {
		struct cerr e = {0};
		if (run_script(c, "scripts", &v[i], false, &e) < 0) {
			ci_log(LOG_ERROR, "%s", e.msg);
			failed++;
		}
	}
	free(v);
	return failed ? -1 : 0;
}

static int run_scripts(const struct ci_ctx *c, const char *kind,
		       const struct ci_script *v, size_t n)
{
	int failed = 0;

	for (size_t i = 0; i < n; i++) {
		struct cerr e = {0};
		if (run_script(c, kind, &v[i], false, &e) < 0) {
			ci_log(LOG_ERROR, "%s", e.msg);
			failed++;
		}
	}
	return failed ? -1 : 0;
}

static int mod_boothooks(const struct ci_ctx *c)
{
	return run_scripts(c, "boothooks", c->cfg->boothooks,
			   c->cfg->n_boothooks);
}

/* ---- files and keys ---- */

static int mod_write_files(const struct ci_ctx *c)
{
	return ci_write_files(c, c->cfg->files, c->cfg->n_files, false,
			      "write_files");
}

static int mod_milpa_files(const struct ci_ctx *c)
{
	return ci_write_files(c, c->cfg->milpa, c->cfg->n_milpa, false,
			      "milpa_files");
}

static int mod_deferred(const struct ci_ctx *c)
{
	int a = ci_write_files(c, c->cfg->files, c->cfg->n_files, true,
			       "write_files (deferred)");
	int b = ci_write_files(c, c->cfg->milpa, c->cfg->n_milpa, true,
			       "milpa_files (deferred)");
	return a < 0 || b < 0 ? -1 : 0;
}

static bool any_file(const struct ci_file *v, size_t n, bool deferred)
{
	for (size_t i = 0; i < n; i++)
		if (v[i].defer == deferred)
			return true;
	return false;
}

static bool want_deferred(const struct ci_ctx *c)
{
	return any_file(c->cfg->files, c->cfg->n_files, true) ||
	       any_file(c->cfg->milpa, c->cfg->n_milpa, true);
}

/* Top-level keys and the meta-data's public keys go to the default user
 * (root unless --default-user), as cloud-init gives them to its own. */
static int mod_ssh_keys(const struct ci_ctx *c)
{
	char **all = NULL;
	size_t n = 0, cap = 0;
	struct cerr e = {0};
	int r;

	for (char **k = c->cfg->ssh_keys; k && *k; k++)
		*VEC_PUSH(all, n, cap) = *k;
	for (char **k = c->meta ? c->meta->keys : NULL; k && *k; k++)
		*VEC_PUSH(all, n, cap) = *k;
	*VEC_PUSH(all, n, cap) = NULL;
	r = ci_authorize_keys(c->rootfd, c->o->default_user, all, &e);
	if (r < 0)
		ci_log(LOG_ERROR, "ssh_authorized_keys: %s", e.msg);
	/* cloud-init's ssh module gives them to the distribution's default
	 * user too, when users: lists it. */
	if (r == 0 && c->cfg->default_user) {
		cleanup_free char *du = ci_default_user_name(c->rootfd);
		if (du && strcmp(du, c->o->default_user) &&
		    (r = ci_authorize_keys(c->rootfd, du, all, &e)) < 0)
			ci_log(LOG_ERROR, "ssh_authorized_keys: %s", e.msg);
	}
	free(all);
	return r;
}

/* Every instance, keys or not: cloud-init's ssh module always leaves the
 * default user an authorized_keys file, empty when there are none. */
static bool want_ssh_keys(const struct ci_ctx *c)
{
	return true;
}

/* ---- final_message ---- */

struct var {
	const char *name;
	const char *value;
};

/* Expand "$NAME" or "${NAME}" at p (cloud-init's basic templater); the
 * number of characters used, 0 when p holds no known variable. */
static size_t expand(struct buf *b, const char *p, const struct var *v,
		     size_t n)
{
	bool brace = p[1] == '{';
	const char *name = p + 1 + brace;

	for (size_t k = 0; k < n; k++) {
		size_t nl = strlen(v[k].name);
		char next;

		if (strncmp(name, v[k].name, nl))
			continue;
		next = name[nl]; /* safe: name has at least nl characters */
		if (brace ? next != '}'
			  : (isalnum((unsigned char)next) || next == '_'))
			continue;
		buf_append(b, v[k].value, strlen(v[k].value), NULL);
		return 1 + nl + 2 * brace;
	}
	return 0;
}

char *ci_final_message(const char *tmpl, const char *iid, const char *ds,
		       double uptime, time_t now)
{
	char stamp[64], up[32];
	struct tm tm;
	const struct var vars[] = {{"UPTIME", up},
				   {"TIMESTAMP", stamp},
				   {"INSTANCE_ID", iid},
				   {"DATASOURCE", ds},
				   {"VERSION", CELL_VERSION}};
	struct buf b;

	gmtime_r(&now, &tm);
	strftime(stamp, sizeof(stamp), "%a, %d %b %Y %H:%M:%S +0000", &tm);
	snprintf(up, sizeof(up), "%.2f", uptime);
	buf_init(&b, 0);
	for (const char *p = tmpl; *p;) {
		size_t used =
		    *p == '$' ? expand(&b, p, vars, ARRAY_SIZE(vars)) : 0;
		if (used) {
			p += used;
			continue;
		}
		buf_append(&b, p++, 1, NULL);
	}
	return buf_steal(&b, NULL);
}

static double uptime_s(void)
{
	struct buf b;
	double up = 0;

	buf_init(&b, 256);
	if (fs_read_file("/proc/uptime", &b, NULL) == 0)
		up = strtod(b.data, NULL);
	buf_free(&b);
	return up;
}

static int mod_final_message(const struct ci_ctx *c)
{
	const char *tmpl = c->cfg->final_message
			       ? c->cfg->final_message
			       : "cell-cloudinit $VERSION finished at "
				 "$TIMESTAMP. Datasource $DATASOURCE. Up "
				 "$UPTIME seconds";
	char *msg = ci_final_message(tmpl, c->st ? c->st->iid : "",
				     c->datasource ? c->datasource : "none",
				     uptime_s(), time(NULL));

	ci_log(LOG_INFO, "%s", msg);
	free(msg);
	return 0;
}

/* ---- the table ---- */

enum freq { ALWAYS, ONCE_AFTER, ONCE_BEFORE };

static bool want_boothooks(const struct ci_ctx *c)
{
	return c->cfg->n_boothooks > 0;
}
static bool want_bootcmd(const struct ci_ctx *c)
{
	return c->cfg->has_bootcmd;
}
static bool want_files(const struct ci_ctx *c)
{
	return any_file(c->cfg->files, c->cfg->n_files, false);
}
static bool want_milpa(const struct ci_ctx *c)
{
	return any_file(c->cfg->milpa, c->cfg->n_milpa, false);
}
static bool want_users(const struct ci_ctx *c)
{
	return c->cfg->n_users || c->cfg->n_groups || c->cfg->default_user;
}
static bool want_scripts(const struct ci_ctx *c)
{
	return c->cfg->n_scripts > 0 || c->cfg->has_runcmd;
}
static bool want_always(const struct ci_ctx *c)
{
	return true;
}

static const struct module {
	const char *name;
	enum freq freq;
	bool (*want)(const struct ci_ctx *c);
	int (*run)(const struct ci_ctx *c);
} modules[] = {
    {"boothooks", ALWAYS, want_boothooks, mod_boothooks},
    {"bootcmd", ALWAYS, want_bootcmd, mod_bootcmd},
    {"write_files", ONCE_AFTER, want_files, mod_write_files},
    {"milpa_files", ONCE_AFTER, want_milpa, mod_milpa_files},
    {"hostname", ONCE_AFTER, want_hostname, mod_hostname},
    {"users_groups", ONCE_AFTER, want_users, ci_users_groups},
    {"ssh_authorized_keys", ONCE_AFTER, want_ssh_keys, mod_ssh_keys},
    {"write_files_deferred", ONCE_AFTER, want_deferred, mod_deferred},
    {"scripts_user", ONCE_BEFORE, want_scripts, mod_scripts_user},
    {"final_message", ALWAYS, want_always, mod_final_message},
};

static int run_module(struct ci_ctx *c, const struct module *m)
{
	struct cerr e = {0};
	int r;

	if (m->freq != ALWAYS && ci_state_done(c->st, m->name)) {
		ci_log(LOG_DEBUG, "%s: already done for instance %s", m->name,
		       c->st->iid);
		return 1;
	}
	/* At-most-once modules are marked before they start. */
	if (m->freq == ONCE_BEFORE && ci_state_mark(c->st, m->name, &e) < 0) {
		ci_log(LOG_ERROR, "%s: %s; not run", m->name, e.msg);
		return -1;
	}
	r = m->run(c);
	if (r == 0 && m->freq == ONCE_AFTER &&
	    ci_state_mark(c->st, m->name, &e) < 0) {
		ci_log(LOG_ERROR, "%s: %s", m->name, e.msg);
		r = -1;
	}
	if (r < 0)
		ci_log(LOG_ERROR, "module %s failed", m->name);
	return r;
}

int ci_apply(struct ci_ctx *c, struct ci_report *rep)
{
	memset(rep, 0, sizeof(*rep));
	for (size_t i = 0; i < ARRAY_SIZE(modules); i++) {
		int r;

		if (!modules[i].want(c))
			continue;
		r = run_module(c, &modules[i]);
		if (r > 0)
			rep->skipped++;
		else if (r < 0)
			rep->failed++, rep->ran++;
		else
			rep->ran++;
	}
	return rep->failed ? -1 : 0;
}
