"""algorithm: the Algorithm contract (poll the store, enqueue, wait, publish) and simple algorithms."""

from algorithm.base import Algorithm, RolloutOutcome
from algorithm.evaluate import Evaluate, EvaluationResult
from algorithm.task import Task

__all__ = ["Algorithm", "Evaluate", "EvaluationResult", "RolloutOutcome", "Task"]
