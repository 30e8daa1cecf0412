# SPDX-License-Identifier: Apache-2.0
"""Figures of a running process from /proc, for the soak and the bench."""


def rss_kib(pid: int) -> int:
    """Resident set size in KiB (VmRSS), 0 when /proc does not say."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0
