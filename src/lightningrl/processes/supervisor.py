"""Supervisor: child processes with their own log files, readiness checks, restarts and a guaranteed stop.

Each child gets a log file under `log_dir` (the console stays the parent's), its own session (a
Ctrl-C in the terminal reaches only the parent, which then stops the children in order), and, on
Linux, `PR_SET_PDEATHSIG` so it gets SIGTERM even when the parent is SIGKILLed. `log_dir/pids.json`
names each child's current pid. A child started `restartable` that dies is handed to `watch`'s
`on_exit` (which restarts it with `respawn`) until it has been restarted `max_restarts` times within
`restart_window` seconds; then, as for any other child, its death ends the watch with its log tail.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

import httpx

LOG_TAIL_CHARS = 3000
MAX_RESTARTS = 3
RESTART_WINDOW = 600.0
"""A restartable child is restarted at most MAX_RESTARTS times within RESTART_WINDOW seconds."""
_PR_SET_PDEATHSIG = 1

OnExit = Callable[["Child", int], Awaitable[None]]
"""Called by `watch` with a restartable child that exited and its exit code; it restarts the child."""


def exit_text(code: int) -> str:
    """How a process ended, from its return code: "signal 9" or "code 1"."""
    return f"signal {-code}" if code < 0 else f"code {code}"


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
    env: dict[str, str] | None = None
    restartable: bool = False
    withhold: frozenset[str] = frozenset()
    """Variables of the parent's environment this child never gets (on restarts too)."""
    restarts: list[float] = field(default_factory=list)
    """`time.monotonic()` of each restart."""

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

    def __init__(
        self,
        log_dir: str | Path,
        *,
        grace: float = 10.0,
        max_restarts: int = MAX_RESTARTS,
        restart_window: float = RESTART_WINDOW,
    ) -> None:
        self.log_dir = Path(log_dir)
        self.grace = grace
        self.max_restarts = max_restarts
        self.restart_window = restart_window
        self.children: list[Child] = []

    def __enter__(self) -> Supervisor:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def start(
        self,
        name: str,
        command: Sequence[str],
        *,
        env: dict[str, str] | None = None,
        restartable: bool = False,
        withhold: Collection[str] = (),
    ) -> Child:
        """Start `command` with stdout and stderr to `log_dir/<name>.log`, in the parent's environment less
        `withhold`, plus `env`. Call from the main thread: PDEATHSIG fires when the forking *thread* exits."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log_path = self.log_dir / f"{name}.log"
        hidden = frozenset(withhold)
        process = self._spawn(command, env, log_path, hidden)
        child = Child(name, process, log_path, list(command), env, restartable, withhold=hidden)
        self.children.append(child)
        self._write_pids()
        return child

    def respawn(self, child: Child, command: Sequence[str] | None = None) -> None:
        """Start an exited child again (its command, or `command`), appending to the same log and
        keeping its place in the stop order. Call from the main thread, as `start`."""
        if child.process.poll() is None:
            raise RuntimeError(f"{child.name} (pid {child.pid}) is still running: not respawned")
        if command is not None:
            child.command = list(command)
        with child.log_path.open("ab") as log:
            log.write(f"\n--- restarted by the supervisor (restart {len(child.restarts) + 1}) ---\n".encode())
        child.process = self._spawn(child.command, child.env, child.log_path, child.withhold)
        child.restarts.append(time.monotonic())
        self._write_pids()

    def recent_restarts(self, child: Child) -> int:
        """How many times `child` was restarted within the last `restart_window` seconds."""
        since = time.monotonic() - self.restart_window
        return sum(1 for t in child.restarts if t >= since)

    def _spawn(
        self, command: Sequence[str], env: dict[str, str] | None, log_path: Path, withhold: frozenset[str]
    ) -> subprocess.Popen[bytes]:
        inherited = {name: value for name, value in os.environ.items() if name not in withhold}
        with log_path.open("ab") as log:
            return subprocess.Popen(
                list(command),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**inherited, "PYTHONUNBUFFERED": "1", **(env or {})},
                start_new_session=True,
                preexec_fn=_die_with_parent(os.getpid()),  # noqa: PLW1509 - needed for PDEATHSIG
            )

    def _write_pids(self) -> None:
        """`log_dir/pids.json`: each child's current pid (for operators, and tests that kill one)."""
        pids = {child.name: child.pid for child in self.children}
        temporary = self.log_dir / "pids.json.tmp"
        temporary.write_text(json.dumps(pids, indent=1))
        temporary.replace(self.log_dir / "pids.json")

    def check(self) -> None:
        """Raise naming the first child that has exited (with its log tail)."""
        for child in self.children:
            code = child.process.poll()
            if code is not None:
                raise child.failure(f"exited with {exit_text(code)}")

    async def wait_http(
        self, child: Child, url: str, *, timeout: float = 180.0, interval: float = 0.1
    ) -> None:
        """Poll GET `url` until it answers 2xx; raise with the log tail if the child dies or time runs out."""
        deadline = time.monotonic() + timeout
        async with httpx.AsyncClient(timeout=5.0) as client:
            while True:
                code = child.process.poll()
                if code is not None:
                    raise child.failure(f"exited with {exit_text(code)} before {url} answered")
                with contextlib.suppress(httpx.HTTPError):
                    if (await client.get(url)).is_success:
                        return
                if time.monotonic() > deadline:
                    raise child.failure(f"did not answer {url} within {timeout:.0f}s")
                await asyncio.sleep(interval)

    async def watch(self, on_exit: OnExit | None = None, interval: float = 0.5) -> None:
        """Return never (run it beside the work that needs the children). A restartable child that
        exited goes to `on_exit` while its restarts allow; any other exit raises with the log tail."""
        while True:
            for child in list(self.children):
                code = child.process.poll()
                if code is None:
                    continue
                if on_exit is None or not child.restartable:
                    raise child.failure(f"exited with {exit_text(code)}")
                if self.recent_restarts(child) >= self.max_restarts:
                    raise child.failure(
                        f"exited with {exit_text(code)} after {self.max_restarts} restarts within "
                        f"{self.restart_window:.0f}s; not restarted again"
                    )
                await on_exit(child, code)
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
