"""Controllers: a local subprocess per rollout (through the real proxy) and a Kubernetes Job per rollout
(against a STAND-IN API server, since there is no cluster here)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from conftest import StoreServer, _serve_in_thread
from kube_stand_in import StandIn, create_stand_in
from kubernetes import client as k8s

from lightningrl.credit.calls import is_llm_span
from lightningstore import LLM, AttemptStatus, RolloutConfig, SqlStore, semconv
from lightningstore.auth import verify_agent_key
from runner import AgentResources, ResolvedLLM, Runner
from runner.controllers import LocalController, attempt_environment
from runner.controllers.kubernetes import JobSpec, KubernetesController, dns1123_name, render_job

ROLLOUT_SCRIPT = """
import json, os, sys, time
task = json.load(sys.stdin)
if task == "hang":
    open(os.environ["PID_FILE"], "w").write(str(os.getpid()))
    time.sleep(60)
if task == "fail":
    print("the environment broke", flush=True)
    sys.exit(3)
import httpx, openai
assert json.loads(os.environ["LIGHTNINGRL_TASK"]) == task
client = openai.OpenAI(max_retries=0)  # OPENAI_BASE_URL and OPENAI_API_KEY come from the environment
reply = client.chat.completions.create(
    model=os.environ["LIGHTNINGRL_MODEL"], messages=[{"role": "user", "content": task}], max_tokens=6
)
response = httpx.post(
    os.environ["LIGHTNINGRL_REWARD_URL"],
    json={"rollout_id": os.environ["LIGHTNINGRL_ROLLOUT_ID"], "attempt_id": os.environ["LIGHTNINGRL_ATTEMPT_ID"],
          "value": float(len(reply.choices[0].message.content or "") >= 0)},
    headers={"authorization": "Bearer " + os.environ["OPENAI_API_KEY"]},
)
response.raise_for_status()
"""


def resources(**overrides: object) -> AgentResources:
    llm = ResolvedLLM(
        base_url="http://proxy/rollout/r/attempt/a/mode/train/v1", model="tiny", api_key="key-1"
    )
    values: dict[str, object] = {"rollout_id": "Roll_Out/ID.1", "attempt_id": "at-1", "mode": "train",
                                 "llms": {"llm": llm}, "api_key": "key-1", "timeout_seconds": 30.0}  # fmt: skip
    return AgentResources(**{**values, **overrides})  # type: ignore[arg-type]


def test_attempt_environment() -> None:
    env = attempt_environment(resources(), {"q": "2+2"}, store_url="http://store:4747/")
    assert env["OPENAI_BASE_URL"] == "http://proxy/rollout/r/attempt/a/mode/train/v1"
    assert env["OPENAI_API_KEY"] == "key-1" and env["LIGHTNINGRL_MODEL"] == "tiny"
    assert (env["LIGHTNINGRL_ROLLOUT_ID"], env["LIGHTNINGRL_ATTEMPT_ID"]) == ("Roll_Out/ID.1", "at-1")
    assert json.loads(env["LIGHTNINGRL_TASK"]) == {"q": "2+2"}
    assert env["LIGHTNINGRL_REWARD_URL"] == "http://store:4747/v1/rewards"
    assert env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] == "http://store:4747/v1/traces"
    assert env["OTEL_EXPORTER_OTLP_TRACES_HEADERS"] == "authorization=Bearer%20key-1"
    assert (
        env["OTEL_RESOURCE_ATTRIBUTES"]
        == "lightningrl.rollout_id=Roll_Out%2FID.1,lightningrl.attempt_id=at-1"
    )


def test_agent_lightning_v1_names_are_set_beside_ours() -> None:
    proxied = ResolvedLLM(
        base_url="http://store:4747/proxy/rollout/Roll_Out%2FID.1/attempt/at-1/mode/val/v1",
        model="tiny",
        api_key="k",
    )
    env = attempt_environment(
        resources(llms={"llm": proxied}, mode="val"), "t", store_url="http://store:4747/"
    )
    assert (
        env["AGL_OPENAI_BASE_URL"]
        == "http://store:4747/proxy/rollout/Roll_Out%2FID.1/attempt/at-1/mode/val/openai/v1"
    )
    assert env["AGL_EVENT_URL"] == "http://store:4747/api/rollouts/Roll_Out%2FID.1/attempt/at-1/events"
    assert env["AGL_KEY"] == env["OPENAI_API_KEY"] == "key-1"
    # Without a store URL the events endpoint is the proxy's own server; without a proxy there is none.
    bare = attempt_environment(resources(llms={"llm": proxied}), "t", store_url=None)
    assert bare["AGL_EVENT_URL"] == env["AGL_EVENT_URL"]
    vendor = ResolvedLLM(base_url="http://model:8000/v1", model="tiny", api_key="k")
    direct = attempt_environment(resources(llms={"llm": vendor}), "t", store_url=None)
    assert "AGL_EVENT_URL" not in direct
    assert direct["AGL_OPENAI_BASE_URL"] == direct["OPENAI_BASE_URL"]  # not a proxy URL: unchanged


async def test_local_controller_runs_one_process_per_rollout(
    sql_store: SqlStore, store_server: StoreServer, inference_url: str, tmp_path: Path
) -> None:
    script = tmp_path / "agent.py"
    script.write_text(ROLLOUT_SCRIPT)
    pid_file = tmp_path / "hang.pid"
    bound = await sql_store.add_resources({"llm": LLM(endpoints=[inference_url], model="tiny")})
    # Only "hang" is meant to time out; the others get room for a slow interpreter start on a busy machine.
    timeouts = {"ok": 120.0, "fail": 120.0, "hang": 8.0}
    for task, seconds in timeouts.items():
        config = RolloutConfig(timeout_seconds=seconds)
        await sql_store.enqueue_rollout(task, resources_id=bound.resources_id, config=config, rollout_id=task)
    controller = LocalController(
        [sys.executable, str(script)],
        store_url=store_server.url,
        env={"PID_FILE": str(pid_file)},
        kill_grace=1.0,
    )
    runner = Runner(sql_store, controller, workers=3, proxy_url=store_server.proxy_url, agent_key_secret="s3cret",
                    heartbeat_interval=0.5, show_progress=False)  # fmt: skip
    summary = await runner.run(max_rollouts=3)
    assert (summary.succeeded, summary.failed, summary.timed_out) == (1, 1, 1)

    (ok,) = await sql_store.query_attempts("ok")
    assert ok.status == AttemptStatus.SUCCEEDED
    (reward,) = await sql_store.query_rewards("ok")
    assert (reward.value, reward.attempt_id) == (1.0, ok.attempt_id)
    (llm_span,) = [s for s in await sql_store.query_spans("ok") if is_llm_span(s)]
    assert (
        llm_span.attempt_id == ok.attempt_id and len(llm_span.attributes[semconv.LLM_RESPONSE_TOKEN_IDS]) > 0
    )

    (failed,) = await sql_store.query_attempts("fail")
    assert failed.status == AttemptStatus.FAILED
    assert "exited with code 3" in (failed.failure_reason or "")
    assert "the environment broke" in (failed.failure_reason or "")

    (hung,) = await sql_store.query_attempts("hang")
    assert hung.status == AttemptStatus.TIMEOUT
    pid = int(pid_file.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # killed and reaped


def test_agent_key_in_the_environment_is_the_attempts() -> None:
    from runner.resources import attempt_api_key

    key = attempt_api_key("s3cret", "r-1", "a-1")
    env = attempt_environment(resources(api_key=key, llms={}), "t", store_url=None)
    assert verify_agent_key("s3cret", env["OPENAI_API_KEY"]) == ("r-1", "a-1")
    assert "OPENAI_BASE_URL" not in env and "LIGHTNINGRL_REWARD_URL" not in env


def test_job_name_is_dns1123_and_deterministic() -> None:
    assert dns1123_name("ro-abc123") == "lightningrl-rollout-ro-abc123"
    odd = dns1123_name("Roll_Out/ID.1")
    assert odd == dns1123_name("Roll_Out/ID.1") and odd.startswith("lightningrl-rollout-roll-out-id-1-")
    long = dns1123_name("x" * 200)
    assert len(long) <= 63 and long[-1].isalnum() and long != dns1123_name("x" * 199)
    for name in (odd, long):
        assert all(c.islower() or c.isdigit() or c == "-" for c in name)


def test_render_job_manifest() -> None:
    spec = JobSpec(
        image="example/agent:1",
        command=["python", "agent.py"],
        namespace="rl",
        ttl_seconds_after_finished=120,
    )
    job = render_job(spec, resources(), {"q": 'it\'s "quoted" <&>'}, store_url="http://store:4747")
    assert job["apiVersion"] == "batch/v1" and job["kind"] == "Job"
    meta = job["metadata"]
    assert meta["name"] == dns1123_name("Roll_Out/ID.1") and meta["namespace"] == "rl"
    assert meta["labels"]["app.kubernetes.io/managed-by"] == "lightningrl"
    assert meta["annotations"] == {
        "lightningrl.io/rollout-id": "Roll_Out/ID.1",
        "lightningrl.io/attempt-id": "at-1",
    }
    assert job["spec"]["backoffLimit"] == 0 and job["spec"]["ttlSecondsAfterFinished"] == 120
    assert job["spec"]["activeDeadlineSeconds"] == 31
    pod = job["spec"]["template"]["spec"]
    assert pod["restartPolicy"] == "Never"
    (container,) = pod["containers"]
    assert container["image"] == "example/agent:1" and container["command"] == ["python", "agent.py"]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env == attempt_environment(resources(), {"q": 'it\'s "quoted" <&>'}, store_url="http://store:4747")
    assert yaml.safe_dump(job)  # a plain, serialisable manifest


@pytest.fixture
def stand_in() -> Iterator[tuple[str, StandIn]]:
    app, state = create_stand_in()
    url, server, thread = _serve_in_thread(app, "kubernetes-stand-in")
    yield url, state
    server.should_exit = True  # type: ignore[attr-defined]
    thread.join(timeout=10)  # type: ignore[attr-defined]


async def test_kubernetes_controller_against_a_stand_in_api_server(
    sql_store: SqlStore, stand_in: tuple[str, StandIn]
) -> None:
    url, state = stand_in
    configuration = k8s.Configuration()
    configuration.host = url
    api_client = k8s.ApiClient(configuration)

    def controller(command: list[str]) -> KubernetesController:
        return KubernetesController(JobSpec(image="example/agent:1", command=command, namespace="rl"),
                                    store_url="http://store:4747", api_client=api_client, poll_interval=0.05)  # fmt: skip

    cases = {"ok": ["python", "agent.py"], "fail": ["python", "fail.py"], "hang": ["python", "hang.py"]}
    outcomes = {}
    for name, command in cases.items():
        # Only "hang" is meant to time out: the others get room for a busy machine.
        config = RolloutConfig(timeout_seconds=1.0 if name == "hang" else 60.0)
        await sql_store.enqueue_rollout(name, rollout_id=f"k8s-{name}", config=config)
        runner = Runner(
            sql_store, controller(command), workers=1, heartbeat_interval=0.2, show_progress=False
        )
        outcomes[name] = await runner.run(max_rollouts=1)
    assert outcomes["ok"].succeeded == 1 and outcomes["fail"].failed == 1 and outcomes["hang"].timed_out == 1

    ok_name, fail_name, hang_name = (dns1123_name(f"k8s-{n}") for n in cases)
    assert state.calls[:3] == [("create", ok_name), ("status", ok_name), ("status", ok_name)]
    (failed,) = await sql_store.query_attempts("k8s-fail")
    assert "BackoffLimitExceeded" in (failed.failure_reason or "")
    assert ("delete", hang_name) in state.calls and ("rl", hang_name) not in state.jobs
    assert ("delete", ok_name) not in state.calls  # finished jobs are left to ttlSecondsAfterFinished
    created = {job["metadata"]["name"]: job for job in state.created}
    assert created[ok_name]["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "lightningrl"
    (attempt,) = await sql_store.query_attempts("k8s-ok")
    assert created[ok_name]["metadata"]["annotations"]["lightningrl.io/attempt-id"] == attempt.attempt_id

    # A retry of the same rollout replaces the Job an earlier attempt left behind (same deterministic name).
    retry = RolloutConfig(max_attempts=2, retry_on=["failed"])
    await sql_store.enqueue_rollout("retry", rollout_id="k8s-retry", config=retry)
    retry_name = dns1123_name("k8s-retry")
    first = controller(["python", "fail.py"])
    assert (await Runner(sql_store, first, workers=1, show_progress=False).run(max_rollouts=1)).failed == 1
    assert ("rl", retry_name) in state.jobs
    second = controller(["python", "agent.py"])
    assert (
        await Runner(sql_store, second, workers=1, show_progress=False).run(max_rollouts=1)
    ).succeeded == 1
    retry_calls = [call for call in state.calls if call[1] == retry_name]
    assert [c for c, _ in retry_calls].count("create") == 3  # created, 409, re-created after the delete
    assert ("delete", retry_name) in retry_calls
    # By default every controller keeps the egress NetworkPolicy beside its Jobs (created once, then replaced).
    assert list(state.policies) == [("rl", "lightningrl-rollout-egress")]
    assert state.policy_calls[0] == ("create", "lightningrl-rollout-egress")
    assert (
        state.policy_calls.count(("replace", "lightningrl-rollout-egress")) == 4
    )  # one per later controller
    policy = state.policies[("rl", "lightningrl-rollout-egress")]
    assert policy["spec"]["policyTypes"] == ["Egress"]
    api_client.close()
