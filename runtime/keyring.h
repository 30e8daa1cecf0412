// SPDX-License-Identifier: Apache-2.0
/* The kernel keyring is not namespaced: without a user namespace, a
 * container's root has the host root's user keyring (@u is looked up by
 * uid), and a container inherits the session keyring of whoever started it.
 * keyring.c gives each container process a fresh session keyring of its
 * own (as runc does) and refuses it the keyring system calls (add_key,
 * keyctl, request_key: EPERM, as Docker's default seccomp profile does),
 * so that nothing in a container can find, read, change or link a host
 * key, nor add keys of its own to the host's keyrings. */
#ifndef CELL_KEYRING_H
#define CELL_KEYRING_H

#include "err.h"

/* Join a new anonymous session keyring, then install the seccomp filter
 * (which needs CAP_SYS_ADMIN or no_new_privs: call it before the
 * capabilities are dropped). Both stay across execve. */
int ctr_isolate_keyring(struct cerr *e);

#endif
