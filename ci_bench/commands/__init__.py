"""The command line: argparse, configuration and the request built from them.

One short handler per subcommand: build the request, run it, publish. The only room that
sees ``argparse`` and may import every other room.
"""
