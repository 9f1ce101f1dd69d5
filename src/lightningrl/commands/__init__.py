"""One module per subcommand; each has `register(subparsers)` setting `func` on its parser."""
