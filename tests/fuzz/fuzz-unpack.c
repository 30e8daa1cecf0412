// SPDX-License-Identifier: Apache-2.0
/* Fuzz harness for the layer unpacker: the input is a tar stream, applied
 * beneath a fresh root (FLAT when the first byte is even, OVERLAY when it
 * is odd) next to a sentinel directory. Whatever the input, the unpacker
 * may fail but must never touch the sentinel or anything else outside the
 * root; the harness aborts if it did.
 *
 * The sandbox (sandbox.h): cell-fuzz-unpack-XXXXXX/root, unpacked into and
 * removed after each run, next to cell-fuzz-unpack-XXXXXX/sentinel/file,
 * which the seeds aim at with relative escapes ("../sentinel/file"). */
#include <archive.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pull-internal.h"
#include "sandbox.h"

static struct sandbox sb;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	enum unpack_mode mode =
	    size && (data[0] & 1) ? UNPACK_OVERLAY : UNPACK_FLAT;
	struct unpack_stats st;
	struct cerr e = {0};
	struct archive *a;
	int rootfd;

	if (!sb.base[0])
		sandbox_setup(&sb, "fuzz-unpack", "root");
	if (mkdir(sb.work, 0755) < 0) {
		perror("fuzz-unpack: mkdir root");
		abort();
	}
	rootfd = open(sb.work, O_PATH | O_DIRECTORY | O_CLOEXEC);
	a = archive_read_new();
	archive_read_support_format_tar(a);
	if (rootfd < 0 || !a ||
	    archive_read_open_memory(a, data, size) != ARCHIVE_OK) {
		/* Not a tar at all (libarchive decides at open). */
	} else {
		unpack_layer(a, rootfd, mode, 0, &st, &e);
	}
	if (a)
		archive_read_free(a);
	if (rootfd >= 0)
		close(rootfd);
	if (fs_rm_rf(sb.work, &e) < 0) {
		fprintf(stderr, "fuzz-unpack: cleanup: %s\n", e.msg);
		abort();
	}
	sandbox_check(&sb);
	return 0;
}
