"""KubernetesController: one Job per rollout, rendered from a Jinja2 template and managed with BatchV1Api."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jinja2
import yaml
from kubernetes import client as k8s
from kubernetes.client.rest import ApiException

from runner.agent import LitAgent
from runner.controllers.egress import EgressPolicy, render_network_policy
from runner.controllers.environment import attempt_environment, check_user_environment
from runner.resources import AgentResources

log = logging.getLogger("runner.controllers.kubernetes")
TEMPLATE = Path(__file__).with_name("job.yaml.j2")
MANAGED_BY = "lightningrl"
ATTEMPT_ANNOTATION = "lightningrl.io/attempt-id"
MAX_NAME = 63


def dns1123_name(text: str, prefix: str = "lightningrl-rollout-") -> str:
    """A DNS-1123 label from `prefix + text`; a short hash keeps altered or cut names unique."""
    raw = prefix + text
    clean = re.sub(r"[^a-z0-9-]+", "-", raw.lower())
    clean = re.sub(r"-{2,}", "-", clean).strip("-")
    if clean == raw and len(clean) <= MAX_NAME:
        return clean
    digest = hashlib.sha256(raw.encode()).hexdigest()[:8]
    return f"{clean[: MAX_NAME - 9].rstrip('-')}-{digest}"


def label_value(text: str) -> str:
    """A valid label value (<= 63 chars of [A-Za-z0-9._-], alphanumeric at both ends)."""
    clean = re.sub(r"[^A-Za-z0-9._-]+", "-", text)[:MAX_NAME]
    return re.sub(r"^[^A-Za-z0-9]+|[^A-Za-z0-9]+$", "", clean)


class JobFailedError(RuntimeError):
    """The rollout's Job failed."""


@dataclass(frozen=True)
class JobSpec:
    """What the template needs beyond the attempt."""

    image: str
    command: Sequence[str]
    namespace: str = "default"
    ttl_seconds_after_finished: int = 600
    service_account: str | None = None
    egress: EgressPolicy | None = field(default_factory=EgressPolicy)
    """The NetworkPolicy the controller keeps beside its Jobs: rollout pods reach the gateway and DNS
    only. None leaves egress as the cluster has it."""
    env: Mapping[str, str] = field(default_factory=dict)
    """Variables the user gives the agent beside the attempt's own (never a role token or the agent
    secret: refused at construction, as `LocalController`'s `env=` is)."""

    def __post_init__(self) -> None:
        check_user_environment(self.env, ())


def render_job(
    spec: JobSpec,
    resources: AgentResources,
    task: Any,
    *,
    store_url: str | None,
    template: str | Path = TEMPLATE,
) -> dict[str, Any]:
    """The Job manifest (a dict) for one attempt."""
    environment = jinja2.Environment(undefined=jinja2.StrictUndefined, autoescape=False)
    text = environment.from_string(Path(template).read_text()).render(
        name=dns1123_name(resources.rollout_id),
        namespace=spec.namespace,
        rollout_id=resources.rollout_id,
        attempt_id=resources.attempt_id,
        rollout_label=label_value(resources.rollout_id),
        image=spec.image,
        command=list(spec.command),
        env={**spec.env, **attempt_environment(resources, task, store_url=store_url)},
        ttl_seconds_after_finished=spec.ttl_seconds_after_finished,
        active_deadline_seconds=int(resources.timeout_seconds) + 1 if resources.timeout_seconds else None,
        service_account=spec.service_account,
    )
    return yaml.safe_load(text)


class KubernetesController(LitAgent):
    """Runs each rollout as a Job; succeeded Job = succeeded attempt; a cancelled attempt deletes its Job."""

    def __init__(
        self,
        spec: JobSpec,
        *,
        store_url: str | None = None,
        api_client: k8s.ApiClient | None = None,
        template: str | Path = TEMPLATE,
        poll_interval: float = 1.0,
        delete_timeout: float = 60.0,
        name: str | None = None,
    ) -> None:
        self.spec = spec
        self.store_url = store_url
        self.api = k8s.BatchV1Api(api_client)
        self.networking = k8s.NetworkingV1Api(api_client)
        self._policy_ready = False
        self._policy_lock = asyncio.Lock()
        self.template = template
        self.poll_interval = poll_interval
        self.delete_timeout = delete_timeout
        self.name = name

    async def rollout(self, task: Any, resources: AgentResources) -> None:
        body = render_job(self.spec, resources, task, store_url=self.store_url, template=self.template)
        job_name = body["metadata"]["name"]
        await self.ensure_network_policy()
        await self._create(body, resources.attempt_id)
        try:
            await self._wait(job_name)
        except asyncio.CancelledError:
            await self._delete(job_name)
            raise

    async def ensure_network_policy(self) -> None:
        """Create (or bring up to date) the egress NetworkPolicy once, before the first Job starts."""
        if self.spec.egress is None or self._policy_ready:
            return
        async with self._policy_lock:
            if self._policy_ready:
                return
            body = render_network_policy(self.spec.egress, self.spec.namespace, self.store_url)
            name, namespace = body["metadata"]["name"], self.spec.namespace
            try:
                await asyncio.to_thread(self.networking.create_namespaced_network_policy, namespace, body)
            except ApiException as error:
                if error.status != 409:
                    raise
                await asyncio.to_thread(
                    self.networking.replace_namespaced_network_policy, name, namespace, body
                )
            self._policy_ready = True

    async def _create(self, body: dict[str, Any], attempt_id: str) -> None:
        """Create the Job; a leftover Job of an earlier attempt of the same rollout is replaced."""
        name, namespace = body["metadata"]["name"], self.spec.namespace
        try:
            await asyncio.to_thread(self.api.create_namespaced_job, namespace, body)
            return
        except ApiException as error:
            if error.status != 409:
                raise
        existing = await asyncio.to_thread(self.api.read_namespaced_job, name, namespace)
        if (existing.metadata.annotations or {}).get(ATTEMPT_ANNOTATION) == attempt_id:
            return  # this attempt's own Job (a retried create): adopt it
        log.info("replacing job %s left by an earlier attempt", name)
        await self._delete(name)
        await self._wait_gone(name)
        await asyncio.to_thread(self.api.create_namespaced_job, namespace, body)

    async def _wait_gone(self, name: str) -> None:
        """Until a deleted Job is gone (foreground deletion takes its pods first), bounded."""
        for _ in range(max(1, int(self.delete_timeout / self.poll_interval))):
            try:
                await asyncio.to_thread(self.api.read_namespaced_job, name, self.spec.namespace)
            except ApiException as error:
                if error.status == 404:
                    return
                raise
            await asyncio.sleep(self.poll_interval)
        raise JobFailedError(
            f"job {name} of an earlier attempt was not deleted within {self.delete_timeout}s"
        )

    async def _wait(self, name: str) -> None:
        while True:
            job = await asyncio.to_thread(self.api.read_namespaced_job_status, name, self.spec.namespace)
            status = job.status
            if status is not None and (status.succeeded or 0) >= 1:
                return
            if status is not None and (status.failed or 0) >= 1:
                reasons = [
                    f"{c.reason}: {c.message}" for c in (status.conditions or []) if c.type == "Failed"
                ]
                raise JobFailedError(f"job {name} failed: {'; '.join(reasons) or 'no condition given'}")
            await asyncio.sleep(self.poll_interval)

    async def _delete(self, name: str) -> None:
        """Delete the Job and its pods (a missing Job is fine)."""
        options = k8s.V1DeleteOptions(propagation_policy="Foreground")
        try:
            await asyncio.to_thread(self.api.delete_namespaced_job, name, self.spec.namespace, body=options)
        except ApiException as error:
            if error.status != 404:
                raise
