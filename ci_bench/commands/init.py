"""``ci-bench init``: adopt ci-bench in an existing kernel repository, in one command.

Writes the ``[tool.ci-bench]`` block (the kernel modules given, or found), the caller
workflows of ci-bench's reusable workflows at this version, a constraints template and
``baselines/README.md`` (``ci_bench.pipeline.adopt``). Idempotent; a file that would be
replaced makes it write nothing unless ``--force``.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import TextIO

from ci_bench import HOMEPAGE, __version__, docs_url
from ci_bench.commands.validate import path_arg
from ci_bench.errors import InputError
from ci_bench.pipeline.adopt import (
    BASELINES_README,
    COMMIT,
    INSTALLED_LABEL,
    PIN_LABEL,
    callers,
    checklist,
    constraints_files,
    package_at,
    plan_files,
    with_config,
    with_gitignore,
    yaml_lines,
)
from ci_bench.schema.gpus import GPU_NAMES
from ci_bench.schema.platforms import INIT_PLATFORMS, PLATFORM
from ci_bench.store.files import atomic_write_text, decode_text, read_bytes
from ci_bench.store.writer import target_problem
from ci_bench.text import one_line

_SPEC = re.compile(r"^SPEC\s*(?::[^=]+)?=\s*(?:[\w.]+\.)?KernelSpec\(", re.M)
# A kernel module as Python imports it (dotted identifiers): what the TOML list holds.
_MODULE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
_SKIP = {".git", ".venv", "venv", "node_modules", "tests", "build", "dist", "__pycache__"}


NAME = "init"


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    init = sub.add_parser(
        NAME, help="adopt ci-bench here: config, caller workflows, constraints, baselines"
    )
    init.add_argument(
        "--kernels",
        nargs="+",
        metavar="MODULE",
        help="kernel modules exposing SPEC (default: the modules found here that define one)",
    )
    init.add_argument(
        "--pin",
        metavar="COMMIT",
        help="the ci-bench commit (40 hex digits) the caller workflows run and install the "
        "package from (pip's git+ URL of that commit), e.g. the commit of the release tag; "
        "the runner checklist names it (default: the commit ci-bench was installed from, "
        "where pip recorded one; else the tag v<version>)",
    )
    init.add_argument(
        "--platform",
        choices=INIT_PLATFORMS,
        default="tpu",
        help="the self-hosted runners' accelerator: tpu (labels self-hosted, tpu) or gpu "
        "(self-hosted, gpu: NVIDIA, jax[cuda12], constraints/gpu.txt, target-chips the "
        "GPUs); default tpu",
    )
    init.add_argument("--force", action="store_true", help="replace files that differ")
    init.add_argument(
        "--dir", type=path_arg, default=Path(), help="the repository's root (default: here)"
    )


def find_kernels(root: Path) -> list[str]:
    """Modules under ``root`` whose text defines ``SPEC = KernelSpec(...)``."""
    found = []
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).parts
        if any(p in _SKIP or p.startswith(".") for p in parts):
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if _SPEC.search(text):
            module = ".".join(parts)[: -len(".py")]
            found.append(module.removesuffix(".__init__"))
    return found


def tpu_only_kernels(modules: list[str], root: Path) -> tuple[list[str], str | None]:
    """The kernels (SPEC names) that lower for a CPU only under jax's TPU interpreter and
    whose SPEC does not say so itself; and why the modules could not be read, if not."""
    if not modules:
        return [], None
    from ci_bench.contract.registry import load_kernels
    from ci_bench.measure.interpret import needs_tpu_interpreter

    try:
        specs = load_kernels(modules, root=root)
    except Exception as exc:  # the adopter's code: init still writes the files
        return [], one_line(str(exc))[:200]
    return [
        n for n, s in specs.items() if s.cpu_interpret is None and needs_tpu_interpreter(s)
    ], None


def installed_commit() -> str | None:
    """The ci-bench commit pip recorded when it installed ci-bench from its git repository
    (``direct_url.json``), else None: a wheel from an index knows no commit."""
    try:
        raw = metadata.distribution("ci-bench").read_text("direct_url.json")
        data = json.loads(raw) if raw else {}
    except (metadata.PackageNotFoundError, ValueError, OSError):
        return None
    commit = (data.get("vcs_info") or {}).get("commit_id") if isinstance(data, dict) else None
    url = str(data.get("url", "")).removesuffix(".git").removeprefix("git+")
    if url == HOMEPAGE and isinstance(commit, str) and COMMIT.fullmatch(commit):
        return commit
    return None


def _read(path: Path) -> str | None:
    if not path.exists() and not path.is_symlink():
        return None
    return decode_text(read_bytes(path, "existing"), str(path), "the existing file")


def _libtpu() -> str | None:
    """The libtpu jax's own tpu extra names (``libtpu==0.0.42.*`` -> ``0.0.42.*``)."""
    for requirement in metadata.requires("jax") or []:
        match = re.match(r"libtpu\s*==\s*([\w.*]+)\s*;.*extra\s*==\s*.tpu.", requirement)
        if match:
            return match[1]
    return None


def _extra_pins(extra: str) -> dict[str, str]:
    """The packages jax's own ``extra`` pins to one version (``jax-cuda12-plugin[with-cuda]
    <=0.10.2,>=0.10.2; extra == "cuda12"`` -> ``{"jax-cuda12-plugin": "0.10.2"}``)."""
    found = {}
    for requirement in metadata.requires("jax") or []:
        match = re.match(
            rf"([\w.-]+)(?:\[[^\]]*\])?\s*(?:==\s*([\w.*]+)|<=\s*([\w.]+)\s*,\s*>=\s*\3)"
            rf"\s*;.*extra\s*==\s*.{re.escape(extra)}.",
            requirement,
        )
        if match and match[1] not in ("jaxlib",):
            found[match[1]] = match[2] or match[3]
    return found


def run(args: argparse.Namespace, env: Mapping[str, str], cwd: Path, out: TextIO) -> int:
    try:
        root = (cwd / args.dir).resolve()
        folder = root.is_dir()
    except (OSError, RuntimeError) as exc:  # a symlink loop: RuntimeError before 3.13
        raise InputError(f"--dir {args.dir}: {one_line(exc)}") from None
    if not folder:
        raise InputError(f"--dir {args.dir}: not a folder")
    kernels = list(args.kernels or find_kernels(root))
    bad = [k for k in kernels if len(k) > 200 or not _MODULE.fullmatch(k)]
    if bad:
        raise InputError(f"--kernels {bad[0][:80]!r}: not a Python module name (a.b.c)")
    pin = args.pin if args.pin is not None else installed_commit()
    if pin is not None and not COMMIT.fullmatch(pin):
        raise InputError(f"--pin {pin[:80]!r}: a commit is 40 lowercase hex digits")
    label = PIN_LABEL if args.pin is not None else INSTALLED_LABEL
    platform = getattr(args, "platform", "tpu")
    pins = {"libtpu": _libtpu()} if platform == "tpu" else _extra_pins(PLATFORM[platform].extra)
    wanted = {
        **callers(__version__, pin, label, platform),
        **constraints_files(metadata.version("jax"), metadata.version("jaxlib"), pins, (platform,)),
        "baselines/README.md": BASELINES_README.format(docs=docs_url("docs/FORMATS.md")),
    }
    existing = {path: _read(root / path) for path in wanted}
    planned = plan_files(existing, wanted, force=args.force)
    tpu_only, unread = tpu_only_kernels(kernels, root)
    targets = GPU_NAMES if platform == "gpu" else ()
    config_action, pyproject = with_config(
        _read(root / "pyproject.toml"), kernels, args.force, tpu_only, targets
    )
    conflicts = [p.path for p in planned if p.action == "conflict"]
    if config_action == "conflict":
        conflicts.insert(0, "pyproject.toml ([tool.ci-bench])")
    if conflicts:
        raise InputError(
            f"init would replace {', '.join(conflicts)}, which differ from what ci-bench "
            "writes; nothing was written (--force replaces them)"
        )
    targets = [p.path for p in planned if p.action != "unchanged"]
    if config_action != "unchanged":
        targets.insert(0, "pyproject.toml")
    ignore_action, ignore_text, ignored = with_gitignore(_read(root / ".gitignore"))
    if ignore_action != "unchanged":
        targets.append(".gitignore")
    for target in targets:  # every target checked before the first is written
        problem = target_problem(root / target, replace=True)
        if problem:
            raise InputError(f"{root / target}: cannot write: {problem}; nothing was written")
    if config_action != "unchanged":
        atomic_write_text(root / "pyproject.toml", pyproject)
    out.write(f"{config_action}: pyproject.toml [tool.ci-bench] (kernels: {kernels or 'none'})\n")
    for item in planned:
        if item.action != "unchanged":
            atomic_write_text(root / item.path, item.text)
        out.write(f"{item.action}: {item.path}\n")
    if ignore_action != "unchanged":
        atomic_write_text(root / ".gitignore", ignore_text)
    out.write(
        f"{ignore_action}: .gitignore" + (f" ({', '.join(ignored)})" if ignored else "") + "\n"
    )
    workflows = sum(yaml_lines(t) for p, t in wanted.items() if p.startswith(".github/"))
    out.write(f"\nThe caller workflows: {workflows} lines; the pipeline is ci-bench's.\n")
    if pin:
        out.write(
            f"They run ci-bench at commit {pin}: the reusable workflows and the package "
            f"({package_at(pin)}), whatever version that commit is.\n"
        )
    else:
        out.write(
            f"They run ci-bench by its tag v{__version__}, which can be moved: "
            "`ci-bench init --pin <commit of the tag> --force` pins a commit.\n"
        )
    if not kernels:
        out.write("No kernel module found: list yours in [tool.ci-bench] kernels.\n")
    if tpu_only:
        out.write(f"TPU-only on a CPU (jax's TPU interpreter): {', '.join(tpu_only)}.\n")
    if unread:
        out.write(
            f"Not imported here ({unread}): if a kernel is TPU-only, name it in "
            "[tool.ci-bench] cpu-interpret-tpu.\n"
        )
    out.write("\n" + checklist(__version__, pin, platform=platform))
    return 0
