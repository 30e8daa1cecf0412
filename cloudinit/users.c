/* The users and groups module, by editing ROOT/etc/passwd, group, shadow
 * and gshadow directly (atomically, under ROOT/etc/.pwd.lock as lckpwdf
 * does) rather than calling useradd: --root may be an image, and the
 * host's useradd would change the host. Semantics follow cloud-init's
 * create_user: an existing user is not re-created, but still gets its
 * password hash, lock, sudo rule and keys; missing groups are created. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ci-internal.h"
#include "cleanup.h"
#include "fsutil.h"
#include "log.h"
#include "path.h"
#include "util.h"

#define SUDOERS_FILE "etc/sudoers.d/90-cloud-init-users"

/* A passwd-style file as lines. */
struct etc {
	const char *rel;
	char **lines;
	size_t n, cap;
	bool exists, dirty;
	mode_t mode;
	uid_t uid;
	gid_t gid;
};

struct db {
	int rootfd;
	struct etc passwd, group, shadow, gshadow;
};

static void etc_free(struct etc *f)
{
	for (size_t i = 0; i < f->n; i++)
		free(f->lines[i]);
	free(f->lines);
	f->lines = NULL;
	f->n = f->cap = 0;
}

static int etc_load(int rootfd, struct etc *f, const char *rel, mode_t mode,
		    struct cerr *e)
{
	struct buf b;
	cleanup_close int fd = -1;
	struct stat st;

	memset(f, 0, sizeof(*f));
	f->rel = rel;
	f->mode = mode;
	fd = path_open_beneath(rootfd, rel, O_RDONLY, 0, e);
	if (fd < 0) {
		if (e->code != ENOENT)
			return -1;
		cerr_clear(e);
		return 0;
	}
	buf_init(&b, CI_MAX_ETC_FILE);
	if (fstat(fd, &st) < 0 || fs_read_fd(fd, &b, e) < 0) {
		buf_free(&b);
		return e->code ? cerr_prefix(e, "%s", rel)
			       : cerr_sys(e, "stat %s", rel);
	}
	f->exists = true;
	f->mode = st.st_mode & 07777;
	f->uid = st.st_uid;
	f->gid = st.st_gid;
	for (char *line = b.data, *end; line && *line; line = end) {
		end = strchr(line, '\n');
		if (end)
			*end++ = '\0';
		*CI_PUSH(f->lines, f->n, f->cap) = xstrdup(line);
	}
	buf_free(&b);
	return 0;
}

static int etc_save(int rootfd, struct etc *f, struct cerr *e)
{
	struct buf b;
	struct ci_ids ids = {f->uid, f->gid};
	int r = 0;

	if (!f->dirty)
		return 0;
	buf_init(&b, 0);
	for (size_t i = 0; i < f->n && r == 0; i++)
		if (buf_append(&b, f->lines[i], strlen(f->lines[i]), e) < 0 ||
		    buf_append(&b, "\n", 1, e) < 0)
			r = -1;
	if (r == 0)
		r = ci_write_file(rootfd, f->rel, b.data ? b.data : "", b.len,
				  f->mode, &ids, e);
	buf_free(&b);
	return r;
}

/* The index of name's line, or -1. */
static long etc_find(const struct etc *f, const char *name)
{
	size_t nl = strlen(name);

	for (size_t i = 0; i < f->n; i++)
		if (!strncmp(f->lines[i], name, nl) && f->lines[i][nl] == ':')
			return (long)i;
	return -1;
}

/* Field k (0-based) of a line, copied into out. */
static const char *field(const char *line, int k, char *out, size_t cap)
{
	const char *end;
	size_t n;

	for (int i = 0; i < k && line; i++)
		line = strchr(line, ':') ? strchr(line, ':') + 1 : NULL;
	if (!line)
		line = "";
	end = strchr(line, ':');
	n = end ? (size_t)(end - line) : strlen(line);
	if (n >= cap)
		n = cap - 1;
	memcpy(out, line, n);
	out[n] = '\0';
	return out;
}

static long num_field(const char *line, int k)
{
	char buf[32];
	int64_t v;

	if (parse_int64(field(line, k, buf, sizeof(buf)), 0, 0x7fffffff, &v,
			NULL) < 0)
		return -1;
	return (long)v;
}

static bool id_used(const struct etc *f, int k, long id)
{
	for (size_t i = 0; i < f->n; i++)
		if (num_field(f->lines[i], k) == id)
			return true;
	return false;
}

/* useradd's ranges: 1000-59999 upwards, system ids 999 down to 100. */
static long alloc_id(const struct etc *f, int k, bool system)
{
	long id;

	if (system) {
		for (id = 999; id >= 100; id--)
			if (!id_used(f, k, id))
				return id;
		return -1;
	}
	id = 1000;
	for (size_t i = 0; i < f->n; i++) {
		long v = num_field(f->lines[i], k);
		if (v >= id && v < 60000)
			id = v + 1;
	}
	return id < 60000 ? id : -1;
}

static void etc_add(struct etc *f, char *line)
{
	*CI_PUSH(f->lines, f->n, f->cap) = line;
	f->dirty = true;
}

static void etc_set(struct etc *f, size_t i, char *line)
{
	free(f->lines[i]);
	f->lines[i] = line;
	f->dirty = true;
}

/* Append member to the last field of a group or gshadow line. */
static void add_member(struct etc *f, const char *group, const char *user)
{
	long i = etc_find(f, group);
	const char *line, *last;
	size_t ul = strlen(user);

	if (i < 0)
		return;
	line = f->lines[i];
	last = strrchr(line, ':') + 1;
	for (const char *p = last; *p;) {
		size_t n = strcspn(p, ",");
		if (n == ul && !strncmp(p, user, ul))
			return;
		p += n + (p[n] == ',');
	}
	etc_set(f, (size_t)i,
		xasprintf("%s%s%s", line, *last ? "," : "", user));
}

/* The group's gid, creating it when missing (want: a gid to use if free,
 * or -1). */
static long ensure_group(struct db *d, const char *name, long want, bool system,
			 struct cerr *e)
{
	long i = etc_find(&d->group, name), gid;

	if (i >= 0)
		return num_field(d->group.lines[i], 2);
	gid = want >= 0 && !id_used(&d->group, 2, want)
		  ? want
		  : alloc_id(&d->group, 2, system);
	if (gid < 0)
		return cerr_set(e, ENOSPC, "no free gid for group %s", name);
	etc_add(&d->group, xasprintf("%s:x:%ld:", name, gid));
	if (d->gshadow.exists)
		etc_add(&d->gshadow, xasprintf("%s:!::", name));
	ci_log(LOG_INFO, "users: created group %s (gid %ld)", name, gid);
	return gid;
}

static void join_group(struct db *d, const char *group, const char *user)
{
	add_member(&d->group, group, user);
	if (d->gshadow.exists)
		add_member(&d->gshadow, group, user);
}

/* The shadow password field for a user. */
static char *shadow_pw(const struct ci_user *u, const char *old)
{
	const char *hash = u->passwd ? u->passwd : old;

	if (hash && hash[0] == '!')
		hash++; /* re-lock below only if asked */
	if (!hash || !*hash || !strcmp(hash, "*"))
		return xstrdup(u->lock_passwd ? "!" : "*");
	return xasprintf("%s%s", u->lock_passwd ? "!" : "", hash);
}

static void set_shadow(struct db *d, const struct ci_user *u)
{
	long i = etc_find(&d->shadow, u->name);
	const char *line, *pwf, *rest;
	char *old, *pw;

	if (i < 0) {
		pw = shadow_pw(u, NULL);
		etc_add(&d->shadow,
			xasprintf("%s:%s:%lld:0:99999:7:::", u->name, pw,
				  (long long)(time(NULL) / 86400)));
		free(pw);
		return;
	}
	/* The password field, however long, between the first two ':'. */
	line = d->shadow.lines[i];
	pwf = line + strlen(u->name) + 1;
	rest = strchr(pwf, ':');
	old = xstrndup(pwf, rest ? (size_t)(rest - pwf) : strlen(pwf));
	pw = shadow_pw(u, old);
	if (strcmp(pw, old))
		etc_set(&d->shadow, (size_t)i,
			xasprintf("%s:%s%s", u->name, pw, rest ? rest : ""));
	free(pw);
	free(old);
}

static int new_user(struct db *d, const struct ci_user *u, struct cerr *e)
{
	long uid = u->uid, gid;
	cleanup_free char *home =
	    u->homedir ? xstrdup(u->homedir) : xasprintf("/home/%s", u->name);

	if (uid >= 0 && id_used(&d->passwd, 2, uid))
		return cerr_set(e, EEXIST, "uid %ld is taken", uid);
	if (uid < 0 && (uid = alloc_id(&d->passwd, 2, u->system)) < 0)
		return cerr_set(e, ENOSPC, "no free uid");
	/* Like useradd with USERGROUPS_ENAB: a group of the user's name. */
	gid = ensure_group(d, u->primary_group ? u->primary_group : u->name,
			   uid, u->system, e);
	if (gid < 0)
		return -1;
	etc_add(&d->passwd, xasprintf("%s:x:%ld:%ld:%s:%s:%s", u->name, uid,
				      gid, u->gecos ? u->gecos : "", home,
				      u->shell ? u->shell : "/bin/sh"));
	ci_log(LOG_INFO, "users: created user %s (uid %ld, gid %ld, home %s)",
	       u->name, uid, gid, home);
	return 0;
}

static int one_user(struct db *d, const struct ci_user *u, bool *created,
		    struct cerr *e)
{
	*created = etc_find(&d->passwd, u->name) < 0;
	if (!*created)
		ci_log(LOG_INFO, "users: %s exists; not re-created", u->name);
	else if (new_user(d, u, e) < 0)
		return -1;
	for (char **g = u->groups; *created && g && *g; g++) {
		if (ensure_group(d, *g, -1, false, e) < 0)
			return -1;
		join_group(d, *g, u->name);
	}
	set_shadow(d, u);
	return 0;
}

/* lckpwdf's lock, beneath the root: fcntl on etc/.pwd.lock, 15 s. */
static int pw_lock(int rootfd, struct cerr *e)
{
	struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
	int fd = path_open_beneath(rootfd, "etc/.pwd.lock",
				   O_WRONLY | O_CREAT | O_NOFOLLOW, 0600, e);

	if (fd < 0)
		return -1;
	for (int i = 0; i < 150; i++) {
		if (fcntl(fd, F_SETLK, &fl) == 0)
			return fd;
		if (errno != EACCES && errno != EAGAIN)
			break;
		usleep(100000);
	}
	cerr_sys(e, "lock etc/.pwd.lock");
	close(fd);
	return -1;
}

static int db_load(struct db *d, struct cerr *e)
{
	if (etc_load(d->rootfd, &d->passwd, "etc/passwd", 0644, e) < 0 ||
	    etc_load(d->rootfd, &d->group, "etc/group", 0644, e) < 0 ||
	    etc_load(d->rootfd, &d->shadow, "etc/shadow", 0640, e) < 0 ||
	    etc_load(d->rootfd, &d->gshadow, "etc/gshadow", 0640, e) < 0)
		return -1;
	if (!d->shadow.exists) {
		/* Debian's: root:shadow 0640, when the group is there. */
		long i = etc_find(&d->group, "shadow");
		d->shadow.gid =
		    i >= 0 ? (gid_t)num_field(d->group.lines[i], 2) : 0;
		d->shadow.mode = i >= 0 ? 0640 : 0600;
	}
	return 0;
}

static int db_save(struct db *d, struct cerr *e)
{
	/* Groups first, so that no passwd line names a missing gid. */
	if (etc_save(d->rootfd, &d->group, e) < 0 ||
	    etc_save(d->rootfd, &d->gshadow, e) < 0 ||
	    etc_save(d->rootfd, &d->passwd, e) < 0 ||
	    etc_save(d->rootfd, &d->shadow, e) < 0)
		return -1;
	return 0;
}

static void db_free(struct db *d)
{
	etc_free(&d->passwd);
	etc_free(&d->group);
	etc_free(&d->shadow);
	etc_free(&d->gshadow);
}

/* uid, gid and home (clean, relative) of a user of the root. */
static int user_info(int rootfd, const char *user, struct ci_ids *ids,
		     char *home, size_t cap, struct cerr *e)
{
	struct etc pw;
	char dir[PATH_MAX_INPUT];
	long i;

	if (etc_load(rootfd, &pw, "etc/passwd", 0644, e) < 0)
		return -1;
	i = etc_find(&pw, user);
	if (i < 0 && strcmp(user, "root")) {
		etc_free(&pw);
		return cerr_set(e, ENOENT, "no user %s in etc/passwd", user);
	}
	ids->uid = i < 0 ? 0 : (uid_t)num_field(pw.lines[i], 2);
	ids->gid = i < 0 ? 0 : (gid_t)num_field(pw.lines[i], 3);
	if (i < 0)
		snprintf(dir, sizeof(dir), "/root");
	else
		field(pw.lines[i], 5, dir, sizeof(dir));
	etc_free(&pw);
	if (path_clean(dir, home, cap, e) < 0 || !home[0])
		return cerr_set(e, EINVAL, "home of %s is '%s'", user, dir);
	return 0;
}

/* mkdir rel beneath root; chown it only when we made it. */
static int make_dir(int rootfd, const char *rel, mode_t mode,
		    const struct ci_ids *ids, struct cerr *e)
{
	const char *base;
	cleanup_close int dfd = path_open_parent(rootfd, rel, true, &base, e);

	if (dfd < 0)
		return -1;
	if (mkdirat(dfd, base, mode) < 0) {
		if (errno == EEXIST)
			return 0;
		return cerr_sys(e, "mkdir /%s", rel);
	}
	if (fchownat(dfd, base, ids->uid, ids->gid, AT_SYMLINK_NOFOLLOW) < 0 ||
	    fchmodat(dfd, base, mode, 0) < 0)
		return cerr_sys(e, "chown /%s", rel);
	return 0;
}

static bool has_line(const struct buf *b, const char *line)
{
	size_t n = strlen(line);

	for (const char *p = b->data; p && *p;) {
		const char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) : strlen(p);
		if (len == n && !memcmp(p, line, n))
			return true;
		p += len + (nl ? 1 : 0);
	}
	return false;
}

/* Append the lines not yet in b; true when anything was added. */
static int merge_lines(struct buf *b, char *const *lines, bool *changed,
		       struct cerr *e)
{
	*changed = false;
	for (char *const *l = lines; l && *l; l++) {
		if (has_line(b, *l))
			continue;
		if ((b->len && b->data[b->len - 1] != '\n' &&
		     buf_append(b, "\n", 1, e) < 0) ||
		    buf_append(b, *l, strlen(*l), e) < 0 ||
		    buf_append(b, "\n", 1, e) < 0)
			return -1;
		*changed = true;
	}
	return 0;
}

int ci_authorize_keys(int rootfd, const char *user, char *const *keys,
		      struct cerr *e)
{
	char home[PATH_MAX_INPUT], rel[PATH_MAX_INPUT + 32];
	struct ci_ids ids;
	struct buf b;
	bool changed;
	int r;

	if (!keys || !*keys)
		return 0;
	if (user_info(rootfd, user, &ids, home, sizeof(home), e) < 0)
		return -1;
	snprintf(rel, sizeof(rel), "%s/.ssh", home);
	if (make_dir(rootfd, rel, 0700, &ids, e) < 0)
		return -1;
	snprintf(rel, sizeof(rel), "%s/.ssh/authorized_keys", home);
	buf_init(&b, 1u << 20);
	r = ci_read_file(rootfd, rel, &b, e);
	if (r < 0 && e->code == ENOENT) {
		cerr_clear(e);
		r = 0;
	}
	if (r == 0)
		r = merge_lines(&b, keys, &changed, e);
	if (r == 0 && changed)
		r = ci_write_file(rootfd, rel, b.data, b.len, 0600, &ids, e);
	if (r == 0)
		ci_log(LOG_INFO, "ssh: %s keys for %s in /%s",
		       changed ? "added" : "already had the", user, rel);
	buf_free(&b);
	return r;
}

/* cloud-init's sudoers file, plus the includedir line it needs. */
static int includedir(int rootfd, struct cerr *e)
{
	struct buf b;
	char *const line[] = {(char *)"#includedir /etc/sudoers.d", NULL};
	bool changed = false;
	int r;

	buf_init(&b, 1u << 20);
	r = ci_read_file(rootfd, "etc/sudoers", &b, e);
	if (r < 0) {
		buf_free(&b);
		if (e->code != ENOENT)
			return -1;
		cerr_clear(e);
		return 0; /* no sudo installed: nothing to include from */
	}
	if (!strstr(b.data, "includedir /etc/sudoers.d"))
		r = merge_lines(&b, line, &changed, e);
	if (r == 0 && changed)
		r = ci_write_file(rootfd, "etc/sudoers", b.data, b.len, 0440,
				  &(struct ci_ids){0, 0}, e);
	buf_free(&b);
	return r;
}

static int sudo_rules(int rootfd, const struct ci_config *cfg, struct cerr *e)
{
	struct buf b;
	char **lines = NULL;
	size_t n = 0, cap = 0;
	bool changed = false;
	int r = 0;

	for (size_t i = 0; i < cfg->n_users; i++)
		for (char **s = cfg->users[i].sudo; s && *s; s++)
			*CI_PUSH(lines, n, cap) =
			    xasprintf("%s %s", cfg->users[i].name, *s);
	if (!n)
		return 0;
	*CI_PUSH(lines, n, cap) = NULL;
	buf_init(&b, 1u << 20);
	if (ci_read_file(rootfd, SUDOERS_FILE, &b, e) < 0) {
		cerr_clear(e);
		r = buf_append(&b, "# Created by cell-cloudinit\n", 28, e);
	}
	if (r == 0)
		r = merge_lines(&b, lines, &changed, e);
	if (r == 0 && changed)
		r = ci_write_file(rootfd, SUDOERS_FILE, b.data, b.len, 0440,
				  &(struct ci_ids){0, 0}, e);
	if (r == 0)
		r = includedir(rootfd, e);
	buf_free(&b);
	strv_free(lines);
	return r;
}

static int groups_step(struct db *d, const struct ci_config *cfg)
{
	int failed = 0;

	for (size_t i = 0; i < cfg->n_groups; i++) {
		const struct ci_group *g = &cfg->groups[i];
		struct cerr e = {0};

		if (ensure_group(d, g->name, -1, false, &e) < 0) {
			ci_log(LOG_ERROR, "groups: %s: %s", g->name, e.msg);
			failed++;
			continue;
		}
		for (char **m = g->members; m && *m; m++) {
			if (etc_find(&d->passwd, *m) < 0)
				ci_log(LOG_WARN,
				       "groups: cannot add %s to %s: "
				       "no such user",
				       *m, g->name);
			else
				join_group(d, g->name, *m);
		}
	}
	return failed;
}

/* Homes and keys need the saved passwd (uid, home). */
static int after_save(const struct ci_ctx *c, const bool *created)
{
	const struct ci_config *cfg = c->cfg;
	int failed = 0;

	for (size_t i = 0; i < cfg->n_users; i++) {
		const struct ci_user *u = &cfg->users[i];
		char home[PATH_MAX_INPUT];
		struct ci_ids ids;
		struct cerr e = {0};

		if (created[i] && !u->system && !u->no_create_home &&
		    (user_info(c->rootfd, u->name, &ids, home, sizeof(home),
			       &e) < 0 ||
		     make_dir(c->rootfd, home, 0755, &ids, &e) < 0)) {
			ci_log(LOG_ERROR, "users: home of %s: %s", u->name,
			       e.msg);
			failed++;
		}
		if (ci_authorize_keys(c->rootfd, u->name, u->keys, &e) < 0) {
			ci_log(LOG_ERROR, "users: keys of %s: %s", u->name,
			       e.msg);
			failed++;
		}
	}
	return failed;
}

int ci_users_groups(const struct ci_ctx *c)
{
	const struct ci_config *cfg = c->cfg;
	struct db d = {.rootfd = c->rootfd};
	cleanup_free bool *created = xcalloc(cfg->n_users + 1, sizeof(bool));
	cleanup_close int lock = -1;
	struct cerr e = {0};
	int failed = 0;

	if (!cfg->n_users && !cfg->n_groups)
		return 0;
	if ((lock = pw_lock(c->rootfd, &e)) < 0 || db_load(&d, &e) < 0) {
		ci_log(LOG_ERROR, "users: %s", e.msg);
		db_free(&d);
		return -1;
	}
	failed += groups_step(&d, cfg);
	for (size_t i = 0; i < cfg->n_users; i++)
		if (one_user(&d, &cfg->users[i], &created[i], &e) < 0) {
			ci_log(LOG_ERROR, "users: %s (line %d): %s",
			       cfg->users[i].name, cfg->users[i].line, e.msg);
			failed++;
		}
	if (db_save(&d, &e) < 0) {
		ci_log(LOG_ERROR, "users: %s", e.msg);
		db_free(&d);
		return -1;
	}
	db_free(&d);
	failed += after_save(c, created);
	if (sudo_rules(c->rootfd, cfg, &e) < 0) {
		ci_log(LOG_ERROR, "users: sudo rules: %s", e.msg);
		failed++;
	}
	return failed ? -1 : 0;
}
