"""Supervisor: log tails in errors, SIGKILL after the grace, and children that die with their parent."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from proc_state import alive as _alive

from lightningrl.processes.supervisor import Supervisor
from lightningstore.server.run import free_port


def _wait_for(condition, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_a_child_that_dies_before_ready_is_reported_with_its_log(tmp_path: Path) -> None:
    with Supervisor(tmp_path / "logs") as supervisor:
        child = supervisor.start("broken", [sys.executable, "-c", "print('boom: no database'); exit(3)"])
        with pytest.raises(RuntimeError, match=r"(?s)broken exited with code 3 .*boom: no database"):
            asyncio.run(supervisor.wait_http(child, f"http://127.0.0.1:{free_port()}/healthz", timeout=60))
    assert (tmp_path / "logs" / "broken.log").read_text().startswith("boom")


def test_stop_kills_a_child_that_ignores_sigterm(tmp_path: Path) -> None:
    code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('up', flush=True); time.sleep(120)"
    supervisor = Supervisor(tmp_path / "logs", grace=0.5)
    child = supervisor.start("stubborn", [sys.executable, "-c", code])
    assert _wait_for(lambda: "up" in child.log_tail())
    supervisor.stop()
    assert child.process.returncode == -signal.SIGKILL and not supervisor.children


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_children_die_when_the_parent_is_sigkilled(tmp_path: Path) -> None:
    parent_code = textwrap.dedent(
        f"""
        import sys, time
        from lightningrl.processes.supervisor import Supervisor
        child = Supervisor({str(tmp_path / "logs")!r}).start("sleeper", [sys.executable, "-c", "import time; time.sleep(120)"])
        print(child.pid, flush=True)
        time.sleep(120)
        """
    )
    parent = subprocess.Popen([sys.executable, "-c", parent_code], stdout=subprocess.PIPE, text=True)
    try:
        child_pid = int(parent.stdout.readline())
        assert _alive(child_pid)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(timeout=30)
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
    assert _wait_for(lambda: not _alive(child_pid)), "the child outlived its SIGKILLed parent"
