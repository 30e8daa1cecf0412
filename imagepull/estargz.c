// SPDX-License-Identifier: Apache-2.0
/* eStargz footer and TOC into struct esgz_toc (estargz.h). Pure: nothing
 * here touches the network or the disk. Every rule that refuses a TOC is
 * one the hostile-tar core applies to the same entry in a tar, or a rule
 * about chunks, which a tar does not have. */
#include "estargz.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>

#include "base64.h"
#include "buf.h"
#include "cleanup.h"
#include "gunzip.h"
#include "jsonutil.h"
#include "path.h"
#include "unpack.h"
#include "util.h"

#define NONE ((size_t)-1)
#define XATTR_NAME_LEN_MAX 255
#define XATTRS_PER_ENTRY_MAX 128

/* ---- footer ---- */

static int hex16(const uint8_t *p, uint64_t *out)
{
	uint64_t v = 0;

	for (int i = 0; i < 16; i++) {
		int c = p[i], d;

		if (c >= '0' && c <= '9')
			d = c - '0';
		else if (c >= 'a' && c <= 'f')
			d = c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			d = c - 'A' + 10;
		else
			return -1;
		v = v << 4 | (uint64_t)d;
	}
	if (v > INT64_MAX)
		return -1; /* Go's ParseInt(…, 16, 64) */
	*out = v;
	return 0;
}

/* An empty gzip member whose Extra field carries the TOC offset: 51 bytes
 * with the RFC 1952 subfield header "SG" + LEN, 47 without (stargz). */
static int footer_at(const uint8_t *p, bool legacy, uint64_t *off)
{
	static const uint8_t flate_end[13] = {1, 0, 0, 0xff, 0xff};
	size_t xlen = legacy ? 22 : 26, x = 12;

	if (p[0] != 0x1f || p[1] != 0x8b || p[2] != 8 || !(p[3] & 4))
		return -1;
	if ((size_t)(p[10] | p[11] << 8) != xlen)
		return -1;
	if (!legacy) {
		if (p[12] != 'S' || p[13] != 'G' || (p[14] | p[15] << 8) != 22)
			return -1;
		x = 16;
	}
	if (memcmp(p + x + 16, "STARGZ", 6) || hex16(p + x, off) < 0)
		return -1;
	/* A stored empty block and a zero trailer (CRC-32 and size of
	 * nothing). */
	return memcmp(p + 12 + xlen, flate_end, 13) ? -1 : 0;
}

int esgz_footer_parse(const void *tail, size_t n, uint64_t blob_size,
		      uint64_t *toc_offset, size_t *footer_size, struct cerr *e)
{
	const uint8_t *p = tail;
	uint64_t off;
	size_t fs;

	if (n >= ESGZ_FOOTER_SIZE &&
	    footer_at(p + n - ESGZ_FOOTER_SIZE, false, &off) == 0)
		fs = ESGZ_FOOTER_SIZE;
	else if (n >= ESGZ_LEGACY_FOOTER_SIZE &&
		 footer_at(p + n - ESGZ_LEGACY_FOOTER_SIZE, true, &off) == 0)
		fs = ESGZ_LEGACY_FOOTER_SIZE;
	else
		return cerr_set(e, EINVAL, "no eStargz footer");
	if (blob_size < fs || off >= blob_size - fs)
		return cerr_set(e, EINVAL,
				"eStargz footer: TOC offset %llu beyond the "
				"blob (%llu bytes)",
				(unsigned long long)off,
				(unsigned long long)blob_size);
	*toc_offset = off;
	*footer_size = fs;
	return 0;
}

/* ---- the TOC's gzip member: one tar entry ---- */

static void archive_freep(struct archive **a)
{
	if (*a)
		archive_read_free(*a);
}

int esgz_toc_extract(const void *gz, size_t n, char **json, size_t *len,
		     struct cerr *e)
{
	_cleanup_(archive_freep) struct archive *a = archive_read_new();
	struct archive_entry *ent;
	struct buf tar;
	la_int64_t size;
	char *out;
	la_ssize_t got;

	if (!a)
		return cerr_set(e, ENOMEM, "archive_read_new");
	if (n > ESGZ_TOC_GZ_MAX)
		return cerr_set(e, EFBIG, "TOC of %zu bytes exceeds %u", n,
				ESGZ_TOC_GZ_MAX);
	buf_init(&tar, ESGZ_TOC_JSON_MAX + (64u << 10));
	if (gunzip_buf(gz, n, &tar, e) < 0) {
		buf_free(&tar);
		return cerr_prefix(e, "TOC");
	}
	archive_read_support_format_tar(a);
	if (archive_read_open_memory(a, tar.data, tar.len) != ARCHIVE_OK ||
	    archive_read_next_header(a, &ent) != ARCHIVE_OK) {
		buf_free(&tar);
		return cerr_set(e, EINVAL, "TOC: not a tar");
	}
	size = archive_entry_size(ent);
	if (!archive_entry_pathname(ent) ||
	    strcmp(archive_entry_pathname(ent), ESGZ_TOC_NAME) ||
	    archive_entry_filetype(ent) != AE_IFREG || size < 0 ||
	    size > (la_int64_t)ESGZ_TOC_JSON_MAX) {
		buf_free(&tar);
		return cerr_set(e, EINVAL, "TOC: no regular %s in its member",
				ESGZ_TOC_NAME);
	}
	out = xmalloc((size_t)size + 1);
	got = size ? archive_read_data(a, out, (size_t)size) : 0;
	buf_free(&tar);
	if (got != size) {
		free(out);
		return cerr_set(e, EINVAL, "TOC: short %s", ESGZ_TOC_NAME);
	}
	out[size] = '\0';
	*json = out;
	*len = (size_t)size;
	return 0;
}

/* ---- building the tree ---- */

struct builder {
	struct esgz_toc *t;
	size_t cap_nodes, cap_dents, cap_chunks;
	size_t *slots; /* names: dent index + 1, 0 free */
	size_t n_slots;
	bool *implicit; /* per node: a directory made for a child */
	/* the regular file whose chunks come next */
	size_t file;
	uint64_t file_next;
	const char *file_path;
	/* blob order */
	bool have_prev;
	uint64_t prev_off, prev_inner_end;
	uint64_t *offs; /* distinct member offsets, ascending */
	size_t n_offs, cap_offs;
	size_t *chunk_member; /* per chunk: its index in offs */
	/* A name this entry takes over (NONE: a new name): a whiteout and an
	 * entry of the same name, the later wins as in the tar core. */
	size_t reuse;
	struct cerr *e;
};

static uint64_t fnv1a(const char *s)
{
	uint64_t h = 1469598103934665603ull;

	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 1099511628211ull;
	return h;
}

static size_t find(const struct builder *b, const char *path)
{
	size_t m = b->n_slots - 1;

	for (size_t i = fnv1a(path) & m;; i = (i + 1) & m) {
		size_t v = b->slots[i];

		if (!v)
			return NONE;
		if (!strcmp(b->t->dents[v - 1].path, path))
			return v - 1;
	}
}

static void slot_put(size_t *slots, size_t n, const char *path, size_t v)
{
	size_t i = fnv1a(path) & (n - 1);

	while (slots[i])
		i = (i + 1) & (n - 1);
	slots[i] = v;
}

static void names_grow(struct builder *b)
{
	size_t n = b->n_slots ? b->n_slots * 2 : 1024;
	size_t *s = xcalloc(n, sizeof(*s));

	for (size_t i = 0; i < b->t->n_dents; i++)
		slot_put(s, n, b->t->dents[i].path, i + 1);
	free(b->slots);
	b->slots = s;
	b->n_slots = n;
}

static size_t new_node(struct builder *b, mode_t mode)
{
	struct esgz_toc *t = b->t;
	struct esgz_node *nd;

	if (t->n_nodes == b->cap_nodes) {
		b->cap_nodes = b->cap_nodes ? b->cap_nodes * 2 : 256;
		t->nodes = xrealloc(t->nodes, b->cap_nodes * sizeof(*nd));
		b->implicit = xrealloc(b->implicit, b->cap_nodes);
	}
	nd = &t->nodes[t->n_nodes];
	memset(nd, 0, sizeof(*nd));
	nd->mode = mode;
	nd->nlink = 1;
	b->implicit[t->n_nodes] = false;
	return t->n_nodes++;
}

static void child_add(struct esgz_node *dir, size_t dent)
{
	if (dir->n_children == dir->cap_children) {
		dir->cap_children =
		    dir->cap_children ? dir->cap_children * 2 : 8;
		dir->children =
		    xrealloc(dir->children, dir->cap_children * sizeof(size_t));
	}
	dir->children[dir->n_children++] = dent;
}

/* A new name; path is taken over. */
static size_t new_dent(struct builder *b, char *path, size_t parent,
		       size_t node)
{
	struct esgz_toc *t = b->t;
	struct esgz_dent *d;
	const char *slash = strrchr(path, '/');

	if (b->reuse != NONE) { /* the name stays, its node changes */
		size_t r = b->reuse;

		b->reuse = NONE;
		free(path);
		t->nodes[t->dents[r].node].nlink--;
		t->dents[r].node = node;
		return r;
	}
	if (t->n_dents == b->cap_dents) {
		b->cap_dents = b->cap_dents ? b->cap_dents * 2 : 256;
		t->dents = xrealloc(t->dents, b->cap_dents * sizeof(*d));
	}
	d = &t->dents[t->n_dents];
	d->path = path;
	d->base = slash ? slash + 1 : path;
	d->parent = parent;
	d->node = node;
	t->n_dents++;
	if ((t->n_dents) * 2 > b->n_slots)
		names_grow(b);
	else
		slot_put(b->slots, b->n_slots, path, t->n_dents);
	if (t->n_dents > 1)
		child_add(&t->nodes[parent], t->n_dents - 1);
	return t->n_dents - 1;
}

/* The directory at path[0..len), made (0755, root) with its parents when
 * missing, as the tar core makes a missing parent. */
static int ensure_dir(struct builder *b, const char *path, size_t len,
		      size_t *out)
{
	size_t cur = 0, i = 0;
	char tmp[PATH_MAX_INPUT];

	while (i < len) {
		size_t j = i, d;

		while (j < len && path[j] != '/')
			j++;
		memcpy(tmp, path, j);
		tmp[j] = '\0';
		d = find(b, tmp);
		if (d == NONE) {
			size_t nd = new_node(b, S_IFDIR | 0755);

			b->implicit[nd] = true;
			new_dent(b, xstrdup(tmp), cur, nd);
			cur = nd;
		} else if (!S_ISDIR(b->t->nodes[b->t->dents[d].node].mode)) {
			return cerr_set(b->e, EINVAL, "'%s' is not a directory",
					tmp);
		} else {
			cur = b->t->dents[d].node;
		}
		i = j + 1;
	}
	*out = cur;
	return 0;
}

static int64_t parse_modtime(const char *s)
{
	struct tm tm = {0};
	const char *end;

	if (!s || !*s)
		return 0;
	end = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
	if (!end)
		return 0;
	return (int64_t)timegm(&tm);
}

static int parse_xattrs(struct builder *b, const json_t *o, const char *at,
			struct esgz_node *nd)
{
	json_t *xo, *v;
	const char *k;
	size_t total = 0;

	int r = jget_obj(o, at, "xattrs", &xo, b->e);

	if (r <= 0)
		return r;
	if (json_object_size(xo) > XATTRS_PER_ENTRY_MAX)
		return jbad(b->e, at, "xattrs", "more than %d",
			    XATTRS_PER_ENTRY_MAX);
	nd->xattrs = xcalloc(json_object_size(xo), sizeof(*nd->xattrs));
	json_object_foreach(xo, k, v)
	{
		struct buf val;
		size_t kl = strlen(k);

		if (!json_is_string(v))
			return jbad(b->e, at, "xattrs", "'%.64s' not a string",
				    k);
		if (!kl || kl > XATTR_NAME_LEN_MAX)
			return jbad(b->e, at, "xattrs", "bad name '%.64s'", k);
		buf_init(&val, ESGZ_XATTRS_MAX);
		if (b64_decode(json_string_value(v), json_string_length(v),
			       B64_PADDED, &val, b->e) < 0) {
			buf_free(&val);
			return cerr_prefix(b->e, "%s.xattrs.%.64s", at, k);
		}
		total += kl + val.len;
		if (total > ESGZ_XATTRS_MAX) {
			buf_free(&val);
			return jbad(b->e, at, "xattrs", "exceed %u bytes",
				    ESGZ_XATTRS_MAX);
		}
		if (unpack_xattr_forbidden(k)) {
			buf_free(&val);
			continue;
		}
		nd->xattrs[nd->n_xattrs].name = xstrdup(k);
		nd->xattrs[nd->n_xattrs].len = val.len;
		nd->xattrs[nd->n_xattrs++].value = buf_steal(&val, NULL);
	}
	return 0;
}

static int parse_attrs(struct builder *b, const json_t *o, const char *at,
		       struct esgz_node *nd)
{
	int64_t mode = 0, uid = 0, gid = 0;
	cleanup_free char *mt = NULL;

	if (jget_int(o, at, "mode", 0, UINT32_MAX, &mode, NULL, b->e) < 0 ||
	    jget_int(o, at, "uid", 0, UINT32_MAX - 1, &uid, NULL, b->e) < 0 ||
	    jget_int(o, at, "gid", 0, UINT32_MAX - 1, &gid, NULL, b->e) < 0 ||
	    jget_str(o, at, "modtime", 64, &mt, b->e) < 0)
		return -1;
	nd->mode = (nd->mode & S_IFMT) | ((mode_t)mode & 07777);
	nd->uid = (uint32_t)uid;
	nd->gid = (uint32_t)gid;
	nd->mtime = parse_modtime(mt);
	return parse_xattrs(b, o, at, nd);
}

/* One stretch of file data in the blob: after the previous one, never
 * overlapping it (members may hold several, at growing innerOffsets). */
static int place(struct builder *b, uint64_t off, uint64_t inner, uint64_t size,
		 const char *at)
{
	if (off >= b->t->toc_offset)
		return jbad(b->e, at, "offset", "%llu is at or beyond the TOC",
			    (unsigned long long)off);
	if (b->have_prev && off < b->prev_off)
		return jbad(b->e, at, "offset", "%llu goes back (out of order)",
			    (unsigned long long)off);
	if (b->have_prev && off == b->prev_off && inner < b->prev_inner_end)
		return jbad(b->e, at, "innerOffset",
			    "%llu overlaps the previous chunk",
			    (unsigned long long)inner);
	if (!b->have_prev || off > b->prev_off) {
		if (b->n_offs == b->cap_offs) {
			b->cap_offs = b->cap_offs ? b->cap_offs * 2 : 256;
			b->offs =
			    xrealloc(b->offs, b->cap_offs * sizeof(*b->offs));
		}
		b->offs[b->n_offs++] = off;
	}
	b->have_prev = true;
	b->prev_off = off;
	b->prev_inner_end = inner + size;
	return 0;
}

/* The data fields of a "reg" (first chunk) or "chunk" entry. */
static int add_chunk(struct builder *b, const json_t *o, const char *at,
		     size_t node, uint64_t file_off)
{
	struct esgz_toc *t = b->t;
	struct esgz_node *nd = &t->nodes[node];
	int64_t off, inner = 0, csize = 0;
	cleanup_free char *dg = NULL;
	struct esgz_chunk *c;
	uint64_t size;

	if (jget_int(o, at, "offset", 0, INT64_MAX, &off, NULL, b->e) < 0 ||
	    jget_int(o, at, "innerOffset", 0, (int64_t)ESGZ_FILE_MAX, &inner,
		     NULL, b->e) < 0 ||
	    jget_int(o, at, "chunkSize", 0, ESGZ_CHUNK_MAX, &csize, NULL,
		     b->e) < 0 ||
	    jget_str_req(o, at, "chunkDigest", DIGEST_STR_MAX - 1, &dg, b->e) <
		0)
		return -1;
	if (digest_validate(dg, b->e) < 0)
		return cerr_prefix(b->e, "%s.chunkDigest", at);
	if (!json_is_integer(jget(o, "offset")))
		return jbad(b->e, at, "offset", "required");
	size = csize ? (uint64_t)csize : nd->size - file_off;
	if (size > ESGZ_CHUNK_MAX)
		return cerr_set(b->e, EFBIG,
				"%s: a chunk of %llu bytes exceeds %u", at,
				(unsigned long long)size, ESGZ_CHUNK_MAX);
	if (!size || file_off + size > nd->size)
		return jbad(b->e, at, "chunkSize",
			    "%llu at %llu does not fit a file of %llu",
			    (unsigned long long)size,
			    (unsigned long long)file_off,
			    (unsigned long long)nd->size);
	if (place(b, (uint64_t)off, (uint64_t)inner, size, at) < 0)
		return -1;
	if (t->n_chunks == b->cap_chunks) {
		b->cap_chunks = b->cap_chunks ? b->cap_chunks * 2 : 256;
		t->chunks = xrealloc(t->chunks, b->cap_chunks * sizeof(*c));
		b->chunk_member =
		    xrealloc(b->chunk_member, b->cap_chunks * sizeof(size_t));
	}
	c = &t->chunks[t->n_chunks];
	memset(c, 0, sizeof(*c));
	c->offset = (uint64_t)off;
	c->inner = (uint64_t)inner;
	c->file_off = file_off;
	c->size = size;
	snprintf(c->digest, sizeof(c->digest), "%s", dg);
	b->chunk_member[t->n_chunks] = b->n_offs - 1;
	if (!nd->n_chunks)
		nd->first_chunk = t->n_chunks;
	nd->n_chunks++;
	t->n_chunks++;
	b->file = file_off + size < nd->size ? node : NONE;
	b->file_next = file_off + size;
	return 0;
}

static int end_file(struct builder *b)
{
	if (b->file == NONE)
		return 0;
	return cerr_set(b->e, EINVAL, "'%s': chunks end at %llu of %llu bytes",
			b->file_path, (unsigned long long)b->file_next,
			(unsigned long long)b->t->nodes[b->file].size);
}

static int landmark(struct builder *b, const json_t *o, const char *at,
		    bool prefetch)
{
	int64_t off = -1, size = 0;

	if (jget_int(o, at, "offset", 0, INT64_MAX, &off, NULL, b->e) < 0 ||
	    jget_int(o, at, "size", 0, ESGZ_CHUNK_MAX, &size, NULL, b->e) < 0)
		return -1;
	if (off < 0)
		return 0;
	if (place(b, (uint64_t)off, 0, (uint64_t)size, at) < 0)
		return -1;
	if (prefetch)
		b->t->prefetch_end = (uint64_t)off;
	return 0;
}

/* ".wh.<name>" (overlay form: a 0/0 device) and ".wh..wh..opq". */
static int whiteout(struct builder *b, char *path, const char *base,
		    size_t dlen, const char *at)
{
	const char *victim = base + strlen(WH_PREFIX);
	size_t dir, node;

	if (ensure_dir(b, path, dlen, &dir) < 0)
		return cerr_prefix(b->e, "%s", at);
	if (!strcmp(base, WH_OPAQUE)) {
		b->t->nodes[dir].opaque = true;
		return 0;
	}
	if (str_has_prefix(base, WH_META))
		return 0; /* AUFS bookkeeping, as the tar core skips it */
	if (!*victim || !strcmp(victim, ".") || !strcmp(victim, ".."))
		return cerr_set(b->e, EINVAL, "%s: invalid whiteout name '%s'",
				at, base);
	memmove(path + (base - path), victim, strlen(victim) + 1);
	b->reuse = find(b, path);
	/* An earlier entry of this layer: the whiteout replaces it, as the
	 * tar core's does (a directory there, with its tree, is refused). */
	if (b->reuse != NONE &&
	    S_ISDIR(b->t->nodes[b->t->dents[b->reuse].node].mode)) {
		b->reuse = NONE;
		return cerr_set(b->e, EINVAL,
				"%s: '%s' is named twice (a directory and a "
				"whiteout)",
				at, path);
	}
	node = new_node(b, S_IFCHR);
	new_dent(b, xstrdup(path), dir, node);
	return 0;
}

static int entry_type(const char *s, mode_t *fmt)
{
	static const struct {
		const char *name;
		mode_t fmt;
	} types[] = {
	    {"dir", S_IFDIR},  {"reg", S_IFREG},  {"symlink", S_IFLNK},
	    {"hardlink", 0},   {"char", S_IFCHR}, {"block", S_IFBLK},
	    {"fifo", S_IFIFO},
	};

	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
		if (!strcmp(s, types[i].name)) {
			*fmt = types[i].fmt;
			return 0;
		}
	return -1;
}

static int hardlink(struct builder *b, const json_t *o, const char *at,
		    char *path, size_t dir)
{
	cleanup_free char *raw = NULL, *owned = path;
	char target[PATH_MAX_INPUT];
	size_t d;

	if (jget_str_req(o, at, "linkName", PATH_MAX_INPUT - 1, &raw, b->e) < 0)
		return -1;
	if (path_clean(raw, target, sizeof(target), b->e) < 0)
		return cerr_prefix(b->e, "%s: hardlink target", at);
	d = target[0] ? find(b, target) : NONE;
	if (d == NONE)
		return cerr_set(b->e, EINVAL,
				"%s: hardlink target '%.240s' is not in the "
				"layer (yet)",
				at, target);
	if (S_ISDIR(b->t->nodes[b->t->dents[d].node].mode))
		return cerr_set(b->e, EINVAL,
				"%s: hardlink target '%.240s' is a directory",
				at, target);
	b->t->nodes[b->t->dents[d].node].nlink++;
	new_dent(b, steal_ptr(&owned), dir, b->t->dents[d].node);
	return 0;
}

static int node_entry(struct builder *b, const json_t *o, const char *at,
		      char *path, size_t dir, mode_t fmt)
{
	struct esgz_toc *t = b->t;
	size_t node = new_node(b, fmt);
	struct esgz_node *nd = &t->nodes[node];
	int64_t v = 0;
	size_t dent = new_dent(b, path, dir, node);

	if (parse_attrs(b, o, at, nd) < 0)
		return -1;
	if (S_ISLNK(fmt)) {
		if (jget_str_req(o, at, "linkName", ESGZ_LINK_MAX - 1,
				 &nd->link, b->e) < 0)
			return -1;
	} else if (S_ISCHR(fmt) || S_ISBLK(fmt)) {
		int64_t maj = 0, min = 0;

		if (jget_int(o, at, "devMajor", 0, 0xfff, &maj, NULL, b->e) <
			0 ||
		    jget_int(o, at, "devMinor", 0, 0xfffff, &min, NULL, b->e) <
			0)
			return -1;
		nd->rdev = makedev((unsigned)maj, (unsigned)min);
	}
	if (!S_ISREG(fmt))
		return 0;
	if (jget_int(o, at, "size", 0, (int64_t)ESGZ_FILE_MAX, &v, NULL, b->e) <
	    0)
		return -1;
	nd = &t->nodes[node];
	nd->size = (uint64_t)v;
	t->data_bytes += nd->size;
	if (!nd->size)
		return 0;
	b->file_path = t->dents[dent].path;
	return add_chunk(b, o, at, node, 0);
}

static bool is_whiteout(const struct esgz_node *n)
{
	return S_ISCHR(n->mode) && n->rdev == 0;
}

/* An entry after this layer's whiteout of the same name replaces it, as
 * in the tar core; a directory there must hide the lower directory as the
 * whiteout did, so it is opaque (unpack.c's apply_dir). */
static int replace_whiteout(struct builder *b, const json_t *o, const char *at,
			    char *path, size_t dir, mode_t fmt, size_t d)
{
	int r;

	b->reuse = d;
	r = fmt ? node_entry(b, o, at, path, dir, fmt)
		: hardlink(b, o, at, path, dir);
	b->reuse = NONE;
	if (r == 0 && fmt == S_IFDIR)
		b->t->nodes[b->t->dents[d].node].opaque = true;
	return r;
}

static int entry(struct builder *b, const json_t *o, const char *at)
{
	cleanup_free char *raw = NULL, *type = NULL;
	char clean[PATH_MAX_INPUT];
	const char *base, *slash;
	size_t dir, d;
	mode_t fmt;

	if (!json_is_object(o))
		return jbad(b->e, at, NULL, "not an object");
	if (jget_str_req(o, at, "name", PATH_MAX_INPUT - 1, &raw, b->e) < 0 ||
	    jget_str_req(o, at, "type", 16, &type, b->e) < 0)
		return -1;
	if (path_clean(raw, clean, sizeof(clean), b->e) < 0)
		return cerr_set(b->e, EINVAL, "%s.name: %s", at,
				b->e->code == EINVAL
				    ? "a '..' component is not allowed"
				    : "name is too long");
	if (!strcmp(type, "chunk")) {
		int64_t co;

		if (b->file == NONE || strcmp(clean, b->file_path))
			return jbad(b->e, at, NULL,
				    "a chunk of no file before it");
		if (jget_int(o, at, "chunkOffset", 0, (int64_t)ESGZ_FILE_MAX,
			     &co, NULL, b->e) < 0)
			return -1;
		if ((uint64_t)co != b->file_next)
			return jbad(b->e, at, "chunkOffset",
				    "%lld, the file is at %llu", (long long)co,
				    (unsigned long long)b->file_next);
		return add_chunk(b, o, at, b->file, (uint64_t)co);
	}
	if (end_file(b) < 0)
		return -1;
	if (entry_type(type, &fmt) < 0)
		return jbad(b->e, at, "type", "unknown type '%.32s'", type);
	if (!strcmp(clean, ESGZ_PREFETCH_LANDMARK) ||
	    !strcmp(clean, ESGZ_NO_PREFETCH_LANDMARK))
		return landmark(b, o, at,
				!strcmp(clean, ESGZ_PREFETCH_LANDMARK));
	if (!clean[0]) {
		if (fmt != S_IFDIR || !b->implicit[0])
			return jbad(b->e, at, "name", "a second root");
		b->implicit[0] = false;
		return parse_attrs(b, o, at, &b->t->nodes[0]);
	}
	slash = strrchr(clean, '/');
	base = slash ? slash + 1 : clean;
	if (str_has_prefix(base, WH_PREFIX))
		return whiteout(b, clean, base,
				slash ? (size_t)(slash - clean) : 0, at);
	if (ensure_dir(b, clean, slash ? (size_t)(slash - clean) : 0, &dir) < 0)
		return cerr_prefix(b->e, "%s", at);
	d = find(b, clean);
	if (d != NONE) {
		size_t n = b->t->dents[d].node;

		/* A directory made for an earlier child, now listed. */
		if (fmt == S_IFDIR && b->implicit[n]) {
			b->implicit[n] = false;
			return parse_attrs(b, o, at, &b->t->nodes[n]);
		}
		if (!is_whiteout(&b->t->nodes[n]))
			return cerr_set(b->e, EINVAL,
					"%s: '%.240s' is named twice", at,
					clean);
		return replace_whiteout(b, o, at, xstrdup(clean), dir, fmt, d);
	}
	if (!fmt)
		return hardlink(b, o, at, xstrdup(clean), dir);
	return node_entry(b, o, at, xstrdup(clean), dir, fmt);
}

static const struct esgz_toc *sort_toc;

static int by_base(const void *a, const void *b)
{
	return strcmp(sort_toc->dents[*(const size_t *)a].base,
		      sort_toc->dents[*(const size_t *)b].base);
}

/* Members end where the next begins (the last where the TOC does);
 * directories list their entries by name and count their subdirectories
 * as links. */
static void finish(struct builder *b)
{
	struct esgz_toc *t = b->t;

	for (size_t i = 0; i < t->n_chunks; i++) {
		size_t m = b->chunk_member[i];

		t->chunks[i].end =
		    m + 1 < b->n_offs ? b->offs[m + 1] : t->toc_offset;
	}
	sort_toc = t;
	for (size_t i = 0; i < t->n_nodes; i++) {
		struct esgz_node *nd = &t->nodes[i];

		if (!S_ISDIR(nd->mode))
			continue;
		if (nd->n_children) /* an empty one has no array */
			qsort(nd->children, nd->n_children, sizeof(size_t),
			      by_base);
		nd->nlink = 2;
		for (size_t c = 0; c < nd->n_children; c++)
			if (S_ISDIR(
				t->nodes[t->dents[nd->children[c]].node].mode))
				nd->nlink++;
	}
	sort_toc = NULL;
}

int esgz_toc_parse(const char *json, size_t len, uint64_t toc_offset,
		   struct esgz_toc *out, struct cerr *e)
{
	cleanup_json json_t *root = NULL;
	struct builder b = {.t = out, .file = NONE, .reuse = NONE, .e = e};
	json_t *entries, *v;
	int64_t version = 0;
	char at[48];
	size_t i;
	int r = -1;

	memset(out, 0, sizeof(*out));
	out->toc_offset = toc_offset;
	root = json_parse_object(json, len, e);
	if (!root)
		return cerr_prefix(e, "TOC");
	if (jget_int(root, "", "version", 0, 1000, &version, NULL, e) < 0)
		goto out;
	if (version != 1) {
		cerr_set(e, EINVAL, "TOC version %lld, not 1",
			 (long long)version);
		goto out;
	}
	if (jget_arr(root, "", "entries", ESGZ_ENTRIES_MAX, &entries, e) <= 0) {
		if (!e->code)
			cerr_set(e, EINVAL, "TOC has no entries");
		goto out;
	}
	names_grow(&b);
	new_node(&b, S_IFDIR | 0755);
	b.implicit[0] = true;
	new_dent(&b, xstrdup(""), 0, 0);
	json_array_foreach(entries, i, v)
	{
		snprintf(at, sizeof(at), "entries[%zu]", i);
		if (entry(&b, v, at) < 0)
			goto out;
	}
	if (end_file(&b) < 0)
		goto out;
	finish(&b);
	r = 0;
out:
	free(b.slots);
	free(b.implicit);
	free(b.offs);
	free(b.chunk_member);
	if (r < 0) {
		cerr_prefix(e, "TOC");
		esgz_toc_free(out);
	}
	return r;
}

void esgz_toc_free(struct esgz_toc *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->n_nodes; i++) {
		struct esgz_node *nd = &t->nodes[i];

		free(nd->link);
		free(nd->children);
		for (size_t x = 0; x < nd->n_xattrs; x++) {
			free(nd->xattrs[x].name);
			free(nd->xattrs[x].value);
		}
		free(nd->xattrs);
	}
	for (size_t i = 0; i < t->n_dents; i++)
		free(t->dents[i].path);
	free(t->nodes);
	free(t->dents);
	free(t->chunks);
	memset(t, 0, sizeof(*t));
}

size_t esgz_lookup(const struct esgz_toc *t, size_t dir, const char *name)
{
	const struct esgz_node *nd = &t->nodes[dir];
	size_t lo = 0, hi = nd->n_children;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2, d = nd->children[mid];
		int c = strcmp(name, t->dents[d].base);

		if (!c)
			return d;
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return NONE;
}

void esgz_chunks_for(const struct esgz_toc *t, const struct esgz_node *nd,
		     uint64_t off, uint64_t len, size_t *first, size_t *n)
{
	const struct esgz_chunk *c = t->chunks + nd->first_chunk;
	size_t lo = 0, hi = nd->n_chunks, end;

	*n = 0;
	*first = nd->first_chunk;
	if (!nd->n_chunks || !len || off >= nd->size)
		return;
	/* the last chunk starting at or before off */
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;

		if (c[mid].file_off <= off)
			lo = mid;
		else
			hi = mid;
	}
	end = lo;
	while (end < nd->n_chunks && c[end].file_off < off + len)
		end++;
	*first = nd->first_chunk + lo;
	*n = end - lo;
}
