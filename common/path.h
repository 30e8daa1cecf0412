/* Paths from outside (tar entries, API parameters, manifests) are resolved
 * beneath a root directory fd and can never reach outside it: an absolute
 * symlink or one that climbs out makes the lookup fail with EXDEV, a ".."
 * component in the input fails with EINVAL. openat2(RESOLVE_BENEATH) does the
 * work when the kernel has it; a component walk with O_NOFOLLOW is the
 * fallback. */
#ifndef CELL_PATH_H
#define CELL_PATH_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "err.h"

#define PATH_MAX_INPUT 4096

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

/* Tests use this to exercise the fallback walker on kernels with openat2. */
void path_force_fallback(bool on);

#endif
