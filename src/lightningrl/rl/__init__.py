"""The RL loop and its parts: `LightningRL` (loop.py), advantages and running baselines, continuous
learning's policy, the metrics log and the step progress. Nothing here starts a process (fit does)."""
