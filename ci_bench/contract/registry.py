"""Find kernels from module paths in config: ci_bench never imports a kernel by name."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

from ci_bench.contract.isolation import Sides, Tree
from ci_bench.contract.spec import KernelSpec, SpecError
from ci_bench.errors import InputError


def kernel_module(modules: Iterable[str], name: str, root: Path | None = None) -> str:
    """The module path that defines kernel ``name`` (a child process re-imports it)."""
    for module_path in dict.fromkeys(modules):
        if load_kernels([module_path], root).get(name) is not None:
            return module_path
    raise InputError(f"unknown kernel {name!r}")


RESOLUTION = (
    "a module name (my_kernels.rmsnorm) is imported with the config file's folder first on "
    "sys.path; a file path (ends in .py or contains '/') is read relative to the current "
    "directory, then the config file's folder"
)


def is_file_path(entry: str) -> bool:
    return entry.endswith(".py") or "/" in entry or "\\" in entry


def _find_file(entry: str, root: Path | None) -> Path:
    """The file, absolute but where the config names it: a SPEC that is a symbolic link
    out of the repository stays a file of each checkout (resolved, the base's would be the
    head's own module and import the head's kernel)."""
    for base in (Path.cwd(), root):
        if base is not None and (base / entry).is_file():
            return Path(os.path.abspath(base / entry))  # noqa: PTH100 (resolve() follows links)
    for base in (Path.cwd(), root):
        if base is not None and (base / entry).is_symlink():
            raise InputError(
                f"kernel module {entry}: a symbolic link to {(base / entry).readlink()}, which "
                "does not exist (a link out of the repository must be absolute to be found "
                "from another checkout, such as an A/B's base)"
            )
    raise InputError(f"kernel module {entry}: no such file ({RESOLUTION})")


def _import_file(path: Path) -> object:
    """Import a kernel file under a name unique to its path; its folder goes on sys.path so
    sibling modules and packages import as they would for a script."""
    name = f"_ci_bench_kernel_{path.stem}_{hashlib.sha1(str(path).encode()).hexdigest()[:8]}"
    if name in sys.modules:
        return sys.modules[name]
    if str(path.parent) not in sys.path:
        sys.path.insert(0, str(path.parent))
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def load_kernels(modules: Iterable[str], root: Path | None = None) -> Mapping[str, KernelSpec]:
    """Import each module (a dotted name or a .py file, see RESOLUTION), take its ``SPEC``;
    a frozen name -> spec mapping.

    ``root`` (the project folder) goes on ``sys.path`` so a kernel library's own
    packages import without being installed.
    """
    if root is not None and str(root) not in sys.path:
        sys.path.insert(0, str(root))
    specs: dict[str, KernelSpec] = {}
    origin: dict[str, str] = {}
    for module_path in modules:
        try:
            if is_file_path(module_path):
                module = _import_file(_find_file(module_path, root))
            else:
                module = importlib.import_module(module_path)
        except InputError:
            raise  # already one line naming the module (no such file)
        except SpecError as exc:
            raise InputError(f"kernel module {module_path}: {exc}") from None
        except ImportError as exc:
            raise InputError(
                f"kernel module {module_path}: cannot import: {exc} ({RESOLUTION})"
            ) from None
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


@dataclass(frozen=True)
class Isolated:
    """The base's SPECs beside the head's in one process (``contract.isolation``): ``base``
    runs the base checkout's modules, ``head(specs)`` binds the head's to theirs, and
    ``sides.held()`` keeps a pair's switches symmetric."""

    sides: Sides
    base: Mapping[str, KernelSpec]

    def head(self, specs: Mapping[str, KernelSpec]) -> Mapping[str, KernelSpec]:
        return MappingProxyType(self.sides.bind_all(specs, self.sides.head))

    def files(self, side: str) -> dict[str, str]:
        """Module name -> file of every repository module the side has loaded so far."""
        return (self.sides.base if side == "base" else self.sides.head).files()

    @property
    def leaks(self) -> set[str]:
        """Modules of the head's checkout that the base's code imported (none, unless an
        import bypassed the finder): the A/B names them rather than trusting the pair."""
        return set(self.sides.base.leaks)


def _base_entry(entry: str, folder: Path, head_tree: Path, base_tree: Path) -> str:
    """A ``.py`` SPEC path of the base's config, read in the base's checkout (a relative path
    resolves from the current directory first, which is the head's checkout)."""
    if not is_file_path(entry):
        return entry
    path = Path(entry)
    if path.is_absolute():
        inside = Tree(str(head_tree)).holds(str(path))
        return Tree(str(head_tree)).moved(str(path), Tree(str(base_tree))) if inside else entry
    here = Path.cwd() / entry
    if Tree(str(head_tree)).holds(str(here)):
        return Tree(str(head_tree)).moved(str(here), Tree(str(base_tree)))
    return str(folder / entry)


def load_isolated(
    folder: Path,
    modules: Sequence[str],
    *,
    head_tree: Path,
    base_tree: Path,
    failures: dict[str, str] | None = None,
) -> Isolated:
    """Import kernel modules from ``folder`` (inside ``base_tree``, another checkout of the
    repository whose top level here is ``head_tree``) beside the head's modules already
    imported: every module inside the repository comes from the base's checkout, the head's
    are set aside while the base's code runs and put back after (``contract.isolation``).

    With ``failures``, a module that cannot be imported is recorded there (module -> the
    one-line error) and the others are loaded: a kernel added by the pull request (on the
    head only) leaves the base's other kernels comparable."""
    sides = Sides(str(head_tree), str(base_tree))
    entries = [_base_entry(m, folder, head_tree, base_tree) for m in modules]
    with sides.loading_base():
        sys.path.insert(0, str(folder))
        if failures is None:
            specs = dict(load_kernels(entries, folder))
        else:
            specs = {}
            for module, entry in zip(modules, entries, strict=True):
                try:
                    found = load_kernels([entry], folder)
                except InputError as exc:
                    failures[module] = str(exc)
                    continue
                for name in set(found) & set(specs):
                    raise InputError(f"kernel {name!r} is defined twice (in {module} too)")
                specs.update(found)
    return Isolated(sides, MappingProxyType(sides.bind_all(specs, sides.base)))
