"""The pages' views of stored data: the span waterfall (parents, orphans, loops, pinned rewards) and the
resource chain (a straight chain, a branch, the pointers)."""

from __future__ import annotations

from pathlib import Path

from lightningstore import PromptTemplate, SqlStore
from lightningstore.data.reward import Reward
from lightningstore.data.span import Span
from lightningstore.server.ui.resource_view import resource_chains
from lightningstore.server.ui.templating import visible
from lightningstore.server.ui.waterfall import build_waterfall


def span(span_id: str, name: str, start: float, end: float, parent: str | None = None, seq: int = 0, **attrs):  # noqa: ANN003
    return Span(
        rollout_id="r",
        attempt_id="a",
        trace_id="t",
        span_id=span_id,
        parent_id=parent,
        name=name,
        start_time=start,
        end_time=end,
        attributes=attrs,
        sequence_id=seq,
    )


def reward(name: str, value: float, step: int | None = None, span_id: str | None = None) -> Reward:
    return Reward(
        rollout_id="r",
        attempt_id="a",
        name=name,
        value=value,
        step=step,
        span_id=span_id,
        reward_id=f"w-{name}",
        create_time=0.0,
    )


def test_proxy_calls_nest_under_the_agent_span_and_rewards_pin_to_calls() -> None:
    spans = [
        span("root", "lightningrl.rollout", 0.0, 10.0, seq=5),
        span("c2", "chat", 6.0, 8.0, seq=3, **{"lightningrl.llm.response_token_ids": [1, 2]}),
        span(
            "c1",
            "chat",
            1.0,
            3.0,
            seq=1,
            **{"gen_ai.usage.input_tokens": 7, "lightningrl.llm.response_logprobs": [-1.0, -3.0]},
        ),
        span("tool", "tool.add", 4.0, 4.5, parent="root", seq=2),
        span("late", "chat", 20.0, 21.0, seq=6),  # outside the agent span: stays a root
    ]
    fall = build_waterfall(
        spans, [reward("first", 1.0, step=0), reward("reward", 0.5), reward("far", 1.0, step=9)]
    )
    assert [(r.span.span_id, r.depth) for r in fall.rows] == [
        ("root", 0),
        ("c1", 1),
        ("tool", 1),
        ("c2", 1),
        ("late", 0),
    ]
    by_id = {r.span.span_id: r for r in fall.rows}
    assert [w.name for w in by_id["c1"].rewards] == ["first"]  # step 0 = the first call in sequence order
    assert [w.name for w in fall.episode_rewards] == ["reward", "far"]  # no call 9: shown with the episode
    c1 = by_id["c1"].llm
    assert c1 is not None and c1.index == 0 and c1.input_tokens == 7
    assert c1.logprobs is not None and c1.logprobs.mean == -2.0 and c1.logprobs.count == 2
    assert by_id["c2"].llm is not None and by_id["c2"].llm.output_tokens == 2
    assert by_id["root"].offset_pct == 0 and by_id["late"].offset_pct + by_id["late"].width_pct <= 100.001


def test_a_parent_loop_or_missing_times_do_not_break_the_tree() -> None:
    spans = [
        span("a", "step.a", 0.0, 1.0, parent="b", seq=1),
        span("b", "step.b", 0.0, 1.0, parent="a", seq=2),
        Span(rollout_id="r", attempt_id="a", trace_id="t", span_id="x", name="open", sequence_id=3),
    ]
    fall = build_waterfall(spans, [])
    assert [(r.span.span_id, r.depth) for r in fall.rows] == [("x", 0), ("a", 0), ("b", 1)]
    assert fall.rows[0].duration_ms is None


async def test_resource_chain_indents_only_branches(tmp_path: Path) -> None:
    store = SqlStore(tmp_path / "store.db")
    root = await store.add_resource_version("p", PromptTemplate(template="0"))
    a = await store.add_resource_version("p", PromptTemplate(template="a"), parent_id=root.version_id)
    b = await store.add_resource_version("p", PromptTemplate(template="b"), parent_id=a.version_id)
    c = await store.add_resource_version("p", PromptTemplate(template="c"), parent_id=a.version_id)
    await store.move_pointer("p", "approved", a.version_id, actor="approver:alice", reason="checked")
    (chain,) = await resource_chains(store)
    await store.close()
    assert [(r.version.version_id, r.depth) for r in chain.rows] == [
        (root.version_id, 0),
        (a.version_id, 0),
        (b.version_id, 1),
        (c.version_id, 1),
    ]
    assert chain.latest == c.version_id and chain.approved == a.version_id
    assert [r.pointers for r in chain.rows] == [[], ["approved"], [], ["latest"]]
    assert chain.history[0].reason == "checked"  # newest first


def test_control_characters_show_as_pictures() -> None:
    assert visible("a\x00b\r\nc\td\x7f") == "a\u2400b\u240d\nc\td\u2421"
    assert visible(None) == ""
