/* Deploy packages: the extractor.
 *
 * It is a security boundary (the old agent wrote wherever a tar
 * name pointed). What keeps a package inside packages/<name>/:
 *
 *  - names are cleaned with path_clean, and a ".." anywhere fails the whole
 *    package: a hostile archive is refused, not half-applied;
 *  - every entry is created through its parent directory, resolved beneath
 *    the package root by path_open_parent (openat2 RESOLVE_BENEATH or the
 *    O_NOFOLLOW walker), so an absolute or climbing symlink on the way makes
 *    the package fail instead of being followed; the last component is
 *    never followed (O_EXCL|O_NOFOLLOW after removing what was there);
 *  - symlink targets must stay inside the package: targets that start with
 *    ROOTFS/ are rewritten to a relative path inside it, absolute targets
 *    are refused, and a relative target may climb only as many levels as
 *    its link really is deep (measured on the opened parent directory, not
 *    on the name, because the name may run through symlinks);
 *  - a hardlink's target is a regular file of this package (never a
 *    directory or a symlink: a second name for a symlink at another depth
 *    would carry its target somewhere else).
 *
 * The package is built in ".tmp-XXXXXXXXXXXX" next to the old one and
 * swapped in with renameat2(RENAME_EXCHANGE), so a reader sees the old
 * package or the new one, never a mixture, and a failure leaves the old one
 * untouched. */
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
#include <zlib.h>

#include "cleanup.h"
#include "fsutil.h"
#include "log.h"
#include "path.h"
#include "util.h"

/* musl 1.2.3 has no renameat2() wrapper nor its flags; the raw system
 * call works on both libcs. */
#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1U << 0)
#define RENAME_EXCHANGE (1U << 1)
#endif
#define DIRS_MEM_MAX (64u << 20)
#define LINK_TARGET_MAX 4095
#define MSG_NAME_MAX 200
#define CHECK_CHUNK 65536

static inline void archive_read_freep(struct archive **a)
{
	if (*a)
		archive_read_free(*a);
}

struct dirmode {
	char *rel;
	mode_t mode;
	uid_t uid;
	gid_t gid;
};

struct extractor {
	struct archive *a;
	int rootfd;
	char rootpath[PATH_MAX]; /* the real path of rootfd */
	size_t rootlen;
	bool as_root;
	uint64_t bytes, entries;
	struct dirmode *dirs;
	size_t ndirs, capdirs, dirs_mem;
	char rel[PATH_MAX_INPUT];     /* the current entry inside the package */
	char scratch[PATH_MAX_INPUT]; /* link targets */
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

/* Strip "ROOTFS/" from a cleaned entry name. 1 with x->rel set for an
 * entry of the package, 0 for one to skip. */
static int entry_rel(struct extractor *x, const char *raw)
{
	char clean[PATH_MAX_INPUT];

	if (path_clean(raw, clean, sizeof(clean), x->e) < 0) {
		x->e->code = EINVAL;
		return -1;
	}
	if (strncmp(clean, "ROOTFS", 6) != 0 ||
	    (clean[6] != '/' && clean[6] != '\0'))
		return 0;
	if (clean[6] == '\0')
		return 0; /* the package root itself */
	memcpy(x->rel, clean + 7, strlen(clean + 7) + 1);
	return 1;
}

/* Something is in the way of a new entry: remove it (a whole tree if it is
 * a directory), never following a symlink. */
static int clear_slot(struct extractor *x, int pfd, const char *base)
{
	if (unlinkat(pfd, base, 0) == 0 || errno == ENOENT)
		return 0;
	if (errno != EISDIR)
		return cerr_sys(x->e, "remove the existing '%s'", x->rel);
	return fs_rm_rf_at(pfd, base, x->e);
}

/* The header's permissions without set-id bits: a package is data for a
 * volume, and a set-id binary in it would be a gift to whoever can run it. */
static mode_t entry_perm(struct archive_entry *ent)
{
	return archive_entry_perm(ent) & 01777;
}

static int entry_owner(struct extractor *x, struct archive_entry *ent,
		       uid_t *uid, gid_t *gid)
{
	int64_t u = archive_entry_uid(ent), g = archive_entry_gid(ent);

	/* (uid_t)-1 would mean "leave unchanged" to chown. */
	if (u < 0 || u >= UINT32_MAX || g < 0 || g >= UINT32_MAX)
		return cerr_set(x->e, EINVAL, "owner %lld:%lld is out of range",
				(long long)u, (long long)g);
	*uid = (uid_t)u;
	*gid = (gid_t)g;
	return 0;
}

static int pwrite_all(int fd, const char *p, size_t n, off_t off)
{
	while (n) {
		ssize_t w = pwrite(fd, p, n, off);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += w;
		n -= (size_t)w;
		off += w;
	}
	return 0;
}

/* Copy the entry's data; libarchive hands sparse files over as blocks with
 * offsets. */
static int write_data(struct extractor *x, struct archive_entry *ent, int fd)
{
	la_int64_t end = 0;

	for (;;) {
		const void *buf;
		size_t len;
		la_int64_t off;
		int r = archive_read_data_block(x->a, &buf, &len, &off);

		if (r == ARCHIVE_EOF)
			break;
		if (r != ARCHIVE_OK && r != ARCHIVE_WARN)
			return archive_fail(x->a, x->e, "read data");
		if (off < 0)
			return cerr_set(x->e, EINVAL, "negative data offset");
		x->bytes += len;
		if (x->bytes > DEPLOY_UNPACKED_MAX)
			return cerr_set(x->e, EFBIG,
					"package unpacks to more than %llu "
					"MiB",
					DEPLOY_UNPACKED_MAX >> 20);
		if (len && pwrite_all(fd, buf, len, (off_t)off) < 0)
			return cerr_sys(x->e, "write");
		if (off + (la_int64_t)len > end)
			end = off + (la_int64_t)len;
	}
	if (archive_entry_size_is_set(ent) && archive_entry_size(ent) > end) {
		if ((uint64_t)archive_entry_size(ent) > DEPLOY_UNPACKED_MAX)
			return cerr_set(x->e, EFBIG, "entry is too large");
		if (ftruncate(fd, (off_t)archive_entry_size(ent)) < 0)
			return cerr_sys(x->e, "truncate");
	}
	return 0;
}

static int extract_file(struct extractor *x, struct archive_entry *ent, int pfd,
			const char *base)
{
	const int fl = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
	mode_t perm = entry_perm(ent);
	cleanup_close int fd = openat(pfd, base, fl, 0600);
	uid_t uid;
	gid_t gid;

	if (fd < 0 && errno == EEXIST) {
		if (clear_slot(x, pfd, base) < 0)
			return -1;
		fd = openat(pfd, base, fl, 0600);
	}
	if (fd < 0)
		return cerr_sys(x->e, "create");
	if (write_data(x, ent, fd) < 0)
		return -1;
	if (x->as_root) {
		if (entry_owner(x, ent, &uid, &gid) < 0)
			return -1;
		if (fchown(fd, uid, gid) < 0)
			return cerr_sys(x->e, "chown");
	}
	if (fchmod(fd, perm) < 0)
		return cerr_sys(x->e, "chmod");
	return 0;
}

/* Directories are made owner-writable while the package is extracted (so a
 * 0555 directory can still receive its entries without root) and get their
 * own mode and owner at the end. */
static int extract_dir(struct extractor *x, struct archive_entry *ent, int pfd,
		       const char *base)
{
	struct stat st;
	struct dirmode *d;
	size_t n = strlen(x->rel) + 1;

	if (mkdirat(pfd, base, 0700) < 0) {
		if (errno != EEXIST)
			return cerr_sys(x->e, "mkdir");
		if (fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW) < 0)
			return cerr_sys(x->e, "stat");
		if (!S_ISDIR(st.st_mode)) {
			if (clear_slot(x, pfd, base) < 0)
				return -1;
			if (mkdirat(pfd, base, 0700) < 0)
				return cerr_sys(x->e, "mkdir");
		}
	}
	if (x->dirs_mem + n + sizeof(*d) > DIRS_MEM_MAX)
		return cerr_set(x->e, EFBIG, "too many directories");
	if (x->ndirs == x->capdirs) {
		x->capdirs = x->capdirs ? x->capdirs * 2 : 64;
		x->dirs = xrealloc(x->dirs, x->capdirs * sizeof(*x->dirs));
	}
	d = &x->dirs[x->ndirs];
	if (entry_owner(x, ent, &d->uid, &d->gid) < 0)
		return -1;
	d->rel = xstrdup(x->rel);
	d->mode = entry_perm(ent);
	x->ndirs++;
	x->dirs_mem += n + sizeof(*d);
	return 0;
}

static int fix_dirs(struct extractor *x)
{
	/* Deepest first: a parent that loses its search permission must not
	 * stop its children from getting theirs (without root). */
	for (size_t i = x->ndirs; i-- > 0;) {
		struct dirmode *d = &x->dirs[i];
		cleanup_close int fd = -1;

		fd = path_open_beneath(x->rootfd, d->rel,
				       O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0,
				       x->e);
		if (fd < 0) {
			if (x->e->code == ENOENT || x->e->code == ENOTDIR ||
			    x->e->code == ELOOP) {
				cerr_clear(x->e); /* replaced later on */
				continue;
			}
			return cerr_prefix(x->e, "directory '%.*s'",
					   MSG_NAME_MAX, d->rel);
		}
		if (x->as_root && fchown(fd, d->uid, d->gid) < 0)
			return cerr_sys(x->e, "chown '%.*s'", MSG_NAME_MAX,
					d->rel);
		if (fchmod(fd, d->mode) < 0)
			return cerr_sys(x->e, "chmod '%.*s'", MSG_NAME_MAX,
					d->rel);
	}
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

/* The target to store for a symlink, in x->scratch. */
static int link_target(struct extractor *x, int pfd, const char *t)
{
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
		memcpy(x->scratch, t, strlen(t) + 1);
		return 0;
	}
	/* "ROOTFS/a/b" names a/b of this package: "../" once per level of
	 * the link's directory, then a/b. */
	if (path_clean(t, clean, sizeof(clean), x->e) < 0) {
		x->e->code = EINVAL;
		return cerr_prefix(x->e, "symlink target");
	}
	for (int i = 0; i < depth; i++) {
		if (o + 4 >= sizeof(x->scratch))
			return cerr_set(x->e, EINVAL,
					"symlink target too long");
		memcpy(x->scratch + o, "../", 3);
		o += 3;
	}
	if (o + strlen(clean + 7) + 2 > sizeof(x->scratch))
		return cerr_set(x->e, EINVAL, "symlink target too long");
	memcpy(x->scratch + o, clean + 7, strlen(clean + 7) + 1);
	if (!x->scratch[0])
		memcpy(x->scratch, ".", 2);
	return 0;
}

static int extract_symlink(struct extractor *x, struct archive_entry *ent,
			   int pfd, const char *base)
{
	uid_t uid;
	gid_t gid;

	if (link_target(x, pfd, archive_entry_symlink(ent)) < 0)
		return -1;
	if (symlinkat(x->scratch, pfd, base) < 0) {
		if (errno != EEXIST)
			return cerr_sys(x->e, "symlink");
		if (clear_slot(x, pfd, base) < 0)
			return -1;
		if (symlinkat(x->scratch, pfd, base) < 0)
			return cerr_sys(x->e, "symlink");
	}
	if (!x->as_root)
		return 0;
	if (entry_owner(x, ent, &uid, &gid) < 0)
		return -1;
	if (fchownat(pfd, base, uid, gid, AT_SYMLINK_NOFOLLOW) < 0)
		return cerr_sys(x->e, "chown");
	return 0;
}

static int extract_hardlink(struct extractor *x, const char *target, int pfd,
			    const char *base)
{
	char clean[PATH_MAX_INPUT];
	cleanup_close int tfd = -1;
	const char *tbase, *trel;
	struct stat st;

	if (path_clean(target, clean, sizeof(clean), x->e) < 0) {
		x->e->code = EINVAL;
		return cerr_prefix(x->e, "hardlink target");
	}
	if (strncmp(clean, "ROOTFS/", 7) != 0 || !clean[7])
		return cerr_set(x->e, EINVAL,
				"hardlink target '%.*s' is outside the package",
				MSG_NAME_MAX, target);
	trel = clean + 7;
	if (!strcmp(trel, x->rel))
		return 0; /* a link to itself: already there */
	tfd = path_open_parent(x->rootfd, trel, false, &tbase, x->e);
	if (tfd < 0) {
		if (x->e->code == EXDEV || x->e->code == ELOOP)
			x->e->code = EINVAL;
		return cerr_prefix(x->e, "hardlink target");
	}
	if (fstatat(tfd, tbase, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		if (errno == ENOENT)
			return cerr_set(x->e, EINVAL,
					"hardlink target '%.*s' is not in the "
					"package (yet)",
					MSG_NAME_MAX, trel);
		return cerr_sys(x->e, "hardlink target '%.*s'", MSG_NAME_MAX,
				trel);
	}
	if (!S_ISREG(st.st_mode))
		return cerr_set(x->e, EINVAL,
				"hardlink target '%.*s' is not a regular file",
				MSG_NAME_MAX, trel);
	if (linkat(tfd, tbase, pfd, base, 0) < 0) {
		if (errno != EEXIST)
			return cerr_sys(x->e, "link");
		if (clear_slot(x, pfd, base) < 0)
			return -1;
		if (linkat(tfd, tbase, pfd, base, 0) < 0)
			return cerr_sys(x->e, "link");
	}
	return 0;
}

static int extract_entry(struct extractor *x, struct archive_entry *ent)
{
	const char *hl = archive_entry_hardlink(ent), *base;
	mode_t type = archive_entry_filetype(ent);
	cleanup_close int pfd = -1;

	if (!hl && type != AE_IFREG && type != AE_IFDIR && type != AE_IFLNK) {
		/* Devices, fifos and sockets have no business in a volume. */
		log_debug("deploy: skipping '%.*s' of type %o", MSG_NAME_MAX,
			  x->rel, (unsigned)type);
		return 0;
	}
	pfd = path_open_parent(x->rootfd, x->rel, true, &base, x->e);
	if (pfd < 0) {
		if (x->e->code == EXDEV || x->e->code == ELOOP)
			x->e->code = EINVAL; /* a hostile archive: 400 */
		return -1;
	}
	if (hl)
		return extract_hardlink(x, hl, pfd, base);
	switch (type) {
	case AE_IFDIR:
		return extract_dir(x, ent, pfd, base);
	case AE_IFLNK:
		return extract_symlink(x, ent, pfd, base);
	default:
		return extract_file(x, ent, pfd, base);
	}
}

static int extract_all(struct extractor *x)
{
	struct archive_entry *ent;
	int r;

	while ((r = archive_read_next_header(x->a, &ent)) == ARCHIVE_OK ||
	       r == ARCHIVE_WARN) {
		const char *raw = archive_entry_pathname(ent);
		int in;

		if (++x->entries > DEPLOY_ENTRIES_MAX)
			return cerr_set(x->e, EFBIG,
					"package has more than %u entries",
					DEPLOY_ENTRIES_MAX);
		if (!raw)
			return cerr_set(x->e, EINVAL, "entry without a name");
		in = entry_rel(x, raw);
		if (in < 0)
			return cerr_prefix(x->e, "entry '%.*s'", MSG_NAME_MAX,
					   raw);
		if (in == 0)
			continue;
		if (extract_entry(x, ent) < 0)
			return cerr_prefix(x->e, "entry '%.*s'", MSG_NAME_MAX,
					   raw);
	}
	if (r != ARCHIVE_EOF)
		return archive_fail(x->a, x->e, "read package");
	return fix_dirs(x);
}

static int open_archive(struct extractor *x, int fd)
{
	x->a = archive_read_new();
	if (!x->a)
		return cerr_set(x->e, ENOMEM, "archive_read_new");
	archive_read_support_filter_gzip(x->a);
	archive_read_support_filter_none(x->a);
	archive_read_support_format_tar(x->a);
	archive_read_support_format_gnutar(x->a);
	if (archive_read_open_fd(x->a, fd, 65536) != ARCHIVE_OK)
		return archive_fail(x->a, x->e, "open package");
	return 0;
}

static void extractor_free(struct extractor *x)
{
	for (size_t i = 0; i < x->ndirs; i++)
		free(x->dirs[i].rel);
	free(x->dirs);
	if (x->a)
		archive_read_free(x->a);
}

/* libarchive's gzip reader never checks a member's trailer (CRC-32 and
 * length), so a package damaged in transit would be extracted with wrong
 * bytes. zlib checks both: the whole stream is inflated once, to nowhere,
 * before anything is written. Concatenated members are each checked; a
 * package that is not gzip'd (a plain tar) has nothing to check. */
static int inflate_all(z_stream *z, int fd, unsigned char *in,
		       unsigned char *out, struct cerr *e)
{
	bool ended = false; /* between two members */

	for (;;) {
		int zr;

		if (z->avail_in == 0) {
			ssize_t n = read(fd, in, CHECK_CHUNK);
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0)
				return cerr_sys(e, "read package");
			if (n == 0)
				return ended ? 0
					     : cerr_set(e, EINVAL,
							"package is not valid "
							"gzip: truncated");
			z->next_in = in;
			z->avail_in = (uInt)n;
		}
		if (ended) {
			/* Padding after the last member is the tar reader's
			 * business; another member is checked too. */
			if (z->next_in[0] != 0x1f)
				return 0;
			inflateReset(z);
			ended = false;
		}
		z->next_out = out;
		z->avail_out = CHECK_CHUNK;
		zr = inflate(z, Z_NO_FLUSH);
		if (zr == Z_STREAM_END)
			ended = true;
		else if (zr != Z_OK && zr != Z_BUF_ERROR)
			return cerr_set(e, EINVAL,
					"package is not valid gzip: %s",
					z->msg ? z->msg : "corrupt data");
	}
}

static int check_gzip(int fd, struct cerr *e)
{
	unsigned char magic[2];
	cleanup_free unsigned char *in = NULL, *out = NULL;
	z_stream z = {0};
	int r;

	if (pread(fd, magic, 2, 0) != 2 || magic[0] != 0x1f || magic[1] != 0x8b)
		return 0;
	if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK)
		return cerr_set(e, ENOMEM, "inflateInit2");
	in = xmalloc(CHECK_CHUNK);
	out = xmalloc(CHECK_CHUNK);
	if (lseek(fd, 0, SEEK_SET) < 0)
		r = cerr_sys(e, "rewind the package");
	else
		r = inflate_all(&z, fd, in, out, e);
	inflateEnd(&z);
	if (r == 0 && lseek(fd, 0, SEEK_SET) < 0)
		r = cerr_sys(e, "rewind the package");
	return r;
}

static int extract_into(int rootfd, int fd, struct cerr *e)
{
	/* On the heap: it is 12 KiB, and the API's workers have small
	 * stacks. */
	struct extractor *x = xcalloc(1, sizeof(*x));
	char proc[64];
	ssize_t n;
	int r = -1;

	x->rootfd = rootfd;
	x->e = e;
	x->as_root = geteuid() == 0;
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", rootfd);
	n = readlink(proc, x->rootpath, sizeof(x->rootpath) - 1);
	if (n < 0) {
		cerr_sys(e, "readlink %s", proc);
		goto out;
	}
	x->rootpath[n] = '\0';
	x->rootlen = (size_t)n;
	if (open_archive(x, fd) < 0 || extract_all(x) < 0)
		goto out;
	r = 0;
out:
	extractor_free(x);
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

static int rename_in(int dirfd, const char *from, const char *to,
		     unsigned int flags)
{
	return (int)syscall(SYS_renameat2, dirfd, from, dirfd, to, flags);
}

/* Put tmp in name's place: exchanged with the old package when there is
 * one (which then sits at tmp, for the caller to remove), else renamed. */
static int swap_in(int pkgdirfd, const char *tmp, const char *name,
		   bool *had_old, struct cerr *e)
{
	for (int tries = 0; tries < 8; tries++) {
		if (rename_in(pkgdirfd, tmp, name, RENAME_EXCHANGE) == 0) {
			*had_old = true;
			return 0;
		}
		if (errno != ENOENT)
			break;
		if (rename_in(pkgdirfd, tmp, name, RENAME_NOREPLACE) == 0) {
			*had_old = false;
			return 0;
		}
		if (errno != EEXIST)
			break;
		/* Another deploy of the same name won the race; swap again. */
	}
	return cerr_sys(e, "rename the new package into place");
}

int deploy_package(int pkgdirfd, const char *name, int fd, struct cerr *e)
{
	char tmp[DEPLOY_NAME_MAX + 32];
	cleanup_close int rootfd = -1;
	bool had_old = false;
	struct cerr ignore = {0};

	if (!deploy_name_ok(name))
		return cerr_set(e, EINVAL, "bad package name '%.*s'",
				MSG_NAME_MAX, name);
	if (check_gzip(fd, e) < 0)
		return cerr_prefix(e, "package %s", name);
	if (make_tmpdir(pkgdirfd, name, tmp, sizeof(tmp), e) < 0)
		return cerr_prefix(e, "package %s", name);
	rootfd = openat(pkgdirfd, tmp,
			O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (rootfd < 0) {
		cerr_sys(e, "open %s", tmp);
		goto fail;
	}
	if (extract_into(rootfd, fd, e) < 0 ||
	    swap_in(pkgdirfd, tmp, name, &had_old, e) < 0)
		goto fail;
	/* tmp now holds the old package, if there was one. */
	if (had_old && fs_rm_rf_at(pkgdirfd, tmp, &ignore) < 0)
		log_warn("deploy %s: removing the old package: %s", name,
			 ignore.msg);
	return 0;
fail:
	if (fs_rm_rf_at(pkgdirfd, tmp, &ignore) < 0)
		log_warn("deploy %s: removing %s: %s", name, tmp, ignore.msg);
	return cerr_prefix(e, "package %s", name);
}
