// SPDX-License-Identifier: Apache-2.0
#include "abspath.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

/* The copies, reachable to the end (no leak report at exit). */
static char **kept;
static size_t n_kept;
static pthread_mutex_t kept_mu = PTHREAD_MUTEX_INITIALIZER;

const char *abs_path(const char *path, struct cerr *e)
{
	char *cwd, *p;

	if (!path || !*path || path[0] == '/')
		return path;
	cwd = getcwd(NULL, 0);
	if (!cwd) {
		cerr_sys(e, "the current directory");
		return NULL;
	}
	if (!strcmp(path, "."))
		p = xstrdup(cwd);
	else
		p = xasprintf("%s%s%s", cwd, strcmp(cwd, "/") ? "/" : "",
			      path[0] == '.' && path[1] == '/' ? path + 2
							       : path);
	free(cwd);
	pthread_mutex_lock(&kept_mu);
	kept = xrealloc(kept, (n_kept + 1) * sizeof(*kept));
	kept[n_kept++] = p;
	pthread_mutex_unlock(&kept_mu);
	return p;
}

int abs_prog_flag(const char *prog, const char *name, const char **path)
{
	const char *const names[] = {name};
	const char **const paths[] = {path};

	if (!*path || !strchr(*path, '/'))
		return 0;
	return abs_path_flags(prog, names, paths, 1);
}

int abs_path_flags(const char *prog, const char *const names[],
		   const char **const paths[], int n)
{
	for (int i = 0; i < n; i++) {
		struct cerr e = {0};
		const char *a = abs_path(*paths[i], &e);

		if (!a && *paths[i]) {
			fprintf(stderr, "%s: --%s %s: %s\n", prog, names[i],
				*paths[i], e.msg);
			return -1;
		}
		*paths[i] = a;
	}
	return 0;
}
