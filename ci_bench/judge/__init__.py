"""Judging: statistics, the ONE verdict ladder, baseline comparison and A/B.

Pure functions from measured results to verdicts: no jax, no files, no network, no clock.
May import ``schema``, the pure ``contract`` and the ground floor (``samples``,
``outcome``); never ``measure`` or ``store`` (checked by ``lint-imports``).
"""
