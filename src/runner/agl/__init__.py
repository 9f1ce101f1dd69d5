"""Agent Lightning v1.0's agents run unchanged: `AglAgent` and `env_map` (`agent`), and the process that
runs a v1.0 class agent (`worker.py`, executed by path)."""

from runner.agl.agent import WORKER, AglAgent, env_from_map, resolve_input_path

__all__ = ["WORKER", "AglAgent", "env_from_map", "resolve_input_path"]
