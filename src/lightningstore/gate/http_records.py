"""HttpGateRecords: GateRecords over the store server's /v1/gate routes (through a StoreClient)."""

from __future__ import annotations

from typing import Any, TypeVar

import orjson
from pydantic import BaseModel, TypeAdapter

from lightningstore.client.store_client import StoreClient
from lightningstore.errors import NotFoundError
from lightningstore.gate.evaluator import Evaluator
from lightningstore.gate.evidence import Evidence, EvidenceKind, EvidenceRecord
from lightningstore.gate.plan import PlanBody, TrainingPlan
from lightningstore.gate.policy import GatePolicy
from lightningstore.gate.protected import ProtectedCase
from lightningstore.gate.receipt import ReceiptBody, UpdateReceipt
from lightningstore.gate.records import GateRecords
from lightningstore.gate.verdict import GateReport
from lightningstore.gate.whoami import WhoAmI
from lightningstore.http_api import path_segment

_receipts = TypeAdapter(list[UpdateReceipt])
_reports = TypeAdapter(list[GateReport])
_evidence = TypeAdapter(list[EvidenceRecord])
_evaluators = TypeAdapter(list[Evaluator])
_cases = TypeAdapter(list[ProtectedCase])
M = TypeVar("M", bound=BaseModel)


def _actor(recorded_by: str) -> str:
    """The name part of a local `recorded_by`, stated to the server, which records the token's identity."""
    return recorded_by.split(":", 1)[-1]


class HttpGateRecords(GateRecords):
    """Gate records of the server a StoreClient talks to, with that client's credentials."""

    def __init__(self, client: StoreClient) -> None:
        self._client = client

    async def _json(self, method: str, path: str, body: Any = None, **kwargs: Any) -> Any:
        return orjson.loads(await self._client._call(method, path, body, **kwargs))

    async def _found(self, model: type[M], path: str) -> M | None:
        """GET `path` as `model`, or None where the server answers 404."""
        try:
            return model.model_validate(await self._json("GET", path))
        except NotFoundError:
            return None

    async def whoami(self) -> WhoAmI:
        """Who the server takes these credentials for (the name its gate records write them under)."""
        return WhoAmI.model_validate(await self._json("GET", "/v1/gate/whoami"))

    async def add_receipt(self, body: ReceiptBody, *, created_by: str) -> UpdateReceipt:
        data = await self._json(
            "POST", "/v1/gate/receipts", {"body": body.model_dump(mode="json"), "actor": _actor(created_by)}
        )
        return UpdateReceipt.model_validate(data)

    async def add_plan(self, body: PlanBody, *, created_by: str) -> TrainingPlan:
        data = await self._json(
            "POST", "/v1/gate/plans", {"body": body.model_dump(mode="json"), "actor": _actor(created_by)}
        )
        return TrainingPlan.model_validate(data)

    async def get_plan(self, plan_id: str) -> TrainingPlan | None:
        return await self._found(TrainingPlan, f"/v1/gate/plans/{path_segment(plan_id)}")

    async def get_receipt(self, receipt_id: str) -> UpdateReceipt | None:
        return await self._found(UpdateReceipt, f"/v1/gate/receipts/{path_segment(receipt_id)}")

    async def list_receipts(
        self, *, resource_name: str | None = None, candidate_version_id: str | None = None
    ) -> list[UpdateReceipt]:
        params = {"resource_name": resource_name, "candidate_version_id": candidate_version_id}
        return _receipts.validate_python(await self._json("GET", "/v1/gate/receipts", params=params))

    async def add_report(self, report: GateReport) -> GateReport:
        body = report.model_copy(update={"recorded_by": _actor(report.recorded_by)}).model_dump(mode="json")
        return GateReport.model_validate(await self._json("POST", "/v1/gate/reports", body, idempotent=False))

    async def list_reports(self, receipt_id: str) -> list[GateReport]:
        return _reports.validate_python(
            await self._json("GET", f"/v1/gate/receipts/{path_segment(receipt_id)}/reports")
        )

    async def add_evidence(self, body: Evidence, *, recorded_by: str) -> EvidenceRecord:
        payload = {"body": body.model_dump(mode="json"), "actor": _actor(recorded_by)}
        data = await self._json("POST", "/v1/gate/evidence", payload, idempotent=False)
        return EvidenceRecord.model_validate(data)

    async def list_evidence(self, receipt_id: str, kind: EvidenceKind | None = None) -> list[EvidenceRecord]:
        params = {"kind": EvidenceKind(kind).value if kind else None}
        path = f"/v1/gate/receipts/{path_segment(receipt_id)}/evidence"
        return _evidence.validate_python(await self._json("GET", path, params=params))

    async def register_evaluator(self, evaluator: Evaluator, *, recorded_by: str) -> Evaluator:
        payload = {"evaluator": evaluator.model_dump(mode="json"), "actor": _actor(recorded_by)}
        return Evaluator.model_validate(await self._json("POST", "/v1/gate/evaluators", payload))

    async def current_evaluator(self, name: str) -> Evaluator | None:
        return await self._found(Evaluator, f"/v1/gate/evaluators/{path_segment(name)}/current")

    async def list_evaluators(self) -> list[Evaluator]:
        return _evaluators.validate_python(await self._json("GET", "/v1/gate/evaluators"))

    async def put_protected_case(self, case: ProtectedCase, *, recorded_by: str) -> ProtectedCase:
        payload = {"case": case.model_dump(mode="json"), "actor": _actor(recorded_by)}
        return ProtectedCase.model_validate(await self._json("PUT", "/v1/gate/protected-cases", payload))

    async def remove_protected_case(self, resource_name: str, case_id: str) -> None:
        await self._json(
            "DELETE", f"/v1/gate/protected-cases/{path_segment(resource_name)}/{path_segment(case_id)}"
        )

    async def list_protected_cases(self, resource_name: str) -> list[ProtectedCase]:
        params = {"resource_name": resource_name}
        return _cases.validate_python(await self._json("GET", "/v1/gate/protected-cases", params=params))

    async def put_policy(self, policy: GatePolicy, *, recorded_by: str) -> GatePolicy:
        payload = {"policy": policy.model_dump(mode="json"), "actor": _actor(recorded_by)}
        return GatePolicy.model_validate(await self._json("PUT", "/v1/gate/policies", payload))

    async def get_policy(self, resource_name: str) -> GatePolicy | None:
        data = await self._json("GET", f"/v1/gate/policies/{path_segment(resource_name)}")
        return GatePolicy.model_validate(data) if data is not None else None
