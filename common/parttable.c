// SPDX-License-Identifier: Apache-2.0
/* The built-in MBR/GPT editor behind rootgrow.c (the agent's resizevolume,
 * cell-boot --grow-root): grows one partition to the end of its disk (or
 * to the next partition), GPT's backup header and CRCs included. */
#include "parttable.h"

#include <errno.h>
#include <linux/fs.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "util.h"

static uint32_t crc32_ieee(const void *p, size_t n)
{
	static uint32_t table[256];
	static bool init;
	const unsigned char *s = p;
	uint32_t c = 0xffffffffu;

	if (!init) { /* idempotent, so a race between threads is harmless */
		for (uint32_t i = 0; i < 256; i++) {
			uint32_t v = i;
			for (int k = 0; k < 8; k++)
				v = (v & 1) ? 0xedb88320u ^ (v >> 1) : v >> 1;
			table[i] = v;
		}
		init = true;
	}
	while (n--)
		c = table[(c ^ *s++) & 0xff] ^ (c >> 8);
	return c ^ 0xffffffffu;
}

static uint32_t le32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static uint64_t le64(const unsigned char *p)
{
	return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}

static void put32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static void put64(unsigned char *p, uint64_t v)
{
	put32(p, (uint32_t)v);
	put32(p + 4, (uint32_t)(v >> 32));
}

static int rw_at(int fd, void *p, size_t n, uint64_t off, bool write,
		 struct cerr *e)
{
	ssize_t r =
	    write ? pwrite(fd, p, n, (off_t)off) : pread(fd, p, n, (off_t)off);

	if (r < 0)
		return cerr_sys(e, "%s at %llu", write ? "write" : "read",
				(unsigned long long)off);
	if ((size_t)r != n)
		return cerr_set(e, EIO, "short %s at %llu",
				write ? "write" : "read",
				(unsigned long long)off);
	return 0;
}

struct disk {
	int fd;
	uint64_t bytes;
	uint32_t ss; /* logical sector size */
	unsigned char mbr[512];
};

static int mbr_grow(struct disk *d, int partno, uint64_t *start, uint64_t *len,
		    struct cerr *e)
{
	unsigned char *ent;
	uint64_t first, size, limit = d->bytes / d->ss;

	if (partno < 1 || partno > 4)
		return cerr_set(e, ENOTSUP,
				"partition %d: only primary MBR partitions "
				"can be grown",
				partno);
	ent = d->mbr + 446 + 16 * (partno - 1);
	if (ent[4] == 0)
		return cerr_set(e, ENOENT, "no MBR partition %d", partno);
	if (ent[4] == 0x05 || ent[4] == 0x0f || ent[4] == 0x85)
		return cerr_set(e, ENOTSUP, "partition %d is extended", partno);
	first = le32(ent + 8);
	size = le32(ent + 12);
	for (int i = 0; i < 4; i++) {
		const unsigned char *o = d->mbr + 446 + 16 * i;
		if (i != partno - 1 && o[4] && le32(o + 8) > first &&
		    le32(o + 8) < limit)
			limit = le32(o + 8);
	}
	if (limit - first > 0xffffffffu)
		limit = first + 0xffffffffu; /* the most MBR can say */
	*start = first * d->ss;
	if (limit <= first + size) {
		*len = size * d->ss;
		return 1;
	}
	put32(ent + 12, (uint32_t)(limit - first));
	ent[5] = 0xfe; /* CHS end: "beyond CHS", as fdisk writes it */
	ent[6] = 0xff;
	ent[7] = 0xff;
	*len = (limit - first) * d->ss;
	return rw_at(d->fd, d->mbr, 512, 0, true, e);
}

struct gpt {
	unsigned char *hdr; /* one sector */
	unsigned char *ents;
	uint32_t hsize, nents, esize;
	size_t ebytes;
	uint64_t ents_lba;
};

static int gpt_read(struct disk *d, struct gpt *g, struct cerr *e)
{
	uint32_t crc;

	g->hdr = xmalloc(d->ss);
	if (rw_at(d->fd, g->hdr, d->ss, d->ss, false, e) < 0)
		return -1;
	if (memcmp(g->hdr, "EFI PART", 8) != 0)
		return cerr_set(e, EINVAL, "no GPT header");
	g->hsize = le32(g->hdr + 12);
	if (g->hsize < 92 || g->hsize > d->ss)
		return cerr_set(e, EINVAL, "GPT header size %u", g->hsize);
	crc = le32(g->hdr + 16);
	put32(g->hdr + 16, 0);
	if (crc32_ieee(g->hdr, g->hsize) != crc)
		return cerr_set(e, EINVAL, "GPT header checksum mismatch");
	put32(g->hdr + 16, crc);
	g->ents_lba = le64(g->hdr + 72);
	g->nents = le32(g->hdr + 80);
	g->esize = le32(g->hdr + 84);
	if (g->esize < 128 || g->esize > 4096 || g->esize % 8 ||
	    g->nents == 0 || g->nents > 4096)
		return cerr_set(e, EINVAL, "GPT entry table %u x %u", g->nents,
				g->esize);
	g->ebytes = (size_t)g->nents * g->esize;
	g->ents = xmalloc(g->ebytes);
	if (rw_at(d->fd, g->ents, g->ebytes, g->ents_lba * d->ss, false, e) < 0)
		return -1;
	if (crc32_ieee(g->ents, g->ebytes) != le32(g->hdr + 88))
		return cerr_set(e, EINVAL, "GPT entries checksum mismatch");
	return 0;
}

static void gpt_seal(struct gpt *g, unsigned char *hdr)
{
	put32(hdr + 88, crc32_ieee(g->ents, g->ebytes));
	put32(hdr + 16, 0);
	put32(hdr + 16, crc32_ieee(hdr, g->hsize));
}

/* Write the backup table at the disk's (new) end, then the primary one,
 * then the protective MBR's size. */
static int gpt_write(struct disk *d, struct gpt *g, uint64_t last,
		     uint64_t bents, struct cerr *e)
{
	cleanup_free unsigned char *bk = xmalloc(d->ss);
	unsigned char *pm = d->mbr + 446;

	memcpy(bk, g->hdr, d->ss);
	put64(bk + 24, last); /* my LBA */
	put64(bk + 32, 1);    /* the other header */
	put64(bk + 72, bents);
	gpt_seal(g, bk);
	gpt_seal(g, g->hdr);
	if (rw_at(d->fd, g->ents, g->ebytes, bents * d->ss, true, e) < 0 ||
	    rw_at(d->fd, bk, d->ss, last * d->ss, true, e) < 0 ||
	    rw_at(d->fd, g->ents, g->ebytes, g->ents_lba * d->ss, true, e) <
		0 ||
	    rw_at(d->fd, g->hdr, d->ss, d->ss, true, e) < 0)
		return -1;
	for (int i = 0; i < 4; i++, pm += 16)
		if (pm[4] == 0xee)
			put32(pm + 12, last > 0xffffffffu ? 0xffffffffu
							  : (uint32_t)last);
	return rw_at(d->fd, d->mbr, 512, 0, true, e);
}

static int gpt_grow(struct disk *d, int partno, uint64_t *start, uint64_t *len,
		    struct cerr *e)
{
	struct gpt g = {0};
	uint64_t last = d->bytes / d->ss - 1, bents, limit, first, end;
	unsigned char *ent;
	int r = -1;

	if (gpt_read(d, &g, e) < 0)
		goto out;
	if (partno < 1 || (uint32_t)partno > g.nents) {
		r = cerr_set(e, ENOENT, "no GPT partition %d", partno);
		goto out;
	}
	ent = g.ents + (size_t)(partno - 1) * g.esize;
	first = le64(ent + 32);
	end = le64(ent + 40);
	bents = last - (g.ebytes + d->ss - 1) / d->ss;
	limit = bents - 1; /* the new last usable LBA */
	if (!first || first > end || limit <= g.ents_lba) {
		r = cerr_set(e, EINVAL,
			     "GPT partition %d is empty or the "
			     "disk too small",
			     partno);
		goto out;
	}
	for (uint32_t i = 0; i < g.nents; i++) {
		const unsigned char *o = g.ents + (size_t)i * g.esize;
		if (le64(o + 32) > first && le64(o + 32) - 1 < limit)
			limit = le64(o + 32) - 1;
	}
	*start = first * d->ss;
	*len = (end - first + 1) * d->ss;
	if (limit <= end) {
		r = 1;
		goto out;
	}
	put64(ent + 40, limit);
	put64(g.hdr + 32, last);
	put64(g.hdr + 48, bents - 1);
	*len = (limit - first + 1) * d->ss;
	r = gpt_write(d, &g, last, bents, e);
out:
	free(g.hdr);
	free(g.ents);
	return r;
}

int parttable_grow(int fd, int partno, uint64_t *start, uint64_t *len,
		   struct cerr *e)
{
	struct disk d = {.fd = fd, .ss = 512};
	struct stat st;
	int r, gpt = 0;

	if (fstat(fd, &st) < 0)
		return cerr_sys(e, "stat");
	if (S_ISBLK(st.st_mode)) {
		int ss = 512;
		if (ioctl(fd, BLKGETSIZE64, &d.bytes) < 0)
			return cerr_sys(e, "BLKGETSIZE64");
		if (ioctl(fd, BLKSSZGET, &ss) == 0 && ss >= 512 && ss <= 65536)
			d.ss = (uint32_t)ss;
	} else {
		d.bytes = (uint64_t)st.st_size;
	}
	if (d.bytes < 64 * (uint64_t)d.ss)
		return cerr_set(e, EINVAL, "disk too small");
	if (rw_at(fd, d.mbr, 512, 0, false, e) < 0)
		return -1;
	if (d.mbr[510] != 0x55 || d.mbr[511] != 0xaa)
		return cerr_set(e, EINVAL, "no partition table");
	for (int i = 0; i < 4; i++)
		gpt |= d.mbr[446 + 16 * i + 4] == 0xee;
	r = gpt ? gpt_grow(&d, partno, start, len, e)
		: mbr_grow(&d, partno, start, len, e);
	if (r == 0 && fsync(fd) < 0)
		return cerr_sys(e, "fsync");
	return r;
}
