"""The pipeline: what a request and an event ask for, as code.

``plan`` decides (pure) which steps a role runs, against what, and what a missing piece
means; ``run`` executes a plan through small ports (measuring, git, files, GitHub, the
clock) and returns one ``Outcome`` whose exit code comes from ``ci_bench.outcome``.
``request`` and ``config`` resolve flags, ``[tool.ci-bench]`` and the event into one frozen
request; ``session`` is a measuring session. May import every room but ``commands``.
"""
