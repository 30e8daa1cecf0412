// SPDX-License-Identifier: Apache-2.0
/* A lazy layer as a read-only FUSE filesystem, through libfuse3's low-level
 * API. Inode n + 1 is the TOC's node n, so lookups are a binary search
 * in a directory's sorted entries and nothing is allocated per request.
 * The tree is what unpack.c would write for the layer in overlay form:
 * whiteouts are 0/0 character devices, opaque directories carry
 * trusted.overlay.opaque "y", eStargz's own entries are not there. */
#include "lazy.h"

#include <errno.h>

#ifdef CELL_STATIC
/* The static build's prefix has no libfuse3 (known gap). */
int lazyfs_serve(struct lazy_layer *l, const char *mountpoint,
		 void (*ready)(void *arg), void *arg, struct cerr *e)
{
	return cerr_set(e, ENOSYS, "lazy layers need libfuse3");
}
#else
/* 3.12: the loop's configuration is ours to free (3.1's leaks it). */
#define FUSE_USE_VERSION 312

#include <fuse_lowlevel.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "log.h"
#include "util.h"

#define TTL 86400.0 /* the tree never changes */
#define READ_MAX (1u << 20)

static struct lazy_layer *layer(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

static const struct esgz_node *node_of(struct lazy_layer *l, fuse_ino_t ino)
{
	if (ino < 1 || ino > l->toc.n_nodes)
		return NULL;
	return &l->toc.nodes[ino - 1];
}

static void fill_stat(const struct esgz_node *n, fuse_ino_t ino,
		      struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	st->st_mode = n->mode;
	st->st_nlink = n->nlink;
	st->st_uid = n->uid;
	st->st_gid = n->gid;
	st->st_rdev = n->rdev;
	st->st_size = S_ISLNK(n->mode)	 ? (off_t)strlen(n->link)
		      : S_ISREG(n->mode) ? (off_t)n->size
					 : 0;
	st->st_blksize = 4096;
	st->st_blocks = (st->st_size + 511) / 512;
	st->st_mtim.tv_sec = st->st_atim.tv_sec = st->st_ctim.tv_sec = n->mtime;
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct lazy_layer *l = layer(req);
	const struct esgz_node *p = node_of(l, parent);
	struct fuse_entry_param ep;
	size_t d;

	if (!p || !S_ISDIR(p->mode)) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	d = esgz_lookup(&l->toc, parent - 1, name);
	if (d == (size_t)-1) {
		memset(&ep, 0, sizeof(ep));
		ep.entry_timeout = TTL; /* a cached negative entry */
		fuse_reply_entry(req, &ep);
		return;
	}
	memset(&ep, 0, sizeof(ep));
	ep.ino = l->toc.dents[d].node + 1;
	ep.attr_timeout = ep.entry_timeout = TTL;
	fill_stat(&l->toc.nodes[l->toc.dents[d].node], ep.ino, &ep.attr);
	fuse_reply_entry(req, &ep);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	const struct esgz_node *n = node_of(layer(req), ino);
	struct stat st;

	if (!n) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	fill_stat(n, ino, &st);
	fuse_reply_attr(req, &st, TTL);
}

static void op_readlink(fuse_req_t req, fuse_ino_t ino)
{
	const struct esgz_node *n = node_of(layer(req), ino);

	if (!n || !S_ISLNK(n->mode))
		fuse_reply_err(req, EINVAL);
	else
		fuse_reply_readlink(req, n->link);
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	const struct esgz_node *n = node_of(layer(req), ino);

	if (!n || !S_ISREG(n->mode)) {
		fuse_reply_err(req, n ? EISDIR : ENOENT);
		return;
	}
	if ((fi->flags & O_ACCMODE) != O_RDONLY) {
		fuse_reply_err(req, EROFS);
		return;
	}
	fi->keep_cache = 1; /* verified data never changes */
	fuse_reply_open(req, fi);
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct lazy_layer *l = layer(req);
	const struct esgz_node *n = node_of(l, ino);
	struct cerr e = {0};
	char *buf;
	size_t got;

	if (!n || !S_ISREG(n->mode) || off < 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	if (size > READ_MAX)
		size = READ_MAX;
	buf = xmalloc(size ? size : 1);
	if (lazy_read(l, n, (uint64_t)off, size, buf, &got, &e) < 0) {
		log_warn("read: %s", e.msg);
		fuse_reply_err(req, EIO);
	} else {
		fuse_reply_buf(req, buf, got);
	}
	free(buf);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	struct lazy_layer *l = layer(req);
	const struct esgz_node *n = node_of(l, ino);
	char *buf;
	size_t used = 0;

	if (!n || !S_ISDIR(n->mode)) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	buf = xmalloc(size);
	for (size_t i = (size_t)off; i < n->n_children + 2; i++) {
		struct stat st = {0};
		const char *name;
		size_t want;

		if (i < 2) {
			name = i ? ".." : ".";
			st.st_ino = ino;
			st.st_mode = S_IFDIR;
		} else {
			const struct esgz_dent *d =
			    &l->toc.dents[n->children[i - 2]];

			name = d->base;
			st.st_ino = d->node + 1;
			st.st_mode = l->toc.nodes[d->node].mode;
		}
		want = fuse_add_direntry(req, buf + used, size - used, name,
					 &st, (off_t)(i + 1));
		if (want > size - used)
			break;
		used += want;
	}
	fuse_reply_buf(req, buf, used);
	free(buf);
}

/* xattrs: the entry's own, and overlayfs's opaque mark. */
static void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
			size_t size)
{
	const struct esgz_node *n = node_of(layer(req), ino);
	const void *v = NULL;
	size_t len = 0;

	if (!n) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	if (n->opaque && !strcmp(name, OVL_OPAQUE_XATTR)) {
		v = "y";
		len = 1;
	}
	for (size_t i = 0; !v && i < n->n_xattrs; i++)
		if (!strcmp(n->xattrs[i].name, name)) {
			v = n->xattrs[i].value;
			len = n->xattrs[i].len;
		}
	if (!v)
		fuse_reply_err(req, ENODATA);
	else if (!size)
		fuse_reply_xattr(req, len);
	else if (size < len)
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, v, len);
}

static void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	const struct esgz_node *n = node_of(layer(req), ino);
	size_t len = 0, at = 0;
	char *buf;

	if (!n) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	if (n->opaque)
		len += sizeof(OVL_OPAQUE_XATTR);
	for (size_t i = 0; i < n->n_xattrs; i++)
		len += strlen(n->xattrs[i].name) + 1;
	if (!size) {
		fuse_reply_xattr(req, len);
		return;
	}
	if (size < len) {
		fuse_reply_err(req, ERANGE);
		return;
	}
	buf = xmalloc(len + 1);
	if (n->opaque) {
		memcpy(buf, OVL_OPAQUE_XATTR, sizeof(OVL_OPAQUE_XATTR));
		at += sizeof(OVL_OPAQUE_XATTR);
	}
	for (size_t i = 0; i < n->n_xattrs; i++) {
		size_t k = strlen(n->xattrs[i].name) + 1;

		memcpy(buf + at, n->xattrs[i].name, k);
		at += k;
	}
	fuse_reply_buf(req, buf, len);
	free(buf);
}

static const struct fuse_lowlevel_ops ops = {
    .lookup = op_lookup,
    .getattr = op_getattr,
    .readlink = op_readlink,
    .open = op_open,
    .read = op_read,
    .readdir = op_readdir,
    .getxattr = op_getxattr,
    .listxattr = op_listxattr,
};

int lazyfs_serve(struct lazy_layer *l, const char *mountpoint,
		 void (*ready)(void *arg), void *arg, struct cerr *e)
{
	/* allow_other: the unit's users (any uid) read through overlayfs;
	 * default_permissions: the kernel checks modes, as on a disk. */
	char a0[] = "cell-pull", a1[] = "-o",
	     a2[] = "ro,allow_other,default_permissions,fsname=cell-lazy,"
		    "subtype=estargz";
	char *argv[] = {a0, a1, a2, NULL};
	struct fuse_args args = FUSE_ARGS_INIT(3, argv);
	struct fuse_loop_config *cfg;
	struct fuse_session *se;
	int r;

	se = fuse_session_new(&args, &ops, sizeof(ops), l);
	fuse_opt_free_args(&args);
	if (!se)
		return cerr_set(e, EIO, "fuse_session_new failed");
	if (fuse_set_signal_handlers(se) < 0) {
		fuse_session_destroy(se);
		return cerr_set(e, EIO, "fuse signal handlers");
	}
	if (fuse_session_mount(se, mountpoint) < 0) {
		fuse_remove_signal_handlers(se);
		fuse_session_destroy(se);
		return cerr_set(e, EIO, "mount FUSE at %s failed", mountpoint);
	}
	if (lazy_prefetch(l, e) < 0) {
		/* Reads fetch on demand what the prefetch could not. */
		log_warn("prefetch: %s", e->msg);
		cerr_clear(e);
	}
	/* Test seam: CELL_PULL_LAZY_BACKGROUND=0 leaves every chunk to be
	 * read on demand. */
	if (!getenv("CELL_PULL_LAZY_BACKGROUND") ||
	    strcmp(getenv("CELL_PULL_LAZY_BACKGROUND"), "0"))
		lazy_background_start(l);
	if (ready)
		ready(arg);
	cfg = fuse_loop_cfg_create();
	r = cfg ? fuse_session_loop_mt(se, cfg) : -ENOMEM;
	fuse_loop_cfg_destroy(cfg);
	fuse_session_unmount(se);
	fuse_remove_signal_handlers(se);
	fuse_session_destroy(se);
	return r < 0 ? cerr_set(e, EIO, "FUSE loop: %d", r) : 0;
}
#endif
