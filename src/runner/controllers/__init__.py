"""Controllers: agents that run each rollout elsewhere (a local subprocess, a Kubernetes Job)."""

from runner.controllers.environment import attempt_environment
from runner.controllers.local import LocalController, RolloutProcessError

__all__ = ["LocalController", "RolloutProcessError", "attempt_environment"]
