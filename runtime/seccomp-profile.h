// SPDX-License-Identifier: Apache-2.0
/* Seccomp profiles in the OCI/containers JSON format (the format of
 * containers/common's seccomp.json, which Debian ships at
 * /usr/share/containers/seccomp.json), turned into a classic BPF program.
 *
 * Three steps, in three places:
 *
 *   sc_profile_parse  pure: JSON text in, a typed profile out (fuzzed);
 *                     run by the agent at start (a bad profile is refused
 *                     there, with its line) and for Localhost profiles
 *   sc_compile        libseccomp: a profile and a unit's capability set in,
 *                     the BPF program out; the agent builds it once per
 *                     (profile, capability set) and writes it into the
 *                     unit's run.json ("seccomp", base64)
 *   sc_install        one seccomp(2) call, no library: cell-monitor's
 *                     container init and exec children, right before the
 *                     execve (after no_new_privs)
 *
 * So cell-monitor never links libseccomp and never parses a profile. */
#ifndef CELL_SECCOMP_H
#define CELL_SECCOMP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

#define SC_PROFILE_MAX (4u << 20) /* a profile file */
#define SC_MAX_RULES 4096
#define SC_MAX_NAMES 4096     /* per rule */
#define SC_MAX_ARGS 6	      /* a syscall has six arguments */
#define SC_BPF_MAX_INSNS 4096 /* BPF_MAXINSNS: the kernel's limit */
#define SC_INSN_SIZE 8	      /* sizeof(struct sock_filter) */

/* An action as libseccomp spells it: SCMP_ACT_* (with the errno folded in
 * for SCMP_ACT_ERRNO and SCMP_ACT_TRACE). */
typedef uint32_t sc_action;

struct sc_arg {
	unsigned index; /* 0..5 */
	uint64_t value, value_two;
	int op; /* enum scmp_compare */
};

/* includes/excludes of a rule: every cap in includes must be in the
 * unit's set; any cap in excludes drops the rule (containers/common's
 * rules). arches are Go's names ("amd64", "arm64", "x86", "x32"). */
struct sc_filter {
	char **caps, **arches; /* NULL-terminated, or NULL */
	int min_kernel[2];     /* includes only: major, minor; 0 0 none */
};

struct sc_rule {
	char **names; /* NULL-terminated */
	sc_action action;
	struct sc_arg args[SC_MAX_ARGS];
	size_t n_args;
	struct sc_filter includes, excludes;
};

struct sc_profile {
	sc_action default_action;
	/* libseccomp arch names ("x86_64", "x86", "x32"): "architectures",
	 * or archMap's entry for the native arch with its subarchitectures */
	char **arches;
	struct sc_rule *rules;
	size_t n_rules;
};

/* Parse a profile. A syntax error says its line and column; a bad value
 * says where it is (`syscalls[3].action`) and the line of its text. */
int sc_profile_parse(const char *buf, size_t len, struct sc_profile *out,
		     struct cerr *e);
void sc_profile_free(struct sc_profile *p);

/* The profile Debian's golang-github-containers-common ships, read into
 * the binary at build time (runtime/seccomp-default.S). */
extern const char sc_default_profile[];
extern const uint64_t sc_default_profile_size;

/* The BPF program for p and a unit whose bounding capabilities are caps
 * ("CAP_SYS_ADMIN" or "SYS_ADMIN", any case). *bpf (caller frees) holds
 * *len bytes, a multiple of SC_INSN_SIZE. */
int sc_compile(const struct sc_profile *p, char *const *caps, void **bpf,
	       size_t *len, struct cerr *e);

/* True when rule r applies to a unit with caps on this kernel and arch:
 * containers/common's includes/excludes rules. */
bool sc_rule_applies(const struct sc_rule *r, char *const *caps,
		     const char *go_arch, const int kernel[2]);

/* Install the program (seccomp(SECCOMP_SET_MODE_FILTER)). Needs
 * no_new_privs or CAP_SYS_ADMIN. */
int sc_install(const void *bpf, size_t len, struct cerr *e);

#endif
