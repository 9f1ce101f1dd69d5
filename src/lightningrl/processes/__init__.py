"""fit's processes: the `Supervisor` of child processes (supervisor.py), what runners are told to run
(agent_spec.py), and what happens when a child dies (faults.py)."""
