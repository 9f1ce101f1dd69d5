"""Code that runs inside vLLM's own processes: `lightningrl.serving.vllm` puts this folder on vLLM's
PYTHONPATH, so its modules import there as top-level modules (`lightningrl_vllm_ext`). They import
only what vLLM's environment has (torch, vllm), never lightningrl."""
