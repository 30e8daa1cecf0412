// SPDX-License-Identifier: Apache-2.0
/* A configuration medium (NoCloud's cidata filesystem, Azure's provisioning
 * disc): mounted read-only on a fresh directory, read, unmounted. One place
 * for the mount, so that both datasources mount with the same flags and
 * leave nothing behind. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <unistd.h>

#include "ci-internal.h"
#include "cleanup.h"
#include "log.h"

int ci_with_medium(const char *dev, const char *tag, const char *const *types,
		   int (*fn)(const char *mp, void *arg, struct cerr *e),
		   void *arg, struct cerr *e)
{
	cleanup_free char *dir = xasprintf("/run/cell-%s.XXXXXX", tag);
	cleanup_free char *dir_tmp = xasprintf("/tmp/cell-%s.XXXXXX", tag);
	char *mp = mkdtemp(dir) ? dir : mkdtemp(dir_tmp);
	int r = -1, err;

	if (!mp)
		return cerr_sys(e, "mkdtemp for %s", dev);
	for (size_t i = 0; types[i] && r < 0; i++)
		r = mount(dev, mp, types[i],
			  MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
	if (r < 0) {
		err = errno;
		rmdir(mp);
		errno = err;
		return CI_MEDIUM_NO_MOUNT;
	}
	r = fn(mp, arg, e);
	if (umount2(mp, MNT_DETACH) < 0)
		ci_log(LOG_WARN, "umount %s: %s", mp, strerror(errno));
	rmdir(mp);
	return r;
}
