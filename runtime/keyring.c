// SPDX-License-Identifier: Apache-2.0
/* See keyring.h. */
#include "keyring.h"

#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/keyctl.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util.h"

#if defined(__x86_64__)
#define NATIVE_ARCH AUDIT_ARCH_X86_64
/* The i386 ABI's numbers, reachable with int 0x80 from a 64-bit process. */
#define COMPAT_ARCH AUDIT_ARCH_I386
#define COMPAT_ADD_KEY 286
#define COMPAT_REQUEST_KEY 287
#define COMPAT_KEYCTL 288
/* x32 calls are the native numbers with this bit set. */
#define X32_BIT 0x40000000u
#elif defined(__aarch64__)
#define NATIVE_ARCH AUDIT_ARCH_AARCH64
#define COMPAT_ARCH AUDIT_ARCH_ARM
#define COMPAT_ADD_KEY 309
#define COMPAT_REQUEST_KEY 310
#define COMPAT_KEYCTL 311
#define X32_BIT 0u
#else
#error "keyring.c: no seccomp numbers for this architecture"
#endif

#define LD_NR                                                                  \
	BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr))
#define DENY_IF(nr, after) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), (after), 0)

static int install_filter(struct cerr *e)
{
	/* Jump offsets count the instructions after the jump: "deny" is 14,
	 * "allow" 13 and 15. */
	struct sock_filter f[] = {
	    /* 0 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
			     offsetof(struct seccomp_data, arch)),
	    /* 1 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, NATIVE_ARCH, 1, 0),
	    /* 2 */ BPF_JUMP(BPF_JMP | BPF_JA, 5, 0, 0), /* to 8 */
	    /* 3 */ LD_NR,
	    /* 4 */ BPF_STMT(BPF_ALU | BPF_AND | BPF_K, ~X32_BIT),
	    /* 5 */ DENY_IF(__NR_add_key, 8),
	    /* 6 */ DENY_IF(__NR_keyctl, 7),
	    /* 7 */
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_request_key, 6, 7),
	    /* 8: another ABI (no other one reaches this kernel's native
	     * numbers): allowed unless it is the compat one */
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, COMPAT_ARCH, 0, 4),
	    /* 9 */ LD_NR,
	    /* 10 */ DENY_IF(COMPAT_ADD_KEY, 3),
	    /* 11 */ DENY_IF(COMPAT_KEYCTL, 2),
	    /* 12 */ DENY_IF(COMPAT_REQUEST_KEY, 1),
	    /* 13 */ BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	    /* 14 */ BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
	    /* 15 */ BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {.len = ARRAY_SIZE(f), .filter = f};

	if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0)
		return cerr_sys(e, "seccomp filter for the keyring calls");
	return 0;
}

int ctr_isolate_keyring(struct cerr *e)
{
	/* NULL: an anonymous keyring, new every time (runc names it after
	 * the container; a name would let two containers share one). A
	 * kernel without keys (ENOSYS) has nothing to share. */
	if (syscall(SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, NULL) < 0 &&
	    errno != ENOSYS)
		return cerr_sys(e, "join a new session keyring");
	return install_filter(e);
}
