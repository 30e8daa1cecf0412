// SPDX-License-Identifier: Apache-2.0
/* The SSM payload: a flat YAML map of boot file name → content (Kip's
 * getMarshalledInstanceParameters). Checked whole before a byte is
 * written, then written all-or-nothing into the boot directory. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "boot-internal.h"
#include "cleanup.h"
#include "fsutil.h"
#include "log.h"
#include "util.h"

static const char *const required[] = {"ca.crt", "server.crt", "server.key"};

static bool plain_name(const char *s)
{
	size_t n = strlen(s);

	if (!n || n > 200 || !strcmp(s, ".") || !strcmp(s, "..") || s[0] == '.')
		return false;
	return strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
			 "0123456789._-") == n;
}

int payload_parse(const char *text, size_t len, struct yamlmap *m,
		  struct cerr *e)
{
	if (yamlmap_parse(text, len, m, e) < 0)
		return cerr_prefix(e, "malformed boot payload");
	for (size_t i = 0; i < m->n; i++)
		if (!plain_name(m->v[i].key)) {
			cerr_set(e, EINVAL,
				 "boot payload line %d: \"%.64s\" is not a "
				 "plain file name",
				 m->v[i].line, m->v[i].key);
			yamlmap_free(m);
			return -1;
		}
	for (size_t i = 0; i < ARRAY_SIZE(required); i++)
		if (!yamlmap_get(m, required[i])) {
			cerr_set(e, ENODATA,
				 "boot payload has no %s (incomplete: %zu "
				 "keys)",
				 required[i], m->n);
			yamlmap_free(m);
			return -1;
		}
	return 0;
}

static int write_tmp(int dfd, const char *tmp, const char *data, struct cerr *e)
{
	cleanup_close int fd = -1;

	unlinkat(dfd, tmp, 0); /* a leftover of a crashed run */
	fd = openat(dfd, tmp,
		    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return cerr_sys(e, "create %s", tmp);
	if (fs_write_all(fd, data, strlen(data)) < 0 || fsync(fd) < 0)
		return cerr_sys(e, "write %s", tmp);
	return 0;
}

int payload_write(const struct yamlmap *m, const char *dir, struct cerr *e)
{
	cleanup_close int dfd = -1;
	char tmp[256];
	size_t done = 0;

	if (fs_mkdir_p(dir, 0700, e) < 0)
		return -1;
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return cerr_sys(e, "open %s", dir);
	for (; done < m->n; done++) {
		snprintf(tmp, sizeof(tmp), ".%s.boot-new", m->v[done].key);
		if (write_tmp(dfd, tmp, m->v[done].value, e) < 0)
			break;
	}
	if (done < m->n) {
		for (size_t i = 0; i <= done && i < m->n; i++) {
			snprintf(tmp, sizeof(tmp), ".%s.boot-new", m->v[i].key);
			unlinkat(dfd, tmp, 0);
		}
		return cerr_prefix(e, "boot directory %s", dir);
	}
	for (size_t i = 0; i < m->n; i++) {
		snprintf(tmp, sizeof(tmp), ".%s.boot-new", m->v[i].key);
		if (renameat(dfd, tmp, dfd, m->v[i].key) < 0)
			return cerr_sys(e, "rename %s/%s", dir, m->v[i].key);
	}
	fsync(dfd);
	return 0;
}

bool payload_complete(const char *dir)
{
	for (size_t i = 0; i < ARRAY_SIZE(required); i++) {
		cleanup_free char *p = xasprintf("%s/%s", dir, required[i]);
		if (!fs_exists(p))
			return false;
	}
	return true;
}
