"""The token accounting of a stored run, per resource version, read back from any store.

Rollouts are grouped by the version that sampled their calls (the proxy records it on each span);
drift and continuity are counted from their spans again, and the mismatch is the one the update
that trained on them measured (it is in the metrics of the version that update published, whose
parent is the sampling version).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lightningrl.accounting.drift import DriftCounts, retokenization_drift
from lightningrl.credit import assign_credit
from lightningrl.credit.report import CreditReport
from lightningstore import LLM, LightningStore, RolloutStatus, semconv, spans_of_rollouts

MISMATCH_FIELDS = ("mismatch_abs_mean", "mismatch_abs_p99", "mismatch_abs_max", "mismatch_k3_kl")


@dataclass
class VersionTokens:
    """One sampling version's figures."""

    version_id: str
    rollouts: int = 0
    drift: DriftCounts = field(default_factory=DriftCounts)
    credit: CreditReport = field(default_factory=CreditReport)
    mismatch: dict[str, float] = field(default_factory=dict)

    @property
    def continuity(self) -> float | None:
        multi = self.credit.multi_call_rollouts
        return self.credit.multi_call_rollouts_merged / multi if multi else None


async def stored_run_tokens(
    store: LightningStore, resource_name: str, *, limit: int | None = None
) -> list[VersionTokens]:
    """Per sampling version of `resource_name`, in publish order, the token accounting of its rollouts."""
    versions = await store.list_resource_versions(resource_name)
    if not versions:
        raise ValueError(f"the store has no versions of resource {resource_name!r}")
    by_id = {v.version_id: v for v in versions}
    checkpoint = next((v.resource.checkpoint for v in versions if isinstance(v.resource, LLM)), None)
    tokenizer = None
    if checkpoint:
        from lightningrl.accounting import tokenizer_of

        tokenizer = tokenizer_of(str(checkpoint))
    rollouts = await store.query_rollouts(status=[RolloutStatus.SUCCEEDED], limit=limit)
    spans = await spans_of_rollouts(store, [r.rollout_id for r in rollouts], "latest")
    rows: dict[str, VersionTokens] = {}
    for rollout in rollouts:
        own = spans.get(rollout.rollout_id, [])
        sampled = {s.attributes.get(semconv.LLM_RESOURCE_VERSION) for s in own} - {None}
        if len(sampled) != 1 or (version_id := str(next(iter(sampled)))) not in by_id:
            continue  # no LLM call, or calls of several versions: not one version's figure
        row = rows.setdefault(version_id, VersionTokens(version_id))
        row.rollouts += 1
        if tokenizer is not None:
            row.drift = row.drift + retokenization_drift(own, tokenizer)
        row.credit = row.credit + assign_credit(own, []).report
    for child in versions:
        parent = child.parent_id
        if parent in rows:
            metrics = (child.metadata or {}).get("metrics") or {}
            rows[parent].mismatch = {
                name: float(metrics[f"tokens/{name}"])
                for name in MISMATCH_FIELDS
                if f"tokens/{name}" in metrics
            }
    order = {v.version_id: i for i, v in enumerate(versions)}
    return sorted(rows.values(), key=lambda r: order[r.version_id])


def format_table(rows: list[VersionTokens]) -> str:
    """The per-version table `lightningrl report tokens` prints."""
    header = (
        f"{'version':<16} {'rollouts':>8} {'calls':>6} {'resp drift':>10} {'prompt drift':>12} "
        f"{'continuity':>10} {'|dlogp| mean':>12} {'p99':>9} {'max':>9} {'k3 KL':>9}"
    )
    lines = [header]

    def share(value: float | None) -> str:
        return "n/a" if value is None else f"{value:.3f}"

    for row in rows:
        shares = row.drift.shares()
        m = row.mismatch
        lines.append(
            f"{row.version_id[:16]:<16} {row.rollouts:>8} {row.drift.calls:>6} "
            f"{share(shares.get('response_drift')):>10} {share(shares.get('prompt_drift')):>12} "
            f"{share(row.continuity):>10} "
            + " ".join(
                f"{m[k]:>{w}.2e}" if k in m else f"{'n/a':>{w}}"
                for k, w in zip(MISMATCH_FIELDS, (12, 9, 9, 9), strict=True)
            )
        )
    return "\n".join(lines)
