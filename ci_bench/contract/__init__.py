"""The kernel contract: ``KernelSpec``, ``Case``, profiles, the matrix and the registry.

What a kernel declares and which cases a selection expands to. Pure: imports nothing of
ci_bench but plain ``schema`` values (``Shard``), ``errors`` and ``text``; never jax.
Kernels import it through the stable public path ``ci_bench.spec``. (Checked by
``lint-imports``: [tool.importlinter] in pyproject.toml.)
"""
