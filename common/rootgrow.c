// SPDX-License-Identifier: Apache-2.0
/* Growing the root: find the block device under the root filesystem,
 * grow its partition (growpart when installed, else parttable.c) and the
 * ext4 filesystem on it (EXT4_IOC_RESIZE_FS online, as resize2fs does on
 * any kernel since 3.3; resize2fs where the kernel lacks the ioctl, and
 * e2fsck + resize2fs offline). */
#include "rootgrow.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <linux/blkpg.h>
#include <linux/fs.h>
#include <linux/types.h>
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
#include "parttable.h"
#include "procspawn.h"
#include "util.h"

/* ---- finding the root device ---- */

/* Walk /proc/self/mountinfo. With mnt: the device number of what is
 * mounted there (the last such mount wins: it hides the ones before it).
 * Without: where *dev is mounted (a read-write mount first: an online
 * grow needs one) into at (size n), or "" when it is not. */
static int mountinfo_find(const char *mnt, dev_t *dev, char *at, size_t n,
			  struct cerr *e)
{
	cleanup_fclose FILE *f = fopen("/proc/self/mountinfo", "re");
	char line[8192];
	bool found = false, rw = false;

	if (!f)
		return cerr_sys(e, "open /proc/self/mountinfo");
	if (at)
		at[0] = '\0';
	while (fgets(line, sizeof(line), f)) {
		char *save = NULL, *tok[6];
		unsigned maj, min;
		int i;

		tok[0] = strtok_r(line, " ", &save);
		for (i = 1; tok[i - 1] && i < 6; i++)
			tok[i] = strtok_r(NULL, " ", &save);
		if (i < 6 || !tok[5] ||
		    sscanf(tok[2], "%u:%u", &maj, &min) != 2)
			continue;
		fs_mountinfo_unescape(tok[4]);
		if (!mnt) {
			bool this_rw = !strncmp(tok[5], "rw", 2) &&
				       (tok[5][2] == ',' || !tok[5][2]);

			if (makedev(maj, min) != *dev || (found && rw) ||
			    (found && !this_rw))
				continue;
			snprintf(at, n, "%s", tok[4]);
			found = true;
			rw = this_rw;
			continue;
		}
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

static int find_root(const struct rootgrow_opts *o, struct rootdev *r,
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
	} else if (mountinfo_find(
		       o->root_mount && *o->root_mount ? o->root_mount : "/",
		       &dev, NULL, 0, e) < 0) {
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

static void pause_ms(unsigned ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static void note(struct buf *log, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void note(struct buf *log, const char *fmt, ...)
{
	struct cerr ig = {0};
	char msg[512];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (n > 0)
		buf_append(log, msg, strnlen(msg, sizeof(msg)), &ig);
}

/* 0 when the partition grew, 1 when it never did within the bound. */
static int grow_partition(const struct rootdev *r, const char *tool, int tries,
			  unsigned interval, struct buf *log, struct cerr *e)
{
	cleanup_free char *growpart = NULL;
	int g = 1;

	if (strcmp(tool, "builtin") != 0)
		growpart = find_tool("growpart");
	if (!strcmp(tool, "growpart") && !growpart)
		return cerr_set(e, ENOENT, "growpart is not installed");
	for (int i = 0; i < tries; i++) {
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

/* ---- the ext4 superblock (pure) ---- */

enum {
	EXT4_SB_MIN = 0x154, /* through s_blocks_count_hi */
	EXT4_MAGIC = 0xEF53,
	EXT4_INCOMPAT_64BIT = 0x80,
	EXT4_RO_COMPAT_BIGALLOC = 0x200,
};

static uint32_t sb32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

int rootgrow_ext4_parse(const unsigned char *sb, size_t n,
			struct rootgrow_ext4 *out, struct cerr *e)
{
	uint32_t logb, logc;

	memset(out, 0, sizeof(*out));
	if (n < EXT4_SB_MIN)
		return cerr_set(e, EINVAL, "short ext4 superblock");
	if ((sb[0x38] | sb[0x39] << 8) != EXT4_MAGIC)
		return cerr_set(e, EINVAL, "not an ext2/3/4 filesystem");
	logb = sb32(sb + 0x18);
	if (logb > 6) /* 1 KiB to 64 KiB */
		return cerr_set(e, EINVAL, "ext4 block size 1024 << %u", logb);
	out->block_size = 1024u << logb;
	out->is64 = sb32(sb + 0x60) & EXT4_INCOMPAT_64BIT;
	out->blocks = sb32(sb + 0x04);
	if (out->is64)
		out->blocks |= (uint64_t)sb32(sb + 0x150) << 32;
	out->cluster_blocks = 1;
	if (sb32(sb + 0x64) & EXT4_RO_COMPAT_BIGALLOC) {
		logc = sb32(sb + 0x1C);
		if (logc < logb || logc - logb > 16)
			return cerr_set(e, EINVAL,
					"ext4 cluster size 1024 << %u", logc);
		out->cluster_blocks = 1u << (logc - logb);
	}
	if (!out->blocks)
		return cerr_set(e, EINVAL, "ext4 of 0 blocks");
	return 0;
}

int rootgrow_ext4_target(const struct rootgrow_ext4 *fs, uint64_t dev_bytes,
			 uint64_t page_size, uint64_t *count, struct cerr *e)
{
	uint64_t c = dev_bytes / fs->block_size;

	/* As resize2fs: whole pages of blocks, then whole clusters. */
	if (page_size > fs->block_size)
		c &= ~(page_size / fs->block_size - 1);
	c -= c % fs->cluster_blocks;
	if (!fs->is64) {
		if (c == 1ull << 32)
			c--; /* 16 TiB of 4 KiB blocks: 2^32 - 1 */
		else if (c > 1ull << 32)
			c = (1ull << 32) - 1;
	}
	if (c < fs->blocks)
		return cerr_set(e, EINVAL,
				"the device holds %llu blocks, the filesystem "
				"%llu: an online shrink is refused",
				(unsigned long long)c,
				(unsigned long long)fs->blocks);
	*count = c;
	return c == fs->blocks ? 1 : 0;
}

/* ---- growing the filesystem ---- */

#ifndef EXT4_IOC_RESIZE_FS
#define EXT4_IOC_RESIZE_FS _IOW('f', 16, __u64)
#endif

/* The superblock of the filesystem on part and the device's size. */
static int fs_read(const char *part, struct rootgrow_ext4 *fs,
		   uint64_t *dev_bytes, struct cerr *e)
{
	cleanup_close int fd = open(part, O_RDONLY | O_CLOEXEC);
	unsigned char sb[1024];
	ssize_t n;

	if (fd < 0)
		return cerr_sys(e, "open %s", part);
	if (ioctl(fd, BLKGETSIZE64, dev_bytes) < 0)
		return cerr_sys(e, "BLKGETSIZE64 %s", part);
	n = pread(fd, sb, sizeof(sb), 1024);
	if (n < 0)
		return cerr_sys(e, "read the superblock of %s", part);
	if (rootgrow_ext4_parse(sb, (size_t)n, fs, e) < 0)
		return cerr_prefix(e, "%s", part);
	return 0;
}

/* The kernel's online grow (what resize2fs does on a mounted ext4): 0
 * grown, 2 when the kernel has no such ioctl (resize2fs then tries its
 * older way). It needs CAP_SYS_RESOURCE and a read-write mount. */
static int grow_ioctl(const char *mnt, uint64_t count, struct cerr *e)
{
	cleanup_close int fd =
	    open(mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	__u64 c = count;

	if (fd < 0)
		return cerr_sys(e, "open %s", mnt);
	if (ioctl(fd, EXT4_IOC_RESIZE_FS, &c) == 0)
		return 0;
	if (errno == ENOTTY || errno == EOPNOTSUPP)
		return 2;
	if (errno == EPERM)
		return cerr_sys(e,
				"EXT4_IOC_RESIZE_FS on %s (needs "
				"CAP_SYS_RESOURCE)",
				mnt);
	return cerr_sys(e, "EXT4_IOC_RESIZE_FS on %s to %llu blocks", mnt,
			(unsigned long long)count);
}

/* resize2fs on part, online (mounted: the kernel's older interface) or
 * offline (after e2fsck). */
static int grow_resize2fs(const struct rootdev *r, bool mounted,
			  struct buf *log, struct cerr *e)
{
	cleanup_free char *resize2fs = find_tool("resize2fs");
	char *argv[] = {resize2fs, (char *)r->part, NULL};
	size_t before;
	int rc;

	if (!resize2fs)
		return cerr_set(e, ENOENT, "resize2fs is not installed%s",
				mounted ? " and the kernel has no "
					  "EXT4_IOC_RESIZE_FS"
					: "");
	if (!mounted && fsck_first(r, log, e) < 0)
		return -1;
	before = log->len;
	rc = spawn_run(argv, log, 600, e);
	if (rc < 0)
		return -1;
	if (rc != 0)
		return cerr_set(e, EIO, "resize2fs %s exited %d: %.300s",
				r->part, rc, log->data + before);
	return 0;
}

/* One try: 0 grown, 1 nothing to grow. The superblock says whether there
 * is anything to do, so a filesystem that fills its device costs no
 * tool and no check. */
static int grow_fs_once(const struct rootdev *r, struct rootgrow_result *res,
			struct buf *log, struct cerr *e)
{
	char mnt[4096];
	struct rootgrow_ext4 fs;
	uint64_t dev_bytes, count;
	long page = sysconf(_SC_PAGESIZE);
	dev_t dev = r->dev;
	int g;

	if (fs_read(r->part, &fs, &dev_bytes, e) < 0)
		return -1;
	res->fs_before = res->fs_after = fs.blocks * fs.block_size;
	g = rootgrow_ext4_target(&fs, dev_bytes,
				 page > 0 ? (uint64_t)page : 4096, &count, e);
	if (g != 0)
		return g;
	if (mountinfo_find(NULL, &dev, mnt, sizeof(mnt), e) < 0)
		return -1;
	g = 2;
	if (mnt[0]) {
		g = grow_ioctl(mnt, count, e);
		if (g < 0)
			return -1;
		if (g == 0)
			note(log,
			     "%s: ext4 grown online from %llu to %llu "
			     "blocks (EXT4_IOC_RESIZE_FS)\n",
			     r->part, (unsigned long long)fs.blocks,
			     (unsigned long long)count);
	}
	if (g == 2) {
		if (grow_resize2fs(r, mnt[0], log, e) < 0)
			return -1;
		if (fs_read(r->part, &fs, &dev_bytes, e) < 0)
			return -1;
		count = fs.blocks;
	}
	res->fs_after = count * fs.block_size;
	return res->fs_after > res->fs_before ? 0 : 1;
}

/* 0 grown, 1 nothing to grow after `tries`, interval apart. */
static int grow_fs(const struct rootdev *r, int tries, unsigned interval,
		   struct rootgrow_result *res, struct buf *log, struct cerr *e)
{
	for (int i = 0; i < tries; i++) {
		int g;

		if (i > 0) {
			pause_ms(interval);
			note(log, "filesystem: trying again\n");
		}
		g = grow_fs_once(r, res, log, e);
		if (g <= 0)
			return g;
	}
	note(log, "%s: the filesystem fills its device: Nothing to do\n",
	     r->part);
	return 1;
}

int rootgrow(const struct rootgrow_opts *o, struct rootgrow_result *res,
	     struct buf *log, struct cerr *e)
{
	struct rootdev r;
	const char *tool = o->tool ? o->tool : "";
	int g, fs_tries;

	memset(res, 0, sizeof(*res));
	if (find_root(o, &r, e) < 0)
		return cerr_prefix(e, "find the root device");
	snprintf(res->part, sizeof(res->part), "%s", r.part);
	note(log, "filesystem on %s, disk %s, partition %d\n", r.part,
	     r.disk[0] ? r.disk : "(none)", r.partno);
	/* A partition that grew is known to the kernel (BLKPG, or growpart's
	 * own re-read), so its filesystem grows at the first try (a second
	 * in case it is late); one that never grew gets one try, for a
	 * filesystem smaller than it. Only a whole-disk filesystem waits for
	 * the kernel here. */
	g = 1;
	if (r.disk[0]) {
		g = grow_partition(&r, tool,
				   o->part_tries > 0 ? o->part_tries : 1,
				   o->interval_ms, log, e);
		if (g < 0)
			return -1;
		res->part_grown = g == 0;
	}
	if (!r.disk[0])
		fs_tries = o->fs_tries > 0 ? o->fs_tries : 1;
	else
		fs_tries = g == 0 && o->fs_tries > 1 ? 2 : 1;
	g = grow_fs(&r, fs_tries, o->interval_ms, res, log, e);
	if (g < 0)
		return cerr_prefix(e, "grow the filesystem on %s", r.part);
	res->fs_grown = g == 0;
	return 0;
}
