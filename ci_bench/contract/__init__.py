"""The kernel contract: ``KernelSpec``, ``Case``, profiles, the matrix and the registry.

What a kernel declares and which cases a selection expands to. Pure: imports nothing of
ci_bench but ``ci_bench.errors``; never jax at import time. Kernels import it through the
stable public path ``ci_bench.spec``.
"""
