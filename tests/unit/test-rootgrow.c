// SPDX-License-Identifier: Apache-2.0
/* Unit tests of the root's growth that need no device: the ext4
 * superblock reader, the block count an online grow asks for (resize2fs's
 * rounding, no shrink), and cell-boot's off switch. The partition table
 * editor's tests are in test-api.c; the real growth, on loop devices, in
 * tests/integration (test_agent_api.py, test_boot.py). */
#include <errno.h>
#include <string.h>

#include "../lib/tap.h"
#include "boot-internal.h"
#include "rootgrow.h"

static void put32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

/* A superblock of `blocks` blocks of 1024 << logb bytes. */
static void sb_make(unsigned char *sb, uint64_t blocks, uint32_t logb,
		    bool is64)
{
	memset(sb, 0, 1024);
	put32(sb + 0x04, (uint32_t)blocks);
	put32(sb + 0x18, logb);
	put32(sb + 0x1C, logb);
	sb[0x38] = 0x53;
	sb[0x39] = 0xEF;
	if (is64) {
		put32(sb + 0x60, 0x80);
		put32(sb + 0x150, (uint32_t)(blocks >> 32));
	}
}

static void test_parse(void)
{
	unsigned char sb[1024];
	struct rootgrow_ext4 fs;
	struct cerr e = {0};

	sb_make(sb, 262144, 2, false);
	ok(rootgrow_ext4_parse(sb, sizeof(sb), &fs, &e) == 0 &&
	       fs.blocks == 262144 && fs.block_size == 4096 && !fs.is64 &&
	       fs.cluster_blocks == 1,
	   "a 1 GiB ext4 of 4 KiB blocks (%s)", e.msg);
	sb_make(sb, (5ull << 32) + 7, 2, true);
	ok(rootgrow_ext4_parse(sb, sizeof(sb), &fs, &e) == 0 &&
	       fs.blocks == (5ull << 32) + 7 && fs.is64,
	   "64bit: the high half of the block count");
	put32(sb + 0x60, 0);
	ok(rootgrow_ext4_parse(sb, sizeof(sb), &fs, &e) == 0 && fs.blocks == 7,
	   "without 64bit the high half is not read");
	sb_make(sb, 1000, 2, false);
	put32(sb + 0x64, 0x200);
	put32(sb + 0x1C, 6);
	ok(rootgrow_ext4_parse(sb, sizeof(sb), &fs, &e) == 0 &&
	       fs.cluster_blocks == 16,
	   "bigalloc: 64 KiB clusters of 4 KiB blocks");
	sb[0x38] = 0;
	ok(rootgrow_ext4_parse(sb, sizeof(sb), &fs, &e) < 0 && e.code == EINVAL,
	   "no ext magic: refused (%s)", e.msg);
	sb_make(sb, 1000, 7, false);
	ok(rootgrow_ext4_parse(sb, sizeof(sb), &fs, &e) < 0,
	   "a block size over 64 KiB: refused");
	sb_make(sb, 0, 2, false);
	ok(rootgrow_ext4_parse(sb, sizeof(sb), &fs, &e) < 0,
	   "0 blocks: refused");
	sb_make(sb, 1000, 2, false);
	ok(rootgrow_ext4_parse(sb, 0x100, &fs, &e) < 0,
	   "a short read: refused");
}

static void test_target(void)
{
	struct rootgrow_ext4 fs = {
	    .blocks = 262144, .block_size = 4096, .cluster_blocks = 1};
	struct cerr e = {0};
	uint64_t c = 0;

	ok(rootgrow_ext4_target(&fs, 5ull << 30, 4096, &c, &e) == 0 &&
	       c == 5ull << 18,
	   "1 GiB in a 5 GiB partition: 1310720 blocks");
	ok(rootgrow_ext4_target(&fs, (1ull << 30) + 4095, 4096, &c, &e) == 1,
	   "a partial block is nothing to grow");
	ok(rootgrow_ext4_target(&fs, (1ull << 30) - 4096, 4096, &c, &e) < 0 &&
	       e.code == EINVAL,
	   "a smaller device: no online shrink (%s)", e.msg);
	fs = (struct rootgrow_ext4){
	    .blocks = 1000, .block_size = 1024, .cluster_blocks = 1};
	ok(rootgrow_ext4_target(&fs, 1023 * 1024 + 512, 4096, &c, &e) == 0 &&
	       c == 1020,
	   "1 KiB blocks: whole 4 KiB pages (1023 -> 1020)");
	fs = (struct rootgrow_ext4){
	    .blocks = 1024, .block_size = 4096, .cluster_blocks = 16};
	ok(rootgrow_ext4_target(&fs, 2047ull * 4096, 4096, &c, &e) == 0 &&
	       c == 2032,
	   "bigalloc: whole clusters (2047 -> 2032)");
	fs = (struct rootgrow_ext4){
	    .blocks = 1ull << 31, .block_size = 4096, .cluster_blocks = 1};
	ok(rootgrow_ext4_target(&fs, 16ull << 40, 4096, &c, &e) == 0 &&
	       c == (1ull << 32) - 1,
	   "16 TiB without 64bit: 2^32 - 1 blocks");
	ok(rootgrow_ext4_target(&fs, 20ull << 40, 4096, &c, &e) == 0 &&
	       c == (1ull << 32) - 1,
	   "over 16 TiB without 64bit: what fits");
	fs.is64 = true;
	ok(rootgrow_ext4_target(&fs, 20ull << 40, 4096, &c, &e) == 0 &&
	       c == 5ull << 30,
	   "64bit: the whole 20 TiB");
}

static void test_off(void)
{
	ok(!boot_grow_root_off(NULL, "BOOT_IMAGE=/vmlinuz root=/dev/vda1\n"),
	   "on by default");
	ok(boot_grow_root_off("0", ""), "CELL_BOOT_GROW_ROOT=0: off");
	ok(boot_grow_root_off("off", NULL), "CELL_BOOT_GROW_ROOT=off: off");
	ok(!boot_grow_root_off("1", ""), "CELL_BOOT_GROW_ROOT=1: on");
	ok(boot_grow_root_off(NULL, "root=/dev/vda1 cell.growroot=0 quiet\n"),
	   "cell.growroot=0 on the kernel command line: off");
	ok(boot_grow_root_off(NULL, "cell.growroot=off\n"),
	   "cell.growroot=off at the start of the line: off");
	ok(!boot_grow_root_off(NULL, "cell.growroot=0 cell.growroot=1\n"),
	   "the last one wins");
	ok(!boot_grow_root_off(NULL, "xcell.growroot=0 cell.growroot=00"),
	   "only whole words, only 0 or off");
}

int main(void)
{
	test_parse();
	test_target();
	test_off();
	return tap_done();
}
