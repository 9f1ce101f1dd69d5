"""Whether a process is alive, read from /proc (a zombie counts as gone: it has exited, unreaped)."""

from __future__ import annotations

from pathlib import Path


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"
