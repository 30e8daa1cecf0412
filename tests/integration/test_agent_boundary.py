# SPDX-License-Identifier: Apache-2.0
"""The container boundary against hostile images and pods (issue 18): an
image's /etc/passwd that is a FIFO or a device node, the kernel keyring,
a container raising its own cgroup limits, and the kubelet's rules for
groups, image VOLUMEs, StopSignal and hostPath types."""
from __future__ import annotations

import pytest

from images import CharDev, Fifo, File, Image, busybox_layer, push, Layer
from wire import pod_params
from test_agent_pod import cell, image, sh, state_of, wait_state  # noqa: F401

GROUP = "root:x:0:\napp:x:1000:\n"
PASSWD = "root:x:0:0:root:/root:/bin/sh\napp:x:1000:1000::/:/bin/sh\n"


def etc_image(registry, tag: str, passwd, group) -> str:
    push(registry, "t/etc", tag,
         Image([busybox_layer(), Layer([passwd, group])], config={"Cmd": ["/bin/sh"]}))
    return registry.ref("t/etc", tag)


@pytest.mark.parametrize("bad", ["passwd", "group"])
@pytest.mark.parametrize("kind", ["fifo", "chardev"])
def test_etc_file_that_is_not_regular(cell, registry, image, bad, kind):
    """A FIFO or a device node as the image's /etc/passwd or /etc/group: the
    unit fails with a reason that names the file, and the agent stays
    responsive (the next spec is applied, SIGTERM ends it)."""
    node = (Fifo(f"etc/{bad}") if kind == "fifo"
            else CharDev(f"etc/{bad}", 1, 5))  # /dev/zero: endless if read
    files = {"passwd": File("etc/passwd", PASSWD), "group": File("etc/group", GROUP)}
    files[bad] = node
    img = etc_image(registry, f"{bad}-{kind}", files["passwd"], files["group"])
    a, c = cell()
    c.update_pod(pod_params("ns_pod", units=[sh(img, "x", "exec sleep 1000")]))
    st = c.wait_status(lambda s: state_of(s, "x").get("waiting", {}).get("startFailure"),
                       timeout=30)
    reason = state_of(st, "x")["waiting"]["reason"]
    assert f"/etc/{bad}" in reason and "not a regular file" in reason, reason
    # Still responsive: a new spec is applied.
    c.update_pod(pod_params("ns_pod", units=[sh(image, "y", "exec sleep 1000")],
                            terminationGracePeriodSeconds=0))
    wait_state(c, "y", "running")
