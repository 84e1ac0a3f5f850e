"""The kernel contract: ``KernelSpec``, ``Case``, profiles, the matrix and the registry.

What a kernel declares and which cases a selection expands to. Pure: imports nothing of
ci_bench but plain ``schema`` values (``Shard``), ``errors`` and ``text``; never jax.
Kernels import it through the stable public path ``ci_bench.spec``. (Checked by
``lint-imports``: [tool.importlinter] in pyproject.toml.) ``tunables``: the knobs
``ci-bench tune`` searches; ``tuned``: the run-time lookup of a kernel's tuned configs (it
reads their file; the chip is detected by ``ci_bench.spec``).
"""
