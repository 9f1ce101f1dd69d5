"""Supervisor: child processes with their own log files, readiness checks, and a guaranteed stop.

Each child gets a log file under `log_dir` (the console stays the parent's), its own session (a
Ctrl-C in the terminal reaches only the parent, which then stops the children in order), and, on
Linux, `PR_SET_PDEATHSIG` so it gets SIGTERM even when the parent is SIGKILLed.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

import httpx

LOG_TAIL_CHARS = 3000
_PR_SET_PDEATHSIG = 1


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on right now (the OS picks it)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    """True when a server could listen on `port` now (with SO_REUSEADDR, as uvicorn binds)."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
        return True


def cli_command(*args: str) -> list[str]:
    """`python -m lightningrl.cli ARGS` with this interpreter."""
    return [sys.executable, "-m", "lightningrl.cli", *args]


def child_env() -> dict[str, str]:
    """The parent's import path first, so children import the modules (and agents) the parent does."""
    paths = [p for p in sys.path if p and Path(p).is_dir()]
    existing = os.environ.get("PYTHONPATH")
    return {"PYTHONPATH": os.pathsep.join(paths + ([existing] if existing else []))}


def _die_with_parent(parent_pid: int) -> Callable[[], None]:
    """A `preexec_fn`: SIGTERM this child when the thread that forked it dies (Linux only)."""
    # Loaded before the fork: dlopen in a forked child of a threaded parent can deadlock.
    prctl = ctypes.CDLL(None, use_errno=True).prctl if sys.platform.startswith("linux") else None

    def preexec() -> None:
        if prctl is not None:
            prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent_pid:  # the parent died before prctl took effect
            os.kill(os.getpid(), signal.SIGTERM)

    return preexec


@dataclass
class Child:
    """One supervised process."""

    name: str
    process: subprocess.Popen[bytes]
    log_path: Path
    command: list[str] = field(default_factory=list)

    @property
    def pid(self) -> int:
        return self.process.pid

    def log_tail(self, chars: int = LOG_TAIL_CHARS) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def failure(self, what: str) -> RuntimeError:
        """An error naming the child, what happened, its log file and the log's tail."""
        return RuntimeError(f"{self.name} {what} (log: {self.log_path}); log tail:\n{self.log_tail()}")


class Supervisor:
    """Starts children and stops them all on `stop()` / leaving the `with` block, in reverse order."""

    def __init__(self, log_dir: str | Path, *, grace: float = 10.0) -> None:
        self.log_dir = Path(log_dir)
        self.grace = grace
        self.children: list[Child] = []

    def __enter__(self) -> Supervisor:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def start(self, name: str, command: Sequence[str], *, env: dict[str, str] | None = None) -> Child:
        """Start `command` with stdout and stderr to `log_dir/<name>.log`. Call from the main thread:
        PDEATHSIG fires when the forking *thread* exits."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log_path = self.log_dir / f"{name}.log"
        with log_path.open("ab") as log:
            process = subprocess.Popen(
                list(command),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
                start_new_session=True,
                preexec_fn=_die_with_parent(os.getpid()),  # noqa: PLW1509 - needed for PDEATHSIG
            )
        child = Child(name, process, log_path, list(command))
        self.children.append(child)
        return child

    def check(self) -> None:
        """Raise naming the first child that has exited (with its log tail)."""
        for child in self.children:
            code = child.process.poll()
            if code is not None:
                raise child.failure(f"exited with code {code}")

    async def wait_http(
        self, child: Child, url: str, *, timeout: float = 180.0, interval: float = 0.1
    ) -> None:
        """Poll GET `url` until it answers 2xx; raise with the log tail if the child dies or time runs out."""
        deadline = time.monotonic() + timeout
        async with httpx.AsyncClient(timeout=5.0) as client:
            while True:
                code = child.process.poll()
                if code is not None:
                    raise child.failure(f"exited with code {code} before {url} answered")
                with contextlib.suppress(httpx.HTTPError):
                    if (await client.get(url)).is_success:
                        return
                if time.monotonic() > deadline:
                    raise child.failure(f"did not answer {url} within {timeout:.0f}s")
                await asyncio.sleep(interval)

    async def watch(self, interval: float = 0.5) -> None:
        """Return never; raise as soon as a child exits (run it beside the work that needs them)."""
        while True:
            self.check()
            await asyncio.sleep(interval)

    def stop(self) -> None:
        """SIGTERM each child (newest first), SIGKILL any still alive after `grace`, and reap all."""
        # A second Ctrl-C must not abandon children half-stopped.
        main = threading.current_thread() is threading.main_thread()
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if main else None
        try:
            for child in reversed(self.children):
                _signal(child, signal.SIGTERM)
                try:
                    child.process.wait(self.grace)
                except subprocess.TimeoutExpired:
                    _signal(child, signal.SIGKILL)
                    child.process.wait()
            self.children.clear()
        finally:
            if main:
                signal.signal(signal.SIGINT, previous)


def _signal(child: Child, sig: signal.Signals) -> None:
    """Signal the child's process group (it leads its own session), so its helpers go too."""
    if child.process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(child.pid, sig)
