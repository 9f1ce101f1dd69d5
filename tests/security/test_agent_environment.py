"""The agent's environment never holds the runner's secrets: a hostile agent run by a real runner process
dumps everything it can reach (its environment, a child shell's, the runner's /proc/PID/environ) and
finds none of the runner token, the agent-key secret, the admin token or the runner's provider keys;
only its own attempt's key and what the user passed by name."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import yaml
from backends import LiveServer

from lightningrl.fitting.run import NOT_FOR_RUNNERS
from lightningrl.processes.supervisor import Supervisor
from lightningstore import AttemptStatus
from lightningstore.auth import verify_agent_key
from lightningstore.client.store_client import StoreClient
from runner import AgentResources, ResolvedLLM
from runner.controllers import LocalController, attempt_environment
from runner.controllers.environment import SAFE_BASE, local_environment
from runner.controllers.kubernetes import JobSpec, render_job
from runner.credentials import take_credentials

ADMIN, RUNNER, SECRET = "env-admin-tok-7f3a", "env-runner-tok-91c2", "env-agent-secret-5d8e"
OPENAI_KEY, ANTHROPIC_KEY = "sk-runner-secret-0b6f", "sk-ant-runner-secret-44e1"
SECRET_VALUES = (ADMIN, RUNNER, SECRET, OPENAI_KEY, ANTHROPIC_KEY)
RUNNER_ENV = {
    "LIGHTNINGRL_ADMIN_TOKEN": ADMIN,
    "LIGHTNINGRL_RUNNER_TOKEN": RUNNER,
    "LIGHTNINGRL_AGENT_SECRET": SECRET,
    "OPENAI_API_KEY": OPENAI_KEY,
    "ANTHROPIC_API_KEY": ANTHROPIC_KEY,
    "FOO": "foo-passed-by-name",
    "NOT_PASSED": "not-on-the-allow-list",
}

DUMP = """
import json, os, subprocess, sys
from pathlib import Path

def dump(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "environ.json").write_text(json.dumps(dict(os.environ)))
    (out / "child_env.txt").write_text(subprocess.run(["sh", "-c", "env"], capture_output=True, text=True).stdout)
    for pid, name in ((os.getpid(), "self"), (os.getppid(), "parent")):
        try:
            (out / f"proc_{name}_environ.bin").write_bytes(Path(f"/proc/{pid}/environ").read_bytes())
        except OSError as error:
            (out / f"proc_{name}_environ.bin").write_bytes(repr(error).encode())
"""
COMMAND_AGENT = DUMP + "\ndump(Path(sys.argv[1]))\n"
IN_PROCESS_AGENT = (
    DUMP
    + """
from runner import rollout

@rollout
def agent(task):
    dump(Path(task["out"]))
    return 1.0
"""
)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[LiveServer]:
    """A real store server process with an admin and a runner token and an agent-key secret (one per test:
    a runner claims whatever is queued)."""
    root = tmp_path / "server"
    root.mkdir()
    env = {k: v for k, v in RUNNER_ENV.items() if k.startswith("LIGHTNINGRL_")}
    live = LiveServer(root / "store.db", root / "server.log", env=env).start()
    yield live
    live.stop()


@pytest.fixture
async def admin(server: LiveServer) -> AsyncIterator[StoreClient]:
    async with StoreClient(server.url, token=ADMIN, max_retries=0) as client:
        yield client


def run_runner(server: LiveServer, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`python -m runner` against the server for one rollout, its credentials and provider keys in its
    environment (as an operator sets them), nothing else of this test's secrets."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("LIGHTNINGRL_") and k not in RUNNER_ENV}
    command = [sys.executable, "-m", "runner", "--store", server.url, "--workers", "1", "--max-rollouts", "1",
               "--no-progress", "--heartbeat-interval", "0.5", *args]  # fmt: skip
    done = subprocess.run(
        command, env={**base, **RUNNER_ENV}, cwd=tmp_path, capture_output=True, text=True, timeout=180
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def dumps(out: Path) -> dict[str, str]:
    """Every dump the agent wrote, as text (NULs of /proc's environ blocks as newlines)."""
    return {p.name: p.read_bytes().replace(b"\0", b"\n").decode(errors="replace") for p in out.iterdir()}


def assert_no_secret(found: dict[str, str], values: tuple[str, ...]) -> None:
    for name, text in found.items():
        for value in values:
            assert value not in text, f"{name} holds a runner secret ({value})"


async def test_a_command_agent_and_its_children_see_none_of_the_runners_secrets(
    server: LiveServer, admin: StoreClient, tmp_path: Path
) -> None:
    (tmp_path / "hostile.py").write_text(COMMAND_AGENT)
    out = tmp_path / "dumps"
    rollout = await admin.enqueue_rollout({"q": "dump"})
    run_runner(
        server,
        tmp_path,
        "--command",
        f"{sys.executable} hostile.py {out}",
        "--pass-env",
        "FOO",
        "--env",
        "BAR=set-by-flag",
    )

    (attempt,) = await admin.query_attempts(rollout.rollout_id)
    assert attempt.status == AttemptStatus.SUCCEEDED
    found = dumps(out)
    assert set(found) == {"environ.json", "child_env.txt", "proc_self_environ.bin", "proc_parent_environ.bin"}
    # /proc/PARENT/environ (the runner's block from exec) is readable by the agent: the runner blanked it.
    assert_no_secret(found, SECRET_VALUES)
    environ = json.loads(found["environ.json"])
    key = environ["LIGHTNINGRL_AGENT_KEY"]
    assert verify_agent_key(SECRET, key) == (rollout.rollout_id, attempt.attempt_id)
    assert environ["OPENAI_API_KEY"] == key and f"LIGHTNINGRL_AGENT_KEY={key}" in found["child_env.txt"]
    assert environ["FOO"] == "foo-passed-by-name" and "FOO=foo-passed-by-name" in found["child_env.txt"]
    assert environ["BAR"] == "set-by-flag" and "BAR=set-by-flag" in found["child_env.txt"]
    assert "NOT_PASSED" not in environ and "not-on-the-allow-list" not in found["child_env.txt"]
    assert set(environ) - set(SAFE_BASE) - {"FOO", "BAR"} <= {
        n for n in environ if n.startswith(("LIGHTNINGRL_", "OPENAI_", "AGL_", "OTEL_", "LC_"))
    }


async def test_an_in_process_agent_sees_neither_the_runner_token_nor_the_agent_secret(
    server: LiveServer, admin: StoreClient, tmp_path: Path
) -> None:
    (tmp_path / "inproc.py").write_text(IN_PROCESS_AGENT)
    out = tmp_path / "dumps"
    rollout = await admin.enqueue_rollout({"out": str(out)})
    run_runner(server, tmp_path, "--agent", f"{tmp_path / 'inproc.py'}:agent")

    (attempt,) = await admin.query_attempts(rollout.rollout_id)
    assert attempt.status == AttemptStatus.SUCCEEDED
    found = dumps(out)
    # The agent shares the runner's process: its environment, /proc/self/environ (the block the runner
    # started with) and any shell it starts hold no role token and no secret.
    assert_no_secret(found, (ADMIN, RUNNER, SECRET))
    assert not any(n.startswith("LIGHTNINGRL_") for n in json.loads(found["environ.json"]))


def resources() -> AgentResources:
    llm = ResolvedLLM(
        base_url="http://store/proxy/rollout/r/attempt/a/mode/train/v1", model="m", api_key="k-1"
    )
    return AgentResources(rollout_id="r", attempt_id="a", mode="train", llms={"llm": llm}, api_key="k-1")


def test_the_local_environment_is_the_allow_list_the_names_passed_and_the_attempt() -> None:
    source = {
        **RUNNER_ENV,
        "PATH": "/usr/bin",
        "HOME": "/home/u",
        "LC_ALL": "C.UTF-8",
        "OMP_NUM_THREADS": "2",
        "LIGHTNINGRL_VIEWER_TOKEN": "viewer-tok",
        "HF_TOKEN": "hf-secret",
        "AWS_SECRET_ACCESS_KEY": "aws-secret",
    }
    attempt = attempt_environment(resources(), {"q": 1}, store_url="http://store")
    env = local_environment(resources(), {"q": 1}, store_url="http://store", env={"BAR": "b", "HOME": "/agent"},
                            pass_env=("FOO", "MISSING"), source=source)  # fmt: skip
    assert env == {
        "PATH": "/usr/bin",
        "HOME": "/agent",  # env= wins over the inherited base
        "LC_ALL": "C.UTF-8",
        "OMP_NUM_THREADS": "2",
        "FOO": "foo-passed-by-name",
        "BAR": "b",
        **attempt,  # the attempt's own values win: OPENAI_API_KEY is the attempt's key
    }
    assert env["OPENAI_API_KEY"] == "k-1"
    # A provider key named explicitly is the user's choice (a direct call, e.g. to a judge model).
    chosen = local_environment(
        resources(), 1, store_url=None, env={}, pass_env=["ANTHROPIC_API_KEY"], source=source
    )
    assert chosen["ANTHROPIC_API_KEY"] == ANTHROPIC_KEY


@pytest.mark.parametrize(
    ("where", "name"),
    [
        ("pass_env", "LIGHTNINGRL_RUNNER_TOKEN"),
        ("pass_env", "LIGHTNINGRL_AGENT_SECRET"),
        ("env", "LIGHTNINGRL_ADMIN_TOKEN"),
        ("pass_env", "LIGHTNINGRL_VIEWER_TOKEN"),
        ("env", "LIGHTNINGRL_SOMETHING_TOKEN"),
        ("pass_env", "OPENAI_API_KEY"),  # the attempt's key holds that name
    ],
)
def test_naming_a_runner_secret_is_refused(where: str, name: str) -> None:
    given = {"env": {name: "x"}} if where == "env" else {"pass_env": [name]}
    with pytest.raises(ValueError, match=f"{where} names {name}"):
        LocalController(["true"], **given)  # type: ignore[arg-type]


def test_the_runner_command_refuses_to_pass_its_secret(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "runner", "--store", str(tmp_path / "s.db"), "--command", "true",
         "--pass-env", "LIGHTNINGRL_AGENT_SECRET", "--no-progress"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode != 0 and "pass_env names LIGHTNINGRL_AGENT_SECRET" in done.stderr


def test_credentials_are_read_once_and_removed(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in RUNNER_ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("LIGHTNINGRL_STORE_URL", "http://store")  # a setting, not a credential: kept
    credentials = take_credentials()
    assert (credentials.token, credentials.agent_secret) == (RUNNER, SECRET)
    left = [name for name in os.environ if name.startswith("LIGHTNINGRL_")]
    assert "LIGHTNINGRL_STORE_URL" in left and not [n for n in left if n.endswith(("_TOKEN", "_SECRET"))]
    monkeypatch.setenv("LIGHTNINGRL_RUNNER_TOKEN", RUNNER)
    assert take_credentials("from-flag").token == "from-flag" and "LIGHTNINGRL_RUNNER_TOKEN" not in os.environ


def test_the_job_manifest_holds_only_the_attempts_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in RUNNER_ENV.items():
        monkeypatch.setenv(name, value)
    job = render_job(JobSpec(image="agent:1", command=["python", "a.py"]), resources(), {"q": 1},
                     store_url="http://store")  # fmt: skip
    (container,) = job["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env == attempt_environment(resources(), {"q": 1}, store_url="http://store")
    assert_no_secret({"job": yaml.safe_dump(job)}, SECRET_VALUES)
    assert job["spec"]["template"]["spec"]["automountServiceAccountToken"] is False


def test_the_job_takes_the_users_env_and_refuses_a_secret() -> None:
    spec = JobSpec(image="agent:1", command=["a"], env={"JUDGE_URL": "http://judge", "OPENAI_BASE_URL": "x"})
    job = render_job(spec, resources(), {"q": 1}, store_url="http://store")
    (container,) = job["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["JUDGE_URL"] == "http://judge"
    assert (
        env["OPENAI_BASE_URL"]
        == attempt_environment(resources(), {"q": 1}, store_url=None)["OPENAI_BASE_URL"]
    )
    with pytest.raises(ValueError, match="LIGHTNINGRL_AGENT_SECRET"):
        JobSpec(image="agent:1", command=["a"], env={"LIGHTNINGRL_AGENT_SECRET": "s"})
    with pytest.raises(ValueError, match="OPENAI_API_KEY"):
        JobSpec(image="agent:1", command=["a"], env={"OPENAI_API_KEY": "sk-real"})


def test_fit_runner_processes_get_no_other_roles_token_and_no_provider_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in RUNNER_ENV.items():
        monkeypatch.setenv(name, value)
    out = tmp_path / "env.txt"
    with Supervisor(tmp_path / "logs") as supervisor:
        child = supervisor.start("runner-0", ["sh", "-c", f"env > {out}"], withhold=NOT_FOR_RUNNERS)
        child.process.wait(30)
        first = out.read_text()
        supervisor.respawn(child)  # a restarted runner is withheld the same
        child.process.wait(30)
    for text in (first, out.read_text()):
        # The runner needs its own token and the secret (it removes them from its environment at start).
        assert f"LIGHTNINGRL_RUNNER_TOKEN={RUNNER}" in text and f"LIGHTNINGRL_AGENT_SECRET={SECRET}" in text
        assert_no_secret({"runner env": text}, (ADMIN, OPENAI_KEY, ANTHROPIC_KEY))
