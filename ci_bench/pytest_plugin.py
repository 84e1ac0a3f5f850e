"""pytest plugin (entry point ``pytest11``): the ``accelerator`` marker and its visible skip."""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--run-accelerator",
        action="store_true",
        help="run tests marked accelerator even where jax's backend is the CPU",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "accelerator: needs a TPU or GPU; skipped on CPU")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    marked = [item for item in items if item.get_closest_marker("accelerator")]
    if not marked or config.getoption("--run-accelerator"):
        return
    import jax

    backend = jax.default_backend()
    if backend in ("tpu", "gpu"):
        return
    skip = pytest.mark.skip(reason=f"needs a TPU or GPU runner (jax backend here: {backend})")
    for item in marked:
        item.add_marker(skip)
