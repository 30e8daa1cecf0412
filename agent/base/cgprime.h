// SPDX-License-Identifier: Apache-2.0
/* Keeping the cgroup attach lock warm around a unit start (cgprime.c). */
#ifndef CELL_CGPRIME_H
#define CELL_CGPRIME_H

/* A unit start is coming; warm the kernel's cgroup attach
 * lock on a thread of its own so that the monitor's cgroup.procs write
 * does not wait for an RCU grace period. Never blocks. */
void cgprime_kick(void);
/* Its thread and cgroup.procs descriptor, at the agent's start: an agent
 * holds the same descriptors whether it has started a unit yet or not. */
void cgprime_init(void);
/* The start is done (the monitor has its cgroups): stop warming. */
void cgprime_done(void);

#endif
