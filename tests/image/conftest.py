# SPDX-License-Identifier: Apache-2.0
"""Fixtures for the image tests (`make image-test`, not part of `make check`:
they need `make static` and, for the boot test, a built image).

The integration suite's fixtures (registry, pki…) are loaded from
tests/integration/conftest.py under another module name so that both
directories keep one implementation of each."""
from __future__ import annotations

import importlib.util
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
INTEG = os.path.join(ROOT, "tests", "integration")
for p in (os.path.join(ROOT, "tests", "pylib"), INTEG):
    if p not in sys.path:
        sys.path.insert(0, p)

_spec = importlib.util.spec_from_file_location("integration_conftest",
                                               os.path.join(INTEG, "conftest.py"))
_integ = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_integ)
# What test_agent_api (Agent, make_boot, wait_ping) imports from "conftest".
CELL_BUILD = _integ.CELL_BUILD
STATIC_BUILD = os.environ.get("CELL_STATIC_BUILD") or os.path.join(ROOT, "build-static")

registry = _integ.registry
make_registry = _integ.make_registry
mounts = _integ.mounts
