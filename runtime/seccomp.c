// SPDX-License-Identifier: Apache-2.0
/* A parsed profile into a BPF program with libseccomp, for one capability
 * set on this kernel and architecture. The agent runs it once per
 * (profile, capability set); cell-monitor only installs the result
 * (seccomp-install.c), so it never links libseccomp. */
#include "seccomp-profile.h"

#include <errno.h>
#include <seccomp.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "cleanup.h"
#include "util.h"

/* Go's name of this machine, as containers/common's includes/excludes
 * "arches" use it. */
#if defined(__x86_64__)
#define GO_ARCH "amd64"
#elif defined(__aarch64__)
#define GO_ARCH "arm64"
#elif defined(__i386__)
#define GO_ARCH "x86"
#else
#define GO_ARCH "unknown"
#endif

static void kernel_version(int v[2])
{
	struct utsname u;

	v[0] = v[1] = 0;
	if (uname(&u) == 0 && sscanf(u.release, "%d.%d", &v[0], &v[1]) != 2)
		v[0] = v[1] = 0;
}

static int add_arches(scmp_filter_ctx ctx, char *const *arches, struct cerr *e)
{
	uint32_t native = seccomp_arch_native();

	for (size_t i = 0; arches && arches[i]; i++) {
		uint32_t a = seccomp_arch_resolve_name(arches[i]);
		int rc;

		if (!a)
			return cerr_set(
			    e, EINVAL, "architecture %s: unknown to libseccomp",
			    arches[i]);
		if (a == native)
			continue;
		rc = seccomp_arch_add(ctx, a);
		if (rc < 0 && rc != -EEXIST)
			return cerr_set(e, -rc, "add architecture %s: %s",
					arches[i], strerror(-rc));
	}
	return 0;
}

static int add_rule(scmp_filter_ctx ctx, const struct sc_rule *r,
		    const char *name, struct cerr *e)
{
	struct scmp_arg_cmp cmp[SC_MAX_ARGS];
	int nr = seccomp_syscall_resolve_name(name), rc;

	/* A name this libseccomp does not know (a newer syscall, another
	 * arch's) is skipped, as runc and crun do. */
	if (nr == __NR_SCMP_ERROR)
		return 0;
	for (size_t i = 0; i < r->n_args; i++)
		cmp[i] = (struct scmp_arg_cmp){
		    .arg = r->args[i].index,
		    .op = (enum scmp_compare)r->args[i].op,
		    .datum_a = r->args[i].value,
		    .datum_b = r->args[i].value_two,
		};
	rc = seccomp_rule_add_array(ctx, r->action, nr, (unsigned)r->n_args,
				    cmp);
	if (rc < 0)
		return cerr_set(e, -rc, "syscall %s: %s", name, strerror(-rc));
	return 0;
}

static int export_bpf(scmp_filter_ctx ctx, void **bpf, size_t *len,
		      struct cerr *e)
{
	cleanup_close int fd = memfd_create("seccomp-bpf", MFD_CLOEXEC);
	struct stat st;
	int rc;

	if (fd < 0)
		return cerr_sys(e, "memfd_create");
	rc = seccomp_export_bpf(ctx, fd);
	if (rc < 0)
		return cerr_set(e, -rc, "export: %s", strerror(-rc));
	if (fstat(fd, &st) < 0)
		return cerr_sys(e, "fstat");
	if (st.st_size <= 0 || st.st_size % SC_INSN_SIZE ||
	    st.st_size > SC_BPF_MAX_INSNS * SC_INSN_SIZE)
		return cerr_set(e, E2BIG, "program of %lld bytes",
				(long long)st.st_size);
	*len = (size_t)st.st_size;
	*bpf = xmalloc(*len);
	if (pread(fd, *bpf, *len, 0) != (ssize_t)*len) {
		free(*bpf);
		*bpf = NULL;
		return cerr_sys(e, "read back the program");
	}
	return 0;
}

int sc_compile(const struct sc_profile *p, char *const *caps, void **bpf,
	       size_t *len, struct cerr *e)
{
	scmp_filter_ctx ctx = seccomp_init(p->default_action);
	int kernel[2], rc = -1;

	*bpf = NULL;
	*len = 0;
	if (!ctx)
		return cerr_set(e, EINVAL, "seccomp_init failed");
	kernel_version(kernel);
	/* We set no_new_privs ourselves (or not, as the unit asks). */
	seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0);
	if (add_arches(ctx, p->arches, e) < 0)
		goto out;
	for (size_t i = 0; i < p->n_rules; i++) {
		const struct sc_rule *r = &p->rules[i];

		if (!sc_rule_applies(r, caps, GO_ARCH, kernel))
			continue;
		/* libseccomp refuses a rule that only repeats the default. */
		if (r->action == p->default_action)
			continue;
		for (size_t k = 0; r->names[k]; k++)
			if (add_rule(ctx, r, r->names[k], e) < 0)
				goto out;
	}
	rc = export_bpf(ctx, bpf, len, e);
out:
	seccomp_release(ctx);
	return rc;
}
