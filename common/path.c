// SPDX-License-Identifier: Apache-2.0
#include "path.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <string.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cleanup.h"
#include "util.h"

#define MAX_SYMLINKS 40
#define MAX_DEPTH 512

static bool force_fallback;
static int have_openat2 = -1; /* -1 unknown, 0 no, 1 yes */

void path_force_fallback(bool on)
{
	force_fallback = on;
}

int path_clean(const char *in, char *out, size_t outsz, struct cerr *e)
{
	size_t o = 0;
	const char *p = in;

	while (*p) {
		const char *s;
		size_t n;

		while (*p == '/')
			p++;
		s = p;
		while (*p && *p != '/')
			p++;
		n = (size_t)(p - s);
		if (n == 0 || (n == 1 && s[0] == '.'))
			continue;
		if (n == 2 && s[0] == '.' && s[1] == '.')
			return cerr_set(e, EINVAL,
					"path '%s' has a '..' component", in);
		if (o + n + 2 > outsz)
			return cerr_set(e, ENAMETOOLONG,
					"path '%.64s…' is too long", in);
		if (o)
			out[o++] = '/';
		memcpy(out + o, s, n);
		o += n;
	}
	if (outsz == 0)
		return cerr_set(e, ENAMETOOLONG, "no room for path");
	out[o] = '\0';
	return 0;
}

static int sys_openat2(int dirfd, const char *path, int flags, mode_t mode,
		       enum path_scope scope)
{
	struct open_how how = {
	    .flags = (unsigned)flags | O_CLOEXEC,
	    .mode = (flags & (O_CREAT | O_TMPFILE)) ? mode : 0,
	    .resolve =
		(scope == PATH_IN_ROOT ? RESOLVE_IN_ROOT : RESOLVE_BENEATH) |
		(scope == PATH_NO_LINKS ? RESOLVE_NO_SYMLINKS : 0) |
		RESOLVE_NO_MAGICLINKS,
	};
	int fd, tries = 0;

	do
		fd = (int)syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
	while (fd < 0 && errno == EAGAIN && ++tries < 16);
	return fd;
}

/* Prepend link target t to the remaining path held in rest. */
static int splice_link(char *rest, size_t restsz, const char *t, size_t tlen)
{
	size_t rl = strlen(rest);

	if (tlen + 1 + rl + 1 > restsz) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memmove(rest + tlen + 1, rest, rl + 1);
	memcpy(rest, t, tlen);
	rest[tlen] = rl ? '/' : '\0';
	return 0;
}

/* The fallback walker's state: a stack of directory fds from the root down,
 * the path it spells (relative to the root), and what is left to walk. */
struct walk {
	enum path_scope scope;
	int stack[MAX_DEPTH];
	size_t spell[MAX_DEPTH]; /* length of `path` at each depth */
	int depth, links;
	char path[PATH_MAX_INPUT];
	char rest[PATH_MAX_INPUT * 2];
	/* The step just taken: its component, whether it was the last, its
	 * lstat and the directory it was looked up in. */
	char name[256];
	bool last;
	struct stat st;
	int top;
};

static void walk_pop_to(struct walk *w, int depth)
{
	while (w->depth > depth)
		close(w->stack[w->depth--]);
	w->path[w->spell[w->depth]] = '\0';
}

static int walk_push(struct walk *w, int fd, const char *name)
{
	size_t at = w->spell[w->depth], n = strlen(name);

	if (w->depth + 1 >= MAX_DEPTH || at + n + 2 > sizeof(w->path)) {
		close(fd);
		errno = w->depth + 1 >= MAX_DEPTH ? ELOOP : ENAMETOOLONG;
		return -1;
	}
	if (at)
		w->path[at++] = '/';
	memcpy(w->path + at, name, n + 1);
	w->stack[++w->depth] = fd;
	w->spell[w->depth] = at + n;
	return 0;
}

/* Take the next component of w->rest into name; *last says whether it was
 * the final one. 0 when rest is empty, 1 with a name, -1 on error. */
static int walk_next(struct walk *w, char *name, size_t namesz, bool *last)
{
	char *s = w->rest, *slash;
	size_t n;

	while (*s == '/')
		s++;
	if (s != w->rest)
		memmove(w->rest, s, strlen(s) + 1);
	if (!w->rest[0])
		return 0;
	slash = strchr(w->rest, '/');
	n = slash ? (size_t)(slash - w->rest) : strlen(w->rest);
	if (n >= namesz) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memcpy(name, w->rest, n);
	name[n] = '\0';
	memmove(w->rest, w->rest + n, strlen(w->rest + n) + 1);
	*last = w->rest[strspn(w->rest, "/")] == '\0';
	return 1;
}

/* A symlink met on the walk: splice its target in front of what is left.
 * An absolute target restarts at the root (in-root) or is refused. */
static int walk_link(struct walk *w, int top, const char *name)
{
	char t[PATH_MAX_INPUT];
	ssize_t tl = readlinkat(top, name, t, sizeof(t) - 1);

	if (tl < 0)
		return -1;
	if (w->scope == PATH_NO_LINKS || ++w->links > MAX_SYMLINKS) {
		errno = ELOOP;
		return -1;
	}
	if (tl == 0) {
		errno = ENOENT;
		return -1;
	}
	if (t[0] == '/') {
		if (w->scope != PATH_IN_ROOT) {
			errno = EXDEV;
			return -1;
		}
		walk_pop_to(w, 0);
	}
	return splice_link(w->rest, sizeof(w->rest), t, (size_t)tl);
}

static int spell_add(struct walk *w, const char *name)
{
	size_t at = strlen(w->path), n = strlen(name);

	if (!strcmp(name, "."))
		return 0;
	if (!strcmp(name, "..")) {
		char *cut = strrchr(w->path, '/');
		*(cut ? cut : w->path) = '\0';
		return 0;
	}
	if (at + n + 2 > sizeof(w->path)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	if (at)
		w->path[at++] = '/';
	memcpy(w->path + at, name, n + 1);
	return 0;
}

/* What is left after a missing component, spelt onto w->path lexically
 * (there is nothing to follow); ".." drops a component, never past the
 * root. */
static int walk_spell_rest(struct walk *w, const char *name)
{
	char comp[256];
	bool last;
	int r;

	if (spell_add(w, name) < 0)
		return -1;
	while ((r = walk_next(w, comp, sizeof(comp), &last)) == 1)
		if (spell_add(w, comp) < 0)
			return -1;
	return r;
}

/* The fallback walks component by component, never following a symlink
 * without checking where it goes: walk_open opens what the path names,
 * walk_spell says where it leads. Both take their steps through walk_step,
 * so the rules of the walk (".." never above the root, links spliced in
 * and counted, only directories descended into) are written once. */

static int walk_start(struct walk *w, int rootfd, const char *rel)
{
	if (strlen(rel) >= sizeof(w->rest)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memcpy(w->rest, rel, strlen(rel) + 1);
	w->depth = w->links = 0;
	w->spell[0] = 0;
	w->path[0] = '\0';
	w->stack[0] = fcntl(rootfd, F_DUPFD_CLOEXEC, 3);
	return w->stack[0] < 0 ? -1 : 0;
}

/* Close the walk's directories; ret and errno pass through. */
static int walk_end(struct walk *w, int ret)
{
	int saved = errno;

	while (w->depth >= 0)
		close(w->stack[w->depth--]);
	errno = saved;
	return ret;
}

enum step {
	STEP_FAIL = -1, /* errno says why */
	STEP_ON,	/* taken: go on with the next component */
	STEP_AT,	/* w->name is the last component, w->st its lstat */
	STEP_MISSING,	/* w->name does not exist (any component) */
	STEP_END,	/* nothing left: the path named the directory w->top */
};

/* The next component: "." stays, ".." goes up (never above the root), a
 * symlink is spliced in front of what is left (the last one only when
 * follow_last), a directory is descended into. The last component itself,
 * or a missing one, is the caller's. */
static enum step walk_step(struct walk *w, bool follow_last)
{
	int fd, r;

	w->top = w->stack[w->depth];
	w->last = false;
	r = walk_next(w, w->name, sizeof(w->name), &w->last);
	if (r <= 0)
		return r < 0 ? STEP_FAIL : STEP_END;
	if (!strcmp(w->name, "."))
		return STEP_ON;
	if (!strcmp(w->name, "..")) {
		if (w->depth == 0 && w->scope != PATH_IN_ROOT) {
			errno = EXDEV;
			return STEP_FAIL;
		}
		if (w->depth > 0)
			walk_pop_to(w, w->depth - 1);
		return STEP_ON;
	}
	if (fstatat(w->top, w->name, &w->st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? STEP_MISSING : STEP_FAIL;
	if (S_ISLNK(w->st.st_mode) && (!w->last || follow_last))
		return walk_link(w, w->top, w->name) < 0 ? STEP_FAIL : STEP_ON;
	if (w->last)
		return STEP_AT;
	if (!S_ISDIR(w->st.st_mode)) {
		errno = ENOTDIR;
		return STEP_FAIL;
	}
	fd = openat(w->top, w->name,
		    O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || walk_push(w, fd, w->name) < 0)
		return STEP_FAIL;
	return STEP_ON;
}

/* Open what rel names beneath rootfd (openat2's flags and mode); a missing
 * last component is created with O_CREAT, never through a link. */
static int walk_open(struct walk *w, int rootfd, const char *rel, int flags,
		     mode_t mode)
{
	enum step step;

	if (walk_start(w, rootfd, rel) < 0)
		return -1;
	while ((step = walk_step(w, !(flags & O_NOFOLLOW))) == STEP_ON)
		;
	if (step == STEP_END)
		return walk_end(w,
				openat(w->top, ".", flags | O_CLOEXEC, mode));
	if (step == STEP_AT ||
	    (step == STEP_MISSING && w->last && (flags & O_CREAT)))
		return walk_end(w,
				openat(w->top, w->name,
				       flags | O_CLOEXEC | O_NOFOLLOW, mode));
	return walk_end(w, -1); /* errno: the step's (ENOENT when missing) */
}

/* Where rel leads beneath rootfd, into w->path; nothing is opened at the
 * end, and what is missing is spelt as given. */
static int walk_spell(struct walk *w, int rootfd, const char *rel,
		      bool follow_last)
{
	enum step step;

	if (walk_start(w, rootfd, rel) < 0)
		return -1;
	while ((step = walk_step(w, follow_last)) == STEP_ON)
		;
	if (step == STEP_END)
		return walk_end(w, 0);
	if (step == STEP_AT || step == STEP_MISSING)
		return walk_end(w, walk_spell_rest(w, w->name));
	return walk_end(w, -1);
}

static int open_raw(int rootfd, const char *rel, int flags, mode_t mode,
		    enum path_scope scope)
{
	struct walk *w;
	int fd;

	if (!force_fallback && have_openat2 != 0) {
		fd = sys_openat2(rootfd, *rel ? rel : ".", flags, mode, scope);
		if (fd >= 0 || errno != ENOSYS) {
			have_openat2 = 1;
			return fd;
		}
		have_openat2 = 0;
	}
	w = xmalloc(sizeof(*w));
	w->scope = scope;
	fd = walk_open(w, rootfd, rel, flags, mode);
	{
		int saved = errno;
		free(w);
		errno = saved;
	}
	return fd;
}

static int open_fail(const char *rel, enum path_scope scope, struct cerr *e)
{
	/* O_DIRECTORY on a link says ENOTDIR rather than ELOOP. */
	if ((errno == ELOOP || errno == ENOTDIR) && scope == PATH_NO_LINKS)
		return cerr_set(e, errno,
				"'%s': a symlink (not followed) or a "
				"non-directory on the way",
				rel);
	if (errno == EXDEV || (errno == ELOOP))
		return cerr_set(e, errno, "'%s' resolves outside the root%s",
				rel, errno == ELOOP ? " or loops" : "");
	return cerr_sys(e, "open '%s'", rel);
}

int path_open_at(int rootfd, const char *rel, int flags, mode_t mode,
		 enum path_scope scope, struct cerr *e)
{
	int fd = open_raw(rootfd, rel, flags, mode, scope);

	return fd < 0 ? open_fail(rel, scope, e) : fd;
}

int path_open_beneath(int rootfd, const char *rel, int flags, mode_t mode,
		      struct cerr *e)
{
	return path_open_at(rootfd, rel, flags, mode, PATH_BENEATH, e);
}

int path_resolve_in_root(int rootfd, const char *rel, bool follow_last,
			 char *out, size_t outsz, struct cerr *e)
{
	struct walk *w = xmalloc(sizeof(*w));
	int r;

	w->scope = PATH_IN_ROOT;
	r = walk_spell(w, rootfd, rel, follow_last);
	if (r < 0)
		open_fail(rel, PATH_IN_ROOT, e);
	else if (strlen(w->path) >= outsz)
		r = cerr_set(e, ENAMETOOLONG, "path '%.64s…' is too long", rel);
	else
		memcpy(out, w->path, strlen(w->path) + 1);
	free(w);
	return r;
}

/* Slow path of path_open_parent: resolve each prefix of dir in turn and
 * create the ones that are missing, inside the directory already resolved. */
static int mkdirs_beneath(int rootfd, const char *dir, enum path_scope scope,
			  struct cerr *e)
{
	char prefix[PATH_MAX_INPUT];
	size_t len = strlen(dir), start = 0;
	int prev;

	if (len >= sizeof(prefix))
		return cerr_set(e, ENAMETOOLONG, "path '%.64s…' is too long",
				dir);
	prev = fcntl(rootfd, F_DUPFD_CLOEXEC, 3);
	if (prev < 0)
		return cerr_sys(e, "dup");
	for (size_t i = 0; i <= len; i++) {
		int fd;

		if (dir[i] != '/' && dir[i] != '\0')
			continue;
		memcpy(prefix, dir, i);
		prefix[i] = '\0';
		fd = open_raw(rootfd, prefix, O_PATH | O_DIRECTORY, 0, scope);
		if (fd < 0 && errno == ENOENT) {
			if (mkdirat(prev, prefix + start, 0755) < 0 &&
			    errno != EEXIST) {
				cerr_sys(e, "mkdir '%s'", prefix);
				close(prev);
				return -1;
			}
			fd = open_raw(rootfd, prefix, O_PATH | O_DIRECTORY, 0,
				      scope);
		}
		if (fd < 0) {
			int saved = errno;
			close(prev);
			errno = saved;
			if (errno == EXDEV || errno == ELOOP)
				return cerr_set(
				    e, errno, "'%s' resolves outside the root",
				    dir);
			return cerr_sys(e, "open '%s'", prefix);
		}
		close(prev);
		prev = fd;
		start = i + 1;
	}
	return prev;
}

int path_open_parent_at(int rootfd, const char *rel, bool mkdirs,
			enum path_scope scope, const char **base,
			struct cerr *e)
{
	const char *slash = strrchr(rel, '/');
	char dir[PATH_MAX_INPUT];
	size_t n;
	int fd;

	if (!*rel)
		return cerr_set(e, EINVAL, "empty path has no parent");
	*base = slash ? slash + 1 : rel;
	n = slash ? (size_t)(slash - rel) : 0;
	if (n >= sizeof(dir))
		return cerr_set(e, ENAMETOOLONG, "path '%.64s…' is too long",
				rel);
	memcpy(dir, rel, n);
	dir[n] = '\0';
	fd = open_raw(rootfd, dir, O_PATH | O_DIRECTORY, 0, scope);
	if (fd >= 0)
		return fd;
	if (errno == ENOENT && mkdirs && scope == PATH_IN_ROOT) {
		/* Make what is missing where the links lead (a dangling
		 * /var/run -> /run gets its /run). */
		char real[PATH_MAX_INPUT];

		if (path_resolve_in_root(rootfd, dir, true, real, sizeof(real),
					 e) < 0)
			return -1;
		return mkdirs_beneath(rootfd, real, scope, e);
	}
	if (errno == ENOENT && mkdirs)
		return mkdirs_beneath(rootfd, dir, scope, e);
	if (errno == EXDEV || errno == ELOOP)
		return cerr_set(e, errno, "'%s' resolves outside the root",
				rel);
	return cerr_sys(e, "open parent of '%s'", rel);
}

int path_open_parent(int rootfd, const char *rel, bool mkdirs,
		     const char **base, struct cerr *e)
{
	return path_open_parent_at(rootfd, rel, mkdirs, PATH_BENEATH, base, e);
}
