// SPDX-License-Identifier: Apache-2.0
/* Directory and file flags made absolute once, at start: a relative
 * --state-dir means the directory the user meant only until something
 * changes directory (the puller's overlay mount does, and helpers run with
 * another working directory), so every binary turns its path flags into
 * absolute paths before it uses them. */
#ifndef CELL_ABSPATH_H
#define CELL_ABSPATH_H

#include "err.h"

/* path against the current directory, lexically ("a/../b" stays as it
 * is; nothing needs to exist, no symlink is followed). An absolute path
 * NULL and "" come back as they are; a relative one as a copy the process
 * keeps to its end. NULL with e set when the current directory is
 * unknown (removed, or too long). */
const char *abs_path(const char *path, struct cerr *e);

/* abs_path on each of the n pointers in place, for flag values: on
 * failure writes "<prog>: --<flag> <path>: <why>" to stderr and returns
 * -1. names[i] is the flag's name for paths[i]. */
int abs_path_flags(const char *prog, const char *const names[],
		   const char **const paths[], int n);

/* The same for a program flag: only a path with a '/' in it is made
 * absolute ("cell-pull" alone is looked up in PATH). */
int abs_prog_flag(const char *prog, const char *name, const char **path);

#endif
