/* Fuzz harness for the layer unpacker: the input is a tar stream, applied
 * beneath a fresh root (FLAT when the first byte is even, OVERLAY when it
 * is odd) next to a sentinel directory. Whatever the input, the unpacker
 * may fail but must never touch the sentinel or anything else outside the
 * root; the harness aborts if it did.
 *
 * Layout, in $TMPDIR (default /tmp):
 *   cell-fuzz-unpack-XXXXXX/root       unpacked into, removed after each run
 *   cell-fuzz-unpack-XXXXXX/sentinel/file
 * The seeds aim at it with relative escapes ("../sentinel/file"). */
#include <archive.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "buf.h"
#include "fsutil.h"
#include "pull-internal.h"

#define SENTINEL "sentinel contents\n"

static char base[256], root[300], sentinel[300], sentinel_file[320];

static void cleanup(void)
{
	struct cerr e = {0};

	if (base[0])
		fs_rm_rf(base, &e);
}

static void setup(void)
{
	const char *tmp = getenv("TMPDIR");
	struct cerr e = {0};

	snprintf(base, sizeof(base), "%s/cell-fuzz-unpack-XXXXXX",
		 tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(base)) {
		perror("fuzz-unpack: mkdtemp");
		abort();
	}
	snprintf(root, sizeof(root), "%s/root", base);
	snprintf(sentinel, sizeof(sentinel), "%s/sentinel", base);
	snprintf(sentinel_file, sizeof(sentinel_file), "%s/file", sentinel);
	if (mkdir(sentinel, 0755) < 0 ||
	    fs_write_atomic(sentinel_file, SENTINEL, strlen(SENTINEL), 0644,
			    &e) < 0) {
		fprintf(stderr, "fuzz-unpack: setup: %s\n", e.msg);
		abort();
	}
	atexit(cleanup);
}

static int entries_in(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;

	if (!d)
		return -1;
	while ((de = readdir(d)))
		n += strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
	closedir(d);
	return n;
}

/* The sentinel is the only thing in base once root is gone, it holds one
 * file, and that file is unchanged and has no other links. */
static void check_sentinel(void)
{
	struct stat st;
	struct buf b;
	struct cerr e = {0};

	buf_init(&b, 4096);
	if (entries_in(base) != 1 || entries_in(sentinel) != 1 ||
	    lstat(sentinel_file, &st) < 0 || !S_ISREG(st.st_mode) ||
	    st.st_nlink != 1 || fs_read_file(sentinel_file, &b, &e) < 0 ||
	    b.len != strlen(SENTINEL) || memcmp(b.data, SENTINEL, b.len)) {
		fprintf(stderr, "fuzz-unpack: something outside the root "
				"changed\n");
		abort();
	}
	buf_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	enum unpack_mode mode =
	    size && (data[0] & 1) ? UNPACK_OVERLAY : UNPACK_FLAT;
	struct unpack_stats st;
	struct cerr e = {0};
	struct archive *a;
	int rootfd;

	if (!base[0])
		setup();
	if (mkdir(root, 0755) < 0) {
		perror("fuzz-unpack: mkdir root");
		abort();
	}
	rootfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	a = archive_read_new();
	archive_read_support_format_tar(a);
	if (rootfd < 0 || !a ||
	    archive_read_open_memory(a, data, size) != ARCHIVE_OK) {
		/* Not a tar at all (libarchive decides at open). */
	} else {
		unpack_layer(a, rootfd, mode, &st, &e);
	}
	if (a)
		archive_read_free(a);
	if (rootfd >= 0)
		close(rootfd);
	if (fs_rm_rf(root, &e) < 0) {
		fprintf(stderr, "fuzz-unpack: cleanup: %s\n", e.msg);
		abort();
	}
	check_sentinel();
	return 0;
}
