"""The demos' subcommands of `lightningrl`, one module each with `register(subparsers)` (as lightningrl.commands)."""
