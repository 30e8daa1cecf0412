// SPDX-License-Identifier: Apache-2.0
/* Replay main for the fuzz harnesses: runs LLVMFuzzerTestOneInput over every
 * file named on the command line (or every file in the named directories),
 * so the corpus is exercised in every `make check` without libFuzzer. */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "buf.h"
#include "fsutil.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path)
{
	struct buf b;
	struct cerr e = {0};

	buf_init(&b, 16u << 20);
	if (fs_read_file(path, &b, &e) < 0) {
		fprintf(stderr, "replay: %s\n", e.msg);
		return -1;
	}
	LLVMFuzzerTestOneInput((const uint8_t *)b.data, b.len);
	buf_free(&b);
	return 0;
}

int main(int argc, char **argv)
{
	int n = 0;

	for (int i = 1; i < argc; i++) {
		struct stat st;
		DIR *d;
		struct dirent *de;

		if (stat(argv[i], &st) < 0) {
			fprintf(stderr, "replay: %s: %s\n", argv[i],
				strerror(errno));
			return 1;
		}
		if (!S_ISDIR(st.st_mode)) {
			if (run_file(argv[i]) < 0)
				return 1;
			n++;
			continue;
		}
		d = opendir(argv[i]);
		while (d && (de = readdir(d))) {
			char p[4096];
			if (de->d_name[0] == '.')
				continue;
			snprintf(p, sizeof(p), "%s/%s", argv[i], de->d_name);
			if (run_file(p) < 0)
				return 1;
			n++;
		}
		if (d)
			closedir(d);
	}
	printf("replayed %d inputs\n", n);
	return n > 0 ? 0 : 1;
}
