// SPDX-License-Identifier: Apache-2.0
/* eStargz footer and TOC (imagepull/estargz.c): the tree a good TOC gives
 * (whiteouts in overlay form, hard links, chunks, landmarks) and every
 * hostile TOC refused as the tar core refuses the same in a tar. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../lib/tap.h"
#include "estargz.h"
#include "util.h"

#define DG                                                                     \
	"sha256:"                                                              \
	"ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb"

static void footer(void)
{
	unsigned char f[ESGZ_FOOTER_SIZE] = {
	    0x1f, 0x8b, 8, 4, 0, 0, 0, 0, 0, 255, 26, 0, 'S', 'G', 22, 0};
	unsigned char legacy[ESGZ_LEGACY_FOOTER_SIZE] = {
	    0x1f, 0x8b, 8, 4, 0, 0, 0, 0, 0, 255, 22, 0};
	struct cerr e = {0};
	uint64_t off = 0;
	size_t fs = 0;

	memcpy(f + 16, "00000000000004d2STARGZ", 22);
	memcpy(f + 38, "\x01\x00\x00\xff\xff", 5);
	ok(esgz_footer_parse(f, sizeof(f), 5000, &off, &fs, &e) == 0 &&
	       off == 1234 && fs == 51,
	   "footer: TOC offset 1234 (%s)", e.msg);
	ok(esgz_footer_parse(f, sizeof(f), 1200, &off, &fs, &e) < 0,
	   "footer: an offset beyond the blob is refused");
	f[20] = 'x';
	ok(esgz_footer_parse(f, sizeof(f), 5000, &off, &fs, &e) < 0,
	   "footer: a bad hex digit is refused");
	memcpy(legacy + 12, "00000000000000ffSTARGZ", 22);
	memcpy(legacy + 34, "\x01\x00\x00\xff\xff", 5);
	ok(esgz_footer_parse(legacy, sizeof(legacy), 5000, &off, &fs, &e) ==
		   0 &&
	       off == 255 && fs == 47,
	   "footer: the legacy 47-byte stargz footer (%s)", e.msg);
}

static int parse(const char *entries, struct esgz_toc *t, struct cerr *e)
{
	char *json = xasprintf("{\"version\":1,\"entries\":[%s]}", entries);
	int r = esgz_toc_parse(json, strlen(json), 100000, t, e);

	free(json);
	return r;
}

static const struct esgz_node *node_at(const struct esgz_toc *t,
				       const char *path)
{
	for (size_t i = 0; i < t->n_dents; i++)
		if (!strcmp(t->dents[i].path, path))
			return &t->nodes[t->dents[i].node];
	return NULL;
}

static void tree(void)
{
	struct esgz_toc t;
	struct cerr e = {0};
	const struct esgz_node *n;
	size_t first, cnt;
	int r = parse(
	    "{\"name\":\"etc/\",\"type\":\"dir\",\"mode\":493,\"uid\":1},"
	    "{\"name\":\"etc/big\",\"type\":\"reg\",\"size\":10,\"mode\":420,"
	    "\"offset\":10,\"chunkSize\":4,\"chunkDigest\":\"" DG "\"},"
	    "{\"name\":\"etc/big\",\"type\":\"chunk\",\"offset\":50,"
	    "\"chunkOffset\":4,\"chunkSize\":4,\"chunkDigest\":\"" DG "\"},"
	    "{\"name\":\"etc/big\",\"type\":\"chunk\",\"offset\":50,"
	    "\"innerOffset\":4,\"chunkOffset\":8,\"chunkDigest\":\"" DG "\"},"
	    "{\"name\":\".prefetch.landmark\",\"type\":\"reg\",\"size\":1,"
	    "\"offset\":90,\"chunkDigest\":\"" DG "\"},"
	    "{\"name\":\"etc/hl\",\"type\":\"hardlink\",\"linkName\":\"etc/"
	    "big\"},"
	    "{\"name\":\"etc/.wh.gone\",\"type\":\"reg\"},"
	    "{\"name\":\"var/lib/.wh..wh..opq\",\"type\":\"reg\"},"
	    "{\"name\":\"bin/sh\",\"type\":\"symlink\",\"linkName\":\"/bin/"
	    "busybox\"},"
	    "{\"name\":\"dev/"
	    "null\",\"type\":\"char\",\"devMajor\":1,\"devMinor\":3,"
	    "\"xattrs\":{\"user.a\":\"eA==\",\"trusted.overlay.opaque\":\"eQ=="
	    "\"}}",
	    &t, &e);

	ok(r == 0, "a good TOC parses (%s)", e.msg);
	if (r < 0)
		return;
	n = node_at(&t, "etc/big");
	ok(n && n->size == 10 && n->n_chunks == 3 && n->nlink == 2,
	   "a file of three chunks, two names");
	ok(t.chunks[0].end == 50 && t.chunks[1].end == 90 &&
	       t.chunks[2].inner == 4 && t.chunks[2].size == 2,
	   "chunks end where the next member starts; the last chunk's size "
	   "is the rest");
	ok(t.prefetch_end == 90, "prefetch up to the landmark");
	ok(!node_at(&t, ".prefetch.landmark"), "the landmark is hidden");
	n = node_at(&t, "etc/gone");
	ok(n && S_ISCHR(n->mode) && n->rdev == 0,
	   "a whiteout is a 0/0 character device");
	n = node_at(&t, "var/lib");
	ok(n && S_ISDIR(n->mode) && n->opaque, "an opaque directory");
	n = node_at(&t, "etc");
	ok(n && n->uid == 1 && (n->mode & 07777) == 0755,
	   "an implicit directory takes its later entry's attributes");
	n = node_at(&t, "dev/null");
	ok(n && n->n_xattrs == 1 && !strcmp(n->xattrs[0].name, "user.a"),
	   "trusted.overlay.* is dropped, as the tar core drops it");
	n = node_at(&t, "etc/big");
	esgz_chunks_for(&t, n, 3, 2, &first, &cnt);
	ok(first == n->first_chunk && cnt == 2, "bytes 3-4 are in chunks 0-1");
	ok(esgz_lookup(&t, 0, "etc") != (size_t)-1 &&
	       esgz_lookup(&t, 0, "nope") == (size_t)-1,
	   "lookup by name");
	esgz_toc_free(&t);
}

static void refused(const char *entries, const char *want, const char *why)
{
	struct esgz_toc t;
	struct cerr e = {0};

	ok(parse(entries, &t, &e) < 0 && strstr(e.msg, want),
	   "refused: %s (%s)", why, e.msg);
}

static void hostile(void)
{
	refused("{\"name\":\"../etc/passwd\",\"type\":\"reg\"}", "..",
		"a '..' component");
	refused("{\"name\":\"a\",\"type\":\"reg\"},"
		"{\"name\":\"b\",\"type\":\"hardlink\",\"linkName\":\"/../a\"}",
		"hardlink target", "a hardlink that climbs");
	refused("{\"name\":\"b\",\"type\":\"hardlink\",\"linkName\":\"/etc/"
		"shadow\"}",
		"not in the layer", "a hardlink out of the layer");
	refused("{\"name\":\"a\",\"type\":\"reg\"},{\"name\":\"/a\","
		"\"type\":\"reg\"}",
		"twice", "a name twice");
	refused("{\"name\":\"a\",\"type\":\"reg\",\"size\":99999999999999,"
		"\"offset\":1,\"chunkDigest\":\"" DG "\"}",
		"size", "a huge size");
	refused("{\"name\":\"a\",\"type\":\"reg\",\"size\":4,\"offset\":50,"
		"\"chunkDigest\":\"" DG "\"},{\"name\":\"b\",\"type\":\"reg\","
		"\"size\":4,\"offset\":10,\"chunkDigest\":\"" DG "\"}",
		"out of order", "chunks out of order");
	refused("{\"name\":\"a\",\"type\":\"reg\",\"size\":4,\"offset\":50,"
		"\"chunkDigest\":\"" DG "\"},{\"name\":\"b\",\"type\":\"reg\","
		"\"size\":4,\"offset\":50,\"innerOffset\":2,\"chunkDigest\":"
		"\"" DG "\"}",
		"overlaps", "overlapping chunks");
	refused("{\"name\":\"a\",\"type\":\"reg\",\"size\":4,\"offset\":"
		"100000,\"chunkDigest\":\"" DG "\"}",
		"beyond the TOC", "a chunk beyond the blob's data");
	refused("{\"name\":\"a\",\"type\":\"reg\",\"size\":8,\"offset\":5,"
		"\"chunkSize\":4,\"chunkDigest\":\"" DG "\"}",
		"chunks end", "a file whose chunks stop short");
	refused("{\"name\":\"a\",\"type\":\"reg\",\"size\":4,\"offset\":5}",
		"chunkDigest", "data without a chunk digest");
	refused("{\"name\":\"a\",\"type\":\"reg\"},{\"name\":\"a/b\","
		"\"type\":\"reg\"}",
		"not a directory", "a child of a file");
	refused("{\"name\":\"a\",\"type\":\"socket\"}", "unknown type",
		"an unknown type");
	refused("{\"name\":\"a\",\"type\":\"dir\"},{\"name\":\"b\",\"type\":"
		"\"hardlink\",\"linkName\":\"a\"}",
		"directory", "a hardlink to a directory");
}

/* A whiteout and an entry of the same name in one layer: the later wins,
 * as in the tar core; a directory after its whiteout is opaque. */
static void whiteout_and_entry(void)
{
	struct esgz_toc t;
	struct cerr e = {0};
	const struct esgz_node *n;
	int r = parse("{\"name\":\".wh.d\",\"type\":\"reg\"},"
		      "{\"name\":\"d/\",\"type\":\"dir\",\"mode\":448},"
		      "{\"name\":\"d/x\",\"type\":\"reg\"},"
		      "{\"name\":\".wh.f\",\"type\":\"reg\"},"
		      "{\"name\":\"f\",\"type\":\"reg\"},"
		      "{\"name\":\"g\",\"type\":\"reg\"},"
		      "{\"name\":\"h\",\"type\":\"hardlink\",\"linkName\":"
		      "\"g\"},"
		      "{\"name\":\".wh.h\",\"type\":\"reg\"}",
		      &t, &e);

	ok(r == 0, "whiteouts and entries of the same name parse (%s)", e.msg);
	if (r < 0)
		return;
	n = node_at(&t, "d");
	ok(n && S_ISDIR(n->mode) && n->opaque && (n->mode & 0777) == 0700 &&
	       n->n_children == 1,
	   "a directory after its whiteout: opaque, with its entries");
	n = node_at(&t, "f");
	ok(n && S_ISREG(n->mode), "a file after its whiteout replaces it");
	n = node_at(&t, "h");
	ok(n && S_ISCHR(n->mode) && n->rdev == 0,
	   "a whiteout after a hard link replaces that name");
	n = node_at(&t, "g");
	ok(n && S_ISREG(n->mode) && n->nlink == 1,
	   "the link's other name stays, with one link");
	esgz_toc_free(&t);
	refused("{\"name\":\"d/\",\"type\":\"dir\"},"
		"{\"name\":\".wh.d\",\"type\":\"reg\"}",
		"a directory and a whiteout",
		"a whiteout after a directory of the layer");
}

static void too_many(void)
{
	struct esgz_toc t;
	struct cerr e = {0};
	size_t n = ESGZ_ENTRIES_MAX + 1, cap = n * 2 + 64, len = 0;
	char *json = xmalloc(cap);

	len += (size_t)snprintf(json, cap, "{\"version\":1,\"entries\":[0");
	for (size_t i = 1; i < n; i++) {
		json[len++] = ',';
		json[len++] = '0';
	}
	len += (size_t)snprintf(json + len, cap - len, "]}");
	ok(esgz_toc_parse(json, len, 10, &t, &e) < 0 &&
	       strstr(e.msg, "entries"),
	   "refused: too many entries (%s)", e.msg);
	free(json);
}

int main(void)
{
	footer();
	tree();
	hostile();
	whiteout_and_entry();
	too_many();
	return tap_done();
}
