"""Tasks from lists, JSONL files and iterables: stable ids, the {input, tags} shape, and clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lightningrl.datasets import load_tasks, task_id_of


def test_ids_are_stable_hashes_of_the_input_unless_given() -> None:
    rows = [{"q": "1+1", "op": "plus"}, {"task_id": "mine", "q": "2*2"}, {"task_id": 7, "q": "3"}]
    first, again = load_tasks(rows), load_tasks([dict(r) for r in rows])
    assert [t.task_id for t in first] == [t.task_id for t in again]
    assert first[0].task_id == task_id_of({"op": "plus", "q": "1+1"})  # key order does not matter
    assert first[0].task_id.startswith("t-") and first[1].task_id == "mine" and first[2].task_id == "7"
    assert first[0].input == rows[0]  # the row itself is the input


def test_input_shape_tags_and_balance_field() -> None:
    tasks = load_tasks(
        [{"input": {"q": "1+1"}, "tags": {"op": "plus", "level": 1}}, {"q": "2*2", "op": "times"}],
        tag_fields=["op"],
    )
    assert tasks[0].input == {"q": "1+1"} and tasks[0].tags == {"op": "plus", "level": "1"}
    assert tasks[1].input == {"q": "2*2", "op": "times"} and tasks[1].tags == {"op": "times"}


def test_jsonl_and_iterables(tmp_path: Path) -> None:
    path = tmp_path / "train.jsonl"
    path.write_text(json.dumps({"q": "a"}) + "\n\n" + json.dumps({"q": "b"}) + "\n")
    from_file = load_tasks(path)
    from_generator = load_tasks(row for row in [{"q": "a"}, {"q": "b"}])
    assert [t.task_id for t in from_file] == [t.task_id for t in from_generator]
    assert load_tasks(str(path))[1].input == {"q": "b"}


def test_bad_rows_are_named(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="train row 1 must be a dict, got str"):
        load_tasks([{"q": 1}, "oops"])
    with pytest.raises(ValueError, match="val rows 0 and 2 have the same task_id 'x'"):
        load_tasks([{"task_id": "x"}, {"task_id": "y"}, {"task_id": "x"}], what="val")
    with pytest.raises(ValueError, match="identical inputs"):
        load_tasks([{"q": 1}, {"q": 1}])
    with pytest.raises(ValueError, match="row 0 .* has no field 'op'"):
        load_tasks([{"q": 1}], tag_fields=["op"])
    with pytest.raises(ValueError, match="task_id"):
        load_tasks([{"task_id": "", "q": 1}])
    with pytest.raises(TypeError, match="got one dict"):
        load_tasks({"q": 1})
    with pytest.raises(TypeError, match="row 0 is not JSON-serialisable"):
        load_tasks([{"q": object()}])
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"q": 1}\n{nope\n')
    with pytest.raises(ValueError, match=r"bad.jsonl:2 is not valid JSON"):
        load_tasks(bad)
    with pytest.raises(FileNotFoundError, match="missing.jsonl"):
        load_tasks(tmp_path / "missing.jsonl")


def test_a_hugging_face_split_from_local_json_or_parquet_is_rows(tmp_path: Path) -> None:
    import datasets

    rows = [{"question": "1+2?", "answer": 3, "op": "plus"}, {"question": "5-2?", "answer": 3, "op": "minus"}]
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    from_json = datasets.load_dataset("json", data_files=str(tmp_path / "rows.jsonl"), split="train")
    from_json.to_parquet(str(tmp_path / "rows.parquet"))
    from_parquet = datasets.load_dataset("parquet", data_files=str(tmp_path / "rows.parquet"), split="train")
    expected = load_tasks(rows, tag_fields=["op"])
    for split in (from_json, from_parquet):
        tasks = load_tasks(split, tag_fields=["op"])
        assert [(t.task_id, t.input, t.tags) for t in tasks] == [
            (t.task_id, t.input, t.tags) for t in expected
        ]
    # The whole DatasetDict is refused with the split to pass.
    whole = datasets.load_dataset("json", data_files={"train": str(tmp_path / "rows.jsonl")})
    with pytest.raises(TypeError, match=r"DatasetDict with splits \['train'\]: pass one split"):
        load_tasks(whole, what="train")
