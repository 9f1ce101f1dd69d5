"""Experiment trackers: every metrics row also goes to TensorBoard, MLflow and/or W&B, all local.

Chosen with `fit(..., trackers=["tensorboard", "mlflow", "wandb"])`, `trackers = [...]` in a run's
TOML or `lightningrl train --tracker NAME`. Each library is imported only when chosen (the
`trackers` extra installs all three) and writes under the run's output directory with no network:

- tensorboard: event files in `tensorboard/` (`tensorboard --logdir <output_dir>/tensorboard`);
  numbers as scalars, text columns (e.g. `decision/first`) as text, the config as text at step 0.
- mlflow: a local store `mlflow.db` (SQLite, MLflow's own recommendation since its file store went
  into maintenance; `mlflow ui --backend-store-uri sqlite:///<output_dir>/mlflow.db`), experiment
  "lightningrl", one run per `fit` call; the config flattened into params. MLflow allows only
  `[/\\w.\\- :]` in a metric name, so a slice `train/success[op=minus]` is logged as
  `train/success/op:minus` (`mlflow_name`); text columns as tags (their last value).
- wandb: W&B in offline mode under `wandb/` (`wandb sync` uploads it later), the config as the run's
  config, every column under its own name.

Rows carry the step (`step`) and the version each update published (`update/version_id`).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import re
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

TRACKERS = ("tensorboard", "mlflow", "wandb")
EXTRA_HINT = 'pip install "lightningrl[trackers]"'


class Tracker(Protocol):
    def log(self, step: int, row: Mapping[str, Any]) -> None: ...

    def close(self) -> None: ...


def check_tracker_names(names: Sequence[str]) -> tuple[str, ...]:
    """The names as a tuple; a clear error for one that is not a tracker."""
    for name in names:
        if name not in TRACKERS:
            raise ValueError(f"trackers: unknown tracker {name!r}; choose from {TRACKERS}")
    return tuple(dict.fromkeys(names))


def flat_config(config: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """Nested config as `a.b.c` -> text (what MLflow's params and TensorBoard's text show)."""
    flat: dict[str, str] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat |= flat_config(value, f"{name}.")
        else:
            flat[name] = str(value)
    return flat


def _numbers_and_texts(row: Mapping[str, Any]) -> tuple[dict[str, float], dict[str, str]]:
    numbers: dict[str, float] = {}
    texts: dict[str, str] = {}
    for key, value in row.items():
        if key == "step" or value is None:
            continue
        if isinstance(value, bool | int | float):
            if math.isfinite(float(value)):
                numbers[key] = float(value)
        else:
            texts[key] = str(value)
    return numbers, texts


def mlflow_name(key: str) -> str:
    """A metrics column as a name MLflow accepts: `a/b[k=v]` -> `a/b/k:v`, other characters -> `_`."""
    name = re.sub(r"\[([^=\]]+)=([^\]]*)\]", r"/\1:\2", key)
    return re.sub(r"[^/\w.\- :]", "_", name)


def _missing(name: str, error: ImportError) -> ImportError:
    return ImportError(f"trackers: {name!r} needs its library ({error.name} is not installed): {EXTRA_HINT}")


class TensorBoardTracker:
    def __init__(self, output_dir: Path, config: Mapping[str, Any]) -> None:
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError as error:
            raise _missing("tensorboard", error) from error
        self.writer = SummaryWriter(log_dir=str(output_dir / "tensorboard"))
        self.writer.add_text("config", "```\n" + json.dumps(config, indent=2, default=str) + "\n```", 0)

    def log(self, step: int, row: Mapping[str, Any]) -> None:
        numbers, texts = _numbers_and_texts(row)
        for key, value in numbers.items():
            self.writer.add_scalar(key, value, step)
        for key, value in texts.items():
            self.writer.add_text(key, value, step)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


class MlflowTracker:
    def __init__(self, output_dir: Path, config: Mapping[str, Any], run_name: str) -> None:
        try:
            from mlflow.entities import Param
            from mlflow.tracking import MlflowClient
        except ImportError as error:
            raise _missing("mlflow", error) from error
        for noisy in ("mlflow", "alembic"):  # table creation and migrations log at INFO
            logging.getLogger(noisy).setLevel(logging.WARNING)
        self.uri = f"sqlite:///{(output_dir / 'mlflow.db').resolve()}"
        self.client = MlflowClient(tracking_uri=self.uri)
        experiment = self.client.get_experiment_by_name("lightningrl")
        experiment_id = (
            experiment.experiment_id if experiment else self.client.create_experiment("lightningrl")
        )
        self.run_id = self.client.create_run(experiment_id, run_name=run_name).info.run_id
        params = [Param(key, value[:6000]) for key, value in flat_config(config).items()]
        for start in range(0, len(params), 100):  # MLflow takes at most 100 params a batch
            self.client.log_batch(self.run_id, params=params[start : start + 100])

    def log(self, step: int, row: Mapping[str, Any]) -> None:
        from mlflow.entities import Metric, RunTag

        numbers, texts = _numbers_and_texts(row)
        now = int(time.time() * 1000)
        metrics = [Metric(mlflow_name(key), value, now, step) for key, value in numbers.items()]
        tags = [RunTag(mlflow_name(key), value[:8000]) for key, value in texts.items()]
        for start in range(0, max(len(metrics), 1), 1000):  # MLflow takes at most 1000 metrics a batch
            self.client.log_batch(
                self.run_id, metrics=metrics[start : start + 1000], tags=tags if start == 0 else []
            )

    def close(self) -> None:
        self.client.set_terminated(self.run_id)


class WandbTracker:
    def __init__(self, output_dir: Path, config: Mapping[str, Any], run_name: str) -> None:
        try:
            import wandb
        except ImportError as error:
            raise _missing("wandb", error) from error
        self.run = wandb.init(
            project="lightningrl",
            name=run_name,
            dir=str(output_dir),
            mode="offline",
            config=dict(config),
            reinit="create_new",
            settings=wandb.Settings(silent=True, console="off"),
        )

    def log(self, step: int, row: Mapping[str, Any]) -> None:
        self.run.log({key: value for key, value in row.items() if key != "step"}, step=step)

    def close(self) -> None:
        self.run.finish()


class RunTrackers:
    """The trackers of one run: `log(row)` hands each row (with its `step`) to every one of them."""

    def __init__(self, trackers: list[Tracker]) -> None:
        self.trackers = trackers

    @classmethod
    def open(
        cls, names: Sequence[str], output_dir: str | Path, config: Mapping[str, Any], run_name: str
    ) -> RunTrackers:
        out = Path(output_dir)
        out.mkdir(parents=True, exist_ok=True)
        opened: list[Tracker] = []
        try:
            for name in check_tracker_names(names):
                if name == "tensorboard":
                    opened.append(TensorBoardTracker(out, config))
                elif name == "mlflow":
                    opened.append(MlflowTracker(out, config, run_name))
                else:
                    opened.append(WandbTracker(out, config, run_name))
        except BaseException:
            for tracker in opened:
                tracker.close()
            raise
        return cls(opened)

    @classmethod
    def for_config(cls, config: Any) -> RunTrackers:
        """The trackers a LightningRLConfig names (`trackers`), writing under its `output_dir`, with the
        whole config recorded."""
        record = json.loads(json.dumps(dataclasses.asdict(config), default=str))
        return cls.open(config.trackers, config.output_dir, record, Path(config.output_dir).name)

    def log(self, row: Mapping[str, Any]) -> None:
        if "step" not in row:
            return
        step = int(row["step"])
        for tracker in self.trackers:
            tracker.log(step, row)

    def close(self) -> None:
        for tracker in self.trackers:
            tracker.close()
        self.trackers = []
