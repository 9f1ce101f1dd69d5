"""Quickstart: a LangChain agent (prompt -> ChatOpenAI -> parser, one tool) learns to use its tool."""

from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from tiny_model import question, tasks, tiny_model

from lightningrl import fit, rollout


@tool
def mirror(word: str) -> str:
    """The word reversed."""
    return word[::-1]


@rollout
def agent(task: dict, llm) -> float:
    chat = ChatOpenAI(base_url=llm.base_url, api_key=llm.api_key, model=llm.model, max_tokens=2)
    chain = ChatPromptTemplate.from_messages([("user", "{q}")]) | chat | StrOutputParser()
    use_tool = chain.invoke({"q": question(task["command"], task["word"])}).strip() == "yes"
    answer = mirror.invoke(task["word"]) if use_tool else task["word"]
    return float(answer == task["word"][::-1])


if __name__ == "__main__":
    trainer = {"lr": 3e-3, "mini_batch_size": 16, "ppo_epochs": 4}
    config = {"steps": 12, "tasks_per_step": 4, "val_every": 6, "trainer": trainer}
    result = fit(agent, tasks("train"), tasks("heldout"), model=tiny_model(), config=config)
    print(f"held-out success: before {result.held_out_before:.2f} after {result.held_out_after:.2f}")
