// SPDX-License-Identifier: Apache-2.0
/* Run inside a container by test_agent_boundary.py (built static, put into
 * the image): what an attacker in a default root container tries.
 *
 *   keys DESC SERIAL   find, read and change host root's key, add our own
 *   cgroup BYTES       unshare user+mount+cgroup namespaces, mount every
 *                      v1 hierarchy and raise memory.limit_in_bytes and
 *                      pids.max of the root it sees (its own cgroup), and
 *                      memory.max where cgroup2 mounts
 *   alloc MIB          touch that much memory, then print "survived"
 *
 * Each attempt prints one line: "<what> ok" or "<what> <errno name>". */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/keyctl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

static void say(const char *what, long r)
{
	if (r < 0)
		printf("%s %s\n", what, strerrorname_np(errno));
	else
		printf("%s ok %ld\n", what, r);
	fflush(stdout);
}

static int put(const char *path, const char *v)
{
	int fd = open(path, O_WRONLY);
	int r;

	if (fd < 0)
		return -1;
	r = write(fd, v, strlen(v)) == (ssize_t)strlen(v) ? 0 : -1;
	close(fd);
	return r;
}

static int keys(const char *desc, long serial)
{
	char buf[256];

	say("get-user-keyring", syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID,
					KEY_SPEC_USER_KEYRING, 0));
	say("search", syscall(SYS_keyctl, KEYCTL_SEARCH, KEY_SPEC_USER_KEYRING,
			      "user", desc, 0));
	say("read", syscall(SYS_keyctl, KEYCTL_READ, serial, buf, sizeof(buf)));
	say("describe",
	    syscall(SYS_keyctl, KEYCTL_DESCRIBE, serial, buf, sizeof(buf)));
	say("update", syscall(SYS_keyctl, KEYCTL_UPDATE, serial, "owned", 5));
	say("link",
	    syscall(SYS_keyctl, KEYCTL_LINK, serial, KEY_SPEC_SESSION_KEYRING));
	say("add-session", syscall(SYS_add_key, "user", "ctr-key-session", "x",
				   1, KEY_SPEC_SESSION_KEYRING));
	say("add-user", syscall(SYS_add_key, "user", "ctr-key-user", "x", 1,
				KEY_SPEC_USER_KEYRING));
	return 0;
}

/* Mount fstype (with opts) at a fresh directory; NULL when refused. */
static const char *mount_at(const char *name, const char *fstype,
			    const char *opts)
{
	static char dir[128];
	char what[160];
	int r;

	snprintf(dir, sizeof(dir), "/tmp/cg-%s", name);
	mkdir(dir, 0755);
	r = mount("none", dir, fstype, 0, opts);
	snprintf(what, sizeof(what), "mount-%s", name);
	say(what, r);
	return r < 0 ? NULL : dir;
}

static void raise_file(const char *dir, const char *file, const char *v,
		       const char *what)
{
	char path[256];

	if (!dir)
		return;
	snprintf(path, sizeof(path), "%s/%s", dir, file);
	say(what, put(path, v));
}

static int cgroup(const char *bytes)
{
	const char *d;

	say("unshare", unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWCGROUP));
	put("/proc/self/setgroups", "deny");
	say("uid_map", put("/proc/self/uid_map", "0 0 1"));
	say("gid_map", put("/proc/self/gid_map", "0 0 1"));
	mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL);
	d = mount_at("memory", "cgroup", "memory");
	/* memsw first: it must stay >= the memory limit. */
	if (d) {
		char p[256];
		snprintf(p, sizeof(p), "%s/memory.memsw.limit_in_bytes", d);
		put(p, bytes);
	}
	raise_file(d, "memory.limit_in_bytes", bytes, "raise-memory");
	d = mount_at("pids", "cgroup", "pids");
	raise_file(d, "pids.max", "max", "raise-pids");
	d = mount_at("v2", "cgroup2", NULL);
	raise_file(d, "memory.max", bytes, "raise-memory-v2");
	raise_file(d, "pids.max", "max", "raise-pids-v2");
	return 0;
}

static int alloc(long mib)
{
	size_t n = (size_t)mib << 20;
	char *p = mmap(NULL, n, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return 1;
	for (size_t i = 0; i < n; i += 4096)
		p[i] = 1;
	printf("survived\n");
	fflush(stdout);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 4 && !strcmp(argv[1], "keys"))
		return keys(argv[2], strtol(argv[3], NULL, 10));
	if (argc == 3 && !strcmp(argv[1], "cgroup"))
		return cgroup(argv[2]);
	if (argc == 3 && !strcmp(argv[1], "alloc"))
		return alloc(strtol(argv[2], NULL, 10));
	fprintf(stderr, "usage: see the comment\n");
	return 2;
}
