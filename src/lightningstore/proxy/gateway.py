"""Gateway: one proxied model call from the agent's request to the stored span and the agent's response."""

from __future__ import annotations

import dataclasses
import time

import anyio
import httpx
import orjson
from fastapi import Request
from fastapi.responses import Response

from lightningstore import semconv
from lightningstore.auth.tokens import Caller, Role
from lightningstore.errors import StoreError
from lightningstore.llm_record import CallRecord
from lightningstore.proxy.binding import Bindings, BoundLLM, check_attempt
from lightningstore.proxy.config import ProxyConfig
from lightningstore.proxy.errors import ProxyError
from lightningstore.proxy.llm_span import CallContext, build_span
from lightningstore.proxy.observed import as_chunk, call_litellm
from lightningstore.proxy.pause_switch import PauseSwitch
from lightningstore.proxy.request import CallRequest, Kind, parse_body, prepare
from lightningstore.proxy.routing import endpoint_order
from lightningstore.proxy.shape import shape_for_agent
from lightningstore.proxy.stream import Finish, RecordedStream, one_chunk, relay
from lightningstore.proxy.upstream import Upstream, UpstreamResponse, upstream_key
from lightningstore.store import LightningStore

CALLER_ROLES = frozenset({Role.ADMIN, Role.ALGORITHM, Role.RUNNER})


def authorize(caller: Caller, rollout_id: str, attempt_id: str) -> None:
    """Role tokens may call for any attempt; an agent key only for its own (403 otherwise)."""
    if caller.role in CALLER_ROLES:
        return
    if caller.role == Role.AGENT and (caller.rollout_id, caller.attempt_id) == (rollout_id, attempt_id):
        return
    raise ProxyError(
        403,
        f"the {caller.role.value} credential may not call the model for rollout {rollout_id!r} "
        f"attempt {attempt_id!r}",
    )


def _upstream_reason(response: UpstreamResponse) -> str:
    """The upstream's error message (OpenAI-shaped bodies) or the start of its body."""
    try:
        error = orjson.loads(response.content).get("error")
        return str(error.get("message", error)) if isinstance(error, dict) else str(error)
    except (orjson.JSONDecodeError, AttributeError):
        return response.text[:300]


def _passthrough(response: UpstreamResponse) -> Response:
    media_type = response.headers.get("content-type", "application/json")
    return Response(response.content, status_code=response.status_code, media_type=media_type)


class Gateway:
    """The model gateway's state: store, cached bindings, the shared upstream client and the pause switch."""

    def __init__(self, store: LightningStore, config: ProxyConfig, client: httpx.AsyncClient) -> None:
        self.store = store
        self.config = config
        self.bindings = Bindings(store, config)
        self.upstream = Upstream(client, config)
        self.pause_switch = PauseSwitch()

    async def call(
        self,
        request: Request,
        kind: Kind,
        caller: Caller,
        rollout_id: str,
        attempt_id: str,
        mode: str,
        *,
        token_ids: bool = False,
    ) -> Response:
        """Forward one call and store its span; refusals answer 4xx/503 with a reason. `token_ids`: the
        reply keeps the token ids even when the agent did not ask (Agent Lightning v1.0's gateway
        always asks its model server for them and passes them on)."""
        context = CallContext(
            rollout_id=rollout_id,
            attempt_id=attempt_id,
            agent_name=request.headers.get(semconv.AGENT_NAME_HEADER),
            traceparent=request.headers.get(semconv.TRACEPARENT_HEADER),
            start_time=time.time(),
            decision=_decision(request.headers.get(semconv.DECISION_HEADER)),
        )
        try:
            authorize(caller, rollout_id, attempt_id)
            agent = parse_body(await request.body(), kind)
            binding = await self.bindings.get(rollout_id)
            binding.check_mode(mode)
            bound = binding.pick(agent.get("model"), self.config.resource_name)
            call = prepare(
                kind,
                agent,
                bound.llm,
                mode,
                self.config,
                ask_tokens=bound.llm.provider == "openai",
                rollout_id=rollout_id,
            )
            if token_ids:
                call = dataclasses.replace(call, wants_token_ids=True)
            # Checked before anything goes upstream: an ended or unknown attempt's prompt is never sent.
            await check_attempt(self.store, rollout_id, attempt_id)
            await self.pause_switch.enter(self.config.pause_wait_s)
        except ProxyError as error:
            return error.response()
        if call.stream:
            return await self._stream(context, call, bound)
        try:
            return await self._once(context, call, bound)
        finally:
            self.pause_switch.leave()

    async def _once(self, context: CallContext, call: CallRequest, bound: BoundLLM) -> Response:
        record = CallRecord(call.kind)
        try:
            response = await self._fetch(context, call, bound, record)
        except ProxyError as error:
            record.status, record.error = error.status, error.message
            response = error.response()
        try:
            await self._store_span(context, call, bound, record)
        except ProxyError as error:
            return error.response()
        return response

    async def _fetch(
        self, context: CallContext, call: CallRequest, bound: BoundLLM, record: CallRecord
    ) -> Response:
        """The agent's response from the upstream (recorded into `record`)."""
        endpoints = endpoint_order(context.rollout_id, bound.llm.endpoints)
        if bound.llm.provider != "openai":
            record.upstream = endpoints[0]
            data = await call_litellm(bound.llm, endpoints[0], call)
            record.absorb(data)
            return Response(orjson.dumps(data), media_type="application/json")
        response = await self.upstream.send(
            endpoints, call.path, call.body, record, stream=False, api_key=upstream_key(bound.llm)
        )
        record.status = response.status_code
        if response.status_code >= 400:
            record.error = (
                f"upstream {record.upstream} answered {response.status_code}: {_upstream_reason(response)}"
            )
            return _passthrough(response)
        try:
            data = orjson.loads(response.content)
        except orjson.JSONDecodeError:
            raise ProxyError(502, f"upstream {record.upstream} sent a body that is not JSON") from None
        record.absorb(data)
        return Response(orjson.dumps(shape_for_agent(data, call)), media_type="application/json")

    async def _stream(self, context: CallContext, call: CallRequest, bound: BoundLLM) -> Response:
        record = CallRecord(call.kind)
        finish = self._finisher(context, call, bound, record)
        endpoints = endpoint_order(context.rollout_id, bound.llm.endpoints)
        try:
            if bound.llm.provider != "openai":
                record.upstream = endpoints[0]
                data = await call_litellm(bound.llm, endpoints[0], call)
                record.absorb(data)
                return RecordedStream(one_chunk(as_chunk(data, call), finish), finish)
            response = await self.upstream.send(
                endpoints, call.path, call.body, record, stream=True, api_key=upstream_key(bound.llm)
            )
        except ProxyError as error:
            record.status, record.error = error.status, error.message
            await finish()
            return error.response()
        except BaseException:
            with anyio.CancelScope(shield=True):
                await finish()
            raise
        if response.status_code >= 400:
            await response.aread()
            await response.aclose()
            record.status = response.status_code
            record.error = (
                f"upstream {record.upstream} answered {response.status_code}: {_upstream_reason(response)}"
            )
            await finish()
            return _passthrough(response)
        return RecordedStream(relay(response, call, record, finish), finish)

    def _finisher(
        self, context: CallContext, call: CallRequest, bound: BoundLLM, record: CallRecord
    ) -> Finish:
        """Store the span and leave the pause switch, once, however the stream ends."""
        done = False

        async def finish() -> None:
            nonlocal done
            if done:
                return
            done = True
            try:
                await self._store_span(context, call, bound, record)
            finally:
                self.pause_switch.leave()

        return finish

    async def _store_span(
        self, context: CallContext, call: CallRequest, bound: BoundLLM, record: CallRecord
    ) -> None:
        span = build_span(context, call, bound, record, time.time())
        try:
            await self.store.add_span(span)
        except StoreError as error:
            raise ProxyError(503, f"the call could not be recorded: {error}") from error


def _decision(header: str | None) -> str | None:
    """The decision key an agent named (trimmed, at most `DECISION_MAX_CHARS`); None when absent."""
    value = (header or "").strip()[: semconv.DECISION_MAX_CHARS]
    return value or None
