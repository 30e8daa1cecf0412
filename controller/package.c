// SPDX-License-Identifier: Apache-2.0
/* Deploy packages as Kip's makeDeployPackage writes them: a gzip'd tar of
 * regular files named ROOTFS/<path> (filepath.Join(".", "ROOTFS", path):
 * cleaned, no leading "./"), owner 0:0, the file's mode; made with
 * libarchive. */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <limits.h>
#include <string.h>
#include <time.h>

#include "cellctl.h"
#include "path.h"
#include "util.h"

#define PKG_MAX (256u << 20)

static int ar_err(struct archive *a, struct cerr *e, const char *what)
{
	return cerr_set(e, EIO, "package: %s: %s", what,
			archive_error_string(a) ? archive_error_string(a)
						: "failed");
}

static int add_entry(struct archive *a, const struct pkg_file *f,
		     struct cerr *e)
{
	char clean[PATH_MAX], name[PATH_MAX + 8];
	struct archive_entry *en;
	int r = 0;

	if (path_clean(f->path, clean, sizeof(clean), e) < 0 || !*clean)
		return cerr_set(e, EINVAL, "package: bad file path \"%s\"",
				f->path);
	snprintf(name, sizeof(name), "ROOTFS/%s", clean);
	en = archive_entry_new();
	archive_entry_set_pathname(en, name);
	archive_entry_set_filetype(en, AE_IFREG);
	archive_entry_set_perm(en, (mode_t)f->mode & 07777);
	archive_entry_set_size(en, (la_int64_t)f->len);
	archive_entry_set_uid(en, 0);
	archive_entry_set_gid(en, 0);
	archive_entry_set_mtime(en, time(NULL), 0);
	if (archive_write_header(a, en) != ARCHIVE_OK ||
	    (f->len &&
	     archive_write_data(a, f->data, f->len) != (la_ssize_t)f->len))
		r = ar_err(a, e, f->path);
	archive_entry_free(en);
	return r;
}

static int on_open(struct archive *a, void *ud)
{
	(void)a;
	(void)ud;
	return ARCHIVE_OK;
}

static la_ssize_t on_write(struct archive *a, void *ud, const void *p, size_t n)
{
	struct cerr e = {0};

	if (buf_append(ud, p, n, &e) < 0) {
		archive_set_error(a, EFBIG, "package over %u bytes", PKG_MAX);
		return -1;
	}
	return (la_ssize_t)n;
}

static int on_close(struct archive *a, void *ud)
{
	(void)a;
	(void)ud;
	return ARCHIVE_OK;
}

int pkg_build(const struct pkg *p, struct buf *out, struct cerr *e)
{
	struct archive *a = archive_write_new();
	int r = 0;

	buf_init(out, PKG_MAX);
	if (archive_write_set_format_pax_restricted(a) != ARCHIVE_OK ||
	    archive_write_add_filter_gzip(a) != ARCHIVE_OK ||
	    archive_write_set_bytes_in_last_block(a, 1) != ARCHIVE_OK ||
	    archive_write_open(a, out, on_open, on_write, on_close) !=
		ARCHIVE_OK)
		r = ar_err(a, e, "open");
	for (size_t i = 0; r == 0 && i < p->n; i++)
		r = add_entry(a, &p->files[i], e);
	if (r == 0 && archive_write_close(a) != ARCHIVE_OK)
		r = ar_err(a, e, "close");
	archive_write_free(a);
	if (r < 0)
		buf_free(out);
	return r < 0 ? cerr_prefix(e, "%s", p->name) : 0;
}
