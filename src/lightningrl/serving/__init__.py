"""An OpenAI-compatible inference server with request batching, vLLM token-id extensions and hot reload.

Responses follow vLLM: with `return_token_ids` the body carries `prompt_token_ids` (chat: top level;
completions: in each choice, and top level for a single prompt) and each choice its `token_ids`; an
EOS or stop token id is kept in `token_ids`, and the text is always `decode(token_ids)` without
special tokens. Logprobs are the raw log-softmax of the sampled ids (temperature 1, before top-p).
"""

from lightningrl.serving.app import create_app
from lightningrl.serving.model import LoadedModel, load_model, resolve_device
from lightningrl.serving.sampling import SamplingParams
from lightningrl.serving.server import run_server
from lightningrl.serving.service import InferenceService, RequestError

__all__ = [
    "InferenceService",
    "LoadedModel",
    "RequestError",
    "SamplingParams",
    "create_app",
    "load_model",
    "resolve_device",
    "run_server",
]
