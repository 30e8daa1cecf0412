// SPDX-License-Identifier: Apache-2.0
/* The default seccomp profile, read into the binary at build time:
 * SECCOMP_DEFAULT_JSON is Debian's /usr/share/containers/seccomp.json
 * (golang-github-containers-common) unless the Makefile is told
 * otherwise. A cell needs no file at run time. NUL-terminated. */
	.section .rodata
	.global sc_default_profile
	.type sc_default_profile, @object
	.balign 16
sc_default_profile:
	.incbin SECCOMP_DEFAULT_JSON
sc_default_profile_end:
	.byte 0
	.global sc_default_profile_size
	.type sc_default_profile_size, @object
	.balign 8
sc_default_profile_size:
	.quad sc_default_profile_end - sc_default_profile
	.section .note.GNU-stack,"",@progbits
