// SPDX-License-Identifier: Apache-2.0
/* Files beneath the root: atomic writes that can never land outside it,
 * with the root's own symlinks followed as chroot(root) would (PATH_IN_ROOT:
 * Debian's /var/run -> /run, Ubuntu's /etc/resolv.conf link, an absolute
 * /home link); a write over a link replaces its target, as cloud-init's
 * open() does, not the link. Owners looked up in the
 * root's own /etc/passwd and /etc/group (not the host's NSS, since --root
 * may be an image), and the write_files / milpa_files modules. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ci-internal.h"
#include "cleanup.h"
#include "fsutil.h"
#include "log.h"
#include "path.h"
#include "util.h"

int ci_read_file(int rootfd, const char *rel, struct buf *out, struct cerr *e)
{
	cleanup_close int fd =
	    path_open_at(rootfd, rel, O_RDONLY, 0, PATH_IN_ROOT, e);

	if (fd < 0)
		return -1;
	if (fs_read_fd(fd, out, e) < 0)
		return cerr_prefix(e, "%s", rel);
	return 0;
}

static int write_tmp(int dfd, const char *tmp, const void *data, size_t len,
		     mode_t mode, const struct ci_ids *ids, struct cerr *e)
{
	cleanup_close int fd = -1;

	for (int tries = 0; fd < 0 && tries < 2; tries++) {
		fd = openat(
		    dfd, tmp,
		    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		/* A leftover of a crashed run that had our pid. */
		if (fd < 0 && errno == EEXIST)
			unlinkat(dfd, tmp, 0);
	}
	if (fd < 0)
		return cerr_sys(e, "create %s", tmp);
	if (fs_write_all(fd, data, len) < 0)
		return cerr_sys(e, "write %s", tmp);
	/* chown before chmod: chown clears set-id bits. */
	if (ids && fchown(fd, ids->uid, ids->gid) < 0)
		return cerr_sys(e, "chown %s to %u:%u", tmp, (unsigned)ids->uid,
				(unsigned)ids->gid);
	if (fchmod(fd, mode) < 0 || fsync(fd) < 0)
		return cerr_sys(e, "chmod/fsync %s", tmp);
	return 0;
}

/* The directory that will hold rel once its links are followed (the last
 * one too), created 0755 where missing; *base points into real. */
static int open_target_dir(int rootfd, const char *rel, char *real,
			   size_t realsz, const char **base, struct cerr *e)
{
	if (path_resolve_in_root(rootfd, rel, true, real, realsz, e) < 0)
		return -1;
	if (!*real)
		return cerr_set(e, EISDIR, "'%s' is the root directory", rel);
	return path_open_parent_at(rootfd, real, true, PATH_IN_ROOT, base, e);
}

int ci_write_file(int rootfd, const char *rel, const void *data, size_t len,
		  mode_t mode, const struct ci_ids *ids, struct cerr *e)
{
	const char *base;
	char tmp[NAME_MAX + 1], real[PATH_MAX_INPUT];
	cleanup_close int dfd =
	    open_target_dir(rootfd, rel, real, sizeof(real), &base, e);

	if (dfd < 0)
		return -1;
	snprintf(tmp, sizeof(tmp), ".%.200s.ci-%d", base, (int)getpid());
	if (write_tmp(dfd, tmp, data, len, mode, ids, e) < 0 ||
	    renameat(dfd, tmp, dfd, base) < 0) {
		if (!e->code)
			cerr_sys(e, "rename %s", rel);
		unlinkat(dfd, tmp, 0);
		return -1;
	}
	return 0;
}

/* O_APPEND in place, as cloud-init's append: true ("ab"). */
static int append_file(int rootfd, const char *rel, const void *data,
		       size_t len, mode_t mode, const struct ci_ids *ids,
		       struct cerr *e)
{
	const char *base;
	char real[PATH_MAX_INPUT];
	cleanup_close int dfd =
	    open_target_dir(rootfd, rel, real, sizeof(real), &base, e);
	cleanup_close int fd = -1;

	if (dfd < 0)
		return -1;
	fd = openat(dfd, base,
		    O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC,
		    mode);
	if (fd < 0)
		return cerr_sys(e, "open %s", rel);
	if (fs_write_all(fd, data, len) < 0)
		return cerr_sys(e, "append to %s", rel);
	if (ids && (fchown(fd, ids->uid, ids->gid) < 0 || fchmod(fd, mode) < 0))
		return cerr_sys(e, "chown/chmod %s", rel);
	return 0;
}

int ci_append_file(int rootfd, const char *rel, const void *data, size_t len,
		   struct cerr *e)
{
	return append_file(rootfd, rel, data, len, 0644, NULL, e);
}

/* Field `field` (0-based) of the line for `name` in a passwd-style file,
 * as a number. */
static int etc_number(int rootfd, const char *rel, const char *name, int field,
		      long *out, struct cerr *e)
{
	struct buf b;
	size_t nl = strlen(name);
	int r = -1;

	buf_init(&b, CI_MAX_ETC_FILE);
	if (ci_read_file(rootfd, rel, &b, e) < 0) {
		buf_free(&b);
		return -1;
	}
	for (char *line = b.data, *end; line && *line; line = end) {
		char *p = line;
		end = strchr(line, '\n');
		if (end)
			*end++ = '\0';
		if (strncmp(line, name, nl) || line[nl] != ':')
			continue;
		for (int f = 0; f < field && p; f++)
			p = strchr(p, ':') ? strchr(p, ':') + 1 : NULL;
		if (p && *p >= '0' && *p <= '9') {
			*out = strtol(p, NULL, 10);
			r = 0;
		}
		break;
	}
	buf_free(&b);
	if (r < 0)
		cerr_set(e, ENOENT, "no '%s' in %s", name, rel);
	return r;
}

static int id_of(int rootfd, const char *rel, const char *name, long *out,
		 struct cerr *e)
{
	int64_t v;

	if (parse_int64(name, 0, 0x7ffffffe, &v, NULL) == 0) {
		*out = (long)v;
		return 0;
	}
	return etc_number(rootfd, rel, name, 2, out, e);
}

int ci_resolve_owner(int rootfd, const char *owner, struct ci_ids *ids,
		     struct cerr *e)
{
	char user[64];
	const char *colon = strchr(owner, ':');
	size_t ul = colon ? (size_t)(colon - owner) : strlen(owner);
	long uid, gid = 0; /* "user" alone leaves the group root's */

	if (ul >= sizeof(user))
		return cerr_set(e, EINVAL, "owner '%s' too long", owner);
	memcpy(user, owner, ul);
	user[ul] = '\0';
	if (id_of(rootfd, "etc/passwd", user, &uid, e) < 0 ||
	    (colon && id_of(rootfd, "etc/group", colon + 1, &gid, e) < 0))
		return cerr_prefix(e, "owner %s", owner);
	ids->uid = (uid_t)uid;
	ids->gid = (gid_t)gid;
	return 0;
}

static int write_one(const struct ci_ctx *c, const struct ci_file *f,
		     struct cerr *e)
{
	struct ci_ids ids = {0, 0};

	/* An unknown owner fails the entry before anything is written: a
	 * secret must not land with the wrong owner, even root's. */
	if (f->owner && ci_resolve_owner(c->rootfd, f->owner, &ids, e) < 0)
		return -1;
	if (f->append)
		return append_file(c->rootfd, f->path, f->data, f->len, f->mode,
				   &ids, e);
	return ci_write_file(c->rootfd, f->path, f->data, f->len, f->mode, &ids,
			     e);
}

int ci_write_files(const struct ci_ctx *c, const struct ci_file *v, size_t n,
		   bool deferred, const char *what)
{
	int failed = 0;

	for (size_t i = 0; i < n; i++) {
		const struct ci_file *f = &v[i];
		struct cerr e = {0};

		if (f->defer != deferred)
			continue;
		if (write_one(c, f, &e) < 0) {
			ci_log(LOG_ERROR, "%s: /%s (line %d): %s", what,
			       f->path, f->line, e.msg);
			failed++;
			/* cloud-init's write_files stops at the first. */
			if (c->o->canonical_write_files)
				break;
			continue;
		}
		ci_log(LOG_INFO, "%s: %s /%s (%zu bytes, mode %04o, owner %s)",
		       what, f->append ? "appended to" : "wrote", f->path,
		       f->len, (unsigned)f->mode,
		       f->owner ? f->owner : "root:root");
	}
	return failed ? -1 : 0;
}
