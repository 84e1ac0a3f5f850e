"""Measuring: harness, timers, device fingerprint, roofline metrics, profiling, HLO.

The only room that runs kernels (and so imports jax). May import ``contract``, ``schema``
and the ground floor (``samples``, ``text``); never ``judge``, ``report`` or ``store``
(checked by ``lint-imports``).
"""
