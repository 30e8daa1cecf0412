// SPDX-License-Identifier: Apache-2.0
/* Growing the root filesystem to its disk: the partition that holds it
 * (growpart when installed, else parttable.c) and the ext4 on it (the
 * kernel's EXT4_IOC_RESIZE_FS when mounted, resize2fs where the kernel
 * lacks it; e2fsck and resize2fs when not mounted). Shared by cell-boot
 * (`--grow-root`, once at boot) and the agent's `resizevolume` (with
 * retries, for the kernel to see a volume the cloud just grew). */
#ifndef CELL_ROOTGROW_H
#define CELL_ROOTGROW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "err.h"

/* Seams: root_device names the block device directly
 * (CELL_AGENT_ROOT_DEVICE); else the device mounted at root_mount ("/")
 * per /proc/self/mountinfo (CELL_AGENT_ROOT_MOUNT). tool "growpart" or
 * "builtin" forces a partition editor (CELL_AGENT_PARTITION_TOOL).
 * part_tries and fs_tries (at least 1) bound the tries of a partition that
 * does not grow and of a whole-disk filesystem that does not, interval_ms
 * apart; a partition that grew grows its filesystem at once (2 tries, in
 * case the kernel is late). */
struct rootgrow_opts {
	const char *root_device;
	const char *root_mount;
	const char *tool;
	int part_tries, fs_tries;
	unsigned interval_ms;
};

/* What was done: the filesystem's size before and after (bytes), and the
 * device that holds it. */
struct rootgrow_result {
	char part[4096];
	uint64_t fs_before, fs_after;
	bool part_grown, fs_grown;
};

/* 0 when done (grown or nothing to grow: see res), -1 with e. `log`
 * collects the steps and the tools' output. */
int rootgrow(const struct rootgrow_opts *o, struct rootgrow_result *res,
	     struct buf *log, struct cerr *e);

/* ---- pure parts (tests/unit/test-rootgrow.c) ---- */

/* An ext4 superblock (the 1024 bytes at offset 1024 of its device). */
struct rootgrow_ext4 {
	uint64_t blocks;	 /* s_blocks_count (hi half with 64bit) */
	uint32_t block_size;	 /* 1024 << s_log_block_size */
	uint32_t cluster_blocks; /* blocks per cluster (bigalloc), else 1 */
	bool is64;		 /* INCOMPAT_64BIT */
};
int rootgrow_ext4_parse(const unsigned char *sb, size_t n,
			struct rootgrow_ext4 *out, struct cerr *e);

/* The block count an online grow asks for on a device of dev_bytes, as
 * resize2fs picks it: whole pages (page_size) and whole clusters; without
 * 64bit at most 2^32 - 1 (resize2fs refuses more; a cell takes what fits).
 * 0 with *count when it grows, 1 when the filesystem already fills the
 * device; -1 (EINVAL) when the device is smaller (online shrinking is
 * refused, as resize2fs does). */
int rootgrow_ext4_target(const struct rootgrow_ext4 *fs, uint64_t dev_bytes,
			 uint64_t page_size, uint64_t *count, struct cerr *e);

#endif
