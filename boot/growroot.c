// SPDX-License-Identifier: Apache-2.0
/* cell-boot --grow-root: the root partition and its ext4 grown to the
 * whole disk, once at boot, before user data and the agent use the disk
 * (a cell's volume is often larger than its image's 1 GiB root). The
 * lean image's rc.boot runs it, systemd and OpenRC before cell-cloudinit.
 * One try, no waiting: the kernel knows the disk's size at boot (the
 * retries are resizevolume's, for a volume the cloud grows later). It
 * never fails the boot: a failure is a warning. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "boot-internal.h"
#include "cleanup.h"
#include "log.h"
#include "rootgrow.h"
#include "util.h"

bool boot_grow_root_off(const char *env, const char *cmdline)
{
	const char *p = cmdline;
	bool off = false;

	if (env && (!strcmp(env, "0") || !strcmp(env, "off")))
		return true;
	/* The last cell.growroot= word wins, as with the kernel's own. */
	while (p && (p = strstr(p, "cell.growroot=")) != NULL) {
		bool word = p == cmdline || p[-1] == ' ' || p[-1] == '\t';
		const char *v = p + strlen("cell.growroot=");
		size_t n = strcspn(v, " \t\n");

		if (word)
			off = (n == 1 && v[0] == '0') ||
			      (n == 3 && !strncmp(v, "off", 3));
		p = v;
	}
	return off;
}

static char *read_cmdline(void)
{
	cleanup_fclose FILE *f = fopen("/proc/cmdline", "re");
	char *s = xmalloc(4096);

	if (!f || !fgets(s, 4096, f))
		s[0] = '\0';
	return s;
}

static const char *env(const char *name)
{
	const char *v = getenv(name);

	return v && *v ? v : NULL;
}

int boot_grow_root(void)
{
	cleanup_free char *cmdline = read_cmdline();
	struct rootgrow_opts o = {
	    .root_device = env("CELL_AGENT_ROOT_DEVICE"),
	    .root_mount = env("CELL_AGENT_ROOT_MOUNT"),
	    .tool = env("CELL_AGENT_PARTITION_TOOL"),
	    .part_tries = 1,
	    .fs_tries = 1,
	};
	struct rootgrow_result res;
	struct cerr e = {0};
	struct buf log;
	uint64_t t0 = now_ns();

	if (boot_grow_root_off(getenv("CELL_BOOT_GROW_ROOT"), cmdline)) {
		log_info("root grow: off");
		return BOOT_EXIT_OK;
	}
	buf_init(&log, 64 * 1024);
	if (rootgrow(&o, &res, &log, &e) < 0)
		log_warn("root not grown (the boot goes on): %s", e.msg);
	else if (res.fs_grown)
		log_info("root grown from %llu to %llu MiB (%s, %llu ms)",
			 (unsigned long long)(res.fs_before >> 20),
			 (unsigned long long)(res.fs_after >> 20), res.part,
			 (unsigned long long)((now_ns() - t0) / 1000000));
	else
		log_info("root: nothing to grow (%llu MiB on %s)",
			 (unsigned long long)(res.fs_after >> 20), res.part);
	if (log.len)
		log_debug("%.*s", (int)log.len, log.data);
	buf_free(&log);
	return BOOT_EXIT_OK;
}
