"""Rollback: drill it (the parent resolves and is routable) or do it (`approved` back to the exact parent)."""

from __future__ import annotations

from lightningrl.release.errors import GateRefusal
from lightningrl.release.inputs import load_inputs
from lightningrl.release.report import get_receipt
from lightningrl.release.routing import production_routes, resolve_version
from lightningstore import LightningStore
from lightningstore.gate import EvidenceRecord, GateRecords, RollbackDrill


async def drill_rollback(
    store: LightningStore, gate: GateRecords, receipt_id: str, *, recorded_by: str = "local:unnamed"
) -> EvidenceRecord:
    """Test the rollback without moving `approved`: the parent resolves and a set bound to it resolves to it."""
    receipt = await get_receipt(gate, receipt_id)
    inputs = await load_inputs(store, gate, receipt)
    resolution = await resolve_version(store, receipt.parent_version_id)
    routed = None
    if resolution.ok and receipt.parent_version_id is not None:
        bound = await store.add_resource_set({receipt.resource_name: receipt.parent_version_id})
        found = await store.get_resources_by_id(bound.resources_id)
        version = found.versions.get(receipt.resource_name) if found is not None else None
        routed = version.version_id if version is not None else None
    drill = RollbackDrill(
        receipt_id=receipt.receipt_id,
        parent_version_id=receipt.parent_version_id,
        resolved=resolution.ok,
        reason=resolution.reason,
        routed_version_id=routed,
        parent=inputs.basis.parent,
    )
    return await gate.add_evidence(drill, recorded_by=recorded_by)


async def rollback(
    store: LightningStore,
    gate: GateRecords,
    receipt_id: str,
    *,
    actor: str,
    recorded_by: str | None = None,
    reason: str = "",
) -> EvidenceRecord:
    """Move `approved` back to the receipt's exact parent and prove production routing now reaches it.

    GateRefusal when the parent does not resolve (nothing moves) or routing does not follow.
    """
    receipt = await get_receipt(gate, receipt_id)
    parent_id = receipt.parent_version_id
    resolution = await resolve_version(store, parent_id)
    if not resolution.ok or parent_id is None:
        raise GateRefusal(f"cannot roll back {receipt.resource_name!r}: {resolution.reason}")
    await store.move_pointer(
        receipt.resource_name,
        "approved",
        parent_id,
        actor=actor,
        reason=reason or f"rollback of {receipt.candidate_version_id} (receipt {receipt.receipt_id})",
    )
    routes = await production_routes(store, receipt.resource_name)
    inputs = await load_inputs(store, gate, receipt)
    wrong = {who: v for who, v in routes.items() if v != parent_id}
    record = await gate.add_evidence(
        RollbackDrill(
            receipt_id=receipt.receipt_id,
            parent_version_id=parent_id,
            resolved=not wrong,
            reason=f"production routes {routes}",
            routed_version_id=routes.get("proxy", routes.get("runner")),
            moved_pointer=True,
            parent=inputs.basis.parent,
        ),
        recorded_by=recorded_by or f"local:{actor}",
    )
    if wrong:
        raise GateRefusal(f"`approved` moved to {parent_id} but production routes to {wrong}")
    return record
