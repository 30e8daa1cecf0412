// SPDX-License-Identifier: Apache-2.0
/* Once-per-instance bookkeeping, laid out like cloud-init's
 * /var/lib/cloud:
 *
 *   STATE/instance-id                     the instance seen last
 *   STATE/instances/<iid>/sem/<module>    a module ran for this instance
 *   STATE/instances/<iid>/scripts/        user-data scripts, as run
 *   STATE/instances/<iid>/boot-finished   time and outcome of the last run
 *
 * A marker is fsync'd (file and directory) before it counts, so that the
 * at-most-once modules (runcmd, scripts) stay at most once across a crash. */
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
#include "util.h"

static bool same_instance(int dirfd, const char *iid)
{
	struct buf b;
	struct cerr e = {0};
	bool same;

	buf_init(&b, 4096);
	if (ci_read_file(dirfd, "instance-id", &b, &e) < 0) {
		buf_free(&b);
		return false;
	}
	while (b.len && (b.data[b.len - 1] == '\n'))
		b.data[--b.len] = '\0';
	same = !strcmp(b.data, iid);
	buf_free(&b);
	return same;
}

int ci_state_open(const char *dir, const char *iid, struct ci_state *st,
		  struct cerr *e)
{
	cleanup_close int inst = -1;

	memset(st, 0, sizeof(*st));
	st->dirfd = st->instfd = -1;
	st->iid = xstrdup(iid);
	if (fs_mkdir_p(dir, 0700, e) < 0) {
		cerr_prefix(e, "state dir");
		goto fail_early;
	}
	st->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (st->dirfd < 0) {
		cerr_sys(e, "open state dir %s", dir);
		goto fail_early;
	}
	st->iid_dir = ci_instance_dir_name(iid);
	st->new_instance = !same_instance(st->dirfd, iid);
	inst = fs_subdir_at(st->dirfd, "instances", 0700, e);
	if (inst < 0)
		goto fail;
	st->instfd = fs_subdir_at(inst, st->iid_dir, 0700, e);
	if (st->instfd < 0)
		goto fail;
	if (mkdirat(st->instfd, "sem", 0700) < 0 && errno != EEXIST) {
		cerr_sys(e, "mkdir sem");
		goto fail;
	}
	return 0;
fail:
	cerr_prefix(e, "state dir %s", dir);
fail_early:
	ci_state_close(st);
	return -1;
}

bool ci_state_done(const struct ci_state *st, const char *module)
{
	char rel[128];

	snprintf(rel, sizeof(rel), "sem/%s", module);
	return faccessat(st->instfd, rel, F_OK, AT_SYMLINK_NOFOLLOW) == 0;
}

int ci_state_mark(const struct ci_state *st, const char *module, struct cerr *e)
{
	char rel[128], stamp[64];
	int n, sem;

	snprintf(rel, sizeof(rel), "sem/%s", module);
	n = snprintf(stamp, sizeof(stamp), "%lld\n", (long long)time(NULL));
	if (ci_write_file(st->instfd, rel, stamp, (size_t)n, 0600, NULL, e) < 0)
		return cerr_prefix(e, "marker %s", module);
	/* The rename is durable only once its directory is synced. */
	sem = openat(st->instfd, "sem", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (sem >= 0) {
		fsync(sem);
		close(sem);
	}
	return 0;
}

int ci_state_finish(const struct ci_state *st, const char *summary,
		    struct cerr *e)
{
	cleanup_free char *iid = xasprintf("%s\n", st->iid);
	cleanup_free char *fin =
	    xasprintf("%lld %s\n", (long long)time(NULL), summary);

	if (ci_write_file(st->instfd, "boot-finished", fin, strlen(fin), 0644,
			  NULL, e) < 0 ||
	    ci_write_file(st->dirfd, "instance-id", iid, strlen(iid), 0644,
			  NULL, e) < 0)
		return cerr_prefix(e, "state dir");
	return 0;
}

void ci_state_close(struct ci_state *st)
{
	if (!st->iid) /* zeroed or never opened: nothing to close */
		return;
	if (st->dirfd >= 0)
		close(st->dirfd);
	if (st->instfd >= 0)
		close(st->instfd);
	free(st->iid);
	free(st->iid_dir);
	st->dirfd = st->instfd = -1;
	st->iid = st->iid_dir = NULL;
}
