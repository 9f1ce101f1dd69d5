"""Tasks from what a user has: a list of dicts, a JSONL file, or any iterable of dicts (a HF split).

A row's task input is the row itself, unless the row is exactly `{input, task_id?, tags?}`: then the
input is its `input` field and its `tags` (a dict) are tags. The task id is the row's `task_id` when
present, else `t-` + a hash of the canonical JSON of the input (stable across runs and machines).
Tags are read from the fields `tag_fields` names (`LightningRLConfig.balance_by`): from the row, or
from `tags` in the `{input, tags}` shape (where every tag is kept).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from algorithm import Task

Rows = str | Path | Iterable[Mapping[str, Any]]
"""A JSONL path, or rows (a list of dicts, a generator, a Hugging Face `datasets` split)."""

_WRAPPED_KEYS = frozenset({"input", "task_id", "tags"})


def task_id_of(task_input: Any) -> str:
    """`t-` + 16 hex of SHA-256 over the input's canonical JSON (sorted keys, no spaces)."""
    text = json.dumps(task_input, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "t-" + hashlib.sha256(text.encode()).hexdigest()[:16]


def read_jsonl(path: str | Path, *, what: str = "rows") -> list[Any]:
    """The JSON values of a JSONL file's non-blank lines; an error names the file and line."""
    file = Path(path)
    if not file.is_file():
        raise FileNotFoundError(f"{what}: JSONL file {str(path)!r} does not exist")
    rows = []
    for number, line in enumerate(file.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as error:
            raise ValueError(f"{what}: {file}:{number} is not valid JSON ({error.msg})") from None
    return rows


def load_tasks(rows: Rows, *, what: str = "train", tag_fields: Sequence[str] = ()) -> list[Task]:
    """Tasks from `rows` (see the module docstring); `what` names the dataset in errors."""
    if isinstance(rows, str | Path):
        values: Iterable[Any] = read_jsonl(rows, what=what)
    elif isinstance(rows, Mapping):
        splits = [name for name, value in rows.items() if hasattr(value, "column_names")]
        if splits and len(splits) == len(rows):  # a Hugging Face DatasetDict: one split is the rows
            raise TypeError(
                f"{what} is a Hugging Face DatasetDict with splits {splits}: pass one split, e.g. "
                f"dataset[{splits[0]!r}] (or load_dataset(..., split={splits[0]!r}))"
            )
        raise TypeError(f"{what} must be a list of dicts, a JSONL path or an iterable of dicts, got one dict")
    elif isinstance(rows, Iterable):
        values = rows
    else:
        raise TypeError(
            f"{what} must be a list of dicts, a JSONL path or an iterable of dicts, got {type(rows).__name__}"
        )
    tasks: list[Task] = []
    seen: dict[str, int] = {}
    for index, row in enumerate(values):
        task = _task_of(row, index, what=what, tag_fields=tag_fields)
        if task.task_id in seen:
            hint = "" if _has_id(row) else " (identical inputs: give each row a distinct task_id)"
            raise ValueError(
                f"{what} rows {seen[task.task_id]} and {index} have the same task_id {task.task_id!r}{hint}"
            )
        seen[task.task_id] = index
        tasks.append(task)
    return tasks


def _has_id(row: Any) -> bool:
    return isinstance(row, Mapping) and row.get("task_id") is not None


def _task_of(row: Any, index: int, *, what: str, tag_fields: Sequence[str]) -> Task:
    if not isinstance(row, Mapping):
        raise TypeError(f"{what} row {index} must be a dict, got {type(row).__name__}: {row!r:.80}")
    row = dict(row)
    wrapped = "input" in row and set(row) <= _WRAPPED_KEYS
    task_input = row["input"] if wrapped else row
    tags_field = row.get("tags") if wrapped else None
    if tags_field is not None and not isinstance(tags_field, Mapping):
        raise TypeError(f"{what} row {index}: field 'tags' must be a dict, got {tags_field!r:.80}")
    try:
        json.dumps(task_input)
    except (TypeError, ValueError) as error:
        raise TypeError(f"{what} row {index} is not JSON-serialisable: {error}") from None
    raw_id = row.get("task_id")
    if raw_id is None:
        task_id = task_id_of(task_input)
    elif isinstance(raw_id, str | int) and not isinstance(raw_id, bool) and str(raw_id):
        task_id = str(raw_id)
    else:
        raise ValueError(
            f"{what} row {index}: field 'task_id' must be a non-empty str or int, got {raw_id!r}"
        )
    source = dict(tags_field or {}) if wrapped else row
    tags = {str(k): str(v) for k, v in source.items()} if wrapped else {}
    for name in tag_fields:
        if name not in source:
            where = "its 'tags'" if wrapped else "the row"
            raise ValueError(f"{what} row {index} ({task_id}): {where} has no field {name!r} to tag by")
        tags[name] = str(source[name])
    return Task(task_id=task_id, input=task_input, tags=tags)
