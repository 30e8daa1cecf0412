// SPDX-License-Identifier: Apache-2.0
/* Scope-bound cleanup, as crun and systemd do it. Library handles with their
 * own destructors get their helpers next to the wrapper that owns them
 * (jsonutil.h, http.h). */
#ifndef CELL_CLEANUP_H
#define CELL_CLEANUP_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define _cleanup_(f) __attribute__((cleanup(f)))

static inline void freep(void *p)
{
	free(*(void **)p);
}
static inline void closep(int *fd)
{
	if (*fd >= 0)
		close(*fd);
}
static inline void fclosep(FILE **f)
{
	if (*f)
		fclose(*f);
}
static inline void closedirp(DIR **d)
{
	if (*d)
		closedir(*d);
}

#define cleanup_free _cleanup_(freep)
#define cleanup_close _cleanup_(closep)
#define cleanup_fclose _cleanup_(fclosep)
#define cleanup_dir _cleanup_(closedirp)

/* Hand ownership out of a cleanup-scoped variable. */
#define steal_ptr(pp)                                                          \
	({                                                                     \
		__typeof__(*(pp)) _tmp = *(pp);                                \
		*(pp) = NULL;                                                  \
		_tmp;                                                          \
	})
#define steal_fd(fdp)                                                          \
	({                                                                     \
		int _tmp = *(fdp);                                             \
		*(fdp) = -1;                                                   \
		_tmp;                                                          \
	})

#endif
