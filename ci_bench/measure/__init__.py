"""Measuring: harness, timers, device fingerprint, roofline metrics, profiling, HLO.

The only room that runs kernels (and so imports jax). May import ``contract`` and ``schema``.
"""
