// SPDX-License-Identifier: Apache-2.0
/* The hostile-tar extraction core (unpack.h): one OCI image layer (an
 * uncompressed tar stream) or one deploy package, applied beneath a root
 * directory fd under a policy (struct unpack_policy: whiteouts or not,
 * which types, which link targets, caps).
 *
 * This is the security boundary of the puller and of deploys: every byte
 * comes from a registry or a controller we do not trust. The rules that
 * keep it inside the root, whatever the policy:
 *
 *  - entry names are cleaned (path_clean) and a ".." component fails the
 *    layer; a leading '/' simply means "from the root";
 *  - every entry is created through its parent directory, which is resolved
 *    beneath the root by path_open_parent (openat2 RESOLVE_BENEATH or the
 *    O_NOFOLLOW walker), so a symlink that climbs out or is absolute makes
 *    the layer fail instead of being followed;
 *  - the last component is never followed: files are created O_EXCL after
 *    whatever was there is unlinked, and metadata goes through the new fd or
 *    an AT_SYMLINK_NOFOLLOW call;
 *  - removals (replacements, whiteouts, opaque directories) use
 *    fs_rm_rf_at, which never follows symlinks or crosses mounts.
 *
 * For speed, the parent directory of the previous entry stays open (tars
 * list a directory's entries together), a child of it is reached with one
 * O_NOFOLLOW openat, and bookkeeping lives in pools that grow by doubling
 * rather than in per-entry allocations. */
#include "pull-internal.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "cleanup.h"
#include "fsutil.h"
#include "path.h"
#include "util.h"

#define UNPACK_BLOCK (128 * 1024)
#define SYMLINK_TARGET_MAX 4096
/* Names plus values of one entry's extended attributes. */
#define XATTR_ENTRY_MAX (64 * 1024)
/* Bookkeeping grows with the entries of a layer (every path it created,
 * for opaque directories, and the directories whose times are set at the
 * end), and a compressed layer of millions of tiny entries is cheap to
 * send: both are capped, at about 300 MiB of memory in all. */
#define POOL_MAX (128u << 20)
#define PATHS_MAX (1u << 21)
/* Opaque directories in FLAT form walk what is on disk; a layer cannot make
 * that walk deeper, or longer in all, than this. */
#define PRUNE_DEPTH_MAX 512
#define PRUNE_VISITS_MAX (16u << 20)
/* How much of an entry name goes into an error message. */
#define MSG_NAME_MAX 240

static inline void archive_read_freep(struct archive **a)
{
	if (*a)
		archive_read_free(*a);
}

/* Strings stored back to back; offset 0 holds "" (the root). */
struct strpool {
	char *p;
	size_t len, cap;
};

struct pslot {
	uint64_t hash;
	size_t off; /* 0: empty slot */
};

/* Open-addressing hash set of paths in the pool, keyed with SipHash and a
 * random key so that a crafted layer cannot make it quadratic. */
struct pathset {
	struct pslot *slot;
	size_t cap, n;
	uint64_t key[2];
};

struct dirtime {
	size_t off; /* path in the pool */
	uint32_t depth, seq;
	struct timespec ts[2];
	mode_t perm; /* with defer_dir_modes: set at the end */
	uid_t uid;
	gid_t gid;
};

struct unpacker {
	struct archive *a;
	int rootfd;
	const struct unpack_policy *pol;
	enum unpack_mode mode;
	mode_t perm_mask;
	bool as_root;
	struct cerr *e;
	struct unpack_stats st;
	uint64_t unchecked; /* bytes written since the last free-space check */
	/* The cached parent directory: ppath (plen bytes) is open as pfd. */
	int pfd;
	size_t plen;
	bool stale; /* see cache_stale */
	char ppath[PATH_MAX_INPUT];
	char name[PATH_MAX_INPUT];    /* the current entry, cleaned */
	char scratch[PATH_MAX_INPUT]; /* hardlink target, opaque walk */
	char target[PATH_MAX_INPUT];  /* a symlink target the policy wrote */
	struct strpool pool;
	struct pathset made; /* FLAT: every path this layer created so far */
	struct dirtime *dt;
	size_t ndt, capdt;
	size_t prune_visits;
};

/* ---- hashing and the path set ---- */

static inline uint64_t rotl64(uint64_t x, int b)
{
	return (x << b) | (x >> (64 - b));
}

#define SIPROUND                                                               \
	do {                                                                   \
		v0 += v1;                                                      \
		v1 = rotl64(v1, 13);                                           \
		v1 ^= v0;                                                      \
		v0 = rotl64(v0, 32);                                           \
		v2 += v3;                                                      \
		v3 = rotl64(v3, 16);                                           \
		v3 ^= v2;                                                      \
		v0 += v3;                                                      \
		v3 = rotl64(v3, 21);                                           \
		v3 ^= v0;                                                      \
		v2 += v1;                                                      \
		v1 = rotl64(v1, 17);                                           \
		v1 ^= v2;                                                      \
		v2 = rotl64(v2, 32);                                           \
	} while (0)

/* SipHash-1-3: collision resistance against someone who does not know the
 * key, which is all a hash table needs. */
static uint64_t siphash13(const uint64_t k[2], const char *p, size_t n)
{
	uint64_t v0 = k[0] ^ 0x736f6d6570736575ull;
	uint64_t v1 = k[1] ^ 0x646f72616e646f6dull;
	uint64_t v2 = k[0] ^ 0x6c7967656e657261ull;
	uint64_t v3 = k[1] ^ 0x7465646279746573ull;
	uint64_t m, b = (uint64_t)n << 56;
	size_t i;

	for (i = 0; i + 8 <= n; i += 8) {
		memcpy(&m, p + i, 8);
		v3 ^= m;
		SIPROUND;
		v0 ^= m;
	}
	for (size_t j = 0; i + j < n; j++)
		b |= (uint64_t)(unsigned char)p[i + j] << (8 * j);
	v3 ^= b;
	SIPROUND;
	v0 ^= b;
	v2 ^= 0xff;
	SIPROUND;
	SIPROUND;
	SIPROUND;
	return v0 ^ v1 ^ v2 ^ v3;
}

static int pool_add(struct unpacker *u, const char *s, size_t n, size_t *off)
{
	struct strpool *pl = &u->pool;

	if (pl->len + n + 1 > pl->cap) {
		size_t cap = pl->cap ? pl->cap : 65536;

		while (pl->len + n + 1 > cap)
			cap *= 2;
		if (cap > POOL_MAX)
			return cerr_set(u->e, ENOMEM,
					"layer has too many entries (more than "
					"%u MiB of paths)",
					POOL_MAX >> 20);
		pl->p = xrealloc(pl->p, cap);
		pl->cap = cap;
	}
	memcpy(pl->p + pl->len, s, n);
	pl->p[pl->len + n] = '\0';
	*off = pl->len;
	pl->len += n + 1;
	return 0;
}

/* The slot that holds path p, or the empty slot where it would go. */
static struct pslot *set_slot(struct unpacker *u, const char *p, size_t n,
			      uint64_t h)
{
	struct pathset *s = &u->made;
	size_t mask = s->cap - 1;

	for (size_t i = (size_t)h & mask;; i = (i + 1) & mask) {
		struct pslot *sl = &s->slot[i];
		const char *q = u->pool.p + sl->off;

		if (!sl->off ||
		    (sl->hash == h && !memcmp(q, p, n) && q[n] == '\0'))
			return sl;
	}
}

static void set_grow(struct pathset *s)
{
	size_t cap = s->cap ? s->cap * 2 : 1024;
	struct pslot *t = xcalloc(cap, sizeof(*t));

	for (size_t i = 0; i < s->cap; i++) {
		size_t j;

		if (!s->slot[i].off)
			continue;
		for (j = (size_t)s->slot[i].hash & (cap - 1); t[j].off;
		     j = (j + 1) & (cap - 1))
			;
		t[j] = s->slot[i];
	}
	free(s->slot);
	s->slot = t;
	s->cap = cap;
}

static bool set_has(struct unpacker *u, const char *p, size_t n)
{
	if (!u->made.cap)
		return false;
	return set_slot(u, p, n, siphash13(u->made.key, p, n))->off != 0;
}

/* Add p and, until one is already there, its ancestors: a directory that
 * mkdirs made implicitly also belongs to this layer. *off is p's string in
 * the pool. */
static int set_add(struct unpacker *u, const char *p, size_t n, size_t *off)
{
	bool first = true;

	while (n) {
		uint64_t h;
		struct pslot *sl;
		const char *slash;

		if (u->made.n >= PATHS_MAX)
			return cerr_set(u->e, ENOMEM,
					"layer has more than %u entries",
					PATHS_MAX);
		if (2 * (u->made.n + 1) > u->made.cap)
			set_grow(&u->made);
		h = siphash13(u->made.key, p, n);
		sl = set_slot(u, p, n, h);
		if (sl->off) {
			if (first)
				*off = sl->off;
			return 0;
		}
		if (pool_add(u, p, n, &sl->off) < 0)
			return -1;
		sl->hash = h;
		u->made.n++;
		if (first)
			*off = sl->off;
		first = false;
		slash = memrchr(p, '/', n);
		n = slash ? (size_t)(slash - p) : 0;
	}
	return 0;
}

/* ---- the parent directory cache ---- */

static void cache_drop(struct unpacker *u)
{
	if (u->pfd >= 0)
		close(u->pfd);
	u->pfd = -1;
	u->plen = 0;
}

static void cache_set(struct unpacker *u, int fd, const char *dir, size_t n)
{
	cache_drop(u);
	memcpy(u->ppath, dir, n);
	u->ppath[n] = '\0';
	u->pfd = fd;
	u->plen = n;
	u->stale = false;
}

/* Something beneath the root is about to be removed or replaced. The
 * cached path may have been resolved through any symlink or directory, so
 * the cache no longer proves where its string leads: stop using it. The fd
 * stays open because the current entry may hold it as its parent (which
 * the removal of one of its children does not change); the next get_parent
 * replaces it. */
static void cache_stale(struct unpacker *u)
{
	u->stale = true;
}

/* One component below an open directory, never following a symlink: a
 * symlink, a missing name or a non-directory returns -1 and the caller does
 * the full resolution. */
static int open_child_dir(int dirfd, const char *comp, size_t n)
{
	char c[256];

	if (n >= sizeof(c))
		return -1;
	memcpy(c, comp, n);
	c[n] = '\0';
	return openat(dirfd, c, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

/* The directory that holds u->name, borrowed: it stays valid until the
 * cache is next replaced or dropped. *base is the last component. */
static int get_parent(struct unpacker *u, bool mkdirs, const char **base)
{
	const char *name = u->name, *slash = strrchr(name, '/');
	size_t dlen = slash ? (size_t)(slash - name) : 0;
	int fd, from = -1;
	size_t flen = 0;

	*base = slash ? slash + 1 : name;
	if (!dlen)
		return u->rootfd;
	if (u->pfd >= 0 && !u->stale && u->plen == dlen &&
	    !memcmp(u->ppath, name, dlen))
		return u->pfd;
	if (u->pfd >= 0 && !u->stale && u->plen < dlen &&
	    name[u->plen] == '/' && !memcmp(u->ppath, name, u->plen)) {
		from = u->pfd;
		flen = u->plen + 1;
	} else if (!memchr(name, '/', dlen)) {
		from = u->rootfd;
	}
	if (from >= 0 && !memchr(name + flen, '/', dlen - flen)) {
		fd = open_child_dir(from, name + flen, dlen - flen);
		if (fd >= 0) {
			cache_set(u, fd, name, dlen);
			return fd;
		}
	}
	fd = path_open_parent(u->rootfd, name, mkdirs, base, u->e);
	if (fd < 0)
		return -1;
	cache_set(u, fd, name, dlen);
	return fd;
}

/* After get_parent failed: was it only that the directory does not exist
 * (which is fine for a whiteout: there is nothing to delete)? */
static bool parent_missing(struct unpacker *u)
{
	if (u->e->code != ENOENT && u->e->code != ENOTDIR)
		return false;
	cerr_clear(u->e);
	return true;
}

/* Under hostile_einval, what a crafted archive provokes (a path that
 * climbs or runs through a symlink out of the root) is the sender's
 * fault: EINVAL. Always returns -1. */
static int hostile(struct unpacker *u)
{
	if (u->pol->hostile_einval &&
	    (u->e->code == EXDEV || u->e->code == ELOOP))
		u->e->code = EINVAL;
	return -1;
}

static mode_t perm_of(const struct unpacker *u, struct archive_entry *ent)
{
	return archive_entry_perm(ent) & u->perm_mask;
}

/* Something is in the way of a new entry (base in pfd): remove it, a whole
 * tree if it is a directory. Trying unlink first spares a stat. */
static int clear_slot(struct unpacker *u, int pfd, const char *base)
{
	cache_stale(u);
	if (unlinkat(pfd, base, 0) == 0 || errno == ENOENT)
		return 0;
	if (errno != EISDIR)
		return cerr_sys(u->e, "remove the existing '%s'", base);
	return fs_rm_rf_at(pfd, base, u->e);
}

/* ---- metadata ---- */

static int entry_owner(struct unpacker *u, struct archive_entry *ent,
		       uid_t *uid, gid_t *gid)
{
	int64_t U = archive_entry_uid(ent), G = archive_entry_gid(ent);

	/* (uid_t)-1 would mean "leave unchanged" to chown. */
	if (U < 0 || U >= UINT32_MAX || G < 0 || G >= UINT32_MAX)
		return cerr_set(u->e, EINVAL, "owner %lld:%lld is out of range",
				(long long)U, (long long)G);
	*uid = (uid_t)U;
	*gid = (gid_t)G;
	return 0;
}

static long clamp_nsec(long ns)
{
	return ns >= 0 && ns < 1000000000 ? ns : 0;
}

/* Like Docker: the access time is the stored one, else the mtime. */
static void entry_times(struct archive_entry *ent, struct timespec ts[2])
{
	if (archive_entry_mtime_is_set(ent)) {
		ts[1].tv_sec = archive_entry_mtime(ent);
		ts[1].tv_nsec = clamp_nsec(archive_entry_mtime_nsec(ent));
	} else {
		ts[1].tv_sec = 0;
		ts[1].tv_nsec = UTIME_OMIT;
	}
	if (archive_entry_atime_is_set(ent)) {
		ts[0].tv_sec = archive_entry_atime(ent);
		ts[0].tv_nsec = clamp_nsec(archive_entry_atime_nsec(ent));
	} else {
		ts[0] = ts[1];
	}
}

/* Names a layer must never set: overlayfs keeps its own metadata
 * (opaque, redirect, metacopy, whiteout …) in trusted.overlay.* — and in
 * user.overlay.* when mounted with userxattr — so a layer that carried them
 * could forge what overlayfs believes about the tree. */
bool unpack_xattr_forbidden(const char *n)
{
	return str_has_prefix(n, "trusted.overlay.") ||
	       str_has_prefix(n, "user.overlay.");
}

/* Attributes that many file systems or unprivileged callers cannot hold;
 * as in Docker, losing them does not fail the layer. */
static bool xattr_optional(const char *n)
{
	return str_has_prefix(n, "user.") || str_has_prefix(n, "security.");
}

/* Set the entry's extended attributes on fd, or (fd < 0) on base in pfd
 * without following it, through /proc/self/fd/<pfd>/<base>. */
static int apply_xattrs(struct unpacker *u, struct archive_entry *ent, int fd,
			int pfd, const char *base)
{
	char proc[PATH_MAX_INPUT + 32];
	const char *xn;
	const void *xv;
	size_t xs, total = 0;

	if (!u->pol->xattrs || archive_entry_xattr_reset(ent) == 0)
		return 0;
	if (fd < 0 &&
	    (size_t)snprintf(proc, sizeof(proc), "/proc/self/fd/%d/%s", pfd,
			     base) >= sizeof(proc))
		return cerr_set(u->e, ENAMETOOLONG, "name too long for xattrs");
	while (archive_entry_xattr_next(ent, &xn, &xv, &xs) == ARCHIVE_OK) {
		int r;

		total += strlen(xn) + xs;
		if (total > XATTR_ENTRY_MAX)
			return cerr_set(u->e, E2BIG,
					"extended attributes exceed %d bytes",
					XATTR_ENTRY_MAX);
		if (unpack_xattr_forbidden(xn))
			continue;
		r = fd >= 0 ? fsetxattr(fd, xn, xv, xs, 0)
			    : lsetxattr(proc, xn, xv, xs, 0);
		if (r < 0 && (errno == ENOTSUP || errno == EPERM) &&
		    xattr_optional(xn))
			continue;
		if (r < 0)
			return cerr_sys(u->e, "set xattr '%.64s'", xn);
	}
	return 0;
}

/* Owner, xattrs and mode through an open file or directory. One fstat
 * replaces a chown and a chmod that would usually change nothing: the node
 * was made with the entry's permission bits, and umask, default ACLs and
 * setgid directories are what can make it differ. chmod comes after chown,
 * which clears setuid and setgid bits. */
static int set_meta_fd(struct unpacker *u, struct archive_entry *ent, int fd)
{
	mode_t perm = perm_of(u, ent);
	struct stat st;
	uid_t uid;
	gid_t gid;

	if (fstat(fd, &st) < 0)
		return cerr_sys(u->e, "stat");
	if (u->as_root) {
		if (entry_owner(u, ent, &uid, &gid) < 0)
			return -1;
		if ((st.st_uid != uid || st.st_gid != gid) &&
		    fchown(fd, uid, gid) < 0)
			return cerr_sys(u->e, "chown %u:%u", uid, gid);
		if (st.st_uid != uid || st.st_gid != gid)
			st.st_mode = 0; /* chown may have cleared bits */
	}
	if (apply_xattrs(u, ent, fd, -1, NULL) < 0)
		return -1;
	if ((st.st_mode & 07777) != perm && fchmod(fd, perm) < 0)
		return cerr_sys(u->e, "chmod %o", perm);
	return 0;
}

/* The same for symlinks and device nodes, which cannot be opened for it. */
static int set_meta_at(struct unpacker *u, struct archive_entry *ent, int pfd,
		       const char *base, bool is_link)
{
	mode_t perm = perm_of(u, ent);
	struct timespec ts[2];
	uid_t uid;
	gid_t gid;

	if (u->as_root) {
		if (entry_owner(u, ent, &uid, &gid) < 0)
			return -1;
		if (fchownat(pfd, base, uid, gid, AT_SYMLINK_NOFOLLOW) < 0)
			return cerr_sys(u->e, "chown %u:%u", uid, gid);
	}
	if (apply_xattrs(u, ent, -1, pfd, base) < 0)
		return -1;
	/* A symlink has no mode of its own. fchmodat follows a symlink, but
	 * base is the node this entry has just made (the target directory
	 * is private to the caller while a layer is applied). */
	if (!is_link && fchmodat(pfd, base, perm, 0) < 0)
		return cerr_sys(u->e, "chmod %o", perm);
	entry_times(ent, ts);
	if (utimensat(pfd, base, ts, AT_SYMLINK_NOFOLLOW) < 0)
		return cerr_sys(u->e, "set times");
	return 0;
}

/* ---- entry types ---- */

static int archive_fail(struct unpacker *u, const char *what)
{
	const char *msg = archive_error_string(u->a);
	int code = archive_errno(u->a);

	/* A package is read from the agent's own temporary file: a read
	 * error there is a corrupt archive. */
	if (u->pol->hostile_einval && code != ENOMEM)
		code = EINVAL;
	return cerr_set(u->e, code > 0 ? code : EIO, "%s: %s", what,
			msg ? msg : "unknown libarchive error");
}

/* How often the free space is looked at: a bomb can get at most this far
 * into the reserve. */
#define RESERVE_CHECK_BYTES (4u << 20)

static int does_not_fit(struct unpacker *u, uint64_t avail, uint64_t reserve)
{
	return cerr_set(u->e, ENOSPC,
			"does not fit: no space left above the reserve: %llu "
			"MiB free, and unpacking keeps %llu MiB free on the "
			"disk it unpacks to; %llu MiB unpacked so far",
			(unsigned long long)(avail >> 20),
			(unsigned long long)(reserve >> 20),
			(unsigned long long)(u->st.bytes >> 20));
}

/* Stop before the filesystem's free space goes below the reserve. */
static int check_reserve(struct unpacker *u, size_t coming)
{
	struct statvfs sv;
	uint64_t avail, reserve;

	u->unchecked += coming;
	if (!u->pol->reserve_bytes || u->unchecked < RESERVE_CHECK_BYTES)
		return 0;
	u->unchecked = 0;
	if (fstatvfs(u->rootfd, &sv) < 0)
		return 0; /* the write itself will tell */
	avail = (uint64_t)sv.f_bavail * sv.f_frsize;
	reserve = unpack_reserve(u->pol->reserve_bytes,
				 (uint64_t)sv.f_blocks * sv.f_frsize);
	if (avail < reserve + RESERVE_CHECK_BYTES)
		return does_not_fit(u, avail, reserve);
	return 0;
}

static int write_failed(struct unpacker *u)
{
	if (errno == ENOSPC || errno == EDQUOT)
		return cerr_set(u->e, ENOSPC,
				"does not fit: no space left on the disk it "
				"unpacks to after %llu MiB",
				(unsigned long long)(u->st.bytes >> 20));
	return cerr_sys(u->e, "write");
}

/* Copy the entry's data; libarchive hands sparse files over as blocks with
 * offsets, and the holes between (and after) them stay holes. */
static int write_data(struct unpacker *u, struct archive_entry *ent, int fd)
{
	const void *buf;
	size_t len;
	la_int64_t off, end = 0;

	for (;;) {
		int r = archive_read_data_block(u->a, &buf, &len, &off);

		if (r == ARCHIVE_EOF)
			break;
		if (r != ARCHIVE_OK && r != ARCHIVE_WARN)
			return archive_fail(u, "read data");
		if (off < 0)
			return cerr_set(u->e, EINVAL, "negative data offset");
		u->st.bytes += len;
		if (u->pol->max_bytes && u->st.bytes > u->pol->max_bytes)
			return cerr_set(
			    u->e, EFBIG,
			    "archive unpacks to more than %llu MiB",
			    (unsigned long long)(u->pol->max_bytes >> 20));
		if (check_reserve(u, len) < 0)
			return -1;
		if (len && fs_pwrite_all(fd, buf, len, (off_t)off) < 0)
			return write_failed(u);
		if (off + (la_int64_t)len > end)
			end = off + (la_int64_t)len;
	}
	if (!archive_entry_size_is_set(ent) || archive_entry_size(ent) == end)
		return 0;
	if (u->pol->max_bytes &&
	    (uint64_t)archive_entry_size(ent) > u->pol->max_bytes)
		return cerr_set(u->e, EFBIG, "entry is too large");
	if (ftruncate(fd, (off_t)archive_entry_size(ent)) < 0)
		return cerr_sys(u->e, "truncate");
	return 0;
}

static int utimes_fd(int fd, const struct timespec ts[2])
{
	char proc[64];

	if (utimensat(fd, "", ts, AT_EMPTY_PATH) == 0)
		return 0;
	if (errno != EINVAL) /* kernels before 5.8 lack AT_EMPTY_PATH here */
		return -1;
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	return utimensat(AT_FDCWD, proc, ts, 0);
}

static int apply_file(struct unpacker *u, struct archive_entry *ent, int pfd,
		      const char *base)
{
	const int fl = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
	mode_t perm = perm_of(u, ent) & 0777;
	cleanup_close int fd = openat(pfd, base, fl, perm);
	struct timespec ts[2];

	if (fd < 0 && errno == EEXIST) {
		if (clear_slot(u, pfd, base) < 0)
			return -1;
		fd = openat(pfd, base, fl, perm);
	}
	if (fd < 0)
		return cerr_sys(u->e, "create");
	if (write_data(u, ent, fd) < 0 || set_meta_fd(u, ent, fd) < 0)
		return -1;
	entry_times(ent, ts);
	if (futimens(fd, ts) < 0)
		return cerr_sys(u->e, "set times");
	return 0;
}

/* A directory that exists stays (with its contents); only its metadata
 * changes. Its times are set at the end of the layer. In OVERLAY form, a
 * directory that replaces this layer's whiteout of the same name must hide
 * the lower directory as the whiteout did: it is made opaque, which is what
 * FLAT's "delete, then create afresh" amounts to. */
static int apply_dir(struct unpacker *u, struct archive_entry *ent, int pfd,
		     const char *base)
{
	mode_t perm = u->pol->defer_dir_modes ? 0700 : perm_of(u, ent) & 0777;
	cleanup_close int fd = -1;
	bool opaque = false;
	struct stat st;

	if (mkdirat(pfd, base, perm) < 0) {
		if (errno != EEXIST)
			return cerr_sys(u->e, "mkdir");
		if (fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW) < 0)
			return cerr_sys(u->e, "stat");
		if (!S_ISDIR(st.st_mode)) {
			opaque = u->mode == UNPACK_OVERLAY &&
				 S_ISCHR(st.st_mode) && st.st_rdev == 0;
			if (clear_slot(u, pfd, base) < 0)
				return -1;
			if (mkdirat(pfd, base, perm) < 0)
				return cerr_sys(u->e, "mkdir");
		}
	}
	fd = openat(pfd, base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return cerr_sys(u->e, "open directory");
	if (opaque && fsetxattr(fd, OVL_OPAQUE_XATTR, "y", 1, 0) < 0)
		return cerr_sys(u->e, "mark the directory opaque");
	if (u->pol->defer_dir_modes) /* see remember, apply_dir_times */
		return apply_xattrs(u, ent, fd, -1, NULL);
	return set_meta_fd(u, ent, fd);
}

/* "./" in a layer: the root's own metadata. The root is never replaced. */
static int apply_root(struct unpacker *u, struct archive_entry *ent)
{
	cleanup_close int fd = -1;

	if (archive_entry_filetype(ent) != AE_IFDIR ||
	    archive_entry_hardlink(ent))
		return cerr_set(u->e, EINVAL,
				"only a directory entry may name the root");
	fd = openat(u->rootfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return cerr_sys(u->e, "open the root");
	return set_meta_fd(u, ent, fd);
}

/* The target is stored as is: an absolute or climbing target is fine to
 * create, because nothing in unpacking ever follows it. */
static int apply_symlink(struct unpacker *u, struct archive_entry *ent, int pfd,
			 const char *base)
{
	const char *t = archive_entry_symlink(ent);

	if (!t || !*t)
		return cerr_set(u->e, EINVAL, "symlink without a target");
	if (u->pol->link_target) {
		if (strnlen(t, SYMLINK_TARGET_MAX) >= SYMLINK_TARGET_MAX)
			return cerr_set(u->e, EINVAL,
					"symlink target too long");
		if (u->pol->link_target(u->pol->ctx, pfd, t, u->target,
					sizeof(u->target), u->e) < 0)
			return -1;
		t = u->target;
	}
	if (strnlen(t, SYMLINK_TARGET_MAX) >= SYMLINK_TARGET_MAX)
		return cerr_set(u->e, ENAMETOOLONG,
				"symlink target is longer than %d bytes",
				SYMLINK_TARGET_MAX - 1);
	if (symlinkat(t, pfd, base) < 0) {
		if (errno != EEXIST)
			return cerr_sys(u->e, "symlink");
		if (clear_slot(u, pfd, base) < 0)
			return -1;
		if (symlinkat(t, pfd, base) < 0)
			return cerr_sys(u->e, "symlink");
	}
	return set_meta_at(u, ent, pfd, base, true);
}

static int apply_node(struct unpacker *u, struct archive_entry *ent, int pfd,
		      const char *base)
{
	mode_t type = archive_entry_filetype(ent) == AE_IFCHR	? S_IFCHR
		      : archive_entry_filetype(ent) == AE_IFBLK ? S_IFBLK
								: S_IFIFO;
	dev_t rdev = type == S_IFIFO ? 0 : archive_entry_rdev(ent);

	if (mknodat(pfd, base, type | 0600, rdev) < 0) {
		if (errno != EEXIST)
			return cerr_sys(u->e, "mknod");
		if (clear_slot(u, pfd, base) < 0)
			return -1;
		if (mknodat(pfd, base, type | 0600, rdev) < 0)
			return cerr_sys(u->e, "mknod");
	}
	return set_meta_at(u, ent, pfd, base, false);
}

/* The target's parent is resolved beneath the root like any entry's (with
 * its own fd: hardlinks are few, and the cache holds the link's parent);
 * the target itself must exist and not be a directory. */
static int apply_hardlink(struct unpacker *u, struct archive_entry *ent,
			  int pfd, const char *base)
{
	cleanup_close int tfd = -1;
	const char *tbase;
	struct stat st;

	if (path_clean(archive_entry_hardlink(ent), u->scratch,
		       sizeof(u->scratch), u->e) < 0) {
		if (u->pol->hostile_einval)
			u->e->code = EINVAL;
		return cerr_prefix(u->e, "hardlink target");
	}
	if (u->pol->map_hardlink &&
	    u->pol->map_hardlink(u->pol->ctx, u->scratch, u->e) < 0)
		return -1;
	if (!u->scratch[0])
		return cerr_set(u->e, EPERM,
				"hardlink target is the root directory");
	if (!strcmp(u->scratch, u->name))
		return 0; /* a link to itself: already there */
	tfd = path_open_parent(u->rootfd, u->scratch, false, &tbase, u->e);
	if (tfd < 0) {
		hostile(u);
		return cerr_prefix(u->e, "hardlink target");
	}
	if (fstatat(tfd, tbase, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		if (errno == ENOENT && u->pol->hostile_einval)
			return cerr_set(u->e, EINVAL,
					"hardlink target '%.*s' is not in the "
					"archive (yet)",
					MSG_NAME_MAX, u->scratch);
		return cerr_sys(u->e, "hardlink target '%s'", u->scratch);
	}
	if (S_ISDIR(st.st_mode))
		return cerr_set(u->e, u->pol->hostile_einval ? EINVAL : EPERM,
				"hardlink target '%s' is a directory",
				u->scratch);
	if (u->pol->hardlink_regular_only && !S_ISREG(st.st_mode))
		return cerr_set(u->e, EINVAL,
				"hardlink target '%.*s' is not a regular file",
				MSG_NAME_MAX, u->scratch);
	if (linkat(tfd, tbase, pfd, base, 0) < 0) {
		if (errno != EEXIST)
			return cerr_sys(u->e, "link to '%s'", u->scratch);
		if (clear_slot(u, pfd, base) < 0)
			return -1;
		if (linkat(tfd, tbase, pfd, base, 0) < 0)
			return cerr_sys(u->e, "link to '%s'", u->scratch);
	}
	return 0;
}

/* ---- whiteouts ---- */

static int prune(struct unpacker *u, int pfd, const char *comp, size_t len,
		 unsigned depth);

/* Was the directory at scratch[0..len) made opaque earlier in this layer?
 * Then everything in it is from this layer already. (The markers' paths
 * are in the set; they never exist on disk.) */
static bool pruned_before(struct unpacker *u, size_t len)
{
	size_t at = len ? len + 1 : 0, n = strlen(WH_OPAQUE);
	bool r;

	if (at + n >= sizeof(u->scratch))
		return false;
	if (len)
		u->scratch[len] = '/';
	memcpy(u->scratch + at, WH_OPAQUE, n + 1);
	r = set_has(u, u->scratch, at + n);
	u->scratch[len] = '\0';
	return r;
}

/* Keep one child of an opaque directory (it is from this layer) and look
 * inside it if it is a directory, which may hold older children. */
static int prune_kept(struct unpacker *u, DIR *d, const char *name, size_t len,
		      unsigned char type, unsigned depth)
{
	struct stat st;

	if (type == DT_UNKNOWN)
		type = fstatat(dirfd(d), name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
			       S_ISDIR(st.st_mode)
			   ? DT_DIR
			   : DT_REG;
	if (type != DT_DIR || pruned_before(u, len))
		return 0;
	return prune(u, dirfd(d), u->scratch + len - strlen(name), len,
		     depth + 1);
}

/* FLAT opaque directory: remove everything beneath scratch[0..len) that
 * this layer did not create, descending into the directories it did.
 * comp names the directory inside pfd. */
static int prune(struct unpacker *u, int pfd, const char *comp, size_t len,
		 unsigned depth)
{
	cleanup_dir DIR *d = NULL;
	struct dirent *de;
	int fd;

	if (depth > PRUNE_DEPTH_MAX)
		return cerr_set(u->e, ELOOP, "opaque directory is too deep");
	fd = openat(pfd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return cerr_sys(u->e, "open directory to make it opaque");
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return cerr_sys(u->e, "read directory");
	}
	while ((errno = 0, de = readdir(d))) {
		size_t n = strlen(de->d_name), at = len ? len + 1 : 0;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (++u->prune_visits > PRUNE_VISITS_MAX)
			return cerr_set(u->e, E2BIG,
					"opaque directories hold too many "
					"entries (more than %u)",
					PRUNE_VISITS_MAX);
		/* A name too long to be stored cannot be from this layer. */
		if (at + n < sizeof(u->scratch)) {
			if (len)
				u->scratch[len] = '/';
			memcpy(u->scratch + at, de->d_name, n + 1);
		}
		if (at + n < sizeof(u->scratch) &&
		    set_has(u, u->scratch, at + n)) {
			if (prune_kept(u, d, de->d_name, at + n, de->d_type,
				       depth) < 0)
				return -1;
		} else if (fs_rm_rf_at(dirfd(d), de->d_name, u->e) < 0) {
			return -1;
		}
	}
	if (errno)
		return cerr_sys(u->e, "read directory");
	return 0;
}

static int apply_opaque(struct unpacker *u)
{
	const char *base;
	cleanup_close int fd = -1;
	int pfd = get_parent(u, u->mode == UNPACK_OVERLAY, &base);
	size_t dlen = base > u->name ? (size_t)(base - u->name) - 1 : 0;

	if (pfd < 0)
		return u->mode == UNPACK_FLAT && parent_missing(u) ? 0 : -1;
	if (u->mode == UNPACK_FLAT) {
		memcpy(u->scratch, u->name, dlen);
		u->scratch[dlen] = '\0';
		if (pruned_before(u, dlen))
			return 0; /* the same marker again */
		cache_stale(u);
		if (prune(u, pfd, ".", dlen, 0) < 0)
			return -1;
		return set_add(u, u->name, strlen(u->name), &(size_t){0});
	}
	fd = openat(pfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fsetxattr(fd, OVL_OPAQUE_XATTR, "y", 1, 0) < 0)
		return cerr_sys(u->e, "mark the directory opaque");
	return 0;
}

/* ".wh.<name>": FLAT deletes <name>; OVERLAY writes overlayfs's whiteout,
 * a character device 0/0 called <name>. */
static int apply_whiteout(struct unpacker *u, const char *base)
{
	const char *victim = base + strlen(WH_PREFIX);
	int pfd;

	if (!strcmp(base, WH_OPAQUE))
		return apply_opaque(u);
	/* AUFS bookkeeping (.wh..wh.plnk, .wh..wh.aufs) is not part of the
	 * OCI format; Docker skips it too. */
	if (str_has_prefix(base, WH_META))
		return 0;
	if (!*victim || !strcmp(victim, ".") || !strcmp(victim, ".."))
		return cerr_set(u->e, EINVAL, "invalid whiteout name '%s'",
				base);
	pfd = get_parent(u, u->mode == UNPACK_OVERLAY, &base);
	if (pfd < 0)
		return u->mode == UNPACK_FLAT && parent_missing(u) ? 0 : -1;
	if (u->mode == UNPACK_FLAT) {
		cache_stale(u);
		return fs_rm_rf_at(pfd, victim, u->e);
	}
	if (mknodat(pfd, victim, S_IFCHR, makedev(0, 0)) == 0)
		return 0;
	if (errno != EEXIST)
		return cerr_sys(u->e, "create whiteout");
	if (clear_slot(u, pfd, victim) < 0)
		return -1;
	if (mknodat(pfd, victim, S_IFCHR, makedev(0, 0)) < 0)
		return cerr_sys(u->e, "create whiteout");
	return 0;
}

/* ---- per entry ---- */

/* Remember what this entry made: its path (FLAT, for opaque directories)
 * and, for a directory, the times to set once its children are in. */
static int remember(struct unpacker *u, struct archive_entry *ent, size_t len,
		    bool isdir)
{
	struct dirtime *d;
	size_t off = 0;

	if (u->pol->whiteouts && u->mode == UNPACK_FLAT && len &&
	    set_add(u, u->name, len, &off) < 0)
		return -1;
	if (!isdir)
		return 0;
	if (len && !(u->pol->whiteouts && u->mode == UNPACK_FLAT) &&
	    pool_add(u, u->name, len, &off) < 0)
		return -1;
	if (u->ndt >= PATHS_MAX)
		return cerr_set(u->e, ENOMEM,
				"layer has more than %u directories",
				PATHS_MAX);
	if (u->ndt == u->capdt) {
		u->capdt = u->capdt ? u->capdt * 2 : 256;
		u->dt = xrealloc(u->dt, u->capdt * sizeof(*u->dt));
	}
	d = &u->dt[u->ndt];
	d->off = off;
	d->seq = (uint32_t)u->ndt++;
	d->depth = 0;
	for (size_t i = 0; i < len; i++)
		d->depth += u->name[i] == '/';
	d->depth += len > 0;
	entry_times(ent, d->ts);
	d->perm = perm_of(u, ent);
	if (u->pol->defer_dir_modes &&
	    entry_owner(u, ent, &d->uid, &d->gid) < 0)
		return -1;
	return 0;
}

static int apply_typed(struct unpacker *u, struct archive_entry *ent)
{
	const char *base;
	mode_t type = archive_entry_filetype(ent);
	bool link = archive_entry_hardlink(ent) != NULL;
	int pfd;

	bool node = type == AE_IFCHR || type == AE_IFBLK || type == AE_IFIFO;

	if (!link && type != AE_IFREG && type != AE_IFDIR && type != AE_IFLNK &&
	    (!node || u->pol->no_devices))
		return 1; /* sockets and unknown types are skipped */
	pfd = get_parent(u, true, &base);
	if (pfd < 0)
		return hostile(u);
	if (link)
		return apply_hardlink(u, ent, pfd, base);
	switch (type) {
	case AE_IFREG:
		return apply_file(u, ent, pfd, base);
	case AE_IFDIR:
		return apply_dir(u, ent, pfd, base);
	case AE_IFLNK:
		return apply_symlink(u, ent, pfd, base);
	default:
		return apply_node(u, ent, pfd, base);
	}
}

static int apply_entry(struct unpacker *u, struct archive_entry *ent)
{
	const char *raw = archive_entry_pathname(ent), *base;
	size_t len;
	int r;

	if (!raw)
		return cerr_set(u->e, EINVAL, "entry without a name");
	if (path_clean(raw, u->name, sizeof(u->name), u->e) < 0)
		return cerr_set(
		    u->e, u->pol->hostile_einval ? EINVAL : u->e->code,
		    u->e->code == EINVAL ? "a '..' component is not allowed"
					 : "name is too long");
	if (u->pol->map_name) {
		r = u->pol->map_name(u->pol->ctx, u->name, u->e);
		if (r <= 0)
			return r;
	}
	len = strlen(u->name);
	if (!len) {
		if (apply_root(u, ent) < 0)
			return -1;
		return remember(u, ent, 0, true);
	}
	base = strrchr(u->name, '/');
	base = base ? base + 1 : u->name;
	if (u->pol->whiteouts && str_has_prefix(base, WH_PREFIX))
		return apply_whiteout(u, base);
	r = apply_typed(u, ent);
	if (r != 0)
		return r < 0 ? -1 : 0;
	return remember(u, ent, len,
			archive_entry_filetype(ent) == AE_IFDIR &&
			    !archive_entry_hardlink(ent));
}

/* ---- end of layer ---- */

/* Deepest first, and for one path the later entry last so that it wins. */
static int dirtime_cmp(const void *a, const void *b)
{
	const struct dirtime *x = a, *y = b;

	if (x->depth != y->depth)
		return x->depth > y->depth ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* A directory's mode and owner need an fd that is not O_PATH. */
static int dir_flags(const struct unpacker *u)
{
	return (u->pol->defer_dir_modes ? O_RDONLY : O_PATH) | O_DIRECTORY |
	       O_NOFOLLOW | O_CLOEXEC;
}

/* Deepest first, as apply_dir_times goes: a parent that loses its search
 * permission does not keep its children from theirs (without root). */
static int set_dir_mode(struct unpacker *u, int fd, const struct dirtime *d)
{
	if (u->as_root && fchown(fd, d->uid, d->gid) < 0)
		return cerr_sys(u->e, "chown");
	if (fchmod(fd, d->perm) < 0)
		return cerr_sys(u->e, "chmod");
	return 0;
}

/* Creating children changed the directories' mtimes, so theirs are set
 * last. A directory that a later entry removed or replaced is skipped. */
static int apply_dir_times(struct unpacker *u)
{
	if (u->ndt)
		qsort(u->dt, u->ndt, sizeof(*u->dt), dirtime_cmp);
	for (size_t i = 0; i < u->ndt; i++) {
		const char *p = u->pool.p ? u->pool.p + u->dt[i].off : "";
		struct cerr ignore = {0};
		cleanup_close int fd = -1;

		if (*p)
			fd = path_open_beneath(u->rootfd, p, dir_flags(u), 0,
					       &ignore);
		else
			fd = openat(u->rootfd, ".", dir_flags(u));
		if (fd < 0 &&
		    (ignore.code == ENOENT || ignore.code == ENOTDIR ||
		     ignore.code == ELOOP || ignore.code == EXDEV))
			continue; /* removed or replaced later in the layer */
		if (fd < 0 && !*p)
			return cerr_sys(u->e, "open the root");
		if (fd < 0)
			return cerr_set(u->e, ignore.code,
					"layer directory: %s", ignore.msg);
		if (u->pol->defer_dir_modes &&
		    set_dir_mode(u, fd, &u->dt[i]) < 0)
			return cerr_prefix(u->e, "directory '%.*s'",
					   MSG_NAME_MAX, p);
		if (utimes_fd(fd, u->dt[i].ts) < 0)
			return cerr_sys(u->e, "layer directory '%s': set times",
					p);
	}
	return 0;
}

/* Quote an entry name for a message: control bytes escaped (a layer could
 * otherwise put terminal escapes into logs), long names shortened. */
static const char *printable(const char *s, char *buf, size_t n)
{
	size_t o = 0;

	for (; *s && o + 8 < n; s++) {
		unsigned char c = (unsigned char)*s;

		if (c < 0x20 || c == 0x7f)
			o += (size_t)snprintf(buf + o, n - o, "\\x%02x", c);
		else
			buf[o++] = (char)c;
	}
	if (*s)
		o += (size_t)snprintf(buf + o, n - o, "…");
	buf[o < n ? o : n - 1] = '\0';
	return buf;
}

static void unpacker_free(struct unpacker *u)
{
	cache_drop(u);
	free(u->pool.p);
	free(u->made.slot);
	free(u->dt);
	free(u);
}

static struct unpacker *unpacker_new(struct archive *a, int rootfd,
				     const struct unpack_policy *pol,
				     struct cerr *e)
{
	struct unpacker *u = xcalloc(1, sizeof(*u));
	size_t off;

	u->a = a;
	u->rootfd = rootfd;
	u->pol = pol;
	u->mode = pol->mode;
	u->perm_mask = pol->perm_mask ? pol->perm_mask : 07777;
	u->as_root = geteuid() == 0;
	u->e = e;
	u->pfd = -1;
	if (getrandom(u->made.key, sizeof(u->made.key), GRND_NONBLOCK) !=
	    sizeof(u->made.key)) {
		u->made.key[0] = now_ns();
		u->made.key[1] = (uint64_t)getpid() ^ (uintptr_t)u;
	}
	pool_add(u, "", 0, &off); /* offset 0 is the root, "" */
	return u;
}

static int unpack_run(struct unpacker *u)
{
	struct archive_entry *ent;
	char q[MSG_NAME_MAX + 8];

	for (;;) {
		int r = archive_read_next_header(u->a, &ent);

		if (r == ARCHIVE_EOF)
			break;
		if (r != ARCHIVE_OK && r != ARCHIVE_WARN) {
			snprintf(q, sizeof(q), "%s #%llu: read header",
				 u->pol->what,
				 (unsigned long long)u->st.entries + 1);
			return archive_fail(u, q);
		}
		if (u->pol->max_entries && u->st.entries >= u->pol->max_entries)
			return cerr_set(
			    u->e, EFBIG, "archive has more than %llu entries",
			    (unsigned long long)u->pol->max_entries);
		if (apply_entry(u, ent) < 0) {
			const char *raw = archive_entry_pathname(ent);

			return cerr_prefix(
			    u->e, "%s '%s'", u->pol->what,
			    printable(raw ? raw : "", q, sizeof(q)));
		}
		u->st.entries++;
	}
	return apply_dir_times(u);
}

int unpack_archive(struct archive *a, int rootfd,
		   const struct unpack_policy *pol, struct unpack_stats *st,
		   struct cerr *e)
{
	struct unpack_policy full = *pol;
	struct unpacker *u;
	int r;

	if (!full.what)
		full.what = "entry";
	u = unpacker_new(a, rootfd, &full, e);
	r = unpack_run(u);

	if (r < 0) {
		/* Other messages quote cleaned names too: keep them clean. */
		for (char *p = e->msg; *p; p++)
			if ((unsigned char)*p < 0x20 || *p == 0x7f)
				*p = '?';
	}
	if (st)
		*st = u->st;
	unpacker_free(u);
	return r < 0 ? -1 : 0;
}

/* An image layer: whiteouts and xattrs applied; map_name (may be NULL)
 * leaves out a format's own entries. */
static int layer(struct archive *a, int rootfd, enum unpack_mode mode,
		 uint64_t reserve,
		 int (*map_name)(void *, char *, struct cerr *),
		 struct unpack_stats *st, struct cerr *e)
{
	const struct unpack_policy policy = {
	    .mode = mode,
	    .whiteouts = true,
	    .xattrs = true,
	    .reserve_bytes = reserve,
	    .what = "layer entry",
	    .map_name = map_name,
	};

	return unpack_archive(a, rootfd, &policy, st, e);
}

int unpack_layer(struct archive *a, int rootfd, enum unpack_mode mode,
		 uint64_t reserve, struct unpack_stats *st, struct cerr *e)
{
	return layer(a, rootfd, mode, reserve, NULL, st, e);
}

/* eStargz's own entries at a layer's root: its TOC and landmarks. */
static int skip_estargz_meta(void *ctx, char *name, struct cerr *e)
{
	return strcmp(name, "stargz.index.json") &&
	       strcmp(name, ".prefetch.landmark") &&
	       strcmp(name, ".no.prefetch.landmark");
}

int unpack_layer_estargz(struct archive *a, int rootfd, enum unpack_mode mode,
			 uint64_t reserve, struct unpack_stats *st,
			 struct cerr *e)
{
	return layer(a, rootfd, mode, reserve, skip_estargz_meta, st, e);
}

int unpack_layer_fd(int tarfd, int rootfd, enum unpack_mode mode,
		    struct unpack_stats *st, struct cerr *e)
{
	_cleanup_(archive_read_freep) struct archive *a = archive_read_new();

	if (!a)
		return cerr_set(e, ENOMEM, "archive_read_new");
	archive_read_support_filter_all(a);
	/* The tar reader covers ustar, pax and GNU tar; "empty" accepts a
	 * zero-byte layer. */
	archive_read_support_format_tar(a);
	archive_read_support_format_empty(a);
	if (archive_read_open_fd(a, tarfd, UNPACK_BLOCK) != ARCHIVE_OK) {
		const char *msg = archive_error_string(a);
		int code = archive_errno(a);

		return cerr_set(e, code > 0 ? code : EIO, "open layer: %s",
				msg ? msg : "unknown libarchive error");
	}
	return unpack_layer(a, rootfd, mode, 0, st, e);
}
