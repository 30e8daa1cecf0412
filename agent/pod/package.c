// SPDX-License-Identifier: Apache-2.0
/* Deploy packages: the extractor's policy over the extraction core
 * (imagepull/unpack.c, which layers go through too).
 *
 * It is a security boundary (the old agent wrote wherever a tar
 * name pointed). What keeps a package inside packages/<name>/, beyond the
 * core's own rules (names cleaned and ".." fatal, parents resolved beneath
 * the root, the last component never followed):
 *
 *  - only entries under ROOTFS/ are the package (map_name); a hostile
 *    archive is refused as a whole (EINVAL: 400), not half-applied;
 *  - symlink targets must stay inside the package: targets that start with
 *    ROOTFS/ are rewritten to a relative path inside it, absolute targets
 *    are refused, and a relative target may climb only as many levels as
 *    its link really is deep (measured on the opened parent directory, not
 *    on the name, because the name may run through symlinks);
 *  - a hardlink's target is a regular file of this package (never a
 *    directory or a symlink: a second name for a symlink at another depth
 *    would carry its target somewhere else);
 *  - no set-id bits, no devices or fifos, caps on entries and bytes.
 *
 * The package is built in ".tmp-XXXXXXXXXXXX" next to the old one and
 * put in force by pkgswap.c, inside packages/<name>/ (which a running unit
 * may have mounted): a reader sees the old package or the new one, never
 * a mixture nor an empty directory, and a failure leaves the old one in
 * force. */
#include "deploy.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cleanup.h"
#include "fsutil.h"
#include "gunzip.h"
#include "log.h"
#include "path.h"
#include "unpack.h"
#include "util.h"

#define LINK_TARGET_MAX 4095
#define MSG_NAME_MAX 200
#define CHECK_CHUNK 65536

/* What the core (imagepull/unpack.h) needs to know about packages, and
 * the real path of the package root for the link checks. */
/* The package's bytes as libarchive reads them: gunzipped here, in the one
 * pass that extracts them, with each member's trailer (CRC-32 and length)
 * checked, which libarchive's own gzip reader never does. Concatenated
 * members are each checked; what follows the last one is the tar reader's
 * business. A package that is not gzip'd passes through. */
struct pkg_reader {
	int fd;
	bool in_eof;		   /* the file's end was read */
	struct gunzip *gz;	   /* NULL: not gzip'd */
	const unsigned char *next; /* unread input in in[] */
	size_t avail;
	unsigned char in[CHECK_CHUNK], out[CHECK_CHUNK];
};

struct extractor {
	struct archive *a;
	struct pkg_reader rd;
	char rootpath[PATH_MAX]; /* the real path of rootfd */
	size_t rootlen;
	struct cerr *e;
};

static int archive_fail(struct archive *a, struct cerr *e, const char *what)
{
	const char *msg = archive_error_string(a);
	int code = archive_errno(a);

	/* The archive is read from our own temporary file, so a read error
	 * is a corrupt archive: the sender's fault, 400 rather than 500. */
	if (code != ENOMEM)
		code = EINVAL;
	return cerr_set(e, code, "%s: %s", what,
			msg ? msg : "unknown libarchive error");
}

/* Entries under "ROOTFS/" are the package, with that prefix stripped; the
 * rest (and ROOTFS itself) is skipped. */
static int map_name(void *ctx, char *name, struct cerr *e)
{
	if (strncmp(name, "ROOTFS", 6) != 0 || name[6] != '/')
		return 0;
	memmove(name, name + 7, strlen(name + 7) + 1);
	return 1;
}

/* A hardlink names its target by the archive's name too. */
static int map_hardlink(void *ctx, char *target, struct cerr *e)
{
	if (strncmp(target, "ROOTFS/", 7) != 0 || !target[7])
		return cerr_set(e, EINVAL,
				"hardlink target '%.*s' is outside the package",
				MSG_NAME_MAX, target);
	memmove(target, target + 7, strlen(target + 7) + 1);
	return 0;
}

/* How many directories deep pfd really is beneath the package root. The
 * name of an entry may run through symlinks, so only the opened directory
 * tells where a relative link target starts from. */
static int real_depth(struct extractor *x, int pfd)
{
	char proc[64], p[PATH_MAX];
	ssize_t n;
	int depth = 0;

	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", pfd);
	n = readlink(proc, p, sizeof(p) - 1);
	if (n < 0)
		return cerr_sys(x->e, "readlink %s", proc);
	p[n] = '\0';
	if (strncmp(p, x->rootpath, x->rootlen) != 0 ||
	    (p[x->rootlen] != '/' && p[x->rootlen] != '\0'))
		return cerr_set(x->e, EXDEV, "'%s' is outside the package", p);
	for (const char *s = p + x->rootlen; *s; s++)
		if (*s == '/')
			depth++;
	return depth;
}

/* A relative target "../../a/b": at most `depth` leading ".." and none
 * after, so that resolving it from the link's real directory cannot leave
 * the package whatever the later components are (each link in the package
 * keeps the same rule). */
static bool target_inside(const char *t, int depth)
{
	int up = 0;
	bool down = false;

	while (*t) {
		const char *s = t;
		size_t n;

		while (*t && *t != '/')
			t++;
		n = (size_t)(t - s);
		while (*t == '/')
			t++;
		if (n == 0 || (n == 1 && s[0] == '.'))
			continue;
		if (n == 2 && s[0] == '.' && s[1] == '.') {
			if (down || ++up > depth)
				return false;
		} else {
			down = true;
		}
	}
	return true;
}

/* The target to store for a symlink, in out. */
static int link_target(void *ctx, int pfd, const char *t, char *out, size_t n,
		       struct cerr *e)
{
	struct extractor *x = ctx;
	char clean[PATH_MAX_INPUT];
	int depth;
	size_t o = 0;

	if (!t || !*t)
		return cerr_set(x->e, EINVAL, "symlink without a target");
	if (strnlen(t, LINK_TARGET_MAX + 1) > LINK_TARGET_MAX)
		return cerr_set(x->e, EINVAL, "symlink target too long");
	if (t[0] == '/')
		return cerr_set(x->e, EINVAL,
				"absolute symlink target '%.*s' points outside "
				"the package",
				MSG_NAME_MAX, t);
	depth = real_depth(x, pfd);
	if (depth < 0)
		return -1;
	if (!str_has_prefix(t, "ROOTFS/") && !str_has_prefix(t, "./ROOTFS/")) {
		if (!target_inside(t, depth))
			return cerr_set(x->e, EINVAL,
					"symlink target '%.*s' leaves the "
					"package",
					MSG_NAME_MAX, t);
		if (strlen(t) + 1 > n)
			return cerr_set(x->e, EINVAL,
					"symlink target too long");
		memcpy(out, t, strlen(t) + 1);
		return 0;
	}
	/* "ROOTFS/a/b" names a/b of this package: "../" once per level of
	 * the link's directory, then a/b. */
	if (path_clean(t, clean, sizeof(clean), x->e) < 0) {
		x->e->code = EINVAL;
		return cerr_prefix(x->e, "symlink target");
	}
	for (int i = 0; i < depth; i++) {
		if (o + 4 >= n)
			return cerr_set(x->e, EINVAL,
					"symlink target too long");
		memcpy(out + o, "../", 3);
		o += 3;
	}
	if (o + strlen(clean + 7) + 2 > n)
		return cerr_set(x->e, EINVAL, "symlink target too long");
	memcpy(out + o, clean + 7, strlen(clean + 7) + 1);
	if (!out[0])
		memcpy(out, ".", 2);
	return 0;
}

/* The next bytes of the package (its tar stream) into *buf: their count,
 * 0 at the end, -1 with e set. */
/* Read the next bytes of the file into buf: their count, 0 at its end. */
static ssize_t reader_read(struct pkg_reader *r, void *buf, struct cerr *e)
{
	for (;;) {
		ssize_t n = read(r->fd, buf, CHECK_CHUNK);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return cerr_sys(e, "read package");
		r->in_eof = n == 0;
		return n;
	}
}

/* The next bytes of the package (its tar stream) into *buf: their count,
 * 0 at the end, -1 with e set. */
static ssize_t reader_next(struct pkg_reader *r, const void **buf,
			   struct cerr *e)
{
	*buf = r->out;
	if (!r->gz)
		return r->in_eof ? 0 : reader_read(r, r->out, e);
	for (;;) {
		size_t used, n;
		ssize_t got;

		if (!r->avail && !r->in_eof) {
			if ((got = reader_read(r, r->in, e)) < 0)
				return -1;
			r->next = r->in;
			r->avail = (size_t)got;
		}
		/* Padding after the last member is the tar reader's
		 * business; another member is checked too. */
		if (gunzip_member_done(r->gz) &&
		    (!r->avail || *r->next != 0x1f))
			return 0;
		if (gunzip_run(r->gz, r->next, r->avail, &used, r->out,
			       CHECK_CHUNK, &n, e) < 0) {
			e->code = EINVAL;
			return cerr_prefix(e, "package is not valid");
		}
		r->next += used;
		r->avail -= used;
		if (n > 0)
			return (ssize_t)n;
		if (!used && (r->in_eof || r->avail) &&
		    !gunzip_member_done(r->gz))
			return cerr_set(e, EINVAL,
					"package is not valid gzip: "
					"truncated");
	}
}

static la_ssize_t read_cb(struct archive *a, void *ud, const void **buf)
{
	struct cerr e = {0};
	ssize_t n = reader_next(ud, buf, &e);

	if (n < 0)
		archive_set_error(a, e.code, "%s", e.msg);
	return n;
}

static int open_archive(struct extractor *x, int fd)
{
	unsigned char magic[2];

	x->rd.fd = fd;
	if (pread(fd, magic, 2, 0) == 2 && gunzip_is_gzip(magic, 2))
		x->rd.gz = gunzip_new();
	x->a = archive_read_new();
	if (!x->a)
		return cerr_set(x->e, ENOMEM, "archive_read_new");
	/* A package we cannot peek into (not a file: stdin a pipe) is left
	 * to libarchive's gzip reader, unchecked, as before. */
	if (!x->rd.gz)
		archive_read_support_filter_gzip(x->a);
	archive_read_support_filter_none(x->a);
	archive_read_support_format_tar(x->a);
	archive_read_support_format_gnutar(x->a);
	if (archive_read_open(x->a, &x->rd, NULL, read_cb, NULL) != ARCHIVE_OK)
		return archive_fail(x->a, x->e, "open package");
	return 0;
}

/* The tar reader stops at its end-of-archive blocks; the rest of the gzip
 * stream (the last trailer above all) is read and checked here. */
static int drain(struct extractor *x)
{
	const void *buf;
	ssize_t n;

	while ((n = reader_next(&x->rd, &buf, x->e)) > 0)
		;
	return n < 0 ? -1 : 0;
}

/* The package's rules over the core's: set-id bits dropped (a package is
 * data for a volume, and a set-id binary in it would be a gift to whoever
 * can run it), no devices, links kept inside, caps, errors a hostile
 * archive causes are 400s. */
static int extract_into(int rootfd, int fd, struct cerr *e)
{
	/* On the heap: it holds a path, and the API's workers have small
	 * stacks. */
	struct extractor *x = xcalloc(1, sizeof(*x));
	const struct unpack_policy pol = {
	    .mode = UNPACK_FLAT,
	    .no_devices = true,
	    .defer_dir_modes = true,
	    .hardlink_regular_only = true,
	    .hostile_einval = true,
	    .perm_mask = 01777,
	    .max_bytes = DEPLOY_UNPACKED_MAX,
	    .max_entries = DEPLOY_ENTRIES_MAX,
	    .what = "entry",
	    .ctx = x,
	    .map_name = map_name,
	    .link_target = link_target,
	    .map_hardlink = map_hardlink,
	};
	char proc[64];
	ssize_t n;
	int r = -1;

	x->e = e;
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", rootfd);
	n = readlink(proc, x->rootpath, sizeof(x->rootpath) - 1);
	if (n < 0) {
		cerr_sys(e, "readlink %s", proc);
		goto out;
	}
	x->rootpath[n] = '\0';
	x->rootlen = (size_t)n;
	if (open_archive(x, fd) < 0 ||
	    unpack_archive(x->a, rootfd, &pol, NULL, e) < 0 || drain(x) < 0)
		goto out;
	r = 0;
out:
	if (x->a)
		archive_read_free(x->a);
	gunzip_free(x->rd.gz);
	free(x);
	return r;
}

/* A fresh ".tmp-XXXXXXXXXXXX" directory in pkgdir; its name goes to tmp.
 * The package's name is not part of it: a 253-byte name plus a prefix and
 * a suffix would not fit in NAME_MAX (255). */
static int make_tmpdir(int pkgdirfd, const char *name, char *tmp, size_t sz,
		       struct cerr *e)
{
	for (int tries = 0; tries < 16; tries++) {
		unsigned char rnd[6];

		if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd))
			return cerr_sys(e, "getrandom");
		snprintf(tmp, sz, ".tmp-%02x%02x%02x%02x%02x%02x", rnd[0],
			 rnd[1], rnd[2], rnd[3], rnd[4], rnd[5]);
		if (mkdirat(pkgdirfd, tmp, 0755) == 0)
			return 0;
		if (errno != EEXIST)
			return cerr_sys(e, "mkdir %s", tmp);
	}
	return cerr_set(e, EEXIST, "no free temporary name for '%s'", name);
}

int deploy_package(int pkgdirfd, const char *name, int fd, struct cerr *e)
{
	char tmp[DEPLOY_NAME_MAX + 32];
	cleanup_close int rootfd = -1;
	struct cerr ignore = {0};

	if (!deploy_name_ok(name))
		return cerr_set(e, EINVAL, "bad package name '%.*s'",
				MSG_NAME_MAX, name);
	if (make_tmpdir(pkgdirfd, name, tmp, sizeof(tmp), e) < 0)
		return cerr_prefix(e, "package %s", name);
	rootfd = openat(pkgdirfd, tmp,
			O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (rootfd < 0) {
		cerr_sys(e, "open %s", tmp);
		goto fail;
	}
	if (extract_into(rootfd, fd, e) < 0 ||
	    deploy_swap_in(pkgdirfd, tmp, name, e) < 0)
		goto fail;
	return 0;
fail:
	if (fs_rm_rf_at(pkgdirfd, tmp, &ignore) < 0)
		log_warn("deploy %s: removing %s: %s", name, tmp, ignore.msg);
	return cerr_prefix(e, "package %s", name);
}
