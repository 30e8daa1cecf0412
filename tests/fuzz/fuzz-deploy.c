// SPDX-License-Identifier: Apache-2.0
/* Fuzz harness for deploy packages (agent/pod/package.c over the extraction
 * core, imagepull/unpack.c): the input is the package as uploaded (a tar,
 * gzip'd or not), deployed with deploy_package into a fresh packages
 * directory next to a sentinel directory. Whatever the input, the deploy
 * may fail, but:
 *  - nothing outside packages/ changes (the sentinel is checked);
 *  - packages/ then holds the package or nothing: no temporary directory;
 *  - every symlink in a deployed package resolves inside it (openat2
 *    RESOLVE_BENEATH from the package root never says EXDEV), which is the
 *    promise that lets a volume's package be mounted into a unit.
 * The harness aborts when one of them does not hold.
 *
 * The sandbox (sandbox.h): cell-fuzz-deploy-XXXXXX/packages/, deployed
 * into and removed after each run, next to cell-fuzz-deploy-XXXXXX/
 * sentinel/file, which the seeds (make-deploy-corpus.py) aim at with
 * relative escapes. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "deploy.h"
#include "fsutil.h"
#include "log.h"
#include "sandbox.h"

#define NAME "pkg"

static struct sandbox sb;

static void fail(const char *what)
{
	fprintf(stderr, "fuzz-deploy: %s\n", what);
	abort();
}

/* Every symlink beneath at (the package root is rootfd, rel the path
 * of at in it) must resolve beneath the root. */
static void check_links(int rootfd, int at, const char *rel, int depth)
{
	int fd = openat(at, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *de;

	if (!d)
		fail("open a deployed directory");
	while ((de = readdir(d))) {
		char path[4200];
		struct stat st;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		snprintf(path, sizeof(path), "%s%s%s", rel, *rel ? "/" : "",
			 de->d_name);
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			fail("stat a deployed entry");
		if (S_ISLNK(st.st_mode)) {
			struct open_how how = {.flags = O_PATH | O_CLOEXEC,
					       .resolve = RESOLVE_BENEATH};
			long r = syscall(SYS_openat2, rootfd, path, &how,
					 sizeof(how));

			if (r >= 0)
				close((int)r);
			else if (errno == EXDEV)
				fail("a deployed symlink leads out of the "
				     "package");
		} else if (S_ISDIR(st.st_mode) && depth < 64) {
			int sub = openat(dirfd(d), de->d_name,
					 O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
					     O_CLOEXEC);
			if (sub >= 0) { /* a 0000 directory as non-root */
				check_links(rootfd, sub, path, depth + 1);
				close(sub);
			}
		}
	}
	closedir(d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cerr e = {0};
	int pkgfd, fd, rootfd, r;

	if (!sb.base[0]) {
		log_init("fuzz-deploy", LOG_ERROR);
		sandbox_setup(&sb, "fuzz-deploy", "packages");
	}
	if (mkdir(sb.work, 0755) < 0)
		fail("mkdir packages");
	pkgfd = open(sb.work, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	fd = memfd_create("package", MFD_CLOEXEC);
	if (pkgfd < 0 || fd < 0 ||
	    (size && write(fd, data, size) != (ssize_t)size) ||
	    lseek(fd, 0, SEEK_SET) < 0)
		fail("set up the package");
	r = deploy_package(pkgfd, NAME, fd, &e);
	close(fd);
	if (sandbox_entries(sb.work, NAME) != 0)
		fail("packages/ holds something besides the package");
	if (r == 0) {
		rootfd =
		    openat(pkgfd, NAME,
			   O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (rootfd < 0)
			fail("a deployed package is not a directory");
		check_links(rootfd, rootfd, "", 0);
		close(rootfd);
	} else if (sandbox_entries(sb.work, NULL) != 0) {
		fail("a refused package left something behind");
	}
	close(pkgfd);
	if (fs_rm_rf(sb.work, &e) < 0) {
		fprintf(stderr, "fuzz-deploy: cleanup: %s\n", e.msg);
		abort();
	}
	sandbox_check(&sb);
	return 0;
}
