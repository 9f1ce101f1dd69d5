"""Quickstart: a LangChain agent calls calculator tools through SmolLM2-135M-Instruct; RL teaches it which."""

from langchain_core.messages import HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from smollm2_start import call_format_model, tasks

from lightningrl import fit, rollout

SYSTEM = "You are a calculator assistant. Call a tool to compute the answer, then reply with just the number."


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    return a * b


@rollout
def agent(task: dict, llm) -> float:
    chat = ChatOpenAI(model=llm.model, base_url=llm.base_url, api_key=llm.api_key, max_tokens=40)
    chat, messages = chat.bind_tools([add, multiply]), [SystemMessage(SYSTEM), HumanMessage(task["question"])]
    for call in (reply := chat.invoke(messages)).tool_calls[:1]:  # run its tool, send the result back
        tool_ = {"add": add, "multiply": multiply}.get(call["name"])
        result = tool_.invoke(call["args"]) if tool_ and set(call["args"]) == {"a", "b"} else "error"
        reply = chat.invoke([*messages, reply, ToolMessage(str(result), tool_call_id=call["id"])])
    return float(reply.content.strip() == str(task["answer"]))


if __name__ == "__main__":
    config = {"steps": 5, "tasks_per_step": 4, "rollouts_per_task": 8, "balance_by": "op",
              "trainer": {"micro_batch_size": 4}}  # micro-batches of 4 sequences: ~11 GB peak  # fmt: skip
    result = fit(agent, tasks("train"), tasks("heldout"), model=call_format_model(SYSTEM, [add, multiply]),
                 config=config, sampling_by_mode={"val": {"temperature": 0.0}})  # fmt: skip
    print(f"held-out success: before {result.held_out_before:.2f} after {result.held_out_after:.2f}")
