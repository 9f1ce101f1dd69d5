"""Read back what the experiment trackers wrote (TensorBoard events, MLflow's SQLite store, a W&B
offline run), with each library's own reader where it has one."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any


def tensorboard_scalars(log_dir: Path) -> dict[str, dict[int, float]]:
    """tag -> {step: value} for every scalar in the event files under `log_dir`."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(log_dir), size_guidance={"scalars": 0, "tensors": 0})
    events.Reload()
    return {tag: {e.step: e.value for e in events.Scalars(tag)} for tag in events.Tags()["scalars"]}


def tensorboard_texts(log_dir: Path) -> dict[str, dict[int, str]]:
    """tag -> {step: text} for every text summary (tags end in `/text_summary`)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(log_dir), size_guidance={"scalars": 0, "tensors": 0})
    events.Reload()
    return {
        tag.removesuffix("/text_summary"): {
            e.step: e.tensor_proto.string_val[0].decode() for e in events.Tensors(tag)
        }
        for tag in events.Tags()["tensors"]
    }


def mlflow_runs(db: Path) -> list[dict[str, Any]]:
    """Each run of the "lightningrl" experiment: its params, tags and metric histories."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{db.resolve()}")
    experiment = client.get_experiment_by_name("lightningrl")
    assert experiment is not None
    runs = []
    for run in client.search_runs([experiment.experiment_id], order_by=["attributes.start_time ASC"]):
        metrics = {
            key: {m.step: m.value for m in client.get_metric_history(run.info.run_id, key)}
            for key in run.data.metrics
        }
        runs.append(
            {"params": run.data.params, "tags": run.data.tags, "metrics": metrics, "status": run.info.status}
        )
    return runs


_BLOCK = 32768


def wandb_records(run_file: Path) -> list[Any]:
    """The records of a W&B `.wandb` file (a leveldb-style log: 32 KiB blocks of CRC'd chunks, after a
    7-byte `:W&B` header), parsed with W&B's own protobuf classes."""
    from wandb.proto import wandb_internal_pb2

    data = run_file.read_bytes()
    ident, _magic, _version = struct.unpack("<4sHB", data[:7])
    assert ident == b":W&B", ident
    records, pending, pos = [], b"", 7
    while pos + 7 <= len(data):
        left = _BLOCK - pos % _BLOCK
        if left < 7:
            pos += left
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        if kind == 0 and length == 0:  # the rest of the block is padding
            pos += left
            continue
        pending += data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):  # a whole record, or its last chunk
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            records.append(record)
            pending = b""
    return records


def wandb_run(wandb_dir: Path) -> dict[str, Any]:
    """The one offline run under `wandb_dir`: its config and its history rows (step -> {key: value})."""
    [run_file] = sorted(wandb_dir.glob("offline-run-*/run-*.wandb"))
    config: dict[str, Any] = {}
    history: dict[int, dict[str, Any]] = {}
    for record in wandb_records(run_file):
        kind = record.WhichOneof("record_type")
        if kind == "run":
            config |= {item.key: json.loads(item.value_json) for item in record.run.config.update}
        elif kind == "history":
            row = {
                item.key or "/".join(item.nested_key): json.loads(item.value_json)
                for item in record.history.item
            }
            history[int(row.pop("_step"))] = {k: v for k, v in row.items() if not k.startswith("_")}
    return {"config": config, "history": history}
