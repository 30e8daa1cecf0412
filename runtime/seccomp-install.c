// SPDX-License-Identifier: Apache-2.0
/* Installing a BPF program that the agent built (seccomp.c): one system
 * call, no library, so cell-monitor's container init and exec children can
 * do it right before execve. */
#include "seccomp-profile.h"

#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/syscall.h>
#include <unistd.h>

int sc_install(const void *bpf, size_t len, struct cerr *e)
{
	struct sock_fprog prog = {
	    .len = (unsigned short)(len / SC_INSN_SIZE),
	    .filter = (struct sock_filter *)bpf,
	};

	if (!len || len % SC_INSN_SIZE || len > SC_BPF_MAX_INSNS * SC_INSN_SIZE)
		return cerr_set(e, EINVAL, "seccomp: program of %zu bytes",
				len);
	if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0)
		return cerr_sys(e, "install the seccomp filter");
	return 0;
}
