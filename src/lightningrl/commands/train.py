"""`lightningrl train --config train.toml [--FIELD VALUE ...]`: `lightningrl.fit` from a TOML file and flags."""

from __future__ import annotations

import argparse
import sys
import tomllib
from pathlib import Path
from typing import Any

TOP_LEVEL = {
    "agent": "the agent: module:function, module:LitAgentClass or path/to/script.py:function",
    "command": "instead of agent: a command line run once per rollout (TOML: a list; flag: one string)",
    "train": "train tasks: a JSONL file (one JSON object per line)",
    "val": "held-out tasks: a JSONL file (optional)",
    "model": "the starting checkpoint: a local Hugging Face model directory",
    "store": "store: a SQLite path, a postgresql:// URL or a store server's http(s):// URL "
    "(default: output_dir/store.db)",
    "workers": "concurrent rollouts in all (default 8)",
    "runner_processes": "runner processes sharing them (default: min(workers, CPU count))",
    "engine": "inference engine: ours, vllm (from .venv-vllm or $LIGHTNINGRL_VLLM_PYTHON) or auto "
    "(vllm when installed and a GPU is present)",
    "vllm_python": "with engine vllm: the python of the environment with vLLM (default .venv-vllm)",
    "output_dir": "metrics.csv, reward_curve.png, checkpoints/, logs/ and the default store (default runs/fit)",
    "sampling_by_mode": "the published LLM's sampling per rollout mode, a TOML table "
    "(flag: an inline table, '{val = {temperature = 1.0}}'; default val 0.7, test greedy)",
    "algorithm": "what to run: rl, sft, apo, or a list run in order (TOML ['apo', 'rl']; flag apo,rl); "
    "default rl",
    "prompt": "the starting prompt template (the `prompt` resource agents read; needed by apo)",
    "sft": "the sft stage's changes to [config], a TOML table [sft] (flag: an inline table, '{steps = 4}')",
    "apo": "APO's settings, a TOML table [apo]: rounds, beam, rollouts_per_task, optimizer_model, "
    "optimizer_base_url, ... (flag: an inline table; default optimizer: the policy as served)",
}
_TABLES = ("sampling_by_mode", "sft", "apo")
_INTS = ("workers", "runner_processes")
_PATHS = ("train", "val", "model", "output_dir")
# fit sets config.output_dir and config.engine from the top-level output_dir and engine.
_SKIPPED_CONFIG_FIELDS = ("output_dir", "engine")

EPILOG = """\
A TOML file holds the top-level keys above and a [config] table of LightningRLConfig fields
(nested tables [config.advantage], [config.trainer], [config.trainer.loss]):

  agent = "my_agent.py:solve"        # or: command = ["python", "agent.py"]
  train = "train.jsonl"
  val = "val.jsonl"
  model = "checkpoints/base"
  [config]
  steps = 20
  [config.trainer]
  lr = 1e-4

Other algorithms, or several in order (docs/algorithms.md): algorithm = ["apo", "rl"] with
prompt = "Answer: {question}" and an [apo] table (rounds = 2, beam = 2, optimizer_model =
"openai/NAME", optimizer_base_url = "http://HOST/v1"); algorithm = "sft" takes [config] with the
changes of an [sft] table (steps = 4).

Every key is also a flag of the same name; nested keys join with dots (--trainer.lr 1e-4,
--advantage.estimator grpo). Flags override the file. Relative paths in the file are relative to
the file; relative paths in flags to the working directory. Values are TOML syntax (3, 1e-4, true,
[0.9, 0.99]) or plain text; `none` clears an optional field; sets take a,b,c.
"""


def register(sub: argparse._SubParsersAction) -> None:
    from lightningrl.config_fields import config_fields, type_name

    parser = sub.add_parser(
        "train",
        usage="lightningrl train [--config FILE] [--KEY VALUE ...]",
        help="train an agent (lightningrl.fit) from a TOML file and flags",
        description="Train an agent with RL: starts the store server, an inference server and runners "
        "as processes, trains here, and stops them all. A second run on the same output_dir resumes.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--config", dest="config_file", metavar="FILE", help="a TOML file (see below)")
    run = parser.add_argument_group("what to train (top-level TOML keys)")
    for key, text in TOP_LEVEL.items():
        run.add_argument(f"--{key}", dest=f"top.{key}", default=argparse.SUPPRESS, metavar="VALUE", help=text)
    fields = parser.add_argument_group("LightningRLConfig fields ([config] table)")
    for item in config_fields():
        if item.name in _SKIPPED_CONFIG_FIELDS:
            continue
        help_text = f"{item.help} " if item.help else ""
        help_text += f"({type_name(item.hint)}, default {item.default!r})"
        fields.add_argument(
            f"--{item.name}",
            dest=f"config.{item.name}",
            default=argparse.SUPPRESS,
            metavar="VALUE",
            help=help_text.replace("%", "%%"),
        )
    parser.set_defaults(func=_train)


def settings_from(args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, Any]]:
    """(top-level settings, the config dict) from the TOML file then the flags."""
    from lightningrl.config_fields import config_fields, parse_field_text, set_dotted

    top: dict[str, Any] = {}
    config: dict[str, Any] = {}
    if args.config_file:
        top, config = _read_toml(Path(args.config_file))
    given = vars(args)
    for key in TOP_LEVEL:
        if f"top.{key}" in given:
            value = given[f"top.{key}"]
            if key in _INTS:
                value = _int(value, key)
            elif key in _TABLES:
                value = _inline_table(value, key)
            elif key == "algorithm":
                value = [name.strip() for name in str(value).split(",") if name.strip()]
            top[key] = value
    hints = {f.name: f.hint for f in config_fields()}
    for name, hint in hints.items():
        if f"config.{name}" in given:
            set_dotted(config, name, parse_field_text(given[f"config.{name}"], hint, f"--{name}"))
    if "command" in top and isinstance(top["command"], str):
        import shlex

        top["command"] = shlex.split(top["command"])
    return top, config


def _int(text: Any, key: str) -> int:
    try:
        return int(text)
    except (TypeError, ValueError):
        raise ValueError(f"{key} must be an integer, got {text!r}") from None


def _inline_table(text: str, key: str) -> dict[str, Any]:
    try:
        return dict(tomllib.loads(f"value = {text}")["value"])
    except (tomllib.TOMLDecodeError, TypeError, ValueError):
        raise ValueError(
            f"--{key} must be a TOML inline table such as '{{steps = 4}}' or '{{val = {{temperature = 1.0}}}}', "
            f"got {text!r}"
        ) from None


def _read_toml(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """Top-level keys (relative paths made relative to the file) and the [config] table."""
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise FileNotFoundError(f"--config: TOML file {str(path)!r} does not exist") from None
    except tomllib.TOMLDecodeError as error:
        raise ValueError(f"--config: {path} is not valid TOML: {error}") from None
    config = data.pop("config", {})
    if not isinstance(config, dict):
        raise ValueError(f"{path}: 'config' must be a table ([config]), got {config!r}")
    unknown = sorted(set(data) - set(TOP_LEVEL))
    if unknown:
        raise ValueError(
            f"{path}: unknown key {unknown[0]!r}; valid top-level keys: {', '.join(TOP_LEVEL)}, config"
        )
    base = path.resolve().parent
    for key in _PATHS:
        if isinstance(data.get(key), str):
            data[key] = str(base / data[key])
    store = data.get("store")
    if isinstance(store, str) and "://" not in store:
        data["store"] = str(base / store)
    agent = data.get("agent")
    if isinstance(agent, str) and ":" in agent:
        from runner.loader import is_script_spec

        module, _, attr = agent.rpartition(":")
        if is_script_spec(module):
            data["agent"] = f"{base / module}:{attr}"
    return data, config


def _train(args: argparse.Namespace) -> int:
    from lightningrl.fitting.run import fit
    from lightningrl.serving.vllm import VllmUnavailable

    try:
        top, config = settings_from(args)
        if ("agent" in top) == ("command" in top):
            raise ValueError("give exactly one of agent (module:function) and command (a command line)")
        for key in ("train", "model"):
            if key not in top:
                raise ValueError(f"{key} is required (TOML key {key} or --{key})")
        agent = top.pop("agent", None) or list(top.pop("command"))
        train, val, model = top.pop("train"), top.pop("val", None), top.pop("model")
        kwargs = {
            k: top[k]
            for k in (
                "store",
                "workers",
                "runner_processes",
                "engine",
                "vllm_python",
                "output_dir",
                "sampling_by_mode",
                "algorithm",
                "prompt",
                "sft",
                "apo",
            )
            if k in top
        }
        result = fit(agent, train, val, model=model, config=config, **kwargs)
    except (ValueError, TypeError, FileNotFoundError, NotImplementedError, VllmUnavailable) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as stopped:  # fit's FitInterrupted says the step reached and how to resume
        print(str(stopped) or "interrupted: every process fit started is stopped", file=sys.stderr)
        return 130
    held = ""
    if result.held_out_before is not None:
        after = "n/a" if result.held_out_after is None else f"{result.held_out_after:.2f}"
        held = f"held-out {result.held_out_before:.2f} -> {after}  "
    print(
        f"done: step {result.steps}  {held}version {result.final_version_id}\n"
        f"  metrics {result.metrics_csv}\n  curve {result.reward_curve}\n  checkpoint {result.last_checkpoint}",
        flush=True,
    )
    return 0
