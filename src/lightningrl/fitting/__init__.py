"""`fit` and what it runs: `run` (the front door: checks, child processes, stages), `stages` (rl, sft,
apo, eval on one store), `interrupts` (Ctrl-C and SIGTERM), `local_stack` (store and inference servers
in this process) and `result` (what `fit` returns). `from lightningrl import fit` is the way in."""
