// SPDX-License-Identifier: Apache-2.0
/* resizevolume: grow the root partition and its ext4 filesystem. */
#ifndef CELL_ROOTRESIZE_H
#define CELL_ROOTRESIZE_H

#include "buf.h"
#include "err.h"

/* Grow the partition that holds the root filesystem to the end of its
 * disk, then the ext4 filesystem on it. Seams: root_device names the
 * block device directly (CELL_AGENT_ROOT_DEVICE); else the device mounted
 * at root_mount ("/") per /proc/self/mountinfo. The partition table is
 * grown by growpart when it is installed, else by the built-in MBR/GPT
 * code (tool = "growpart" or "builtin" forces one). `log` collects the
 * tools' output. */
struct resize_opts {
	const char *root_device;
	const char *root_mount;
	const char *tool;
};
int resize_root(const struct resize_opts *o, struct buf *log, struct cerr *e);

#endif
