# SPDX-License-Identifier: Apache-2.0
"""``"command": []`` and ``"args": []`` mean "use the image's Entrypoint and
Cmd", exactly like null, as Kubernetes treats an empty list (issue 14)."""
from __future__ import annotations

import pytest

from images import Image, busybox_layer, push
from wire import pod_params, unit
from test_agent_pod import cell, image, state_of, wait_state  # noqa: F401 - fixtures
from test_agent_unit_names import wait_logs


@pytest.fixture
def entry_image(registry) -> str:
    push(registry, "t/entry", "v1", Image(
        [busybox_layer()],
        config={"Entrypoint": ["/bin/sh", "-c", "echo entry $0 $1; exec sleep 1000"],
                "Cmd": ["cmd0", "cmd1"]}))
    return registry.ref("t/entry", "v1")


@pytest.mark.parametrize("command,args,want", [
    ([], [], b"entry cmd0 cmd1\n"),
    (None, None, b"entry cmd0 cmd1\n"),
    ([], ["x0", "x1"], b"entry x0 x1\n"),
    (["/bin/sh", "-c", "echo own $0; exec sleep 1000", "y0"], [], b"own y0\n"),
])
def test_empty_command_and_args_are_the_images(cell, entry_image, command, args, want):
    a, c = cell()
    u = unit("u", entry_image)
    u["command"], u["args"] = command, args
    c.update_pod(pod_params("ns_pod", units=[u], terminationGracePeriodSeconds=0))
    wait_state(c, "u", "running")
    assert wait_logs(c, "u", want) == want


def test_a_unit_without_stdin_reads_eof(cell, image):
    """Without `stdin: true` a unit's stdin is /dev/null, as under the
    kubelet: busybox's own Cmd (/bin/sh) reads EOF and exits 0 (issue 18).
    With it, a FIFO that an attach writes into: the shell waits."""
    a, c = cell()
    plain = unit("plain", image)
    held = unit("held", image, stdin=True)
    c.update_pod(pod_params("ns_pod", units=[plain, held], restart_policy="Never",
                            terminationGracePeriodSeconds=0))
    st = wait_state(c, "plain", "terminated", timeout=30)
    assert state_of(st, "plain")["terminated"]["exitCode"] == 0, st
    assert "running" in state_of(c.status(), "held"), c.status()
