"""The pipeline: what a request and an event ask for, as code.

``plan`` decides (pure) which steps a role runs, against what, and what a missing piece
means; ``run`` hands the plan to ``steps``, which runs exactly those steps on one
``context.Context`` and returns one ``Outcome`` whose exit code comes from
``ci_bench.outcome``. Measuring goes through the one port (``context.Ports``); git, GitHub
and the clock are reached directly.
``request`` and ``config`` resolve flags, ``[tool.ci-bench]`` and the event into one frozen
request; ``session`` is a measuring session. May import every room but ``commands``.
"""
