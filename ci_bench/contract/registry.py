"""Find kernels from module paths in config: ci_bench never imports a kernel by name."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import MappingProxyType

from ci_bench.contract.spec import KernelSpec, SpecError
from ci_bench.errors import InputError


def kernel_module(modules: Iterable[str], name: str, root: Path | None = None) -> str:
    """The module path that defines kernel ``name`` (a child process re-imports it)."""
    for module_path in dict.fromkeys(modules):
        if load_kernels([module_path], root).get(name) is not None:
            return module_path
    raise InputError(f"unknown kernel {name!r}")


def load_kernels(modules: Iterable[str], root: Path | None = None) -> Mapping[str, KernelSpec]:
    """Import each module, take its ``SPEC``; a frozen name -> spec mapping.

    ``root`` (the project folder) goes on ``sys.path`` so a kernel library's own
    packages import without being installed.
    """
    if root is not None and str(root) not in sys.path:
        sys.path.insert(0, str(root))
    specs: dict[str, KernelSpec] = {}
    origin: dict[str, str] = {}
    for module_path in modules:
        try:
            module = importlib.import_module(module_path)
        except SpecError as exc:
            raise InputError(f"kernel module {module_path}: {exc}") from None
        except ImportError as exc:
            raise InputError(f"kernel module {module_path}: cannot import: {exc}") from None
        except Exception as exc:  # a broken kernel module is bad input, reported in one line
            raise InputError(
                f"kernel module {module_path}: failed on import: {type(exc).__name__}: {exc}"
            ) from None
        spec = getattr(module, "SPEC", None)
        if not isinstance(spec, KernelSpec):
            raise InputError(
                f"kernel module {module_path}: needs a SPEC of type ci_bench.spec.KernelSpec"
            )
        if spec.name in specs:
            raise InputError(
                f"kernel {spec.name!r} is defined twice ({origin[spec.name]}, {module_path})"
            )
        specs[spec.name] = spec
        origin[spec.name] = module_path
    return MappingProxyType(specs)
