"""The background task that runs the store's watchdog (`sweep_stale_attempts`) periodically."""

from __future__ import annotations

import asyncio
import logging

import sqlalchemy.exc

from lightningstore.store import LightningStore

log = logging.getLogger("lightningstore.server")


async def run_watchdog(store: LightningStore, interval: float) -> None:
    """Sweep every `interval` seconds until cancelled; a failed sweep is logged and retried next time."""
    while True:
        await asyncio.sleep(interval)
        try:
            changed = await store.sweep_stale_attempts()
        except asyncio.CancelledError:
            raise
        except sqlalchemy.exc.OperationalError as exc:  # database restarting or unreachable: no traceback
            log.warning("watchdog sweep failed, retried in %.0fs: %s", interval, exc.orig)
            continue
        except Exception:
            log.exception("watchdog sweep failed")
            continue
        if changed:
            log.info("watchdog moved %d stale attempt(s)", len(changed))
