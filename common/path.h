// SPDX-License-Identifier: Apache-2.0
/* Paths from outside (tar entries, API parameters, manifests) are resolved
 * beneath a root directory fd and can never reach outside it. Two scopes:
 *
 * PATH_BENEATH: an absolute symlink or one that climbs out makes the lookup
 *   fail with EXDEV (openat2 RESOLVE_BENEATH). For untrusted trees whose
 *   links mean nothing (a tar being unpacked, an API path).
 * PATH_IN_ROOT: as if chroot(root): an absolute symlink and ".." at the top
 *   resolve against the root (openat2 RESOLVE_IN_ROOT). For an image or
 *   system root whose own links must work (Debian's /var/run -> /run,
 *   Ubuntu's /etc/resolv.conf -> ../run/...), still never leaving it.
 *
 * A ".." component in the input fails with EINVAL (path_clean). openat2
 * does the work when the kernel has it; a component walk with the same
 * rules, never following a link without looking at it, is the fallback. */
#ifndef CELL_PATH_H
#define CELL_PATH_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "err.h"

#define PATH_MAX_INPUT 4096

enum path_scope {
	PATH_BENEATH,  /* absolute or escaping links fail (EXDEV) */
	PATH_IN_ROOT,  /* links resolve as under chroot(root) */
	PATH_NO_LINKS, /* beneath, and any symlink on the way fails (ELOOP;
			* the last one too, unless O_PATH|O_NOFOLLOW) */
};

/* Normalise an outside path to a relative one: leading '/' and "./" are
 * dropped, "//" and "/./" collapsed, a trailing '/' removed. A ".."
 * component is refused (EINVAL). The root itself becomes "". */
int path_clean(const char *in, char *out, size_t outsz, struct cerr *e);

/* openat() beneath rootfd. O_NOFOLLOW in flags applies to the last component
 * only; intermediate symlinks are followed while they stay beneath root. */
int path_open_beneath(int rootfd, const char *rel, int flags, mode_t mode,
		      struct cerr *e);

/* Open (O_PATH|O_DIRECTORY) the directory that holds the last component of
 * rel, which must be clean (see path_clean) and not empty. With mkdirs,
 * missing directories are created with mode 0755. *base is set to the last
 * component inside rel. */
int path_open_parent(int rootfd, const char *rel, bool mkdirs,
		     const char **base, struct cerr *e);

/* The same two, in a given scope. */
int path_open_at(int rootfd, const char *rel, int flags, mode_t mode,
		 enum path_scope scope, struct cerr *e);
int path_open_parent_at(int rootfd, const char *rel, bool mkdirs,
			enum path_scope scope, const char **base,
			struct cerr *e);

/* Where rel leads inside the root under PATH_IN_ROOT rules, as a clean
 * relative path into out ("" is the root itself): every symlink on the way
 * is followed, the last one too with follow_last. Components from the first
 * missing one on are kept as written. Writers use it to replace a link's
 * target rather than the link (a rename lands on the name, not the file). */
int path_resolve_in_root(int rootfd, const char *rel, bool follow_last,
			 char *out, size_t outsz, struct cerr *e);

/* Tests use this to exercise the fallback walker on kernels with openat2. */
void path_force_fallback(bool on);

#endif
