// SPDX-License-Identifier: Apache-2.0
/* The users and groups module, by editing ROOT/etc/passwd, group, shadow
 * and gshadow directly (atomically, under ROOT/etc/.pwd.lock as lckpwdf
 * does) rather than calling useradd: --root may be an image, and the
 * host's useradd would change the host. Semantics follow cloud-init's
 * create_user and of Debian's useradd under it: an existing user is not
 * re-created, but still gets its password hash, lock, sudo rule and keys;
 * missing groups are created first (groupadd), then the user (useradd -m:
 * ids and password ageing from the root's login.defs, a home populated
 * from /etc/skel, subordinate id ranges when /etc/subuid exists). */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
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

/* What useradd takes from ROOT/etc/login.defs (Debian's defaults). */
struct defs {
	long pass_min, pass_max, pass_warn;
	long uid_min, uid_max, gid_min, gid_max;
	long sys_uid_min, sys_uid_max, sys_gid_min, sys_gid_max;
	long sub_uid_min, sub_uid_max, sub_uid_count;
	long sub_gid_min, sub_gid_max, sub_gid_count;
	long home_mode; /* -1: from UMASK */
	long umask;
};

struct db {
	int rootfd;
	struct etc passwd, group, shadow, gshadow, subuid, subgid;
	struct defs defs;
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
	fd = path_open_at(rootfd, rel, O_RDONLY, 0, PATH_IN_ROOT, e);
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
		*VEC_PUSH(f->lines, f->n, f->cap) = xstrdup(line);
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

/* useradd's ranges (login.defs): one above the highest id in
 * [UID_MIN, UID_MAX], or the first free one going down from SYS_UID_MAX
 * for system ids. */
static long alloc_id(const struct db *d, bool gid, bool system)
{
	const struct defs *df = &d->defs;
	const struct etc *f = gid ? &d->group : &d->passwd;
	int k = 2;
	long lo = gid ? df->gid_min : df->uid_min;
	long hi = gid ? df->gid_max : df->uid_max, id;

	if (system) {
		lo = gid ? df->sys_gid_min : df->sys_uid_min;
		hi = gid ? df->sys_gid_max : df->sys_uid_max;
		for (id = hi; id >= lo; id--)
			if (!id_used(f, k, id))
				return id;
		return -1;
	}
	id = lo;
	for (size_t i = 0; i < f->n; i++) {
		long v = num_field(f->lines[i], k);
		if (v >= id && v <= hi)
			id = v + 1;
	}
	if (id <= hi)
		return id;
	for (id = lo; id <= hi; id++) /* full: the first gap */
		if (!id_used(f, k, id))
			return id;
	return -1;
}

static void etc_add(struct etc *f, char *line)
{
	*VEC_PUSH(f->lines, f->n, f->cap) = line;
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
		  : alloc_id(d, true, system);
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

/* passwd -l: a '!' in front, once. */
static char *locked(const char *pw)
{
	return pw[0] == '!' ? xstrdup(pw) : xasprintf("!%s", pw);
}

/* A new user's shadow line as useradd writes it: the hash given with
 * `passwd` (useradd --password) or '!'; then passwd -l unless
 * lock_passwd is false. A system user has no ageing fields. */
static char *new_shadow(const struct db *d, const struct ci_user *u)
{
	const struct defs *df = &d->defs;
	cleanup_free char *pw =
	    u->passwd && *u->passwd ? xstrdup(u->passwd) : xstrdup("!");
	cleanup_free char *lk = u->lock_passwd ? locked(pw) : NULL;
	long days = (long)(time(NULL) / 86400);

	if (u->system)
		return xasprintf("%s:%s:%ld::::::", u->name, lk ? lk : pw,
				 days);
	return xasprintf("%s:%s:%ld:%ld:%ld:%ld:::", u->name, lk ? lk : pw,
			 days, df->pass_min, df->pass_max, df->pass_warn);
}

static void set_shadow(struct db *d, const struct ci_user *u)
{
	long i = etc_find(&d->shadow, u->name);
	const char *line, *pwf, *rest;
	cleanup_free char *old = NULL, *pw = NULL;

	if (i < 0) {
		etc_add(&d->shadow, new_shadow(d, u));
		return;
	}
	/* An existing user: a new hash (chpasswd -e), then the lock. The
	 * password field, however long, is between the first two ':'. */
	line = d->shadow.lines[i];
	pwf = line + strlen(u->name) + 1;
	rest = strchr(pwf, ':');
	old = xstrndup(pwf, rest ? (size_t)(rest - pwf) : strlen(pwf));
	/* `passwd` is useradd's --password: new users only. */
	pw = u->passwd && *u->passwd && u->passwd_hashed ? xstrdup(u->passwd)
							 : xstrdup(old);
	if (u->lock_passwd) {
		char *l = locked(pw);
		free(pw);
		pw = l;
	}
	if (strcmp(pw, old))
		etc_set(&d->shadow, (size_t)i,
			xasprintf("%s:%s%s", u->name, pw, rest ? rest : ""));
}

static int new_user(struct db *d, const struct ci_user *u, struct cerr *e)
{
	long uid = u->uid, gid;
	cleanup_free char *home =
	    u->homedir ? xstrdup(u->homedir) : xasprintf("/home/%s", u->name);

	if (uid >= 0 && id_used(&d->passwd, 2, uid))
		return cerr_set(e, EEXIST, "uid %ld is taken", uid);
	if (uid < 0 && (uid = alloc_id(d, false, u->system)) < 0)
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

/* Subordinate ids as useradd allocates them: the first gap of `count`
 * in [min, max] among the ranges already given out. */
static void add_subids(struct etc *f, const char *name, long min, long max,
		       long count)
{
	long start = min;
	bool moved = true;

	if (!f->exists || etc_find(f, name) >= 0)
		return;
	while (moved && start + count - 1 <= max) {
		moved = false;
		for (size_t i = 0; i < f->n; i++) {
			long s0 = num_field(f->lines[i], 1);
			long n0 = num_field(f->lines[i], 2);
			if (s0 < 0 || n0 <= 0)
				continue;
			if (start < s0 + n0 && s0 < start + count) {
				start = s0 + n0;
				moved = true;
			}
		}
	}
	if (start + count - 1 > max) {
		ci_log(LOG_WARN, "users: no free subordinate ids for %s", name);
		return;
	}
	etc_add(f, xasprintf("%s:%ld:%ld", name, start, count));
}

/* cloud-init's add_user: the groups (and the primary group when groups
 * are given) are created first, in order, then useradd. */
static int one_user(struct db *d, const struct ci_user *u, bool *created,
		    struct cerr *e)
{
	*created = etc_find(&d->passwd, u->name) < 0;
	if (!*created)
		ci_log(LOG_INFO, "users: %s exists; not re-created", u->name);
	for (char **g = u->groups; *created && g && *g; g++)
		if (ensure_group(d, *g, -1, false, e) < 0)
			return -1;
	if (*created && u->groups && u->primary_group &&
	    ensure_group(d, u->primary_group, -1, false, e) < 0)
		return -1;
	if (*created && new_user(d, u, e) < 0)
		return -1;
	for (char **g = u->groups; *created && g && *g; g++)
		join_group(d, *g, u->name);
	if (*created && !u->system) {
		const struct defs *df = &d->defs;
		add_subids(&d->subuid, u->name, df->sub_uid_min,
			   df->sub_uid_max, df->sub_uid_count);
		add_subids(&d->subgid, u->name, df->sub_gid_min,
			   df->sub_gid_max, df->sub_gid_count);
	}
	set_shadow(d, u);
	return 0;
}

/* lckpwdf's lock, beneath the root: fcntl on etc/.pwd.lock, 15 s. */
static int pw_lock(int rootfd, struct cerr *e)
{
	struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
	int fd = path_open_at(rootfd, "etc/.pwd.lock",
			      O_WRONLY | O_CREAT | O_NOFOLLOW, 0600,
			      PATH_IN_ROOT, e);

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

static void defs_load(int rootfd, struct defs *df)
{
	static const struct {
		const char *key;
		size_t off;
	} keys[] = {
#define K(name, field) {name, offsetof(struct defs, field)}
	    K("PASS_MIN_DAYS", pass_min),
	    K("PASS_MAX_DAYS", pass_max),
	    K("PASS_WARN_AGE", pass_warn),
	    K("UID_MIN", uid_min),
	    K("UID_MAX", uid_max),
	    K("GID_MIN", gid_min),
	    K("GID_MAX", gid_max),
	    K("SYS_UID_MIN", sys_uid_min),
	    K("SYS_UID_MAX", sys_uid_max),
	    K("SYS_GID_MIN", sys_gid_min),
	    K("SYS_GID_MAX", sys_gid_max),
	    K("SUB_UID_MIN", sub_uid_min),
	    K("SUB_UID_MAX", sub_uid_max),
	    K("SUB_UID_COUNT", sub_uid_count),
	    K("SUB_GID_MIN", sub_gid_min),
	    K("SUB_GID_MAX", sub_gid_max),
	    K("SUB_GID_COUNT", sub_gid_count),
	    K("HOME_MODE", home_mode),
	    K("UMASK", umask),
#undef K
	};
	struct buf b;
	struct cerr e = {0};

	*df = (struct defs){0,	       99999,  7,	  1000,	 60000,
			    1000,      60000,  101,	  -1,	 101,
			    -1,	       100000, 600100000, 65536, 100000,
			    600100000, 65536,  -1,	  022};
	buf_init(&b, 1u << 20);
	if (ci_read_file(rootfd, "etc/login.defs", &b, &e) == 0) {
		for (char *line = b.data, *end; line && *line; line = end) {
			char *v;
			end = strchr(line, '\n');
			if (end)
				*end++ = '\0';
			line += strspn(line, " \t");
			v = line + strcspn(line, " \t");
			if (!*v)
				continue;
			*v++ = '\0';
			for (size_t i = 0; i < ARRAY_SIZE(keys); i++)
				if (!strcmp(line, keys[i].key))
					*(long *)((char *)df + keys[i].off) =
					    strtol(v, NULL, 0);
		}
	}
	buf_free(&b);
	/* shadow's defaults for the system ranges: just below the others */
	if (df->sys_uid_max < 0)
		df->sys_uid_max = df->uid_min - 1;
	if (df->sys_gid_max < 0)
		df->sys_gid_max = df->gid_min - 1;
}

static int db_load(struct db *d, struct cerr *e)
{
	if (etc_load(d->rootfd, &d->passwd, "etc/passwd", 0644, e) < 0 ||
	    etc_load(d->rootfd, &d->group, "etc/group", 0644, e) < 0 ||
	    etc_load(d->rootfd, &d->shadow, "etc/shadow", 0640, e) < 0 ||
	    etc_load(d->rootfd, &d->gshadow, "etc/gshadow", 0640, e) < 0 ||
	    etc_load(d->rootfd, &d->subuid, "etc/subuid", 0644, e) < 0 ||
	    etc_load(d->rootfd, &d->subgid, "etc/subgid", 0644, e) < 0)
		return -1;
	defs_load(d->rootfd, &d->defs);
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
	    etc_save(d->rootfd, &d->shadow, e) < 0 ||
	    etc_save(d->rootfd, &d->subuid, e) < 0 ||
	    etc_save(d->rootfd, &d->subgid, e) < 0)
		return -1;
	return 0;
}

static void db_free(struct db *d)
{
	etc_free(&d->passwd);
	etc_free(&d->group);
	etc_free(&d->shadow);
	etc_free(&d->gshadow);
	etc_free(&d->subuid);
	etc_free(&d->subgid);
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

/* mkdir rel in the root (its links followed as chroot would: a home
 * under an absolute /home link); chown it only when we made it. */
static int make_dir(int rootfd, const char *rel, mode_t mode,
		    const struct ci_ids *ids, bool *made, struct cerr *e)
{
	const char *base;
	cleanup_close int dfd =
	    path_open_parent_at(rootfd, rel, true, PATH_IN_ROOT, &base, e);

	if (made)
		*made = false;
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
	if (made)
		*made = true;
	return 0;
}

static int copy_tree(int src, int dst, const struct ci_ids *ids, int depth,
		     struct cerr *e);

/* One entry of /etc/skel into the new home, owned by the user. */
static int copy_entry(int src, int dst, const char *name,
		      const struct ci_ids *ids, int depth, struct cerr *e)
{
	struct stat st;

	if (fstatat(src, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return cerr_sys(e, "stat skel/%s", name);
	if (S_ISDIR(st.st_mode)) {
		cleanup_close int s = -1, d = -1;
		if (mkdirat(dst, name, 0700) < 0 && errno != EEXIST)
			return cerr_sys(e, "mkdir %s", name);
		s = openat(src, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
		d = openat(dst, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
		if (s < 0 || d < 0)
			return cerr_sys(e, "open skel/%s", name);
		if (copy_tree(s, d, ids, depth + 1, e) < 0)
			return -1;
		if (fchown(d, ids->uid, ids->gid) < 0 ||
		    fchmod(d, st.st_mode & 07777) < 0)
			return cerr_sys(e, "chown %s", name);
	} else if (S_ISLNK(st.st_mode)) {
		char t[PATH_MAX_INPUT];
		ssize_t n = readlinkat(src, name, t, sizeof(t) - 1);
		if (n < 0)
			return cerr_sys(e, "readlink skel/%s", name);
		t[n] = '\0';
		if (symlinkat(t, dst, name) < 0 ||
		    fchownat(dst, name, ids->uid, ids->gid,
			     AT_SYMLINK_NOFOLLOW) < 0)
			return cerr_sys(e, "symlink %s", name);
	} else if (S_ISREG(st.st_mode)) {
		struct buf b;
		cleanup_close int fd = openat(src, name, O_RDONLY | O_NOFOLLOW);
		int r;
		buf_init(&b, CI_MAX_CONTENT_FILE);
		if (fd < 0 || fs_read_fd(fd, &b, e) < 0) {
			buf_free(&b);
			return e->code ? -1 : cerr_sys(e, "read skel/%s", name);
		}
		r = ci_write_file(dst, name, b.data ? b.data : "", b.len,
				  st.st_mode & 07777, ids, e);
		buf_free(&b);
		return r;
	}
	return 0; /* devices, fifos: useradd copies them; skel has none */
}

static int copy_tree(int src, int dst, const struct ci_ids *ids, int depth,
		     struct cerr *e)
{
	cleanup_dir DIR *d = NULL;
	struct dirent *de;
	int fd;

	if (depth > 16)
		return cerr_set(e, ELOOP, "/etc/skel nests too deep");
	fd = dup(src);
	if (fd < 0 || !(d = fdopendir(fd))) {
		if (fd >= 0)
			close(fd);
		return cerr_sys(e, "read /etc/skel");
	}
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (copy_entry(src, dst, de->d_name, ids, depth, e) < 0)
			return -1;
	}
	return 0;
}

/* useradd -m: the home (HOME_MODE, else 0777 & ~UMASK) with a copy of
 * ROOT/etc/skel, unless it already existed. */
static int make_home(int rootfd, const char *home, const struct defs *df,
		     const struct ci_ids *ids, struct cerr *e)
{
	mode_t mode =
	    (mode_t)(df->home_mode >= 0 ? df->home_mode : 0777 & ~df->umask);
	cleanup_close int skel = -1, dst = -1;
	bool made;

	if (make_dir(rootfd, home, mode & 07777, ids, &made, e) < 0)
		return -1;
	if (!made) {
		ci_log(LOG_WARN,
		       "users: /%s exists; nothing copied from "
		       "/etc/skel",
		       home);
		return 0;
	}
	skel = path_open_at(rootfd, "etc/skel", O_RDONLY | O_DIRECTORY, 0,
			    PATH_IN_ROOT, e);
	if (skel < 0) {
		cerr_clear(e);
		return 0;
	}
	dst = path_open_at(rootfd, home, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0,
			   PATH_IN_ROOT, e);
	if (dst < 0)
		return -1;
	return copy_tree(skel, dst, ids, 0, e);
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

	if (user_info(rootfd, user, &ids, home, sizeof(home), e) < 0)
		return -1;
	snprintf(rel, sizeof(rel), "%s/.ssh", home);
	if (make_dir(rootfd, rel, 0700, &ids, NULL, e) < 0)
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
	if (r == 0 && (changed || !b.data))
		r = ci_write_file(rootfd, rel, b.data ? b.data : "", b.len,
				  0600, &ids, e);
	if (r == 0)
		ci_log(LOG_INFO, "ssh: %s keys for %s in /%s",
		       changed ? "added" : "already had the", user, rel);
	buf_free(&b);
	return r;
}

char *ci_header(const char *verb)
{
	char when[64];
	time_t now = time(NULL);
	struct tm tm;

	gmtime_r(&now, &tm);
	strftime(when, sizeof(when), "%a, %d %b %Y %H:%M:%S +0000", &tm);
	return xasprintf("# %s by cell-cloudinit v. %s on %s", verb,
			 CELL_VERSION, when);
}

/* Whether sudoers text includes /etc/sudoers.d (#includedir or
 * @includedir, as cloud-init's ensure_sudo_dir looks for it). */
static bool includes_dir(const char *text)
{
	for (const char *p = text; p && *p;) {
		const char *nl = strchr(p, '\n'), *d;
		size_t n = nl ? (size_t)(nl - p) : strlen(p);
		cleanup_free char *line = xstrndup(p, n);

		d = line + strspn(line, " \t");
		if ((*d == '#' || *d == '@' || *d == '|') &&
		    str_has_prefix(d + 1, "includedir") &&
		    strchr(" \t", d[11]) && d[11]) {
			d += 11 + strspn(d + 11, " \t");
			if (!strncmp(d, "/etc/sudoers.d", 14) &&
			    strspn(d + 14, "/ \t\r") == strlen(d + 14))
				return true;
		}
		p += n + (nl ? 1 : 0);
	}
	return false;
}

/* cloud-init's ensure_sudo_dir: the #includedir line in ROOT/etc/sudoers
 * (the file made when missing) and /etc/sudoers.d as a 0750 directory. */
static int ensure_sudo_dir(int rootfd, struct cerr *e)
{
	struct buf b;
	cleanup_free char *add = ci_header("Added");
	cleanup_free char *text = NULL;
	cleanup_close int fd = -1;
	int r = 0;

	buf_init(&b, 1u << 20);
	if (ci_read_file(rootfd, "etc/sudoers", &b, e) < 0) {
		if (e->code != ENOENT) {
			buf_free(&b);
			return -1;
		}
		cerr_clear(e);
		text = xasprintf("# See sudoers(5) for more information on "
				 "\"#include\" directives:\n\n%s\n"
				 "#includedir /etc/sudoers.d\n",
				 add);
		r = ci_write_file(rootfd, "etc/sudoers", text, strlen(text),
				  0440, &(struct ci_ids){0, 0}, e);
	} else if (!includes_dir(b.data)) {
		text = xasprintf("\n%s\n#includedir /etc/sudoers.d\n", add);
		r = ci_append_file(rootfd, "etc/sudoers", text, strlen(text),
				   e);
	}
	buf_free(&b);
	if (r < 0 || make_dir(rootfd, "etc/sudoers.d", 0750,
			      &(struct ci_ids){0, 0}, NULL, e) < 0)
		return -1;
	fd = path_open_at(rootfd, "etc/sudoers.d", O_RDONLY | O_DIRECTORY, 0,
			  PATH_IN_ROOT, e);
	if (fd < 0 || fchmod(fd, 0750) < 0)
		return fd < 0 ? -1 : cerr_sys(e, "chmod /etc/sudoers.d");
	return 0;
}

/* cloud-init's write_sudo_rules: a "# User rules for NAME" block per
 * user, appended; a block whose rules are all there already is skipped
 * (a new instance id must not duplicate them). */
static int sudo_user(int rootfd, const struct ci_user *u, struct cerr *e)
{
	struct buf b, add;
	bool all = true;
	int r = 0;

	buf_init(&b, 1u << 20);
	buf_init(&add, 0);
	if (ci_read_file(rootfd, SUDOERS_FILE, &b, e) < 0) {
		if (e->code != ENOENT)
			r = -1;
		cerr_clear(e);
		all = false;
	}
	{
		cleanup_free char *h =
		    xasprintf("\n# User rules for %s\n", u->name);
		buf_append(&add, h, strlen(h), NULL);
	}
	for (char **s = u->sudo; s && *s; s++) {
		cleanup_free char *line = xasprintf("%s %s", u->name, *s);
		all &= has_line(&b, line);
		buf_append(&add, line, strlen(line), NULL);
		buf_append(&add, "\n", 1, NULL);
	}
	if (r == 0 && !all && ensure_sudo_dir(rootfd, e) < 0)
		r = -1;
	if (r == 0 && !all && b.len) {
		r = ci_append_file(rootfd, SUDOERS_FILE, add.data, add.len, e);
	} else if (r == 0 && !all) {
		cleanup_free char *hdr = ci_header("Created");
		cleanup_free char *text = xasprintf("%s\n%s", hdr, add.data);
		r = ci_write_file(rootfd, SUDOERS_FILE, text, strlen(text),
				  0440, &(struct ci_ids){0, 0}, e);
	}
	buf_free(&b);
	buf_free(&add);
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

/* Homes, keys and sudo rules need the saved passwd (uid, home). */
static int after_save(const struct ci_ctx *c, const struct db *d,
		      const struct ci_user *const *users, size_t n,
		      const bool *created)
{
	int failed = 0;

	for (size_t i = 0; i < n; i++) {
		const struct ci_user *u = users[i];
		char home[PATH_MAX_INPUT];
		struct ci_ids ids;
		struct cerr e = {0};

		if (created[i] && !u->system && !u->no_create_home &&
		    (user_info(c->rootfd, u->name, &ids, home, sizeof(home),
			       &e) < 0 ||
		     make_home(c->rootfd, home, &d->defs, &ids, &e) < 0)) {
			ci_log(LOG_ERROR, "users: home of %s: %s", u->name,
			       e.msg);
			failed++;
		}
		if (u->sudo && sudo_user(c->rootfd, u, &e) < 0) {
			ci_log(LOG_ERROR, "users: sudo rules of %s: %s",
			       u->name, e.msg);
			failed++;
		}
		if (u->keys &&
		    ci_authorize_keys(c->rootfd, u->name, u->keys, &e) < 0) {
			ci_log(LOG_ERROR, "users: keys of %s: %s", u->name,
			       e.msg);
			failed++;
		}
	}
	return failed;
}

/* users: [default]: the image's system_info.default_user, from
 * ROOT/etc/cloud/cloud.cfg; without one, a notice and nothing. */
static bool default_user(int rootfd, struct ci_user *u)
{
	struct buf b;
	struct cerr e = {0};
	bool ok = false;

	buf_init(&b, 1u << 20);
	if (ci_read_file(rootfd, "etc/cloud/cloud.cfg", &b, &e) == 0)
		ok = ci_cc_default_user(b.data, b.len, u) == 0;
	buf_free(&b);
	if (!ok)
		ci_log(LOG_INFO, "users: 'default' skipped: no "
				 "system_info.default_user in "
				 "/etc/cloud/cloud.cfg");
	return ok;
}

char *ci_default_user_name(int rootfd)
{
	struct ci_user u = {0};
	char *name;
	struct buf b;
	struct cerr e = {0};

	buf_init(&b, 1u << 20);
	if (ci_read_file(rootfd, "etc/cloud/cloud.cfg", &b, &e) < 0 ||
	    ci_cc_default_user(b.data, b.len, &u) < 0) {
		buf_free(&b);
		return NULL;
	}
	buf_free(&b);
	name = u.name;
	u.name = NULL;
	ci_user_free(&u);
	return name;
}

int ci_users_groups(const struct ci_ctx *c)
{
	const struct ci_config *cfg = c->cfg;
	struct db d = {.rootfd = c->rootfd};
	struct ci_user def = {0};
	cleanup_free const struct ci_user **users =
	    xcalloc(cfg->n_users + 1, sizeof(*users));
	cleanup_free bool *created = xcalloc(cfg->n_users + 1, sizeof(bool));
	cleanup_close int lock = -1;
	struct cerr e = {0};
	size_t n = 0;
	int failed = 0;

	for (size_t i = 0; i < cfg->n_users; i++)
		users[n++] = &cfg->users[i];
	/* cloud-init puts the default user last. */
	if (cfg->default_user && default_user(c->rootfd, &def)) {
		bool dup = false;
		for (size_t i = 0; i < n; i++)
			dup |= !strcmp(users[i]->name, def.name);
		if (!dup)
			users[n++] = &def;
	}
	if (!n && !cfg->n_groups) {
		ci_user_free(&def);
		return 0;
	}
	if ((lock = pw_lock(c->rootfd, &e)) < 0 || db_load(&d, &e) < 0) {
		ci_log(LOG_ERROR, "users: %s", e.msg);
		db_free(&d);
		ci_user_free(&def);
		return -1;
	}
	failed += groups_step(&d, cfg);
	for (size_t i = 0; i < n; i++)
		if (one_user(&d, users[i], &created[i], &e) < 0) {
			ci_log(LOG_ERROR, "users: %s (line %d): %s",
			       users[i]->name, users[i]->line, e.msg);
			failed++;
		}
	if (db_save(&d, &e) < 0) {
		ci_log(LOG_ERROR, "users: %s", e.msg);
		db_free(&d);
		ci_user_free(&def);
		return -1;
	}
	failed += after_save(c, &d, users, n, created);
	db_free(&d);
	ci_user_free(&def);
	return failed ? -1 : 0;
}
