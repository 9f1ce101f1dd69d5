"""Secrets in a process's environment: which names are the store's credentials, and taking them out.

A process that reads a credential from its environment (a runner its token and the agent secret, a store
server every role's token) removes it once read, so nothing it runs or starts finds it there, and blanks
the copy of its start-up environment that `/proc/PID/environ` shows to other processes of the same user.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterable

from lightningstore.auth.tokens import AGENT_SECRET_ENV, ENV_VARS

log = logging.getLogger("lightningstore.auth.environment_secrets")

CREDENTIAL_VARS: frozenset[str] = frozenset({*ENV_VARS.values(), AGENT_SECRET_ENV})
"""Every role token variable and the agent-key secret."""


def is_credential_var(name: str) -> bool:
    """True for a role token or the agent-key secret (and any LIGHTNINGRL_*_TOKEN / *_SECRET name)."""
    return name in CREDENTIAL_VARS or (
        name.startswith("LIGHTNINGRL_") and name.endswith(("_TOKEN", "_SECRET"))
    )


def remove_credentials(extra: Iterable[str] = ()) -> None:
    """Remove every credential variable (and `extra` names) from this process's environment, and blank
    the start-up copy of it."""
    for name in {name for name in os.environ if is_credential_var(name)} | CREDENTIAL_VARS | set(extra):
        os.environ.pop(name, None)
    _blank_initial_environment()


def _blank_initial_environment() -> None:
    """Zero the block the process's environment was copied into at exec, once libc's list points
    elsewhere.

    Removing a variable unlinks it from libc's list, but its text stays where the kernel put it, and
    `/proc/PID/environ` (readable by a rollout process of the same user) shows that block, credentials
    and all. Every variable still set is set again first (libc copies it to the heap), so this process
    and the programs it starts keep them.
    Written through /proc/self/mem: an address that is not what /proc says fails with OSError, never a crash.
    """
    if not sys.platform.startswith("linux"):
        return
    try:
        with open("/proc/self/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
        start, end = int(fields[47]), int(fields[48])  # env_start, env_end: fields 50 and 51 of stat
        with open("/proc/self/environ", "rb") as environ:
            block = environ.read()
        if start <= 0 or not block or len(block) > end - start:
            return
        for name, value in os.environb.items():
            os.putenv(name, value)
        with open("/proc/self/mem", "r+b", buffering=0) as memory:
            memory.seek(start)
            if memory.read(len(block)) == block:
                memory.seek(start)
                memory.write(b"\0" * len(block))
    except (OSError, ValueError, IndexError) as error:
        log.warning("could not blank the initial environment (/proc/PID/environ): %s", error)
