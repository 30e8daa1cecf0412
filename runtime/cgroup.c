// SPDX-License-Identifier: Apache-2.0
/* One cgroup per unit, on pure v2, pure v1 and hybrid hosts.
 *
 * The layout is found by looking at the directories under the cgroup root
 * (CELL_CGROUP_ROOT, /sys/fs/cgroup by default), which also works for the
 * plain directory tree the unit tests use as a fake root:
 *
 *   v2      root/cgroup.controllers exists: one hierarchy, controllers are
 *           enabled in cgroup.subtree_control on the way down to the unit.
 *   v1      root/<controller>/ for memory, cpu, cpuacct, pids, blkio (the
 *           "cpu,cpuacct" pair is one hierarchy, found once).
 *   hybrid  v1 plus a v2 hierarchy at root/unified (usually without
 *           controllers): the unit joins it too, which gives it
 *           cgroup.kill and a place systemd-style tools look for it.
 *
 * Each limit goes to the hierarchy that holds its controller; a limit with
 * no controller anywhere is an error rather than a silent no-op.
 *
 * Limits are out of the unit's reach: they are set on the unit's cgroup,
 * and its processes live in a child of it, CG_LEAF ("ctr"; an exec gets a
 * sibling, exec-<pid>). A container that unshares a user, mount and cgroup
 * namespace can mount a v1 hierarchy rooted at its own cgroup and write
 * memory.limit_in_bytes, pids.max or cpu.cfs_quota_us there (v1 checks only
 * the file's owner, which is its root); on v2 the same holds without
 * nsdelegate. Rooted at the leaf, it reaches only the leaf's files, and
 * the limits of the unit's cgroup above still hold (all of them are
 * hierarchical).
 *
 * Devices: the default capability set has CAP_MKNOD, so the minimal /dev
 * alone does not keep a unit off the host's disks; Docker's allowlist is
 * enforced with the v1 devices controller and, on v2, a BPF_CGROUP_DEVICE
 * program (both on hybrid hosts). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"
#include "fsutil.h"
#include "runtime.h"
#include "util.h"

#ifndef CGROUP_SUPER_MAGIC
#define CGROUP_SUPER_MAGIC 0x27e0eb
#endif
#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif

#define CPU_PERIOD_US 100000
#define CPU_MIN_QUOTA_US 1000 /* the kernel refuses less */

static const char *const v1_names[] = {"memory", "cpu",	  "cpuacct",
				       "pids",	 "blkio", "devices"};

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* A plain directory standing in for cgroupfs (tests): control files are
 * created on write, and nothing is ever killed. */
static bool is_fake(const char *dir)
{
	struct statfs sf;

	if (statfs(dir, &sf) < 0)
		return true;
	return sf.f_type != CGROUP_SUPER_MAGIC &&
	       sf.f_type != CGROUP2_SUPER_MAGIC;
}

static int cg_write(const char *dir, const char *file, const char *val,
		    struct cerr *e)
{
	cleanup_free char *p = xasprintf("%s/%s", dir, file);
	int flags = O_WRONLY | O_CLOEXEC | O_TRUNC | O_NOFOLLOW;
	cleanup_close int fd = -1;

	/* The kernel's files are there: a stand-in tree is looked at only
	 * when one is missing (a statfs less per write on a start). */
	fd = open(p, flags);
	if (fd < 0 && errno == ENOENT) {
		if (is_fake(dir))
			fd = open(p, flags | O_CREAT, 0644);
		else
			errno = ENOENT;
	}
	if (fd < 0)
		return cerr_sys(e, "open %s", p);
	if (write(fd, val, strlen(val)) < 0)
		return cerr_sys(e, "write '%s' to %s", val, p);
	return 0;
}

/* Like cg_write, but a file the kernel does not have (no swap accounting,
 * an older kernel) is not an error. */
static int cg_write_opt(const char *dir, const char *file, const char *val,
			struct cerr *e)
{
	struct cerr ign;

	if (cg_write(dir, file, val, &ign) < 0 && ign.code != ENOENT) {
		*e = ign;
		return -1;
	}
	return 0;
}

static bool has_file(const char *dir, const char *file)
{
	cleanup_free char *p = xasprintf("%s/%s", dir, file);

	return access(p, F_OK) == 0;
}

static bool word_in(const char *text, const char *word)
{
	size_t n = strlen(word);

	for (const char *p = text; (p = strstr(p, word)); p += n)
		if ((p == text || p[-1] == ' ' || p[-1] == '\n') &&
		    (p[n] == '\0' || p[n] == ' ' || p[n] == '\n'))
			return true;
	return false;
}

static char *read_small(const char *path)
{
	struct buf b;
	struct cerr e;

	buf_init(&b, 1u << 20);
	if (fs_read_file(path, &b, &e) < 0) {
		buf_free(&b);
		return NULL;
	}
	return buf_steal(&b, NULL);
}

/* The caller's own cgroup in the hierarchy with controller ctrl ("" for
 * v2), from the text of /proc/self/cgroup; "" when not found. */
static const char *own_path(const char *self, const char *ctrl, char *out,
			    size_t outsz)
{
	const char *line = self;

	out[0] = '\0';
	while (self && line && *line) {
		const char *c1 = strchr(line, ':'), *c2, *nl;
		c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		nl = strchr(line, '\n');
		if (!c2 || (nl && c2 > nl))
			break;
		size_t end = nl ? (size_t)(nl - c2 - 1) : strlen(c2 + 1);
		cleanup_free char *list =
		    xstrndup(c1 + 1, (size_t)(c2 - c1 - 1));
		/* v2 is the line with no controllers; a v1 list such as
		 * "cpu,cpuacct" is compared element-wise. */
		bool match = !*ctrl && !*list;
		char *save = NULL;
		for (char *t = *ctrl ? strtok_r(list, ",", &save) : NULL; t;
		     t = strtok_r(NULL, ",", &save))
			match = match || !strcmp(t, ctrl);
		if (match && end < outsz) {
			memcpy(out, c2 + 1, end);
			out[end] = '\0';
			/* "/" is the root: nothing to append. */
			if (!strcmp(out, "/"))
				out[0] = '\0';
			break;
		}
		line = nl ? nl + 1 : NULL;
	}
	return out;
}

/* name: the v1 controller directory the hierarchy was found under (its
 * root has no pids.max, so files alone cannot tell), or NULL for v2. */
static void add_hier(struct cg_layout *l, const char *name, const char *mount,
		     const char *own)
{
	bool v2 = !name;
	struct cg_hier *h = &l->h[l->n++];

	h->v2 = v2;
	h->base = xasprintf("%s%s", mount, own);
	if (v2) {
		cleanup_free char *p =
		    xasprintf("%s/cgroup.controllers", h->base);
		cleanup_free char *ctl = read_small(p);
		h->memory = ctl && word_in(ctl, "memory");
		h->cpu = ctl && word_in(ctl, "cpu");
		h->pids = ctl && word_in(ctl, "pids");
		h->io = ctl && word_in(ctl, "io");
	} else {
		h->memory = !strcmp(name, "memory");
		h->cpu = !strcmp(name, "cpu");
		h->pids = !strcmp(name, "pids");
		h->devices = !strcmp(name, "devices");
	}
}

static void detect_v1(const char *root, const char *self, struct cg_layout *l)
{
	struct stat seen[ARRAY_SIZE(v1_names)];
	size_t n_seen = 0;
	char own[4096];

	for (size_t i = 0; i < ARRAY_SIZE(v1_names); i++) {
		cleanup_free char *d = xasprintf("%s/%s", root, v1_names[i]);
		struct stat st;
		bool dup = false;

		if (stat(d, &st) < 0 || !S_ISDIR(st.st_mode) ||
		    !has_file(d, "cgroup.procs"))
			continue;
		for (size_t k = 0; k < n_seen; k++)
			dup = dup || (seen[k].st_dev == st.st_dev &&
				      seen[k].st_ino == st.st_ino);
		if (dup || l->n >= CG_MAX_DIRS - 1)
			continue;
		seen[n_seen++] = st;
		add_hier(l, v1_names[i], d,
			 own_path(self, v1_names[i], own, sizeof(own)));
	}
}

int cg_detect(const char *root, const char *self_cgroup, struct cg_layout *l,
	      struct cerr *e)
{
	cleanup_free char *unified = xasprintf("%s/unified", root);
	char own[4096];

	memset(l, 0, sizeof(*l));
	if (has_file(root, "cgroup.controllers")) {
		l->mode = CG_V2;
		add_hier(l, NULL, root,
			 own_path(self_cgroup, "", own, sizeof(own)));
		return 0;
	}
	detect_v1(root, self_cgroup, l);
	if (l->n == 0)
		return cerr_set(e, ENOENT, "no cgroup hierarchy under %s",
				root);
	l->mode = CG_V1;
	if (has_file(unified, "cgroup.controllers")) {
		l->mode = CG_HYBRID;
		add_hier(l, NULL, unified,
			 own_path(self_cgroup, "", own, sizeof(own)));
		/* A controller lives on one hierarchy; v1 got it first. */
		for (size_t i = 0; i + 1 < l->n; i++) {
			l->h[l->n - 1].memory &= !l->h[i].memory;
			l->h[l->n - 1].cpu &= !l->h[i].cpu;
			l->h[l->n - 1].pids &= !l->h[i].pids;
		}
	}
	return 0;
}

int cg_detect_env(struct cg_layout *l, struct cerr *e)
{
	const char *root = getenv("CELL_CGROUP_ROOT");
	cleanup_free char *self = NULL;

	if (getenv("CELL_CGROUP_NEST")) {
		struct buf b;
		buf_init(&b, 1u << 16);
		if (fs_read_file("/proc/self/cgroup", &b, e) < 0)
			return -1;
		self = buf_steal(&b, NULL);
	}
	return cg_detect(root && *root ? root : "/sys/fs/cgroup", self, l, e);
}

void cg_layout_free(struct cg_layout *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->h[i].base);
	memset(l, 0, sizeof(*l));
}

/* ---- creation ---- */

static int mkdir_one(const char *d, struct cerr *e)
{
	if (mkdir(d, 0755) < 0 && errno != EEXIST)
		return cerr_sys(e, "mkdir %s", d);
	return 0;
}

/* v2: every ancestor of the unit enables the controllers in its
 * cgroup.subtree_control. One the unit needs but cannot get is an error;
 * the others are best effort (cpu cannot be enabled while real-time
 * threads run in non-root cgroups, for one). Only what is not enabled
 * yet is written: each write takes the cgroup mutex and waits for dying
 * cgroups to go (a unit that just stopped), right on a start's path. */
static int v2_enable(const char *dir, const struct cg_hier *h,
		     const struct cg_limits *lim, struct cerr *e)
{
	static const char *const names[] = {"memory", "cpu", "pids", "io"};
	bool avail[] = {h->memory, h->cpu, h->pids, h->io};
	bool need[] = {lim->memory > 0 || lim->parent_memory > 0,
		       lim->cpu_millis > 0, lim->pids > 0, false};
	cleanup_free char *path = xasprintf("%s/cgroup.subtree_control", dir);
	cleanup_free char *on = read_small(path);

	for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
		char val[16];
		struct cerr ign;

		if (!avail[i] || (on && word_in(on, names[i])))
			continue;
		snprintf(val, sizeof(val), "+%s", names[i]);
		if (cg_write(dir, "cgroup.subtree_control", val, &ign) < 0 &&
		    need[i]) {
			*e = ign;
			return cerr_prefix(e, "enable %s controller", names[i]);
		}
	}
	return 0;
}

static int make_dir(const struct cg_hier *h, const char *rel,
		    const struct cg_limits *lim, char **out, struct cerr *e)
{
	cleanup_free char *d = xasprintf("%s/%s", h->base, rel);
	size_t blen = strlen(h->base);

	if (h->v2 && v2_enable(h->base, h, lim, e) < 0)
		return -1;
	for (char *p = d + blen + 1; (p = strchr(p, '/')); p++) {
		*p = '\0';
		int rc = mkdir_one(d, e);
		if (rc == 0 && h->v2)
			rc = v2_enable(d, h, lim, e);
		*p = '/';
		if (rc < 0)
			return -1;
	}
	/* A leftover from a monitor that died is reused only when empty:
	 * rmdir succeeds exactly then (its empty leaf goes first). */
	{
		cleanup_free char *leaf = xasprintf("%s/%s", d, CG_LEAF);
		rmdir(leaf);
	}
	if (rmdir(d) < 0 && errno != ENOENT)
		return cerr_sys(e, "cgroup %s exists and is in use", d);
	if (mkdir(d, 0755) < 0)
		return cerr_sys(e, "mkdir %s", d);
	*out = steal_ptr(&d);
	return 0;
}

/* The pod's cap, on the unit's parent cgroup (cell/<pod tag>) in the
 * memory hierarchy; every unit writes the same value, so the order of
 * their starts does not matter. */
static int apply_parent_memory(const struct cgroup *cg, int64_t bytes,
			       struct cerr *e)
{
	cleanup_free char *parent = xstrdup(cg->dirs[cg->memory]);
	char *slash = strrchr(parent, '/');
	char v[32];

	if (!slash)
		return cerr_set(e, EINVAL, "cgroup %s has no parent", parent);
	*slash = '\0';
	snprintf(v, sizeof(v), "%lld", (long long)bytes);
	if (cg->v2[cg->memory])
		return cg_write(parent, "memory.max", v, e);
	return cg_write(parent, "memory.limit_in_bytes", v, e);
}

static int apply_memory(const struct cgroup *cg, int64_t bytes, struct cerr *e)
{
	const char *d = cg->dirs[cg->memory];
	char v[32];

	snprintf(v, sizeof(v), "%lld", (long long)bytes);
	if (cg->v2[cg->memory]) {
		/* No swap, so the limit is a limit; and an OOM kills the
		 * whole unit, as the kubelet asks on v2. */
		if (cg_write(d, "memory.max", v, e) < 0 ||
		    cg_write_opt(d, "memory.swap.max", "0", e) < 0 ||
		    cg_write_opt(d, "memory.oom.group", "1", e) < 0)
			return -1;
		return 0;
	}
	/* memsw must stay >= the memory limit, so it is written second. */
	if (cg_write(d, "memory.limit_in_bytes", v, e) < 0 ||
	    cg_write_opt(d, "memory.memsw.limit_in_bytes", v, e) < 0)
		return -1;
	return 0;
}

static int apply_cpu(const struct cgroup *cg, int64_t millis, struct cerr *e)
{
	const char *d = cg->dirs[cg->cpu];
	int64_t quota = millis * CPU_PERIOD_US / 1000;
	char v[64];

	if (quota < CPU_MIN_QUOTA_US)
		quota = CPU_MIN_QUOTA_US;
	if (cg->v2[cg->cpu]) {
		snprintf(v, sizeof(v), "%lld %d", (long long)quota,
			 CPU_PERIOD_US);
		return cg_write(d, "cpu.max", v, e);
	}
	snprintf(v, sizeof(v), "%d", CPU_PERIOD_US);
	if (cg_write(d, "cpu.cfs_period_us", v, e) < 0)
		return -1;
	snprintf(v, sizeof(v), "%lld", (long long)quota);
	return cg_write(d, "cpu.cfs_quota_us", v, e);
}

static int apply_limits(const struct cgroup *cg, const struct cg_limits *lim,
			struct cerr *e)
{
	char v[32];

	if ((lim->memory > 0 && cg->memory < 0) ||
	    (lim->cpu_millis > 0 && cg->cpu < 0) ||
	    (lim->pids > 0 && cg->pids < 0))
		return cerr_set(e, ENOTSUP,
				"a %s limit is asked for but no cgroup "
				"hierarchy has that controller",
				lim->memory > 0 && cg->memory < 0    ? "memory"
				: lim->cpu_millis > 0 && cg->cpu < 0 ? "cpu"
								     : "pids");
	if (lim->memory > 0 && apply_memory(cg, lim->memory, e) < 0)
		return -1;
	/* The pod's cap is a safety net, not something a unit asked for:
	 * best effort (no memory controller, a parent we may not write). */
	if (lim->parent_memory > 0 && cg->memory >= 0) {
		struct cerr ign = {0};
		apply_parent_memory(cg, lim->parent_memory, &ign);
	}
	if (lim->cpu_millis > 0 && apply_cpu(cg, lim->cpu_millis, e) < 0)
		return -1;
	snprintf(v, sizeof(v), "%lld", (long long)lim->pids);
	if (lim->pids > 0 && cg_write(cg->dirs[cg->pids], "pids.max", v, e) < 0)
		return -1;
	return 0;
}

/* ---- devices: Docker's default allowlist ---- */

struct dev_rule {
	char type;	  /* 'c' or 'b' */
	int major, minor; /* -1: any */
	const char *access;
};

static const struct dev_rule dev_rules[] = {
    {'c', -1, -1, "m"},	   {'b', -1, -1, "m"}, /* mknod, never use */
    {'c', 1, 3, "rwm"},	   {'c', 1, 5, "rwm"}, /* null, zero */
    {'c', 1, 7, "rwm"},	   {'c', 1, 8, "rwm"}, /* full, random */
    {'c', 1, 9, "rwm"},	   {'c', 5, 0, "rwm"}, /* urandom, tty */
    {'c', 5, 1, "rwm"},	   {'c', 5, 2, "rwm"}, /* console, ptmx */
    {'c', 136, -1, "rwm"},		       /* pts */
};

/* The default rules followed by the unit's own devices (CDI's, each with
 * its access; one with none adds nothing). Caller frees. */
static struct dev_rule *all_rules(const struct cg_limits *lim, size_t *n)
{
	struct dev_rule *r =
	    xcalloc(ARRAY_SIZE(dev_rules) + lim->n_devices, sizeof(*r));
	size_t k = 0;

	for (size_t i = 0; i < ARRAY_SIZE(dev_rules); i++)
		r[k++] = dev_rules[i];
	for (size_t i = 0; i < lim->n_devices; i++) {
		const struct run_device *d = &lim->devices[i];

		if (!d->access[0])
			continue;
		r[k++] = (struct dev_rule){d->type, (int)d->major,
					   (int)d->minor, d->access};
	}
	*n = k;
	return r;
}

static int v1_devices(const char *dir, const struct dev_rule *rules,
		      size_t n_rules, struct cerr *e)
{
	if (cg_write(dir, "devices.deny", "a", e) < 0)
		return -1;
	for (size_t i = 0; i < n_rules; i++) {
		const struct dev_rule *r = &rules[i];
		char v[64], maj[16] = "*", min[16] = "*";

		if (r->major >= 0)
			snprintf(maj, sizeof(maj), "%d", r->major);
		if (r->minor >= 0)
			snprintf(min, sizeof(min), "%d", r->minor);
		snprintf(v, sizeof(v), "%c %s:%s %s", r->type, maj, min,
			 r->access);
		if (cg_write(dir, "devices.allow", v, e) < 0)
			return -1;
	}
	return 0;
}

#define INSN(c, d, s, o, i)                                                    \
	((struct bpf_insn){.code = (c),                                        \
			   .dst_reg = (d),                                     \
			   .src_reg = (s),                                     \
			   .off = (o),                                         \
			   .imm = (i)})
#define LDX_W(d, s, o) INSN(BPF_LDX | BPF_MEM | BPF_W, d, s, o, 0)
#define ALU_K(op, d, i) INSN(BPF_ALU64 | (op) | BPF_K, d, 0, 0, i)
#define MOV_X(d, s) INSN(BPF_ALU64 | BPF_MOV | BPF_X, d, s, 0, 0)
#define JNE_K(d, i, o) INSN(BPF_JMP | BPF_JNE | BPF_K, d, 0, o, i)
#define EXIT() INSN(BPF_JMP | BPF_EXIT, 0, 0, 0, 0)

static int access_bits(const char *a)
{
	return (strchr(a, 'm') ? BPF_DEVCG_ACC_MKNOD : 0) |
	       (strchr(a, 'r') ? BPF_DEVCG_ACC_READ : 0) |
	       (strchr(a, 'w') ? BPF_DEVCG_ACC_WRITE : 0);
}

/* The allowlist as a cgroup device program, the way runc builds it: r2 =
 * device type, r3 = access, r4 = major, r5 = minor; one block per rule that
 * returns 1 on a match and jumps to the next block otherwise. */
static size_t build_dev_prog(struct bpf_insn *p, const struct dev_rule *rules,
			     size_t n_rules)
{
	size_t n = 0;

	p[n++] = LDX_W(2, 1, 0);
	p[n++] = ALU_K(BPF_AND, 2, 0xffff);
	p[n++] = LDX_W(3, 1, 0);
	p[n++] = ALU_K(BPF_RSH, 3, 16);
	p[n++] = LDX_W(4, 1, 4);
	p[n++] = LDX_W(5, 1, 8);
	for (size_t i = 0; i < n_rules; i++) {
		const struct dev_rule *r = &rules[i];
		size_t start = n,
		       len = 4 + (r->major >= 0) + (r->minor >= 0) + 2;
		/* A jump's offset skips the rest of this block. */
#define NEXT ((short)(start + len - n - 1))
		p[n] = JNE_K(2,
			     r->type == 'c' ? BPF_DEVCG_DEV_CHAR
					    : BPF_DEVCG_DEV_BLOCK,
			     NEXT);
		n++;
		p[n++] = MOV_X(1, 3);
		p[n++] = ALU_K(BPF_AND, 1, ~access_bits(r->access));
		p[n] = JNE_K(1, 0, NEXT);
		n++;
		if (r->major >= 0) {
			p[n] = JNE_K(4, r->major, NEXT);
			n++;
		}
		if (r->minor >= 0) {
			p[n] = JNE_K(5, r->minor, NEXT);
			n++;
		}
#undef NEXT
		p[n++] = ALU_K(BPF_MOV, 0, 1);
		p[n++] = EXIT();
	}
	p[n++] = ALU_K(BPF_MOV, 0, 0);
	p[n++] = EXIT();
	return n;
}

/* The allowlist as a loaded cgroup device program (its fd). Loaded before
 * the unit's cgroups are made: the kernel's verifier and JIT take a good
 * part of a millisecond, and need no cgroup lock. */
static int load_dev_prog(const struct cg_limits *lim, struct cerr *e)
{
	size_t n_rules;
	cleanup_free struct dev_rule *rules = all_rules(lim, &n_rules);
	cleanup_free struct bpf_insn *prog =
	    xcalloc(6 + 8 * n_rules + 2, sizeof(*prog));
	union bpf_attr a;
	int pfd;

	memset(&a, 0, sizeof(a));
	a.prog_type = BPF_PROG_TYPE_CGROUP_DEVICE;
	a.insn_cnt = (__u32)build_dev_prog(prog, rules, n_rules);
	a.insns = (__u64)(uintptr_t)prog;
	a.license = (__u64)(uintptr_t) "Apache";
	pfd = (int)syscall(SYS_bpf, BPF_PROG_LOAD, &a, sizeof(a));
	if (pfd < 0)
		return cerr_sys(e, "load the device filter");
	return pfd;
}

static int v2_devices(const char *dir, int pfd, struct cerr *e)
{
	union bpf_attr a;
	cleanup_close int cg = -1;

	cg = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (cg < 0)
		return cerr_sys(e, "open %s", dir);
	memset(&a, 0, sizeof(a));
	a.target_fd = (__u32)cg;
	a.attach_bpf_fd = (__u32)pfd;
	a.attach_type = BPF_CGROUP_DEVICE;
	/* Attached, the program lives as long as the cgroup. */
	if (syscall(SYS_bpf, BPF_PROG_ATTACH, &a, sizeof(a)) < 0)
		return cerr_sys(e, "attach the device filter to %s", dir);
	return 0;
}

/* pfd: the program for v2 directories (load_dev_prog), -1 when none. */
static int apply_devices(const struct cgroup *cg, const struct cg_limits *lim,
			 int pfd, struct cerr *e)
{
	size_t n_rules;
	cleanup_free struct dev_rule *rules = all_rules(lim, &n_rules);

	for (size_t i = 0; i < cg->n; i++) {
		const char *d = cg->dirs[i];
		int rc = 0;

		if (cg->v2[i] && pfd >= 0)
			rc = v2_devices(d, pfd, e);
		else if ((int)i == cg->devices)
			rc = v1_devices(d, rules, n_rules, e);
		if (rc < 0)
			return cerr_prefix(e, "devices");
	}
	return 0;
}

/* The leaf the unit's processes join, last: a v1 devices cgroup copies
 * its parent's allowlist when it is made. */
static int make_leaves(const struct cgroup *cg, struct cerr *e)
{
	for (size_t i = 0; i < cg->n; i++) {
		cleanup_free char *leaf =
		    xasprintf("%s/%s", cg->dirs[i], CG_LEAF);

		/* Parent limits bind children only with hierarchy on (always
		 * so since Linux 6.1; a no-op or absent file there). */
		if (!cg->v2[i] && (int)i == cg->memory) {
			struct cerr ign = {0};
			cg_write_opt(cg->dirs[i], "memory.use_hierarchy", "1",
				     &ign);
		}
		if (mkdir(leaf, 0755) < 0 && errno != EEXIST)
			return cerr_sys(e, "mkdir %s", leaf);
	}
	return 0;
}

/* A v2 hierarchy that is the kernel's (not a test's plain directory)
 * takes the device program. */
static bool wants_dev_prog(const struct cg_layout *l)
{
	for (size_t i = 0; i < l->n; i++)
		if (l->h[i].v2 && !is_fake(l->h[i].base))
			return true;
	return false;
}

int cg_create(const struct cg_layout *l, const char *rel,
	      const struct cg_limits *lim, struct cgroup *cg, struct cerr *e)
{
	cleanup_close int pfd = -1;

	memset(cg, 0, sizeof(*cg));
	cg->memory = cg->cpu = cg->pids = cg->devices = -1;
	if (!*rel || rel[0] == '/' || strstr(rel, ".."))
		return cerr_set(e, EINVAL, "bad cgroup path '%s'", rel);
	if (wants_dev_prog(l) && (pfd = load_dev_prog(lim, e)) < 0)
		return cerr_prefix(e, "devices");
	for (size_t i = 0; i < l->n; i++) {
		const struct cg_hier *h = &l->h[i];

		if (make_dir(h, rel, lim, &cg->dirs[cg->n], e) < 0)
			goto fail;
		cg->v2[cg->n] = h->v2;
		if (h->memory && cg->memory < 0)
			cg->memory = (int)cg->n;
		if (h->cpu && cg->cpu < 0)
			cg->cpu = (int)cg->n;
		if (h->pids && cg->pids < 0)
			cg->pids = (int)cg->n;
		if (h->devices && cg->devices < 0)
			cg->devices = (int)cg->n;
		cg->n++;
	}
	if (apply_limits(cg, lim, e) < 0 ||
	    apply_devices(cg, lim, pfd, e) < 0 || make_leaves(cg, e) < 0)
		goto fail;
	return 0;
fail:
	cg_destroy(cg, NULL);
	cg_free(cg);
	return -1;
}

void cg_from_dirs(struct cgroup *cg, char *const *dirs)
{
	memset(cg, 0, sizeof(*cg));
	cg->memory = cg->cpu = cg->pids = cg->devices = -1;
	for (size_t i = 0; dirs && dirs[i] && cg->n < CG_MAX_DIRS; i++) {
		const char *d = dirs[i];
		size_t k = cg->n++;

		cg->dirs[k] = xstrdup(d);
		cg->v2[k] = has_file(d, "cgroup.controllers");
		if (cg->memory < 0 && (has_file(d, "memory.max") ||
				       has_file(d, "memory.limit_in_bytes")))
			cg->memory = (int)k;
		if (cg->cpu < 0 &&
		    (has_file(d, "cpu.max") || has_file(d, "cpu.cfs_quota_us")))
			cg->cpu = (int)k;
		if (cg->pids < 0 && has_file(d, "pids.max"))
			cg->pids = (int)k;
		if (cg->devices < 0 && has_file(d, "devices.allow"))
			cg->devices = (int)k;
	}
}

int cg_enter(const struct cgroup *cg, pid_t pid, struct cerr *e)
{
	char v[24];

	snprintf(v, sizeof(v), "%d", (int)pid);
	for (size_t i = 0; i < cg->n; i++) {
		cleanup_free char *leaf =
		    xasprintf("%s/%s", cg->dirs[i], CG_LEAF);
		/* A unit's cgroup has its leaf; an exec's cgroup is one. */
		const char *d = has_file(leaf, ".") ? leaf : cg->dirs[i];

		if (cg_write(d, "cgroup.procs", v, e) < 0)
			return cerr_prefix(e, "join cgroup");
	}
	return 0;
}

/* "key value" lines (memory.events, memory.oom_control). */
static int64_t keyed_value(const char *dir, const char *file, const char *key)
{
	cleanup_free char *p = xasprintf("%s/%s", dir, file);
	cleanup_free char *text = read_small(p);
	size_t n = strlen(key);

	for (const char *l = text; l && *l;) {
		if (!strncmp(l, key, n) && l[n] == ' ')
			return strtoll(l + n + 1, NULL, 10);
		l = strchr(l, '\n');
		l = l ? l + 1 : NULL;
	}
	return -1;
}

/* memory.oom_control's oom_kill of dir and the cgroups below it (v1's
 * counters are not hierarchical); -1 when dir has none. */
static int64_t v1_oom_kills(const char *dir, int depth)
{
	int64_t n = keyed_value(dir, "memory.oom_control", "oom_kill");
	cleanup_dir DIR *d = n >= 0 && depth < 8 ? opendir(dir) : NULL;
	struct dirent *de;

	while (d && (de = readdir(d))) {
		if (de->d_type != DT_DIR || de->d_name[0] == '.')
			continue;
		cleanup_free char *sub = xasprintf("%s/%s", dir, de->d_name);
		int64_t k = v1_oom_kills(sub, depth + 1);
		if (k > 0)
			n += k;
	}
	return n;
}

int64_t cg_oom_kills(const struct cgroup *cg)
{
	if (cg->memory < 0)
		return -1;
	if (cg->v2[cg->memory])
		return keyed_value(cg->dirs[cg->memory], "memory.events",
				   "oom_kill");
	/* v1 has kept this counter since Linux 4.13. It counts where the
	 * killed process was (the leaf), not where the limit was hit. */
	return v1_oom_kills(cg->dirs[cg->memory], 0);
}

static int kill_listed(const char *dir);

/* Calls fn on each child cgroup of dir (an exec's, or one a workload made
 * where it may); depth-first, a few levels deep. Returns fn's sum. */
static int each_child(const char *dir, int depth, int (*fn)(const char *))
{
	cleanup_dir DIR *d = depth < 8 ? opendir(dir) : NULL;
	struct dirent *de;
	int n = 0;

	while (d && (de = readdir(d))) {
		if (de->d_type != DT_DIR || de->d_name[0] == '.')
			continue;
		cleanup_free char *sub = xasprintf("%s/%s", dir, de->d_name);
		n += each_child(sub, depth + 1, fn) + fn(sub);
	}
	return n;
}

static int rmdir_quiet(const char *dir)
{
	return rmdir(dir) < 0 ? 1 : 0;
}

/* Pids in dir/cgroup.procs and its children's; SIGKILL each. Returns how
 * many were seen. */
static int kill_tree(const char *dir)
{
	return kill_listed(dir) + each_child(dir, 0, kill_listed);
}

/* Pids in dir/cgroup.procs; SIGKILL each. Returns how many were seen. */
static int kill_listed(const char *dir)
{
	cleanup_free char *p = xasprintf("%s/cgroup.procs", dir);
	cleanup_free char *text = read_small(p);
	int n = 0;

	for (char *s = text; s && *s;) {
		char *end;
		long pid = strtol(s, &end, 10);
		if (end == s)
			break;
		if (pid > 0) {
			kill((pid_t)pid, SIGKILL);
			n++;
		}
		s = end;
		while (*s == '\n')
			s++;
	}
	return n;
}

int cg_kill_all(const struct cgroup *cg, struct cerr *e)
{
	const char *track = NULL;

	for (size_t i = 0; i < cg->n; i++) {
		if (is_fake(cg->dirs[i]) || !has_file(cg->dirs[i], "."))
			continue;
		if (!track)
			track = cg->dirs[i];
		/* cgroup.kill (5.14+) kills the lot atomically, forks
		 * racing with us included. */
		if (cg->v2[i] && has_file(cg->dirs[i], "cgroup.kill") &&
		    cg_write(cg->dirs[i], "cgroup.kill", "1", NULL) == 0)
			track = cg->dirs[i];
	}
	if (!track)
		return 0;
	/* Without it, pass over the list until nothing is left: a process
	 * that forks between the read and the kill is caught next time. */
	for (int pass = 0; pass < 500; pass++) {
		if (kill_tree(track) == 0)
			return 0;
		sleep_ms(pass < 10 ? 1 : 10);
	}
	return cerr_set(e, EBUSY, "processes left in %s after SIGKILL", track);
}

int cg_destroy(struct cgroup *cg, struct cerr *e)
{
	int rc = 0;

	for (size_t k = cg->n; k-- > 0;) {
		const char *d = cg->dirs[k];
		int tries = 0;

		if (!d)
			continue;
		if (is_fake(d)) {
			/* A fake directory holds the files writes created. */
			struct cerr ign;
			fs_rm_rf(d, &ign);
			continue;
		}
		/* Right after the last process exits the kernel may still
		 * count it for a moment: EBUSY is retried. Children (an
		 * exec's cgroup that outlived its `cell-monitor exec`) go
		 * first. */
		while ((each_child(d, 0, rmdir_quiet), rmdir(d) < 0) &&
		       errno == EBUSY && ++tries < 100)
			sleep_ms(10);
		if (access(d, F_OK) == 0) {
			rc = cerr_sys(e, "rmdir %s", d);
			continue;
		}
	}
	return rc;
}

void cg_free(struct cgroup *cg)
{
	for (size_t i = 0; i < cg->n; i++)
		free(cg->dirs[i]);
	memset(cg, 0, sizeof(*cg));
	cg->memory = cg->cpu = cg->pids = cg->devices = -1;
}
