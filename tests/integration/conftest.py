# SPDX-License-Identifier: Apache-2.0
"""pytest fixtures for the integration tests (run as root, loopback only).

Puts tests/pylib on sys.path and provides:

* ``registry``: a fresh docker-registry per test (starts in ~0.1 s);
  ``make_registry(**kw)`` for one with htpasswd/token auth or TLS.
* ``token_server``, ``make_proxy(registry)``, ``pki_dir``.
* ``cell_pull``: the binary, $CELL_BUILD/bin/cell-pull (CELL_BUILD defaults
  to <repo>/build). A missing binary FAILS the test; it never skips.
* ``agent``/``client``: a module's cell-agent and a client of it;
  ``module_registry``: a registry that lives as long as the module.
* ``workdir``: an empty cache dir; ``tmp_path`` for everything else.
* ``run_pull(*args, env=…, timeout=…)`` → (rc, stdout, stderr);
  ``start_pull(*args, …)`` → a background Popen (own process group) that is
  killed at teardown; ``pull(registry, ref, dest, workdir, *extra)`` wraps
  run_pull with ``--insecure-registry`` and ``--extract-to``.
* ``mounts``: a list to append mount points to; anything still mounted at
  teardown is unmounted (lazily) so one failing test cannot leak mounts.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from typing import List, Optional, Sequence, Tuple

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PYLIB = os.path.join(ROOT, "tests", "pylib")
if PYLIB not in sys.path:
    sys.path.insert(0, PYLIB)

import leakcheck  # noqa: E402
from registry import Registry  # noqa: E402
from tokenserver import TokenServer  # noqa: E402
from proxy import Proxy  # noqa: E402

CELL_BUILD = os.environ.get("CELL_BUILD") or os.path.join(ROOT, "build")
CELL_PULL = os.path.join(CELL_BUILD, "bin", "cell-pull")
DEFAULT_TIMEOUT = 120


def _clean_env(extra: Optional[dict] = None) -> dict:
    env = {k: v for k, v in os.environ.items()
           if not k.lower().endswith("_proxy") and not k.startswith("CELL_PULL_")}
    env.setdefault("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
    env["HOME"] = env.get("HOME", "/root")
    if extra:
        env.update({k: str(v) for k, v in extra.items()})
    return env


def _killpg(p: subprocess.Popen) -> None:
    if p.poll() is None:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    try:
        p.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


def is_mountpoint(path: str) -> bool:
    path = os.path.realpath(path)
    with open("/proc/self/mountinfo") as f:
        for line in f:
            mp = line.split()[4].replace("\\040", " ")
            if mp == path:
                return True
    return False


@pytest.fixture(scope="session", autouse=True)
def nothing_left_behind(tmp_path_factory):
    """At the end of the session: no process, mount, cgroup or network
    namespace of this run is left (tests/pylib/leakcheck.py says which
    are its own). Anything left fails the session's last test, listed."""
    base = leakcheck.snapshot()
    yield
    roots = [str(tmp_path_factory.getbasetemp()), *sorted(leakcheck.ROOTS)]
    left = leakcheck.leftovers(base, CELL_BUILD, roots)
    if left:
        leakcheck.clean(base, CELL_BUILD, roots)
        pytest.fail("the suite left behind:\n  " + "\n  ".join(left), pytrace=False)


@pytest.fixture
def cell_pull() -> str:
    if not (os.path.isfile(CELL_PULL) and os.access(CELL_PULL, os.X_OK)):
        pytest.fail(f"cell-pull binary not found at {CELL_PULL} (build it with make; "
                    "CELL_BUILD selects the build dir)", pytrace=False)
    return CELL_PULL


@pytest.fixture
def registry(tmp_path):
    r = Registry(str(tmp_path / "registry"))
    yield r
    r.close()


@pytest.fixture
def make_registry(tmp_path):
    made: List[Registry] = []

    def make(**kw) -> Registry:
        r = Registry(str(tmp_path / f"registry{len(made)}"), **kw)
        made.append(r)
        return r

    yield make
    for r in made:
        r.close()


@pytest.fixture
def token_server(tmp_path):
    ts = TokenServer(str(tmp_path / "tokens"), {"alice": "wonderland"})
    yield ts
    ts.close()


@pytest.fixture
def make_proxy():
    made: List[Proxy] = []

    def make(registry: Registry) -> Proxy:
        p = Proxy(registry.port)
        made.append(p)
        return p

    yield make
    for p in made:
        p.close()


@pytest.fixture(scope="module")
def module_registry(tmp_path_factory):
    """One registry for a module whose agent lives as long as the module."""
    r = Registry(str(tmp_path_factory.mktemp("modreg")))
    yield r
    r.close()


@pytest.fixture(scope="module")
def agent(tmp_path_factory):
    """A cell-agent for a module's tests (test_agent_api.py's start_agent)."""
    from test_agent_api import start_agent
    a = start_agent(str(tmp_path_factory.mktemp("agent")))
    yield a
    assert a.stop() == 0, a.log()[-3000:]


@pytest.fixture
def client(agent):
    """A mutual-TLS client of the module's agent."""
    c = agent.client()
    yield c
    c.close()


@pytest.fixture
def workdir(tmp_path) -> str:
    d = tmp_path / "work"
    d.mkdir()
    return str(d)


@pytest.fixture
def procs():
    """Background processes to kill (by process group) at teardown."""
    ps: List[subprocess.Popen] = []
    yield ps
    for p in ps:
        _killpg(p)


@pytest.fixture
def run_pull(cell_pull):
    def run(*args: str, env: Optional[dict] = None,
            timeout: float = DEFAULT_TIMEOUT) -> Tuple[int, str, str]:
        p = subprocess.Popen([cell_pull, *map(str, args)], stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env=_clean_env(env), start_new_session=True)
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _killpg(p)
            out, err = p.communicate()
            pytest.fail(f"cell-pull {' '.join(map(str, args))} did not finish in {timeout}s;"
                        f" stderr: {err.decode(errors='replace')[-2000:]}")
        return p.returncode, out.decode(errors="replace"), err.decode(errors="replace")
    return run


@pytest.fixture
def start_pull(cell_pull, procs):
    def start(*args: str, env: Optional[dict] = None, stdout=subprocess.PIPE,
              stderr=subprocess.PIPE) -> subprocess.Popen:
        p = subprocess.Popen([cell_pull, *map(str, args)], stdin=subprocess.DEVNULL,
                             stdout=stdout, stderr=stderr, env=_clean_env(env),
                             start_new_session=True)
        procs.append(p)
        return p
    return start


@pytest.fixture
def pull(run_pull):
    """pull(registry_or_host, ref, dest, workdir, *extra, env=, timeout=)."""
    def do(reg, ref: str, dest: str, workdir: str, *extra: str,
           env: Optional[dict] = None, timeout: float = DEFAULT_TIMEOUT,
           mode: str = "--extract-to") -> Tuple[int, str, str]:
        host = reg if isinstance(reg, str) else reg.host
        return run_pull("--image", ref, mode, dest, "--workdir", workdir,
                        "--insecure-registry", host, *extra, env=env, timeout=timeout)
    return do


@pytest.fixture
def mounts():
    mps: List[str] = []
    yield mps
    for mp in reversed(mps):
        for _ in range(8):
            if not is_mountpoint(mp):
                break
            subprocess.run(["umount", "-l", mp], capture_output=True, timeout=30)


def pytest_report_header(config) -> Sequence[str]:
    return [f"cell-pull: {CELL_PULL} ({'present' if os.path.exists(CELL_PULL) else 'MISSING'})"]
