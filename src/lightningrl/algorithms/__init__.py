"""The algorithms `fit` runs besides the RL loop: SFT on successes (sft.py) and prompt optimization (apo.py)."""
