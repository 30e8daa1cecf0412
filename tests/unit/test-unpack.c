// SPDX-License-Identifier: Apache-2.0
/* Unit tests of the layer unpacker (imagepull/unpack.c): every entry type
 * and its metadata, multi-layer FLAT application with whiteouts, the
 * OVERLAY form checked against a real overlayfs mount, and a corpus of
 * hostile layers that must fail without touching anything outside the root
 * — each with openat2 and with the fallback walker. Runs as root. */
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "../lib/tap.h"
#include "buf.h"
#include "cleanup.h"
#include "fsutil.h"
#include "path.h"
#include "pull-internal.h"
#include "util.h"

/* The layer tables below name only the fields they need. */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

/* One tar entry to write. type: f file, d dir, l symlink, h hardlink,
 * c/b char/block device, p fifo, S sparse file (1 MiB, data at 0
 * and 512 KiB, a trailing hole). Tar cannot carry sockets, so none are
 * here. */
struct ent {
	char type;
	const char *name;
	const char *data; /* file content; symlink or hardlink target */
	mode_t mode;	  /* permission bits; 0 means 0644 or 0755 */
	long long uid, gid;
	time_t mtime; /* 0 means T0 */
	const char *xname, *xval;
	unsigned maj, min;
};

#define T0 1600000000
#define SPARSE_SIZE (1u << 20)
#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

static mode_t ent_type(char t)
{
	switch (t) {
	case 'd':
		return AE_IFDIR;
	case 'l':
		return AE_IFLNK;
	case 'c':
		return AE_IFCHR;
	case 'b':
		return AE_IFBLK;
	case 'p':
		return AE_IFIFO;
	default:
		return AE_IFREG;
	}
}

static void write_sparse(struct archive *a, struct archive_entry *e)
{
	char *buf = xcalloc(1, SPARSE_SIZE);

	memset(buf, 'A', 4096);
	memset(buf + SPARSE_SIZE / 2, 'B', 4096);
	/* libarchive ignores sparse regions beyond the size set so far. */
	archive_entry_set_size(e, SPARSE_SIZE);
	archive_entry_sparse_add_entry(e, 0, 4096);
	archive_entry_sparse_add_entry(e, SPARSE_SIZE / 2, 4096);
	archive_write_header(a, e);
	archive_write_data(a, buf, SPARSE_SIZE);
	free(buf);
}

static void write_ent(struct archive *a, const struct ent *x)
{
	struct archive_entry *e = archive_entry_new();
	mode_t perm = x->mode ? x->mode : (x->type == 'd' ? 0755 : 0644);
	size_t len =
	    x->data && x->type != 'l' && x->type != 'h' ? strlen(x->data) : 0;

	archive_entry_set_pathname(e, x->name);
	archive_entry_set_mode(e, ent_type(x->type) | perm);
	archive_entry_set_uid(e, x->uid);
	archive_entry_set_gid(e, x->gid);
	archive_entry_set_mtime(e, x->mtime ? x->mtime : T0, 0);
	if (x->type == 'l')
		archive_entry_set_symlink(e, x->data);
	if (x->type == 'h')
		archive_entry_set_hardlink(e, x->data);
	if (x->type == 'c' || x->type == 'b')
		archive_entry_set_rdev(e, makedev(x->maj, x->min));
	if (x->xname)
		archive_entry_xattr_add_entry(e, x->xname, x->xval,
					      strlen(x->xval));
	if (x->type == 'S') {
		write_sparse(a, e);
	} else {
		archive_entry_set_size(e, (la_int64_t)len);
		archive_write_header(a, e);
		if (len)
			archive_write_data(a, x->data, len);
	}
	archive_entry_free(e);
}

/* A pax tar of the entries, in a memfd positioned at 0. */
static int make_tar(const struct ent *ents, size_t n)
{
	size_t cap = 8u << 20, used = 0;
	char *buf = xmalloc(cap);
	struct archive *a = archive_write_new();
	int fd;

	archive_write_set_format_pax_restricted(a);
	archive_write_set_bytes_in_last_block(a, 1);
	archive_write_open_memory(a, buf, cap, &used);
	for (size_t i = 0; i < n; i++)
		write_ent(a, &ents[i]);
	archive_write_close(a);
	archive_write_free(a);
	fd = memfd_create("layer", MFD_CLOEXEC);
	if (fs_write_all(fd, buf, used) < 0)
		abort();
	lseek(fd, 0, SEEK_SET);
	free(buf);
	return fd;
}

static int unpack(int rootfd, const struct ent *ents, size_t n,
		  enum unpack_mode m, struct unpack_stats *st, struct cerr *e)
{
	cleanup_close int fd = make_tar(ents, n);
	struct unpack_stats dummy;

	cerr_clear(e);
	return unpack_layer_fd(fd, rootfd, m, st ? st : &dummy, e);
}

/* A sandbox: base/root is unpacked into; base/outside holds one sentinel
 * file that must survive untouched. */
struct box {
	char base[64], root[96], outside[96];
	int rootfd;
};

static void box_open(struct box *b)
{
	char sentinel[160];

	snprintf(b->base, sizeof(b->base), "/tmp/cell-unpack-XXXXXX");
	if (!mkdtemp(b->base))
		abort();
	snprintf(b->root, sizeof(b->root), "%s/root", b->base);
	snprintf(b->outside, sizeof(b->outside), "%s/outside", b->base);
	mkdir(b->root, 0755);
	mkdir(b->outside, 0755);
	snprintf(sentinel, sizeof(sentinel), "%s/file", b->outside);
	fs_write_atomic(sentinel, "sentinel", 8, 0644, &(struct cerr){0});
	b->rootfd = open(b->root, O_PATH | O_DIRECTORY | O_CLOEXEC);
}

static void box_close(struct box *b)
{
	close(b->rootfd);
	fs_rm_rf(b->base, &(struct cerr){0});
}

static int count_dir(const char *path)
{
	cleanup_dir DIR *d = opendir(path);
	struct dirent *de;
	int n = 0;

	while (d && (de = readdir(d)))
		n += strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
	return d ? n : -1;
}

/* lstat of a path inside the root. */
static int rstat(const struct box *b, const char *rel, struct stat *st)
{
	char p[4200];

	snprintf(p, sizeof(p), "%s/%s", b->root, rel);
	return lstat(p, st);
}

static bool rexists(const struct box *b, const char *rel)
{
	struct stat st;
	return rstat(b, rel, &st) == 0;
}

static char *rread(const struct box *b, const char *rel)
{
	char p[4200];
	struct buf out;
	struct cerr e = {0};

	snprintf(p, sizeof(p), "%s/%s", b->root, rel);
	buf_init(&out, 1 << 20);
	if (fs_read_file(p, &out, &e) < 0) {
		buf_free(&out);
		return NULL;
	}
	return out.data ? out.data : xstrdup("");
}

static bool rcontent(const struct box *b, const char *rel, const char *want)
{
	cleanup_free char *got = rread(b, rel);
	return got && !strcmp(got, want);
}

static char *rxattr(const struct box *b, const char *rel, const char *name)
{
	char p[4200], v[256];
	ssize_t n;

	snprintf(p, sizeof(p), "%s/%s", b->root, rel);
	n = lgetxattr(p, name, v, sizeof(v) - 1);
	if (n < 0)
		return NULL;
	v[n] = '\0';
	return xstrdup(v);
}

static bool is_mode(const struct box *b, const char *rel, mode_t fmt,
		    mode_t perm, uid_t uid, gid_t gid)
{
	struct stat st;

	if (rstat(b, rel, &st) < 0)
		return false;
	if ((st.st_mode & S_IFMT) != fmt || (st.st_mode & 07777) != perm ||
	    st.st_uid != uid || st.st_gid != gid) {
		printf("#   %s: mode %o owner %u:%u\n", rel, st.st_mode,
		       st.st_uid, st.st_gid);
		return false;
	}
	return true;
}

static time_t rmtime(const struct box *b, const char *rel)
{
	struct stat st;
	return rstat(b, rel, &st) < 0 ? -1 : st.st_mtime;
}

/* ---- every type, with metadata ---- */

static void test_types(bool fallback)
{
	const char *how = fallback ? "fallback" : "openat2";
	struct ent l[] = {
	    {'d', "./", .mode = 0751, .mtime = T0 + 1},
	    {'d', "d", .mode = 0750, .uid = 1000, .gid = 1000, .mtime = T0 + 2},
	    {'f', "d/f", "hello", .mode = 0640, .mtime = T0 + 3},
	    {'f', "suid", "#!/bin/sh\n", .mode = 04755, .uid = 1000,
	     .gid = 1000, .mtime = T0 + 4, .xname = "user.foo", .xval = "bar"},
	    {'f', "sgid", "x", .mode = 02711, .uid = 0, .gid = 1000},
	    {'d', "tmp", .mode = 01777, .xname = "user.dir", .xval = "y"},
	    {'d', "sg", .mode = 02775, .uid = 1000, .gid = 1000},
	    {'l', "d/l", "../suid", .uid = 1000, .gid = 1000, .mtime = T0 + 5},
	    {'l', "abs", "/etc/passwd"},
	    {'h', "d/h", "suid"},
	    {'c', "dev/null", .mode = 0666, .maj = 1, .min = 3,
	     .mtime = T0 + 6},
	    {'b', "dev/loop0", .mode = 0660, .gid = 6, .maj = 7, .min = 0},
	    {'p', "fifo", .mode = 0600, .uid = 1000, .gid = 1000},
	    {'s', "sock"},
	    {'S', "sparse", .mode = 0600},
	    {'f', "empty", ""},
	    {'f', "dir/implicit/file", "deep"},
	};
	struct box b;
	struct cerr e = {0};
	struct unpack_stats st = {0};
	struct stat s1, s2;
	cleanup_free char *x1 = NULL, *x2 = NULL, *sp = NULL;

	path_force_fallback(fallback);
	box_open(&b);
	ok(unpack(b.rootfd, l, ARRAY_LEN(l), UNPACK_FLAT, &st, &e) == 0,
	   "%s: layer with every type unpacks (%s)", how, e.msg);
	ok(st.entries == ARRAY_LEN(l), "%s: stats count %llu entries", how,
	   (unsigned long long)st.entries);
	ok(st.bytes == 5 + 10 + 1 + 8192 + 4, "%s: stats count %llu bytes", how,
	   (unsigned long long)st.bytes);
	ok(is_mode(&b, "", S_IFDIR, 0751, 0, 0) && rmtime(&b, "") == T0 + 1,
	   "%s: './' sets the root's mode and mtime", how);
	ok(is_mode(&b, "d", S_IFDIR, 0750, 1000, 1000) &&
	       rmtime(&b, "d") == T0 + 2,
	   "%s: directory mode, owner, mtime (set after its children)", how);
	ok(is_mode(&b, "d/f", S_IFREG, 0640, 0, 0) &&
	       rcontent(&b, "d/f", "hello") && rmtime(&b, "d/f") == T0 + 3,
	   "%s: file content, mode, mtime", how);
	ok(is_mode(&b, "suid", S_IFREG, 04755, 1000, 1000) &&
	       rmtime(&b, "suid") == T0 + 4,
	   "%s: setuid survives chown to 1000:1000", how);
	ok(is_mode(&b, "sgid", S_IFREG, 02711, 0, 1000), "%s: setgid file",
	   how);
	ok(is_mode(&b, "tmp", S_IFDIR, 01777, 0, 0), "%s: sticky directory",
	   how);
	ok(is_mode(&b, "sg", S_IFDIR, 02775, 1000, 1000),
	   "%s: setgid directory", how);
	x1 = rxattr(&b, "suid", "user.foo");
	x2 = rxattr(&b, "tmp", "user.dir");
	is_str(x1, "bar", "%s: file xattr user.foo", how);
	is_str(x2, "y", "%s: directory xattr", how);
	ok(rstat(&b, "d/l", &s1) == 0 && S_ISLNK(s1.st_mode) &&
	       s1.st_uid == 1000 && s1.st_mtime == T0 + 5,
	   "%s: symlink owner and mtime", how);
	ok(rstat(&b, "abs", &s1) == 0 && S_ISLNK(s1.st_mode),
	   "%s: absolute symlink created as is", how);
	ok(rstat(&b, "d/h", &s1) == 0 && rstat(&b, "suid", &s2) == 0 &&
	       s1.st_ino == s2.st_ino && s1.st_nlink == 2,
	   "%s: hardlink shares the inode", how);
	ok(rstat(&b, "dev/null", &s1) == 0 && S_ISCHR(s1.st_mode) &&
	       s1.st_rdev == makedev(1, 3) && (s1.st_mode & 07777) == 0666 &&
	       s1.st_mtime == T0 + 6,
	   "%s: character device", how);
	ok(rstat(&b, "dev/loop0", &s1) == 0 && S_ISBLK(s1.st_mode) &&
	       s1.st_rdev == makedev(7, 0) && s1.st_gid == 6,
	   "%s: block device", how);
	ok(is_mode(&b, "fifo", S_IFIFO, 0600, 1000, 1000), "%s: fifo", how);
	sp = rread(&b, "sparse");
	ok(rstat(&b, "sparse", &s1) == 0 && s1.st_size == SPARSE_SIZE &&
	       s1.st_blocks * 512 < SPARSE_SIZE / 2 && sp && sp[0] == 'A' &&
	       sp[4095] == 'A' && sp[4096] == 0 && sp[SPARSE_SIZE / 2] == 'B' &&
	       sp[SPARSE_SIZE - 1] == 0,
	   "%s: sparse file keeps holes (%lld blocks) and its trailing hole",
	   how, (long long)s1.st_blocks);
	ok(rcontent(&b, "empty", ""), "%s: empty file", how);
	ok(is_mode(&b, "dir/implicit", S_IFDIR, 0755, 0, 0) &&
	       rcontent(&b, "dir/implicit/file", "deep"),
	   "%s: missing parents are made 0755", how);
	box_close(&b);
	path_force_fallback(false);
}

/* ---- FLAT: several layers, whiteouts, opaque directories ---- */

static void test_flat(bool fallback)
{
	const char *how = fallback ? "fallback" : "openat2";
	struct ent l1[] = {
	    {'d', "a"},
	    {'f', "a/f", "one"},
	    {'d', "tree"},
	    {'d', "tree/x"},
	    {'f', "tree/x/y", "y"},
	    {'f', "file2dir", "f"},
	    {'d', "dir2file", .mode = 0700},
	    {'f', "dir2file/child", "c"},
	    {'f', "wh-file", "w"},
	    {'d', "opq"},
	    {'f', "opq/old", "o"},
	    {'d', "opq/sub"},
	    {'f', "opq/sub/old2", "o"},
	    {'d', "opq2"},
	    {'f', "opq2/old", "o"},
	    {'d', "keepdir", .mode = 0755},
	    {'f', "keepdir/k", "k"},
	    {'f', "keep", "k"},
	    {'f', "n/a/old", "o"},
	    {'f', "n/old", "o"},
	};
	struct ent l2[] = {
	    {'d', "file2dir", .mode = 0711},
	    {'f', "file2dir/inner", "i"},
	    {'f', "dir2file", "now a file"},
	    {'f', ".wh.wh-file"},
	    {'f', ".wh.tree"},
	    {'f', "opq/new", "n"},
	    {'f', "opq/.wh..wh..opq"},
	    {'f', "opq/sub/new2", "n"},
	    {'f', "opq2/.wh..wh..opq"},
	    {'f', "opq2/new", "n"},
	    {'d', "keepdir", .mode = 0700, .uid = 1000},
	    {'f', "a/.wh.missing"},
	    {'f', "nodir/.wh.x"},
	    {'f', "nodir2/.wh..wh..opq"},
	    {'f', "a/f", "two"},
	    {'f', "n/a/.wh..wh..opq"},
	    {'f', "n/a/new", "n"},
	    {'f', "n/.wh..wh..opq"},
	    {'f', "n/.wh..wh..opq"},
	    {'f', "n/new2", "n"},
	};
	struct box b;
	struct cerr e = {0};
	struct stat st;

	path_force_fallback(fallback);
	box_open(&b);
	ok(unpack(b.rootfd, l1, ARRAY_LEN(l1), UNPACK_FLAT, NULL, &e) == 0,
	   "%s: flat layer 1 (%s)", how, e.msg);
	ok(unpack(b.rootfd, l2, ARRAY_LEN(l2), UNPACK_FLAT, NULL, &e) == 0,
	   "%s: flat layer 2 (%s)", how, e.msg);
	ok(is_mode(&b, "file2dir", S_IFDIR, 0711, 0, 0) &&
	       rcontent(&b, "file2dir/inner", "i"),
	   "%s: a directory replaces a file", how);
	ok(rstat(&b, "dir2file", &st) == 0 && S_ISREG(st.st_mode) &&
	       rcontent(&b, "dir2file", "now a file"),
	   "%s: a file replaces a directory tree", how);
	ok(!rexists(&b, "wh-file") && !rexists(&b, ".wh.wh-file"),
	   "%s: whiteout deletes a file and is not created", how);
	ok(!rexists(&b, "tree") && !rexists(&b, ".wh.tree"),
	   "%s: whiteout deletes a directory tree", how);
	ok(!rexists(&b, "opq/old") && !rexists(&b, "opq/sub/old2") &&
	       rcontent(&b, "opq/new", "n") &&
	       rcontent(&b, "opq/sub/new2", "n") &&
	       !rexists(&b, "opq/.wh..wh..opq"),
	   "%s: opaque marker after a sibling keeps this layer's entries", how);
	ok(!rexists(&b, "opq2/old") && rcontent(&b, "opq2/new", "n"),
	   "%s: opaque marker first hides the older children", how);
	ok(is_mode(&b, "keepdir", S_IFDIR, 0700, 1000, 0) &&
	       rcontent(&b, "keepdir/k", "k"),
	   "%s: an existing directory is kept, its metadata updated", how);
	ok(rcontent(&b, "keep", "k") && rcontent(&b, "a/f", "two"),
	   "%s: untouched files stay, replaced files change", how);
	ok(rcontent(&b, "n/a/new", "n") && rcontent(&b, "n/new2", "n") &&
	       !rexists(&b, "n/old") && !rexists(&b, "n/a/old"),
	   "%s: nested and repeated opaque markers", how);
	ok(!rexists(&b, "nodir") && !rexists(&b, "nodir2"),
	   "%s: whiteouts in missing directories create nothing", how);
	box_close(&b);
	path_force_fallback(false);
}

/* The parent cache must not outlive a replaced or deleted directory. */
static void test_cache(void)
{
	/* clang-format off */
	struct ent l1[] = {
	    {'d', "c"},
	    {'f', "a/b/f1", "1"},
	    {'l', "a/b", "../c"},
	    {'f', "a/b/f2", "2"},
	    {'f', "x/y/f", "f"},
	    {'f', ".wh.x"},
	    {'f', "x/y/g", "g"},
	    {'f', "p/q/r", "r"},
	    {'f', "p/.wh.q"},
	    {'f', "p/q/s", "s"},
	    {'d', "real1/x"},
	    {'d', "real2/x"},
	    {'l', "b", "real1"},
	    {'l', "a2", "b"},
	    {'f', "a2/x/f1", "1"},
	    {'l', "b", "real2"},
	    {'f', "a2/x/f2", "2"},
	};
	/* clang-format on */
	struct ent l2[] = {
	    {'f', "m/n/o", "o"},
	    {'f', "m/.wh..wh..opq"},
	    {'f', "m/n/p", "p"},
	};
	struct ent l3[] = {
	    {'f', "m/n/q", "q"},
	    {'f', "m/.wh..wh..opq"},
	    {'f', "m/n/r", "r"},
	};
	struct box b;
	struct cerr e = {0};

	box_open(&b);
	ok(unpack(b.rootfd, l1, ARRAY_LEN(l1), UNPACK_FLAT, NULL, &e) == 0,
	   "cache: layer applies (%s)", e.msg);
	ok(rcontent(&b, "c/f2", "2") && !rexists(&b, "c/f1"),
	   "cache: a directory replaced by a symlink is resolved again");
	ok(rcontent(&b, "x/y/g", "g") && !rexists(&b, "x/y/f"),
	   "cache: a whited-out tree is made again");
	ok(rcontent(&b, "p/q/s", "s") && !rexists(&b, "p/q/r"),
	   "cache: a whited-out parent is made again");
	ok(rcontent(&b, "real1/x/f1", "1") && rcontent(&b, "real2/x/f2", "2") &&
	       !rexists(&b, "real1/x/f2"),
	   "cache: replacing a symlink the cached path went through");
	ok(unpack(b.rootfd, l2, ARRAY_LEN(l2), UNPACK_FLAT, NULL, &e) == 0 &&
	       unpack(b.rootfd, l3, ARRAY_LEN(l3), UNPACK_FLAT, NULL, &e) == 0,
	   "cache: opaque layers apply (%s)", e.msg);
	ok(rcontent(&b, "m/n/q", "q") && rcontent(&b, "m/n/r", "r") &&
	       !rexists(&b, "m/n/o") && !rexists(&b, "m/n/p"),
	   "cache: opaque prunes beneath the cached directory");
	box_close(&b);
}

/* ---- OVERLAY form ---- */

static void test_overlay(void)
{
	struct ent l[] = {
	    {'f', ".wh.x"},
	    {'d', "d"},
	    {'f', "d/.wh..wh..opq"},
	    {'f', "e/.wh..wh..opq"},
	    {'f', ".wh.y"},
	    {'f', "y", "back"},
	    {'d', "z"},
	    {'f', ".wh.z"},
	    {'d', "forged", .xname = "trusted.overlay.opaque", .xval = "y"},
	    {'f', "redir", "r", .xname = "trusted.overlay.redirect",
	     .xval = "/etc"},
	    {'f', "uo", "r", .xname = "user.overlay.origin", .xval = "x"},
	    {'f', "trusted", "t", .xname = "trusted.cell", .xval = "ok"},
	    {'f', ".wh.w"},
	    {'d', "w"},
	    {'f', "w/new", "n"},
	};
	struct box b;
	struct cerr e = {0};
	struct stat st;
	cleanup_free char *o1 = NULL, *o2 = NULL, *o3 = NULL, *o4 = NULL,
			  *o5 = NULL, *o6 = NULL, *o7 = NULL;

	box_open(&b);
	ok(unpack(b.rootfd, l, ARRAY_LEN(l), UNPACK_OVERLAY, NULL, &e) == 0,
	   "overlay: layer applies (%s)", e.msg);
	ok(rstat(&b, "x", &st) == 0 && S_ISCHR(st.st_mode) &&
	       st.st_rdev == makedev(0, 0) && !rexists(&b, ".wh.x"),
	   "overlay: whiteout becomes a char device 0/0");
	o1 = rxattr(&b, "d", "trusted.overlay.opaque");
	o2 = rxattr(&b, "e", "trusted.overlay.opaque");
	is_str(o1, "y", "overlay: opaque directory marked");
	is_str(o2, "y", "overlay: opaque marker makes a missing directory");
	ok(!rexists(&b, "d/.wh..wh..opq"), "overlay: marker not created");
	ok(rstat(&b, "y", &st) == 0 && S_ISREG(st.st_mode) &&
	       rcontent(&b, "y", "back"),
	   "overlay: a later entry replaces a whiteout device");
	ok(rstat(&b, "z", &st) == 0 && S_ISCHR(st.st_mode),
	   "overlay: a whiteout replaces an earlier entry");
	o3 = rxattr(&b, "forged", "trusted.overlay.opaque");
	o4 = rxattr(&b, "redir", "trusted.overlay.redirect");
	o5 = rxattr(&b, "uo", "user.overlay.origin");
	o6 = rxattr(&b, "trusted", "trusted.cell");
	ok(!o3 && !o4 && !o5, "overlay: overlay xattrs from the tar dropped");
	o7 = rxattr(&b, "w", "trusted.overlay.opaque");
	is_str(o7, "y", "overlay: a directory over a whiteout is opaque");
	is_str(o6, "ok", "overlay: other trusted xattrs kept");
	box_close(&b);
}

/* ---- hostile layers ---- */

static char evil[64]; /* a name that must never appear anywhere */

static bool evil_nowhere(const struct box *b)
{
	const char *dirs[] = {"/", "/tmp", b->base, b->outside};
	char p[256];
	struct stat st;

	for (size_t i = 0; i < ARRAY_LEN(dirs); i++) {
		snprintf(p, sizeof(p), "%s/%s", dirs[i], evil);
		if (lstat(p, &st) == 0) {
			printf("#   stray %s\n", p);
			unlink(p);
			return false;
		}
	}
	return true;
}

/* Nothing outside the root changed: base holds root and outside, outside
 * holds the sentinel alone, unchanged and not linked. */
static bool outside_intact(const struct box *b)
{
	char p[160];
	struct stat st;
	struct buf got;
	struct cerr e = {0};
	bool good;

	snprintf(p, sizeof(p), "%s/file", b->outside);
	buf_init(&got, 1024);
	good = count_dir(b->base) == 2 && count_dir(b->outside) == 1 &&
	       lstat(p, &st) == 0 && st.st_nlink == 1 &&
	       fs_read_file(p, &got, &e) == 0 && got.len == 8 &&
	       !memcmp(got.data, "sentinel", 8) && evil_nowhere(b);
	buf_free(&got);
	return good;
}

struct hostile {
	const char *what;
	struct ent ents[4];
	bool succeeds;	    /* allowed, but must land inside */
	const char *inside; /* with succeeds: this must exist in the root */
};

static void run_hostile(const struct hostile *h, bool fallback,
			enum unpack_mode m)
{
	const char *how = fallback ? "fallback" : "openat2";
	const char *mode = m == UNPACK_FLAT ? "flat" : "overlay";
	struct ent ents[4];
	char names[4][256], datas[4][256];
	size_t n = 0;
	struct box b;
	struct cerr e = {0};
	int r;

	box_open(&b);
	/* Fill in the sandbox paths: "@" is the outside dir, "%" the evil
	 * name. */
	for (; n < 4 && h->ents[n].name; n++) {
		const struct ent *x = &h->ents[n];
		const char *fields[2] = {x->name, x->data};
		char *outs[2] = {names[n], datas[n]};

		ents[n] = *x;
		for (int k = 0; k < 2; k++) {
			size_t o = 0;

			for (const char *s = fields[k]; s && *s; s++)
				o += (size_t)snprintf(
				    outs[k] + o, 256 - o, "%s",
				    *s == '@'	? b.outside
				    : *s == '%' ? evil
						: (char[]){*s, 0});
			outs[k][o] = '\0';
		}
		ents[n].name = names[n];
		ents[n].data = x->data ? datas[n] : NULL;
	}
	r = unpack(b.rootfd, ents, n, m, NULL, &e);
	if (h->succeeds)
		ok(r == 0 && rexists(&b, h->inside),
		   "%s/%s: %s lands inside (%s)", how, mode, h->what, e.msg);
	else
		ok(r < 0 && strstr(e.msg, "layer entry '") && e.code != 0,
		   "%s/%s: %s fails: %s", how, mode, h->what, e.msg);
	ok(outside_intact(&b), "%s/%s: %s changes nothing outside", how, mode,
	   h->what);
	box_close(&b);
}

static const struct hostile hostile[] = {
    {"'../evil'", {{'f', "../%", "x"}}},
    {"'a/../../evil'", {{'f', "a/../../%", "x"}}},
    {"'./../evil'", {{'d', "./../%"}}},
    {"absolute '/etc/x'", {{'f', "/etc/%", "x"}}, true, "etc"},
    {"absolute symlink then 'link/evil'",
     {{'l', "link", "@"}, {'f', "link/%", "x"}}},
    {"symlink '../../..' then 'link/evil'",
     {{'l', "link", "../../.."}, {'f', "link/%", "x"}}},
    {"symlink '/' then 'link/tmp/evil'",
     {{'l', "link", "/"}, {'f', "link/tmp/%", "x"}}},
    {"absolute symlink then a directory through it",
     {{'l', "link", "@"}, {'d', "link/%"}}},
    {"absolute symlink then a symlink through it",
     {{'l', "link", "@"}, {'l', "link/%", "/"}}},
    {"absolute symlink then a fifo through it",
     {{'l', "link", "@"}, {'p', "link/%"}}},
    {"chained symlinks climbing out",
     {{'l', "a", "b/../.."}, {'d', "b"}, {'f', "a/%", "x"}}},
    {"hardlink to '../outside/file'", {{'h', "h", "../outside/file"}}},
    {"hardlink through an escaping symlink",
     {{'l', "link", "@"}, {'h', "h", "link/file"}}},
    {"hardlink through a climbing symlink",
     {{'l', "link", "../outside"}, {'h', "h", "link/file"}}},
    {"hardlink to a directory", {{'d', "d"}, {'h', "h", "d"}}},
    {"hardlink to the root", {{'h', "h", "./"}}},
    {"hardlink to a missing file", {{'h', "h", "nothere"}}},
    {"whiteout '.wh..'", {{'f', ".wh.."}}},
    {"whiteout '.wh...'", {{'f', ".wh..."}}},
    {"whiteout 'dir/.wh..'", {{'d', "dir"}, {'f', "dir/.wh.."}}},
    {"whiteout '.wh.'", {{'f', ".wh."}}},
    {"whiteout through an escaping symlink",
     {{'l', "link", "@"}, {'f', "link/.wh.file"}}},
    {"opaque through an escaping symlink",
     {{'l', "link", "@"}, {'f', "link/.wh..wh..opq"}}},
    {"whiteout through a climbing symlink",
     {{'l', "link", "../outside"}, {'f', "link/.wh.file"}}},
    {"symlink replaces a directory, then a write through it",
     {{'d', "d"}, {'f', "d/f", "x"}, {'l', "d", "@"}, {'f', "d/%", "x"}}},
    {"relative symlink replaces a directory, then a write through it",
     {{'d', "d"},
      {'f', "d/f", "x"},
      {'l', "d", "../outside"},
      {'f', "d/%", "x"}}},
    {"file over a symlink to the outside",
     {{'l', "link", "@/file"}, {'f', "link", "pwned"}},
     true,
     "link"},
    {"hardlink over a symlink to the outside",
     {{'f', "t", "t"}, {'l', "link", "@/file"}, {'h', "link", "t"}},
     true,
     "link"},
    {"root replaced by a symlink", {{'l', "./", "@"}}},
    {"root replaced by a file", {{'f', ".", "x"}}},
};

static void test_hostile(void)
{
	for (int fb = 0; fb < 2; fb++) {
		path_force_fallback(fb);
		for (size_t i = 0; i < ARRAY_LEN(hostile); i++) {
			run_hostile(&hostile[i], fb, UNPACK_FLAT);
			run_hostile(&hostile[i], fb, UNPACK_OVERLAY);
		}
	}
	path_force_fallback(false);
}

/* A file replaced by a hardlink's name must not write through the link. */
static void test_no_write_through(void)
{
	struct ent l[] = {
	    {'f', "t", "orig"},
	    {'h', "h", "t"},
	    {'f', "h", "new"},
	};
	struct box b;
	struct cerr e = {0};

	box_open(&b);
	ok(unpack(b.rootfd, l, ARRAY_LEN(l), UNPACK_FLAT, NULL, &e) == 0 &&
	       rcontent(&b, "t", "orig") && rcontent(&b, "h", "new"),
	   "a file entry replaces a hardlink instead of writing through it");
	box_close(&b);
}

/* ---- malformed input and caps ---- */

static void test_malformed(void)
{
	struct ent ok1[] = {{'f', "a", "0123456789abcdef"}, {'f', "b", "x"}};
	char longt[5000], *big = xmalloc(70000);
	struct ent lt[] = {{'l', "l", longt}};
	struct ent bx[] = {{'f', "x", "x", .xname = "user.big", .xval = big}};
	struct ent ctl[] = {{'f', "a\033[31m/../b"}};
	struct ent utf[] = {{'f', "caf\xc3\xa9", "x"}};
	struct ent hugeid[] = {{'f', "x", "x", .uid = 1LL << 33}};
	struct box b;
	struct cerr e = {0};
	struct stat st;
	cleanup_close int fd = make_tar(ok1, ARRAY_LEN(ok1));
	cleanup_close int cut = memfd_create("cut", MFD_CLOEXEC);
	cleanup_close int junk = memfd_create("junk", MFD_CLOEXEC);
	cleanup_close int empty = memfd_create("empty", MFD_CLOEXEC);
	char tar[4096];
	ssize_t n = read(fd, tar, sizeof(tar));

	box_open(&b);
	/* Header of "a" and half of its data. */
	ok(n > 1100 && fs_write_all(cut, tar, 512 + 8) == 0 &&
	       lseek(cut, 0, SEEK_SET) == 0,
	   "malformed: truncated tar made");
	ok(unpack_layer_fd(cut, b.rootfd, UNPACK_FLAT, NULL, &e) < 0,
	   "malformed: truncated tar fails: %s", e.msg);
	memset(tar, 'j', sizeof(tar));
	fs_write_all(junk, tar, sizeof(tar));
	lseek(junk, 0, SEEK_SET);
	ok(unpack_layer_fd(junk, b.rootfd, UNPACK_FLAT, NULL, &e) < 0,
	   "malformed: junk fails: %s", e.msg);
	ok(unpack_layer_fd(empty, b.rootfd, UNPACK_FLAT, NULL, &e) == 0,
	   "malformed: a zero-byte layer is empty (%s)", e.msg);
	memset(longt, 'a', sizeof(longt) - 1);
	longt[sizeof(longt) - 1] = '\0';
	ok(unpack(b.rootfd, lt, 1, UNPACK_FLAT, NULL, &e) < 0 &&
	       e.code == ENAMETOOLONG,
	   "malformed: symlink target over 4095 bytes fails: %s", e.msg);
	memset(big, 'v', 69999);
	big[69999] = '\0';
	ok(unpack(b.rootfd, bx, 1, UNPACK_FLAT, NULL, &e) < 0 &&
	       e.code == E2BIG,
	   "malformed: xattrs over 64 KiB fail: %s", e.msg);
	ok(unpack(b.rootfd, ctl, 1, UNPACK_FLAT, NULL, &e) < 0 &&
	       !strchr(e.msg, '\033') && strstr(e.msg, "\\x1b"),
	   "malformed: control bytes are escaped in messages: %s", e.msg);
	ok(unpack(b.rootfd, hugeid, 1, UNPACK_FLAT, NULL, &e) < 0,
	   "malformed: out-of-range owner fails: %s", e.msg);
	ok(unpack(b.rootfd, utf, 1, UNPACK_FLAT, NULL, &e) == 0 &&
	       rstat(&b, "caf\xc3\xa9", &st) == 0,
	   "malformed: UTF-8 names are kept byte for byte (%s)", e.msg);
	ok(outside_intact(&b), "malformed: nothing outside changed");
	box_close(&b);
	free(big);
}

/* ---- OVERLAY vs FLAT on a real overlayfs mount ---- */

struct lines {
	char **v;
	size_t n, cap;
};

static void list_tree(const char *top, const char *rel, struct lines *out)
{
	char p[4200], t[4200];
	cleanup_dir DIR *d = NULL;
	struct dirent *de;

	snprintf(p, sizeof(p), "%s/%s", top, rel);
	d = opendir(p);
	while (d && (de = readdir(d))) {
		char r[4200];
		struct stat st;
		ssize_t tl = 0;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		snprintf(r, sizeof(r), "%s%s%s", rel, *rel ? "/" : "",
			 de->d_name);
		snprintf(p, sizeof(p), "%s/%s", top, r);
		if (lstat(p, &st) < 0)
			continue;
		if (S_ISLNK(st.st_mode))
			tl = readlink(p, t, sizeof(t) - 1);
		t[tl > 0 ? tl : 0] = '\0';
		if (out->n == out->cap) {
			out->cap = out->cap ? out->cap * 2 : 64;
			out->v = xrealloc(out->v, out->cap * sizeof(char *));
		}
		out->v[out->n++] = xasprintf(
		    "%s %o %u:%u %lld %u,%u %s", r, st.st_mode, st.st_uid,
		    st.st_gid, S_ISDIR(st.st_mode) ? 0 : (long long)st.st_size,
		    major(st.st_rdev), minor(st.st_rdev), t);
		if (S_ISDIR(st.st_mode))
			list_tree(top, r, out);
	}
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static char *listing(const char *top)
{
	struct lines l = {0};
	size_t len = 1;
	char *s;

	list_tree(top, "", &l);
	qsort(l.v, l.n, sizeof(char *), cmp_str);
	for (size_t i = 0; i < l.n; i++)
		len += strlen(l.v[i]) + 1;
	s = xcalloc(1, len);
	for (size_t i = 0, o = 0; i < l.n; i++) {
		size_t n = strlen(l.v[i]);

		memcpy(s + o, l.v[i], n);
		s[o + n] = '\n';
		o += n + 1;
		free(l.v[i]);
	}
	free(l.v);
	return s;
}

static const struct ent ml1[] = {
    {'d', "etc"},
    {'f', "etc/passwd", "root:x:0:0"},
    {'f', "etc/shadow", "s", .mode = 0640, .gid = 42},
    {'d', "usr"},
    {'d', "usr/bin"},
    {'f', "usr/bin/tool", "v1", .mode = 04755},
    {'h', "usr/bin/tool2", "usr/bin/tool"},
    {'l', "bin", "usr/bin"},
    {'d', "gone"},
    {'d', "gone/sub"},
    {'f', "gone/sub/x", "x"},
    {'f', "f2d", "f"},
    {'d', "d2f"},
    {'f', "d2f/c", "c"},
    {'d', "opq", .mode = 0700, .uid = 1000, .gid = 1000},
    {'f', "opq/old", "o"},
    {'d', "opq/sub"},
    {'f', "opq/sub/old2", "o"},
    {'d', "dev"},
    {'c', "dev/null", .mode = 0666, .maj = 1, .min = 3},
    {'p', "fifo"},
    {'d', "home"},
    {'d', "home/user", .mode = 0700, .uid = 1000, .gid = 1000},
    {'f', "home/user/.profile", "p", .uid = 1000, .gid = 1000},
    {'d', "re"},
    {'f', "re/old", "o"},
};

static const struct ent ml2[] = {
    {'f', ".wh.gone"},
    {'d', "etc"},
    {'f', "etc/.wh.shadow"},
    {'f', "etc/passwd", "root:x:0:0\nuser:x:1000:1000"},
    {'l', "etc/mtab", "/proc/mounts"},
    {'d', "f2d", .mode = 0750},
    {'f', "f2d/inner", "i"},
    {'f', "d2f", "now a file", .mode = 0600},
    {'d', "opq", .mode = 0755},
    {'f', "opq/new", "n"},
    {'f', "opq/.wh..wh..opq"},
    {'d', "opq/sub"},
    {'f', "opq/sub/new2", "n"},
    {'d', "home"},
    {'d', "home/user", .mode = 0700, .uid = 1000, .gid = 1000},
    {'f', "home/user/.wh..profile"},
    {'f', "home/user/.bashrc", "b", .uid = 1000, .gid = 1000},
    {'f', ".wh.re"},
    {'d', "re", .mode = 0700},
    {'f', "re/new", "n"},
};

static const struct ent ml3[] = {
    {'f', ".wh.bin"},
    {'d', "usr", .mode = 0700},
    {'d', "usr/bin"},
    {'f', "usr/bin/tool", "v3", .mode = 0755},
    {'d', "opq"},
    {'d', "opq/sub"},
    {'f', "opq/sub/new3", "n"},
    {'f', "deep/a/b/c/d", "deep"},
    {'f', "deep/.wh..wh..opq"},
    {'d', "dev"},
    {'f', "dev/.wh.null"},
    {'f', "fifo", "not a fifo any more"},
};

static void test_overlay_mount(void)
{
	const struct {
		const struct ent *e;
		size_t n;
	} layers[] = {{ml1, ARRAY_LEN(ml1)},
		      {ml2, ARRAY_LEN(ml2)},
		      {ml3, ARRAY_LEN(ml3)}};
	char base[] = "/tmp/cell-unpack-ovl-XXXXXX";
	char p[6][128], opts[700];
	const char *sub[6] = {"flat", "l1", "l2", "l3", "upper", "work"};
	char merged[128];
	struct cerr e = {0};
	cleanup_free char *a = NULL, *b = NULL;
	int fd, good = 1, mounted;

	if (!mkdtemp(base))
		abort();
	for (int i = 0; i < 6; i++) {
		snprintf(p[i], sizeof(p[i]), "%s/%s", base, sub[i]);
		mkdir(p[i], 0755);
	}
	snprintf(merged, sizeof(merged), "%s/merged", base);
	mkdir(merged, 0755);
	for (int i = 0; i < 3; i++) {
		fd = open(p[0], O_PATH | O_DIRECTORY | O_CLOEXEC);
		good &= unpack(fd, layers[i].e, layers[i].n, UNPACK_FLAT, NULL,
			       &e) == 0;
		close(fd);
		fd = open(p[i + 1], O_PATH | O_DIRECTORY | O_CLOEXEC);
		good &= unpack(fd, layers[i].e, layers[i].n, UNPACK_OVERLAY,
			       NULL, &e) == 0;
		close(fd);
	}
	ok(good, "overlay mount: three layers unpacked both ways (%s)", e.msg);
	snprintf(opts, sizeof(opts), "lowerdir=%s:%s:%s,upperdir=%s,workdir=%s",
		 p[3], p[2], p[1], p[4], p[5]);
	mounted = mount("overlay", merged, "overlay", 0, opts) == 0;
	ok(mounted, "overlay mount: mount -t overlay %s (%s)", opts,
	   mounted ? "ok" : strerror(errno));
	if (mounted) {
		a = listing(p[0]);
		b = listing(merged);
		ok(!strcmp(a, b), "overlay mount: same tree as FLAT");
		if (strcmp(a, b))
			printf("# flat:\n%s# overlay:\n%s", a, b);
		ok(strstr(a, "opq/sub/new3") && !strstr(a, "opq/old") &&
		       !strstr(a, "gone") && strstr(a, "deep/a/b/c/d"),
		   "overlay mount: the listing has the expected shape");
		umount2(merged, MNT_DETACH);
	}
	fs_rm_rf(base, &e);
}

int main(void)
{
	umask(022);
	snprintf(evil, sizeof(evil), "cell-unpack-evil-%d", (int)getpid());
	if (geteuid() != 0) {
		ok(0, "test-unpack needs root (owners, devices, overlayfs)");
		return tap_done();
	}
	test_types(false);
	test_types(true);
	test_flat(false);
	test_flat(true);
	test_cache();
	test_overlay();
	test_no_write_through();
	test_hostile();
	test_malformed();
	test_overlay_mount();
	return tap_done();
}
