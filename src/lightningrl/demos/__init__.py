"""What the examples, tests and benchmarks share: tiny models, supervised warm-ups and demo flags.

Not the library: no module outside lightningrl.demos imports it (tests/test_import_graph.py); the
`lightningrl` command line loads its commands (lightningrl.demos.commands) by name.
"""
