// SPDX-License-Identifier: Apache-2.0
/* The sandbox of the extraction harnesses (fuzz-unpack, fuzz-deploy): a
 * fresh directory in $TMPDIR (default /tmp) holding the directory a run
 * writes into and, next to it, a sentinel directory with one file the
 * seeds aim at ("../sentinel/file"). After each run the harness removes
 * its work directory and calls sandbox_check: anything else that appeared
 * in the sandbox, or any change to the sentinel, aborts.
 *
 *   cell-fuzz-<name>-XXXXXX/<work>/
 *   cell-fuzz-<name>-XXXXXX/sentinel/file */
#ifndef CELL_FUZZ_SANDBOX_H
#define CELL_FUZZ_SANDBOX_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "buf.h"
#include "fsutil.h"

#define SANDBOX_SENTINEL "sentinel contents\n"

struct sandbox {
	const char *name, *work_name;
	char base[256], work[300], sentinel[300], sentinel_file[320];
};

static struct sandbox *sandbox_at_exit;

static void sandbox_remove(void)
{
	struct cerr e = {0};

	if (sandbox_at_exit && sandbox_at_exit->base[0])
		fs_rm_rf(sandbox_at_exit->base, &e);
}

/* Once per process: make the sandbox (sb->work is not created) and remove
 * it at exit. */
static inline void sandbox_setup(struct sandbox *sb, const char *name,
				 const char *work_name)
{
	const char *tmp = getenv("TMPDIR");
	struct cerr e = {0};

	sb->name = name;
	sb->work_name = work_name;
	snprintf(sb->base, sizeof(sb->base), "%s/cell-%s-XXXXXX",
		 tmp && *tmp ? tmp : "/tmp", name);
	if (!mkdtemp(sb->base)) {
		fprintf(stderr, "%s: mkdtemp %s\n", name, sb->base);
		abort();
	}
	snprintf(sb->work, sizeof(sb->work), "%s/%s", sb->base, work_name);
	snprintf(sb->sentinel, sizeof(sb->sentinel), "%s/sentinel", sb->base);
	snprintf(sb->sentinel_file, sizeof(sb->sentinel_file), "%s/file",
		 sb->sentinel);
	if (mkdir(sb->sentinel, 0755) < 0 ||
	    fs_write_atomic(sb->sentinel_file, SANDBOX_SENTINEL,
			    strlen(SANDBOX_SENTINEL), 0644, &e) < 0) {
		fprintf(stderr, "%s: setup: %s\n", name, e.msg);
		abort();
	}
	sandbox_at_exit = sb;
	atexit(sandbox_remove);
}

/* Entries of dir other than "." and ".." and other than one named except
 * (NULL: none excepted); -1 when dir cannot be opened. */
static inline int sandbox_entries(const char *dir, const char *except)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;

	if (!d)
		return -1;
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") &&
		    !(except && !strcmp(de->d_name, except)))
			n++;
	closedir(d);
	return n;
}

/* The sentinel is the only thing in the sandbox besides the work
 * directory, it holds one file, and that file is unchanged and has no
 * other links. */
static inline void sandbox_check(const struct sandbox *sb)
{
	struct stat st;
	struct buf b;
	struct cerr e = {0};

	buf_init(&b, 4096);
	if (sandbox_entries(sb->base, sb->work_name) != 1 ||
	    sandbox_entries(sb->sentinel, NULL) != 1 ||
	    lstat(sb->sentinel_file, &st) < 0 || !S_ISREG(st.st_mode) ||
	    st.st_nlink != 1 || fs_read_file(sb->sentinel_file, &b, &e) < 0 ||
	    b.len != strlen(SANDBOX_SENTINEL) ||
	    memcmp(b.data, SANDBOX_SENTINEL, b.len)) {
		fprintf(stderr, "%s: something outside %s/ changed\n", sb->name,
			sb->work_name);
		abort();
	}
	buf_free(&b);
}

#endif
