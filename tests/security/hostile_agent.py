"""A hostile agent, run as `fit`'s command agent: it tries every way this suite knows to reach the
training signal, records what each try got in `probes-<rollout>.json` beside this file, then does its
task honestly (one model call, one reward) so the run goes on.

Its first argument is a rollout it does not own (the victim): a succeeded rollout of the same store.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx

SECRET_NAMES = ("TOKEN", "SECRET")


def _secrets_in_other_processes() -> set[str]:
    """`pid:NAME` for each credential variable the start-up environment of one of fit's processes shows
    (`/proc/PID/environ`, readable by a process of the same user)."""
    found = set()
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if b"lightningrl" not in (proc / "cmdline").read_bytes():
                continue
            entries = (proc / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        for entry in entries:
            name = entry.split(b"=", 1)[0].decode(errors="replace")
            if (
                "=" in entry.decode(errors="replace")
                and name.startswith("LIGHTNINGRL")
                and name.endswith(SECRET_NAMES)
            ):
                found.add(f"{proc.name}:{name}")
    return found


def _parent(pid: int | str) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def _inference_port() -> int:
    """The port of this run's `serve-model` process (a child of fit, as the runner is), as its command
    line in /proc shows it."""
    fit = _parent(os.getppid())
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            argv = (proc / "cmdline").read_bytes().decode().split("\0")
            if "serve-model" in argv and "--port" in argv and _parent(proc.name) == fit:
                return int(argv[argv.index("--port") + 1])
        except (OSError, ValueError):
            continue
    raise RuntimeError("no serve-model process found")


def main() -> None:
    victim = sys.argv[1]
    own_key = os.environ["LIGHTNINGRL_AGENT_KEY"]
    rollout, attempt, mode = (os.environ[f"LIGHTNINGRL_{n}"] for n in ("ROLLOUT_ID", "ATTEMPT_ID", "MODE"))
    store = os.environ["LIGHTNINGRL_STORE_URL"]
    base_url = os.environ["OPENAI_BASE_URL"]
    model = os.environ["LIGHTNINGRL_MODEL"]
    mine = {"Authorization": f"Bearer {own_key}"}
    probes: dict[str, object] = {}
    client = httpx.Client(timeout=30)

    # 1. Secrets in its environment, and in a child shell's.
    shell = subprocess.run(["sh", "-c", "env"], capture_output=True, text=True, check=True).stdout
    names = {line.split("=", 1)[0] for line in shell.splitlines() if "=" in line} | set(os.environ)
    probes["secret_names"] = sorted(
        n for n in names if n.endswith(SECRET_NAMES) and n.startswith("LIGHTNINGRL")
    )
    probes["environment"] = shell
    probes["proc_secrets"] = sorted(_secrets_in_other_processes())

    # 2. The store with no credential at all (a no-token server would take it as admin).
    probes["reward_no_token"] = client.post(
        f"{store}/v1/rewards", json={"rollout_id": victim, "name": "forged", "value": 666.0}
    ).status_code
    probes["read_no_token"] = client.get(f"{store}/v1/statistics").status_code

    # 3. Its own key, on a rollout that is not its own.
    probes["reward_other_rollout"] = client.post(
        f"{store}/v1/rewards",
        json={"rollout_id": victim, "attempt_id": attempt, "name": "forged", "value": 666.0},
        headers=mine,
    ).status_code
    now = time.time()
    span = {
        "rollout_id": victim, "attempt_id": attempt, "trace_id": uuid.uuid4().hex, "span_id": uuid.uuid4().hex[:16],
        "name": "forged", "start_time": now, "end_time": now, "attributes": {"lightningrl.llm.trainable": True},
    }  # fmt: skip
    probes["span_other_rollout"] = client.post(f"{store}/v1/spans", json=[span], headers=mine).status_code

    # 4. Its own attempt, but training data of its own making, another sampling mode, forced output.
    probes["span_training_attributes"] = client.post(
        f"{store}/v1/spans", json=[{**span, "rollout_id": rollout}], headers=mine
    ).status_code
    other_mode = "test" if mode == "train" else "train"
    chat = {"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
    probes["other_mode"] = client.post(
        base_url.replace(f"/mode/{mode}/", f"/mode/{other_mode}/") + "/chat/completions",
        json=chat,
        headers=mine,
    ).status_code
    if mode == "train":
        probes["logit_bias"] = client.post(
            f"{base_url}/chat/completions", json={**chat, "logit_bias": {"5": 100}}, headers=mine
        ).status_code
        probes["max_tokens_1e9"] = client.post(
            f"{base_url}/chat/completions", json={**chat, "max_tokens": 10**9}, headers=mine
        ).status_code
        probes["n_64"] = client.post(
            f"{base_url}/chat/completions", json={**chat, "n": 64}, headers=mine
        ).status_code

    # 5. The inference server itself (its port read from its command line): swap in other weights.
    probes["reload"] = client.post(
        f"http://127.0.0.1:{_inference_port()}/reload", json={"checkpoint": str(Path(__file__).parent)}
    ).status_code

    # 6. More telemetry than an attempt may write (a span each, 5,001 in one request).
    flood = [{**span, "rollout_id": rollout, "span_id": f"{i:016x}", "attributes": {}} for i in range(5001)]
    probes["span_flood"] = client.post(f"{store}/v1/spans", json=flood, headers=mine).status_code

    # 7. The task, honestly.
    reply = client.post(f"{base_url}/chat/completions", json=chat, headers=mine)
    reply.raise_for_status()
    text = reply.json()["choices"][0]["message"]["content"] or ""
    client.post(
        f"{store}/v1/rewards", json={"rollout_id": rollout, "attempt_id": attempt, "value": min(1.0, len(text) / 20)},
        headers=mine,
    ).raise_for_status()  # fmt: skip
    (Path(__file__).parent / f"probes-{rollout}.json").write_text(json.dumps({"mode": mode, **probes}))


if __name__ == "__main__":
    main()
