// SPDX-License-Identifier: Apache-2.0
/* A lazy layer as a read-only FUSE filesystem, speaking the kernel's
 * protocol (<linux/fuse.h>) over /dev/fuse itself: no libfuse, so the
 * static (musl) build serves lazy layers too. Inode n + 1 is the TOC's
 * node n, so lookups are a binary search in a directory's sorted entries
 * and nothing is allocated per request (nor kept per inode: FORGET has
 * nothing to drop). The tree is what unpack.c would write for the layer
 * in overlay form: whiteouts are 0/0 character devices, opaque
 * directories carry trusted.overlay.opaque "y", eStargz's own entries are
 * not there.
 *
 * WORKERS threads each loop wait → read a request → answer it on the one
 * descriptor (the kernel hands a request to one reader; another's read is
 * EAGAIN), so a read waiting on the registry holds up only its own
 * thread. Every request is the kernel's, but each length is checked
 * against the request's own before use. */
#include "lazy.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "cleanup.h"
#include "log.h"
#include "util.h"

#define TTL_S 86400 /* the tree never changes */
#define READ_MAX (1u << 20)
/* Nothing is written (the mount is read-only), but the kernel sizes the
 * reader's buffer by max_write: a request may be this plus its headers. */
#define MAX_WRITE (128u << 10)
#define IN_BUF (MAX_WRITE + 4096)
#define WORKERS 10 /* libfuse's loop_mt's default */
#define WORKER_STACK (512u << 10)
/* fuse_init_out as 7.23 made it (64 bytes); every kernel since 3.15. */
#define MIN_MINOR 23

_Static_assert(IN_BUF >= FUSE_MIN_READ_BUFFER, "the kernel's minimum");

struct srv {
	struct lazy_layer *l;
	int fd;	  /* /dev/fuse, non-blocking */
	int stop; /* eventfd: readable once the workers are to end */
	atomic_bool inited;
	atomic_int err; /* why the server ended, when not an unmount */
};

/* One request: its header, and the bytes after it (plen of them). */
struct req {
	struct srv *s;
	const struct fuse_in_header *h;
	const char *p;
	size_t plen;
	char *out; /* the worker's reply buffer: READ_MAX bytes */
};

/* The signal handler's way to the workers: one server per process. */
static int stop_fd = -1;

static void wake_all(struct srv *s)
{
	uint64_t one = 1;

	if (write(s->stop, &one, sizeof(one)) < 0)
		log_warn("wake the FUSE workers: %m");
}

static void on_signal(int sig)
{
	int saved = errno;
	uint64_t one = 1;

	if (stop_fd >= 0 && write(stop_fd, &one, sizeof(one)) < 0)
		(void)0; /* the counter is past its maximum: set already */
	errno = saved;
}

/* ---- replies: fuse_out_header + payload in one writev ---- */

static void reply(struct req *q, int err, const void *data, size_t len)
{
	struct fuse_out_header oh = {
	    .len = (uint32_t)(sizeof(oh) + (err ? 0 : len)),
	    .error = -err,
	    .unique = q->h->unique,
	};
	struct iovec iov[2] = {{&oh, sizeof(oh)}, {(void *)data, len}};

	/* ENOENT: the request was interrupted or its caller is gone. */
	if (writev(q->s->fd, iov, err || !len ? 1 : 2) < 0 && errno != ENOENT)
		log_warn("FUSE reply to opcode %u: %m", q->h->opcode);
}

static void reply_err(struct req *q, int err)
{
	reply(q, err, NULL, 0);
}

/* The request's argument struct, or NULL when the request is short. */
static const void *arg(const struct req *q, size_t size)
{
	return q->plen >= size ? q->p : NULL;
}

/* A NUL-terminated name at off in the request, or NULL. */
static const char *name_at(const struct req *q, size_t off)
{
	if (off >= q->plen || !memchr(q->p + off, '\0', q->plen - off))
		return NULL;
	return q->p + off;
}

static const struct esgz_node *node_of(struct lazy_layer *l, uint64_t ino)
{
	if (ino < 1 || ino > l->toc.n_nodes)
		return NULL;
	return &l->toc.nodes[ino - 1];
}

static void fill_attr(const struct esgz_node *n, uint64_t ino,
		      struct fuse_attr *a)
{
	memset(a, 0, sizeof(*a));
	a->ino = ino;
	a->mode = n->mode;
	a->nlink = n->nlink;
	a->uid = n->uid;
	a->gid = n->gid;
	/* The kernel's 32-bit encoding, which glibc's and musl's dev_t
	 * share for every number a 32-bit one can hold. */
	a->rdev = (uint32_t)n->rdev;
	a->size = S_ISLNK(n->mode)   ? strlen(n->link)
		  : S_ISREG(n->mode) ? n->size
				     : 0;
	a->blksize = 4096;
	a->blocks = (a->size + 511) / 512;
	a->mtime = a->atime = a->ctime = (uint64_t)n->mtime;
}

/* ---- the handshake ---- */

static void op_init(struct req *q)
{
	struct fuse_init_in in = {0}; /* an older kernel's is shorter */
	struct fuse_init_out out = {.major = FUSE_KERNEL_VERSION};
	uint32_t want = FUSE_ASYNC_READ | FUSE_PARALLEL_DIROPS | FUSE_MAX_PAGES;
	long page = sysconf(_SC_PAGESIZE);

	if (q->plen < 2 * sizeof(uint32_t) || atomic_load(&q->s->inited)) {
		reply_err(q, EIO);
		return;
	}
	memcpy(&in, q->p, q->plen < sizeof(in) ? q->plen : sizeof(in));
	out.minor = in.minor < FUSE_KERNEL_MINOR_VERSION
			? in.minor
			: FUSE_KERNEL_MINOR_VERSION;
	if (in.major > FUSE_KERNEL_VERSION) {
		/* The kernel asks again with our major. */
		out.minor = FUSE_KERNEL_MINOR_VERSION;
		reply(q, 0, &out, sizeof(out));
		return;
	}
	if (in.major < FUSE_KERNEL_VERSION || in.minor < MIN_MINOR) {
		log_error("the kernel speaks FUSE %u.%u: 7.%u or later needed",
			  in.major, in.minor, MIN_MINOR);
		atomic_store(&q->s->err, EPROTO);
		reply_err(q, EPROTO);
		wake_all(q->s);
		return;
	}
	/* Only what the kernel offers, and only what is done here: reads
	 * in parallel, even of one file (the workers), lookups in parallel
	 * (nothing here is per directory), reads of up to READ_MAX. */
	out.max_readahead = in.max_readahead;
	out.flags = in.flags & want;
	out.max_write = MAX_WRITE;
	if (out.flags & FUSE_MAX_PAGES)
		out.max_pages = (uint16_t)(READ_MAX / (page > 0 ? page : 4096));
	atomic_store(&q->s->inited, true);
	reply(q, 0, &out, sizeof(out));
}

/* ---- the tree ---- */

static void op_lookup(struct req *q)
{
	struct lazy_layer *l = q->s->l;
	const struct esgz_node *p = node_of(l, q->h->nodeid);
	const char *name = name_at(q, 0);
	struct fuse_entry_out out = {0};
	size_t d;

	if (!name) {
		reply_err(q, EINVAL);
		return;
	}
	if (!p || !S_ISDIR(p->mode)) {
		reply_err(q, ENOTDIR);
		return;
	}
	/* Not found: node 0 with a timeout, a cached negative entry. */
	out.entry_valid = TTL_S;
	d = esgz_lookup(&l->toc, q->h->nodeid - 1, name);
	if (d != (size_t)-1) {
		out.nodeid = l->toc.dents[d].node + 1;
		out.attr_valid = TTL_S;
		fill_attr(&l->toc.nodes[l->toc.dents[d].node], out.nodeid,
			  &out.attr);
	}
	reply(q, 0, &out, sizeof(out));
}

static void op_getattr(struct req *q)
{
	const struct esgz_node *n = node_of(q->s->l, q->h->nodeid);
	struct fuse_attr_out out = {.attr_valid = TTL_S};

	if (!n) {
		reply_err(q, ENOENT);
		return;
	}
	fill_attr(n, q->h->nodeid, &out.attr);
	reply(q, 0, &out, sizeof(out));
}

static void op_readlink(struct req *q)
{
	const struct esgz_node *n = node_of(q->s->l, q->h->nodeid);

	if (!n || !S_ISLNK(n->mode))
		reply_err(q, EINVAL);
	else
		reply(q, 0, n->link, strlen(n->link));
}

static void op_open(struct req *q, bool dir)
{
	const struct esgz_node *n = node_of(q->s->l, q->h->nodeid);
	const struct fuse_open_in *in = arg(q, sizeof(*in));
	struct fuse_open_out out = {0};

	if (!in || !n) {
		reply_err(q, in ? ENOENT : EINVAL);
		return;
	}
	if (dir ? !S_ISDIR(n->mode) : !S_ISREG(n->mode)) {
		reply_err(q, dir ? ENOTDIR : EISDIR);
		return;
	}
	if ((in->flags & O_ACCMODE) != O_RDONLY) {
		reply_err(q, EROFS);
		return;
	}
	if (!dir) /* verified data never changes */
		out.open_flags = FOPEN_KEEP_CACHE;
	reply(q, 0, &out, sizeof(out));
}

static void op_read(struct req *q)
{
	struct lazy_layer *l = q->s->l;
	const struct esgz_node *n = node_of(l, q->h->nodeid);
	const struct fuse_read_in *in = arg(q, sizeof(*in));
	struct cerr e = {0};
	size_t got;

	if (!in || !n || !S_ISREG(n->mode) || in->offset > INT64_MAX) {
		reply_err(q, EINVAL);
		return;
	}
	if (lazy_read(l, n, in->offset,
		      in->size < READ_MAX ? in->size : READ_MAX, q->out, &got,
		      &e) < 0) {
		log_warn("read: %s", e.msg);
		reply_err(q, EIO);
		return;
	}
	reply(q, 0, q->out, got);
}

/* One fuse_dirent at buf + used, if it fits in size: its length, or 0. */
static size_t add_dirent(char *buf, size_t used, size_t size, const char *name,
			 uint64_t ino, uint32_t mode, uint64_t next)
{
	size_t len = strlen(name);
	size_t rec = FUSE_DIRENT_ALIGN(FUSE_NAME_OFFSET + len);
	struct fuse_dirent *d = (struct fuse_dirent *)(buf + used);

	if (len > UINT32_MAX || rec > size - used)
		return 0;
	memset(buf + used, 0, rec); /* the padding too */
	d->ino = ino;
	d->off = next;
	d->namelen = (uint32_t)len;
	d->type = (mode & S_IFMT) >> 12;
	memcpy(d->name, name, len);
	return rec;
}

/* Entries from index off ("." and ".." first), each naming the next
 * index as its offset, as many as fit. */
static void op_readdir(struct req *q)
{
	struct lazy_layer *l = q->s->l;
	const struct esgz_node *n = node_of(l, q->h->nodeid);
	const struct fuse_read_in *in = arg(q, sizeof(*in));
	size_t size, used = 0;

	if (!in) {
		reply_err(q, EINVAL);
		return;
	}
	if (!n || !S_ISDIR(n->mode)) {
		reply_err(q, ENOTDIR);
		return;
	}
	size = in->size < READ_MAX ? in->size : READ_MAX;
	for (uint64_t i = in->offset; i < (uint64_t)n->n_children + 2; i++) {
		const struct esgz_dent *d =
		    i < 2 ? NULL : &l->toc.dents[n->children[i - 2]];
		size_t rec =
		    d ? add_dirent(q->out, used, size, d->base, d->node + 1,
				   l->toc.nodes[d->node].mode, i + 1)
		      : add_dirent(q->out, used, size, i ? ".." : ".",
				   q->h->nodeid, S_IFDIR, i + 1);

		if (!rec)
			break;
		used += rec;
	}
	reply(q, 0, q->out, used);
}

/* ---- xattrs: the entry's own, and overlayfs's opaque mark ---- */

/* size 0 asks for the length; a buffer too small is ERANGE. */
static void reply_xattr(struct req *q, uint32_t size, const void *v, size_t len)
{
	struct fuse_getxattr_out out = {.size = (uint32_t)len};

	if (!size)
		reply(q, 0, &out, sizeof(out));
	else if (size < len)
		reply_err(q, ERANGE);
	else
		reply(q, 0, v, len);
}

static void op_getxattr(struct req *q)
{
	const struct esgz_node *n = node_of(q->s->l, q->h->nodeid);
	const struct fuse_getxattr_in *in = arg(q, sizeof(*in));
	const char *name = name_at(q, sizeof(*in));
	const void *v = NULL;
	size_t len = 0;

	if (!in || !name) {
		reply_err(q, EINVAL);
		return;
	}
	if (!n) {
		reply_err(q, ENOENT);
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
		reply_err(q, ENODATA);
	else if (len > READ_MAX)
		reply_err(q, E2BIG);
	else
		reply_xattr(q, in->size, v, len);
}

static void op_listxattr(struct req *q)
{
	const struct esgz_node *n = node_of(q->s->l, q->h->nodeid);
	const struct fuse_getxattr_in *in = arg(q, sizeof(*in));
	size_t len = 0;

	if (!in || !n) {
		reply_err(q, in ? ENOENT : EINVAL);
		return;
	}
	if (n->opaque)
		len += sizeof(OVL_OPAQUE_XATTR);
	for (size_t i = 0; i < n->n_xattrs; i++)
		len += strlen(n->xattrs[i].name) + 1;
	if (len > READ_MAX) {
		reply_err(q, E2BIG);
		return;
	}
	if (in->size >= len) {
		size_t at = 0;

		if (n->opaque) {
			memcpy(q->out, OVL_OPAQUE_XATTR,
			       sizeof(OVL_OPAQUE_XATTR));
			at += sizeof(OVL_OPAQUE_XATTR);
		}
		for (size_t i = 0; i < n->n_xattrs; i++) {
			size_t k = strlen(n->xattrs[i].name) + 1;

			memcpy(q->out + at, n->xattrs[i].name, k);
			at += k;
		}
	}
	reply_xattr(q, in->size, q->out, len);
}

static void op_statfs(struct req *q)
{
	struct fuse_statfs_out out = {
	    .st = {.bsize = 4096, .frsize = 4096, .namelen = 255},
	};

	reply(q, 0, &out, sizeof(out));
}

static void op_access(struct req *q)
{
	const struct fuse_access_in *in = arg(q, sizeof(*in));

	if (!in)
		reply_err(q, EINVAL);
	else
		reply_err(q, in->mask & W_OK ? EROFS : 0);
}

/* ---- dispatch ---- */

static bool writes(uint32_t op)
{
	switch (op) {
	case FUSE_SETATTR:
	case FUSE_SYMLINK:
	case FUSE_MKNOD:
	case FUSE_MKDIR:
	case FUSE_UNLINK:
	case FUSE_RMDIR:
	case FUSE_RENAME:
	case FUSE_RENAME2:
	case FUSE_LINK:
	case FUSE_WRITE:
	case FUSE_SETXATTR:
	case FUSE_REMOVEXATTR:
	case FUSE_CREATE:
	case FUSE_FALLOCATE:
	case FUSE_COPY_FILE_RANGE:
#ifdef FUSE_TMPFILE
	case FUSE_TMPFILE:
#endif
		return true;
	default:
		return false;
	}
}

static void dispatch(struct req *q)
{
	uint32_t op = q->h->opcode;

	if (op == FUSE_INIT) {
		op_init(q);
		return;
	}
	/* Those the kernel wants no answer to. */
	if (op == FUSE_FORGET || op == FUSE_BATCH_FORGET ||
	    op == FUSE_INTERRUPT || op == FUSE_NOTIFY_REPLY)
		return;
	if (!atomic_load(&q->s->inited)) {
		reply_err(q, EIO);
		return;
	}
	switch (op) {
	case FUSE_LOOKUP:
		op_lookup(q);
		break;
	case FUSE_GETATTR:
		op_getattr(q);
		break;
	case FUSE_READLINK:
		op_readlink(q);
		break;
	case FUSE_OPEN:
	case FUSE_OPENDIR:
		op_open(q, op == FUSE_OPENDIR);
		break;
	case FUSE_READ:
		op_read(q);
		break;
	case FUSE_READDIR:
		op_readdir(q);
		break;
	case FUSE_GETXATTR:
		op_getxattr(q);
		break;
	case FUSE_LISTXATTR:
		op_listxattr(q);
		break;
	case FUSE_STATFS:
		op_statfs(q);
		break;
	case FUSE_ACCESS:
		op_access(q);
		break;
	case FUSE_RELEASE:
	case FUSE_RELEASEDIR:
	case FUSE_FLUSH:
	case FUSE_DESTROY:
		reply_err(q, 0);
		break;
	default:
		reply_err(q, writes(op) ? EROFS : ENOSYS);
	}
}

/* One request as read: checked against its own header before dispatch. */
static void handle(struct srv *s, const char *buf, size_t n, char *out)
{
	struct fuse_in_header h;
	struct req q = {.s = s, .h = &h, .out = out};

	if (n < sizeof(h)) {
		log_warn("FUSE: a request of %zu bytes", n);
		return;
	}
	memcpy(&h, buf, sizeof(h));
	if (h.len != n) {
		log_warn("FUSE: opcode %u says %u bytes, read %zu", h.opcode,
			 h.len, n);
		reply_err(&q, EIO);
		return;
	}
	q.p = buf + sizeof(h);
	q.plen = n - sizeof(h);
	dispatch(&q);
}

/* A worker's own epoll: /dev/fuse exclusively (a request wakes one
 * worker, not all of them; one that lost the race reads EAGAIN), the stop
 * eventfd as every worker does. */
static int worker_epoll(struct srv *s)
{
	struct epoll_event fe = {.events = EPOLLIN | EPOLLEXCLUSIVE,
				 .data.fd = s->fd};
	struct epoll_event se = {.events = EPOLLIN, .data.fd = s->stop};
	int ep = epoll_create1(EPOLL_CLOEXEC);

	if (ep < 0)
		return -1;
	if (epoll_ctl(ep, EPOLL_CTL_ADD, s->fd, &fe) < 0 ||
	    epoll_ctl(ep, EPOLL_CTL_ADD, s->stop, &se) < 0) {
		close(ep);
		return -1;
	}
	return ep;
}

static void *worker(void *arg)
{
	struct srv *s = arg;
	/* Aligned for the argument structs read in place. */
	char *in = aligned_alloc(8, IN_BUF), *out = xmalloc(READ_MAX);
	int ep = worker_epoll(s);

	if (!in)
		abort(); /* out of memory, as xmalloc */
	if (ep < 0) {
		log_warn("FUSE worker: epoll: %m");
		atomic_store(&s->err, errno);
	}
	while (ep >= 0) {
		struct epoll_event ev[2];
		int k = epoll_wait(ep, ev, 2, -1);
		bool stop = false;
		ssize_t n;

		if (k < 0 && errno != EINTR) {
			log_warn("epoll /dev/fuse: %m");
			atomic_store(&s->err, errno);
			break;
		}
		for (int i = 0; i < k; i++)
			stop |= ev[i].data.fd == s->stop;
		if (stop)
			break;
		n = read(s->fd, in, IN_BUF);
		if (n >= 0) {
			handle(s, in, (size_t)n, out);
			continue;
		}
		/* EAGAIN: another worker took the request. */
		if (errno == EINTR || errno == EAGAIN)
			continue;
		if (errno != ENODEV) { /* ENODEV: unmounted, the end */
			log_warn("read /dev/fuse: %m");
			atomic_store(&s->err, errno);
		}
		break;
	}
	wake_all(s);
	if (ep >= 0)
		close(ep);
	free(in);
	free(out);
	return NULL;
}

/* ---- the mount and its end ---- */

/* libfuse's mount as root, by hand: the same source, type and options. */
static int fuse_mount(const char *mountpoint, struct cerr *e)
{
	cleanup_free char *opts = NULL;
	int fd = open("/dev/fuse", O_RDWR | O_NONBLOCK | O_CLOEXEC);

	if (fd < 0)
		return cerr_sys(e, "open /dev/fuse");
	/* allow_other: the unit's users (any uid) read through overlayfs;
	 * default_permissions: the kernel checks modes, as on a disk. */
	opts = xasprintf("fd=%d,rootmode=40000,user_id=%u,group_id=%u,"
			 "allow_other,default_permissions",
			 fd, (unsigned)getuid(), (unsigned)getgid());
	if (mount("cell-lazy", mountpoint, "fuse.estargz",
		  MS_RDONLY | MS_NOSUID | MS_NODEV, opts) < 0) {
		cerr_sys(e, "mount FUSE at %s", mountpoint);
		close(fd);
		return -1;
	}
	return fd;
}

/* As libfuse's unmount: the descriptor closed first (that ends the
 * connection: a synchronous unmount could otherwise wait on this very
 * server), the mount detached unless the kernel had ended it already. */
static void fuse_unmount(int fd, const char *mountpoint)
{
	struct pollfd pf = {.fd = fd};
	int r = poll(&pf, 1, 0);

	close(fd);
	if (r == 1 && (pf.revents & POLLERR))
		return;
	if (umount2(mountpoint, MNT_DETACH | UMOUNT_NOFOLLOW) < 0 &&
	    errno != EINVAL && errno != ENOENT)
		log_warn("unmount %s: %m", mountpoint);
}

static const int stop_signals[] = {SIGHUP, SIGINT, SIGTERM};
#define N_STOP_SIGNALS (sizeof(stop_signals) / sizeof(stop_signals[0]))

/* SIGHUP, SIGINT, SIGTERM end the server (as libfuse's handlers did);
 * SIGPIPE is ignored unless someone chose otherwise. */
static void signals_set(int stop, struct sigaction old[N_STOP_SIGNALS + 1])
{
	struct sigaction sa = {.sa_handler = on_signal};

	stop_fd = stop;
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < N_STOP_SIGNALS; i++)
		sigaction(stop_signals[i], &sa, &old[i]);
	sigaction(SIGPIPE, NULL, &old[N_STOP_SIGNALS]);
	if (old[N_STOP_SIGNALS].sa_handler == SIG_DFL)
		signal(SIGPIPE, SIG_IGN);
}

static void signals_restore(const struct sigaction old[N_STOP_SIGNALS + 1])
{
	for (size_t i = 0; i < N_STOP_SIGNALS; i++)
		sigaction(stop_signals[i], &old[i], NULL);
	sigaction(SIGPIPE, &old[N_STOP_SIGNALS], NULL);
	stop_fd = -1;
}

/* The workers, until the mount ends or a signal comes. */
static int loop(struct srv *s, struct cerr *e)
{
	pthread_t th[WORKERS];
	pthread_attr_t at;
	size_t n = 0;

	pthread_attr_init(&at);
	pthread_attr_setstacksize(&at, WORKER_STACK);
	while (n < WORKERS && pthread_create(&th[n], &at, worker, s) == 0)
		n++;
	pthread_attr_destroy(&at);
	if (!n)
		return cerr_set(e, EAGAIN, "no FUSE worker thread");
	for (size_t i = 0; i < n; i++)
		pthread_join(th[i], NULL);
	if (atomic_load(&s->err))
		return cerr_set(e, atomic_load(&s->err), "FUSE: %s",
				strerror(atomic_load(&s->err)));
	return 0;
}

static void background(struct lazy_layer *l, struct cerr *e)
{
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
}

int lazyfs_serve(struct lazy_layer *l, const char *mountpoint,
		 void (*ready)(void *arg), void *arg, struct cerr *e)
{
	struct srv s = {.l = l, .fd = -1};
	struct sigaction old[N_STOP_SIGNALS + 1];
	int r;

	s.stop = eventfd(0, EFD_CLOEXEC);
	if (s.stop < 0)
		return cerr_sys(e, "eventfd");
	signals_set(s.stop, old);
	s.fd = fuse_mount(mountpoint, e);
	if (s.fd < 0) {
		signals_restore(old);
		close(s.stop);
		return -1;
	}
	background(l, e);
	if (ready)
		ready(arg);
	r = loop(&s, e);
	fuse_unmount(s.fd, mountpoint);
	signals_restore(old);
	close(s.stop);
	return r;
}
