"""Two versions of a repository's code in one process: an A/B's base beside its head.

The base and the head of a pull request define the same module names (``mylib.kernels.x``),
and Python keeps one module per name in ``sys.modules``: a base SPEC that imports ``mylib``
would find the head's, and the A/B would compare the head with itself. So every module whose
file lies inside the repository (any package, namespace packages, ``src/`` layouts, the
files beside a ``.py`` SPEC, an editable install of the repository itself) belongs to a
*side*. The base's are imported from the base checkout by a finder that maps whatever the
head's import system would find inside the head's checkout to the same path in the base's,
and each side's functions run with that side's modules in ``sys.modules`` (imports inside a
function included, module-level caches kept apart). ``ci_bench`` is shared: both sides obey
one contract. Code outside the repository (site-packages, a vendored path elsewhere) is the
same file for both sides: it cannot be isolated, and the A/B says so (``pipeline.ab``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib.abc
import importlib.machinery
import importlib.util
import os
import site
import sys
import sysconfig
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

from ci_bench.contract.spec import KernelSpec

SHARED = "ci_bench"  # the contract both sides obey: never set aside


def _shared(name: str) -> bool:
    return name == SHARED or name.startswith(SHARED + ".")


@functools.cache
def _real(path: str) -> str:
    return os.path.realpath(path)


@functools.cache
def _environment() -> tuple[str, ...]:
    """Where the interpreter and installed packages live: never the repository's own code,
    even when the virtual environment sits inside the checkout (``.venv/``)."""
    places = {sys.prefix, sys.base_prefix, sys.exec_prefix, *site.getsitepackages()}
    places.add(site.getusersitepackages())
    places.update(v for k, v in sysconfig.get_paths().items() if k != "scripts")
    return tuple(sorted({_real(p) + os.sep for p in places if p}))


def location(module: ModuleType) -> str | None:
    """The module's file, or a namespace package's first folder (None: built in)."""
    file = getattr(module, "__file__", None)
    if isinstance(file, str):
        return file
    path = getattr(module, "__path__", None)
    with contextlib.suppress(TypeError):
        first = next(iter(path or ()), None)
        return first if isinstance(first, str) else None
    return None


@dataclasses.dataclass
class Tree:
    """A checkout on disk (the git top level): what of it is this repository's own code."""

    root: str

    def __post_init__(self) -> None:
        self.root = _real(self.root)

    def holds(self, path: str | None) -> bool:
        if not path:
            return False
        real = _real(path)
        inside = real == self.root or real.startswith(self.root + os.sep)
        return inside and not real.startswith(_environment())

    def moved(self, path: str, to: Tree) -> str:
        """``path`` (inside this tree) at the same place in ``to``."""
        return str(Path(to.root) / os.path.relpath(_real(path), self.root))


@dataclasses.dataclass
class Side:
    """One version's modules: those whose files lie in its tree."""

    name: str  # "head" or "base"
    tree: Tree
    modules: dict[str, ModuleType] = dataclasses.field(default_factory=dict)
    leaks: set[str] = dataclasses.field(default_factory=set)  # the other tree's, seen here
    _mark: int = -1  # len(sys.modules) when this side became active

    def collect(self, other: Tree) -> None:
        """Adopt the modules imported while this side was active (cheap when none were)."""
        if len(sys.modules) == self._mark:
            return
        for name, module in list(sys.modules.items()):
            if name in self.modules or _shared(name) or module is None:
                continue
            where = location(module)
            if self.tree.holds(where):
                self.modules[name] = module
            elif other.holds(where):
                self.leaks.add(name)
        self._mark = len(sys.modules)

    def files(self) -> dict[str, str]:
        """Module name -> its file, for every module of this side that has one."""
        return {n: f for n, m in self.modules.items() if (f := location(m))}


class _BaseFinder(importlib.abc.MetaPathFinder):
    """While the base is active: whatever the other finders would find inside the head's
    tree (a ``sys.path`` entry, an editable install's mapping, a parent's ``__path__``) is
    found at the same path in the base's tree, or not at all."""

    def __init__(self, head: Tree, base: Tree, extra_path: list[str]) -> None:
        self.head, self.base, self.extra_path = head, base, extra_path

    def _others(self, fullname: str, path: Any, target: Any) -> Any:
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            if finder is self or find is None:
                continue
            spec = find(fullname, path, target)
            if spec is not None:
                return spec
        return None

    def _base_path(self) -> list[str]:
        moved = [self.head.moved(p, self.base) for p in sys.path if self.head.holds(p)]
        return list(dict.fromkeys([*moved, *self.extra_path, self.base.root]))

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if _shared(fullname):
            return None
        spec = self._others(fullname, path, target)
        if spec is None and path is None:
            return importlib.machinery.PathFinder.find_spec(fullname, self._base_path(), target)
        return None if spec is None else self._rebased(fullname, spec)

    def _rebased(self, fullname: str, spec: Any) -> Any:
        origin = spec.origin if spec.has_location else None
        places = list(spec.submodule_search_locations or ())
        if not self.head.holds(origin) and not any(self.head.holds(p) for p in places):
            return spec
        missing = ModuleNotFoundError(
            f"No module named {fullname!r} in the base checkout", name=fullname
        )
        moved = [self.head.moved(p, self.base) if self.head.holds(p) else p for p in places]
        moved = [p for p in moved if Path(p).is_dir()]
        if origin is not None:
            file = self.head.moved(origin, self.base) if self.head.holds(origin) else origin
            if not Path(file).is_file():
                raise missing
            locations = moved if spec.submodule_search_locations is not None else None
            return importlib.util.spec_from_file_location(
                fullname, file, submodule_search_locations=locations
            )
        if not moved:  # a namespace package with no portion in the base
            raise missing
        namespace = importlib.machinery.ModuleSpec(fullname, None, is_package=True)
        namespace.submodule_search_locations = moved
        return namespace


class Sides:
    """The head and the base in one process, one of them active (its modules in
    ``sys.modules``). The head is active unless a base function runs; inside ``held()`` (a
    pair timed round by round) a side stays active until the other is called, so each side
    pays the switch alike, and the head is active again at the end."""

    def __init__(self, head_root: str, base_root: str) -> None:
        self.head = Side("head", Tree(head_root))
        self.base = Side("base", Tree(base_root))
        self.head.collect(self.base.tree)
        self.active = self.head
        self.holding = 0
        self.extra_path: list[str] = []
        self._finder = _BaseFinder(self.head.tree, self.base.tree, self.extra_path)

    def _other(self, side: Side) -> Side:
        return self.base if side is self.head else self.head

    def switch(self, to: Side) -> None:
        leaving = self.active
        if leaving is to:
            return
        leaving.collect(self._other(leaving).tree)
        for name, module in leaving.modules.items():
            if sys.modules.get(name) is module:
                del sys.modules[name]
        sys.modules.update(to.modules)
        with contextlib.suppress(ValueError):
            sys.meta_path.remove(self._finder)
        if to is self.base:
            sys.meta_path.insert(0, self._finder)
        self.active = to
        to._mark = len(sys.modules)

    @contextlib.contextmanager
    def on(self, side: Side) -> Iterator[None]:
        """``side`` active in the block (and after it, while held)."""
        before = self.active
        self.switch(side)
        try:
            yield
        finally:
            if not self.holding:
                self.switch(before)

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """Sides stay as the last call left them: a pair's rounds pay one switch per change
        of side, whichever side it is; the head's modules are back afterwards."""
        self.holding += 1
        try:
            yield
        finally:
            self.holding -= 1
            if not self.holding:
                self.switch(self.head)

    @contextlib.contextmanager
    def loading_base(self) -> Iterator[None]:
        """The base's modules imported (their finder in place); ``sys.path`` left as it was,
        the entries the base's loading added kept for its later imports."""
        path = list(sys.path)
        importlib.invalidate_caches()
        try:
            with self.on(self.base):
                yield
        finally:
            self.extra_path[:] = [p for p in sys.path if p not in path]
            sys.path[:] = path

    def calling(self, side: Side, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``fn`` run with ``side``'s modules active."""

        @functools.wraps(fn)
        def on_side(*args: Any, **kwargs: Any) -> Any:
            if self.active is side:
                return fn(*args, **kwargs)
            with self.on(side):
                return fn(*args, **kwargs)

        return on_side

    def bind(self, spec: KernelSpec, side: Side) -> KernelSpec:
        """``spec`` with every function it holds run as ``side``."""
        changes: dict[str, Any] = {}
        for f in dataclasses.fields(spec):
            value = getattr(spec, f.name)
            if f.name == "variants":
                changes[f.name] = {k: self.calling(side, v) for k, v in value.items()}
            elif f.name == "tunables" and value is not None:
                changes[f.name] = self._tunables(value, side)
            elif callable(value) and not isinstance(value, type):
                changes[f.name] = self.calling(side, value)
        return dataclasses.replace(spec, **changes)

    def _tunables(self, tunables: Any, side: Side) -> Any:
        build = tunables.build

        def built(config: Any) -> Callable[..., Any]:
            return self.calling(side, self.calling(side, build)(config))

        config = tunables.config
        rules = tuple(
            dataclasses.replace(rule, check=self.calling(side, rule.check))
            for rule in tunables.constraints
        )
        return dataclasses.replace(
            tunables,
            build=functools.wraps(build)(built),
            config=None if config is None else self.calling(side, config),
            constraints=rules,
        )

    def bind_all(self, specs: Mapping[str, KernelSpec], side: Side) -> dict[str, KernelSpec]:
        return {name: self.bind(spec, side) for name, spec in specs.items()}
