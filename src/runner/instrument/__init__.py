"""Framework integrations: the openai client, LangChain callbacks and AutoGen (each imported on demand)."""

from lightningstore.semconv import is_proxy_url
from runner.instrument.openai import instrument_openai, uninstrument_openai

__all__ = ["instrument_openai", "is_proxy_url", "uninstrument_openai"]
