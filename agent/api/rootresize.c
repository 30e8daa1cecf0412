// SPDX-License-Identifier: Apache-2.0
/* resizevolume: find the block device under the root filesystem, grow
 * its partition (growpart when installed, else parttable.c) and the ext4
 * filesystem on it (e2fsck, resize2fs). */
#include "rootresize.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/blkpg.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"
#include "fsutil.h"
#include "log.h"
#include "parttable.h"
#include "procspawn.h"
#include "util.h"

/* ---- finding the root device ---- */

/* Walk /proc/self/mountinfo. With mnt: the device number of what is
 * mounted there (the last such mount wins: it hides the ones before it).
 * Without: whether *dev is mounted anywhere (1) or not (0). */
static int mountinfo_find(const char *mnt, dev_t *dev, struct cerr *e)
{
	cleanup_fclose FILE *f = fopen("/proc/self/mountinfo", "re");
	char line[8192];
	bool found = false;

	if (!f)
		return cerr_sys(e, "open /proc/self/mountinfo");
	while (fgets(line, sizeof(line), f)) {
		char *save = NULL, *tok[5];
		unsigned maj, min;
		int i;

		tok[0] = strtok_r(line, " ", &save);
		for (i = 1; tok[i - 1] && i < 5; i++)
			tok[i] = strtok_r(NULL, " ", &save);
		if (i < 5 || !tok[4] ||
		    sscanf(tok[2], "%u:%u", &maj, &min) != 2)
			continue;
		if (!mnt) {
			if (makedev(maj, min) == *dev)
				return 1;
			continue;
		}
		fs_mountinfo_unescape(tok[4]);
		if (strcmp(tok[4], mnt) != 0)
			continue;
		*dev = makedev(maj, min);
		found = true;
	}
	if (mnt && !found)
		return cerr_set(e, ENOENT, "nothing is mounted at %s", mnt);
	return 0;
}

struct rootdev {
	char part[PATH_MAX]; /* the device that holds the filesystem */
	char disk[PATH_MAX]; /* its whole disk; "" when not a partition */
	int partno;
	dev_t dev;
};

/* From a device number to /dev names through sysfs: a partition's sysfs
 * directory sits inside its disk's and has a "partition" file. */
static int sysfs_names(dev_t dev, struct rootdev *r, struct cerr *e)
{
	char link[128], real[PATH_MAX], pf[PATH_MAX + 16], num[32];
	cleanup_fclose FILE *f = NULL;
	char *base, *slash;

	snprintf(link, sizeof(link), "/sys/dev/block/%u:%u", major(dev),
		 minor(dev));
	if (!realpath(link, real))
		return cerr_sys(e, "%s", link);
	base = strrchr(real, '/') + 1;
	if (!r->part[0])
		snprintf(r->part, sizeof(r->part), "/dev/%s", base);
	snprintf(pf, sizeof(pf), "%s/partition", real);
	f = fopen(pf, "re");
	if (!f)
		return 0; /* a whole disk: nothing to grow but the fs */
	if (!fgets(num, sizeof(num), f) || sscanf(num, "%d", &r->partno) != 1 ||
	    r->partno < 1)
		return cerr_set(e, EINVAL, "bad %s", pf);
	slash = base - 1;
	*slash = '\0';
	snprintf(r->disk, sizeof(r->disk), "/dev/%s", strrchr(real, '/') + 1);
	return 0;
}

static int find_root(const struct resize_opts *o, struct rootdev *r,
		     struct cerr *e)
{
	dev_t dev;
	struct stat st;

	memset(r, 0, sizeof(*r));
	if (o->root_device && *o->root_device) {
		if (stat(o->root_device, &st) < 0)
			return cerr_sys(e, "%s", o->root_device);
		if (!S_ISBLK(st.st_mode))
			return cerr_set(e, EINVAL, "%s is not a block device",
					o->root_device);
		snprintf(r->part, sizeof(r->part), "%s", o->root_device);
		dev = st.st_rdev;
	} else if (mountinfo_find(o->root_mount ? o->root_mount : "/", &dev,
				  e) < 0) {
		return -1;
	}
	r->dev = dev;
	return sysfs_names(dev, r, e);
}

/* A tool by name in the usual places (the agent may run with a bare
 * PATH). */
static char *find_tool(const char *name)
{
	static const char *const dirs[] = {"/usr/local/sbin", "/usr/local/bin",
					   "/usr/sbin",	      "/usr/bin",
					   "/sbin",	      "/bin"};

	for (size_t i = 0; i < ARRAY_SIZE(dirs); i++) {
		char *p = xasprintf("%s/%s", dirs[i], name);
		if (access(p, X_OK) == 0)
			return p;
		free(p);
	}
	return NULL;
}

static int grow_builtin(const struct rootdev *r, struct buf *log,
			struct cerr *e)
{
	cleanup_close int fd = open(r->disk, O_RDWR | O_CLOEXEC);
	struct blkpg_partition p = {.pno = r->partno};
	struct blkpg_ioctl_arg a = {
	    .op = BLKPG_RESIZE_PARTITION, .datalen = sizeof(p), .data = &p};
	uint64_t start, len;
	struct cerr ig = {0};
	char msg[160];
	int g;

	if (fd < 0)
		return cerr_sys(e, "open %s", r->disk);
	g = parttable_grow(fd, r->partno, &start, &len, e);
	if (g < 0)
		return cerr_prefix(e, "%s partition %d", r->disk, r->partno);
	snprintf(msg, sizeof(msg), "%s partition %d: %s, %llu bytes\n", r->disk,
		 r->partno, g ? "NOCHANGE" : "grown", (unsigned long long)len);
	buf_append(log, msg, strlen(msg), &ig);
	/* Tell the kernel the partition's new size; it allows that while the
	 * partition is mounted, unlike a re-read of the whole table. */
	p.start = (long long)start;
	p.length = (long long)len;
	if (ioctl(fd, BLKPG, &a) < 0)
		return cerr_sys(e, "BLKPG resize %s partition %d", r->disk,
				r->partno);
	return g;
}

static int grow_growpart(const char *tool, const struct rootdev *r,
			 struct buf *log, struct cerr *e)
{
	char num[16];
	char *argv[] = {(char *)tool, (char *)r->disk, num, NULL};
	size_t before = log->len;
	int rc;

	snprintf(num, sizeof(num), "%d", r->partno);
	rc = spawn_run(argv, log, 120, e);
	if (rc < 0)
		return -1;
	/* growpart exits 1 with NOCHANGE when the partition is already as
	 * large as it can be: not an error, but maybe too early (below). */
	if (rc == 0)
		return 0;
	if (rc == 1 &&
	    memmem(log->data + before, log->len - before, "NOCHANGE", 8))
		return 1;
	return cerr_set(e, EIO, "growpart %s %d exited %d: %.300s", r->disk,
			r->partno, rc, log->data + before);
}

/* A filesystem that is not mounted (only reachable through the test
 * seam: a cell's root always is) is resized offline, which resize2fs
 * allows only after a forced check. e2fsck exits 1 when it fixed
 * something, which is fine; 4 and up is not. */
static int fsck_first(const struct rootdev *r, struct buf *log, struct cerr *e)
{
	cleanup_free char *fsck = find_tool("e2fsck");
	char *argv[] = {fsck, (char *)"-f", (char *)"-p", (char *)r->part,
			NULL};
	size_t before = log->len;
	int rc;

	if (!fsck)
		return cerr_set(e, ENOENT, "e2fsck is not installed");
	rc = spawn_run(argv, log, 600, e);
	if (rc < 0)
		return -1;
	if (rc > 1)
		return cerr_set(e, EIO, "e2fsck %s exited %d: %.300s", r->part,
				rc, log->data + before);
	return 0;
}

/* Kip calls resizevolume right after the cloud resized the volume, and
 * the kernel may not have seen the new size yet: then there is nothing
 * to grow, and growing again a moment later works. So, as Itzo did, the
 * partition is tried up to 30 times and the filesystem up to 15, a second
 * apart (CELL_AGENT_RESIZE_INTERVAL_MS), until one grows. A call with
 * truly nothing to grow takes that long and still succeeds. Only the
 * calling API worker waits; every other request is served meanwhile. */
enum { GROW_TRIES = 30, FS_TRIES = 15 };

static unsigned retry_interval_ms(void)
{
	const char *v = getenv("CELL_AGENT_RESIZE_INTERVAL_MS");
	struct cerr e = {0};
	int64_t ms;

	if (v && parse_int64(v, 0, 60000, &ms, &e) == 0)
		return (unsigned)ms;
	return 1000;
}

static void pause_ms(unsigned ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static void note(struct buf *log, const char *msg)
{
	struct cerr ig = {0};

	buf_append(log, msg, strlen(msg), &ig);
}

/* 0 when the partition grew, 1 when it never did within the bound. */
static int grow_partition(const struct rootdev *r, const char *tool,
			  unsigned interval, struct buf *log, struct cerr *e)
{
	cleanup_free char *growpart = NULL;
	int g = 1;

	if (strcmp(tool, "builtin") != 0)
		growpart = find_tool("growpart");
	if (!strcmp(tool, "growpart") && !growpart)
		return cerr_set(e, ENOENT, "growpart is not installed");
	for (int i = 0; i < GROW_TRIES; i++) {
		if (i > 0) {
			pause_ms(interval);
			note(log, "partition: trying again\n");
		}
		g = growpart ? grow_growpart(growpart, r, log, e)
			     : grow_builtin(r, log, e);
		if (g <= 0)
			return g;
	}
	return 1;
}

/* resize2fs says "Nothing to do!" when the filesystem already fills its
 * device; anything else that exits 0 grew it. */
static int grow_fs(const struct rootdev *r, int tries, unsigned interval,
		   struct buf *log, struct cerr *e)
{
	cleanup_free char *resize2fs = find_tool("resize2fs");
	char *argv[] = {resize2fs, (char *)r->part, NULL};

	if (!resize2fs)
		return cerr_set(e, ENOENT, "resize2fs is not installed");
	for (int i = 0; i < tries; i++) {
		size_t before = log->len;
		int rc;

		if (i > 0) {
			pause_ms(interval);
			note(log, "filesystem: trying again\n");
		}
		rc = spawn_run(argv, log, 600, e);
		if (rc < 0)
			return -1;
		if (rc != 0)
			return cerr_set(e, EIO,
					"resize2fs %s exited %d: %.300s",
					r->part, rc, log->data + before);
		if (!memmem(log->data + before, log->len - before,
			    "Nothing to do", 13))
			return 0;
	}
	return 1;
}

int resize_root(const struct resize_opts *o, struct buf *log, struct cerr *e)
{
	struct rootdev r;
	const char *tool = o->tool ? o->tool : "";
	unsigned interval = retry_interval_ms();
	int g, fs_tries;

	if (find_root(o, &r, e) < 0)
		return cerr_prefix(e, "find the root device");
	log_info("resizevolume: filesystem on %s, disk %s, partition %d",
		 r.part, r.disk[0] ? r.disk : "(none)", r.partno);
	/* A partition that grew is known to the kernel (BLKPG, or growpart's
	 * own re-read), so its filesystem grows at the first try; one that
	 * never grew gets one try, for a filesystem smaller than it. Only a
	 * whole-disk filesystem waits for the kernel here. */
	g = 0;
	if (r.disk[0]) {
		g = grow_partition(&r, tool, interval, log, e);
		if (g < 0)
			return -1;
	}
	if (mountinfo_find(NULL, &r.dev, e) == 0 && fsck_first(&r, log, e) < 0)
		return -1;
	if (!r.disk[0])
		fs_tries = FS_TRIES;
	else
		fs_tries = g == 0 ? 2 : 1;
	g = grow_fs(&r, fs_tries, interval, log, e);
	if (g < 0)
		return -1;
	if (g > 0)
		log_info("resizevolume: %s has nothing to grow", r.part);
	return 0;
}
