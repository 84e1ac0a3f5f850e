"""HLO and buffer-assignment dumps for peak-memory analysis (specification section 3.4).

XLA reads ``XLA_FLAGS`` once, when the backend initialises, so a dump needs a fresh
process: ``dump_case_hlo`` runs ``python -m ci_bench.measure.hlo MODULE CASE_ID OUT_DIR`` with
``--xla_dump_to`` set, and the child compiles and runs ONE top-level ``jax.jit`` of the
kernel's Pallas callable. The parser reads XLA's ``*buffer-assignment.txt`` (plus the
``-buffer-assignment-values.txt`` and ``-live-range.txt`` files newer XLA splits off it).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tabulate import tabulate

from ci_bench.measure.profiling import ProfilingError
from ci_bench.text import one_line

SUMMARY = "ci_bench_dump.json"
SEED = 42
PREFIX = "ci_bench_"  # the jitted wrapper is ci_bench_<kernel>; XLA's module jit_ci_bench_<kernel>


def xla_dump_flags(out_dir: Path, existing: str = "") -> str:
    """The user's XLA_FLAGS without their own ``--xla_dump_*`` flags, plus ours.

    ``--xla_dump_to`` alone already writes the buffer assignment, live ranges and HLO text
    on jax 0.10; ``--xla_dump_hlo_as_text`` keeps text the format should XLA's default
    change, and ``--xla_dump_hlo_module_re`` keeps input-generation modules out.
    """
    kept = [f for f in existing.split() if not f.startswith("--xla_dump_")]
    ours = [f"--xla_dump_to={out_dir}", "--xla_dump_hlo_as_text"]
    return " ".join([*kept, *ours, f"--xla_dump_hlo_module_re=^jit_{PREFIX}"])


# ---- parsing: pure functions over XLA's text -------------------------------------------

_ALLOC = re.compile(r"^allocation (\d+): size (\d+)(.*):\s*$")
_VALUE = re.compile(r"^\s*value: <(\d+) (.+?) @\d+> \(size=(\d+),offset=(\d+)\): (.*)$")
_PARAM = re.compile(r", parameter \d+, shape \|(.*?)\|")
_OUTPUT = re.compile(r", output shape is \|(.*?)\|")
_TOTAL = re.compile(r"^Total bytes used: (\d+)", re.MULTILINE)
_CUMULATIVE = re.compile(r"\(cumulative: (\d+) bytes\)")
_LAYOUT = re.compile(r"\{[^{}]*\}")


@dataclass(frozen=True)
class Allocation:
    """One XLA buffer allocation; ``kind`` is parameter, output, constant, thread-local or temp."""

    index: int
    size: int
    kind: str
    shape: str | None


@dataclass(frozen=True)
class Buffer:
    """A slice of a temporary allocation; ``aliases``: other (non-phi) values reusing it."""

    name: str
    size: int
    shape: str
    allocation: int
    offset: int
    aliases: tuple[str, ...] = ()


@dataclass(frozen=True)
class BufferAssignment:
    """What one compiled module reserves, by allocation kind, and its largest temporaries."""

    allocations: tuple[Allocation, ...]
    total_bytes: int
    peak_live_bytes: int | None
    temporaries: tuple[Buffer, ...]

    def bytes_of(self, kind: str) -> int:
        return sum(a.size for a in self.allocations if a.kind == kind)


def _kind(flags: str) -> tuple[str, str | None]:
    if param := _PARAM.search(flags):
        return "parameter", param[1]
    output = _OUTPUT.search(flags)
    if ", constant" in flags:
        return "constant", None
    if output or ", maybe-live-out" in flags:
        return "output", output[1] if output else None
    if ", thread-local" in flags:
        return "thread-local", None
    return "temp", None


def _peak_live(text: str) -> int | None:
    """Peak of XLA's heap simulation: the last cumulative size in the "(peak)" section."""
    start = text.find("(peak):")
    if start < 0:
        return None
    sizes = []
    for line in text[start:].splitlines()[1:]:
        found = _CUMULATIVE.search(line)
        if not found:
            break
        sizes.append(int(found[1]))
    return max(sizes, default=None)


def parse_buffer_assignment(text: str) -> BufferAssignment:
    """Parse ``*buffer-assignment.txt`` (optionally with its sibling files appended).

    Total bytes is XLA's "Total bytes used" (the sum of all allocations, what the
    executable reserves) when present, else that sum. Values sharing one slice of a temp
    allocation (while-loop phis, in-place updates) are one buffer, named after its first
    non-phi value.
    """
    allocations: list[Allocation] = []
    slices: dict[tuple[int, int, int], list[tuple[str, str]]] = {}
    current: Allocation | None = None
    for line in text.splitlines():
        if head := _ALLOC.match(line):
            kind, shape = _kind(head[3])
            current = Allocation(int(head[1]), int(head[2]), kind, shape)
            allocations.append(current)
        elif (value := _VALUE.match(line)) and current is not None and current.kind == "temp":
            key = (current.index, int(value[4]), int(value[3]))
            slices.setdefault(key, []).append((value[2], _LAYOUT.sub("", value[5]).strip()))
        elif not line.startswith(" "):
            current = None
    if not allocations:
        raise ProfilingError("not an XLA buffer assignment: no 'allocation N: size M' lines")
    temporaries = []
    for (index, offset, size), values in slices.items():
        named = [v for v in values if not v[0].endswith(" (phi)")] or values
        name, shape = named[0]
        aliases = tuple(n for n, _ in named[1:])
        temporaries.append(Buffer(name.removesuffix(" (phi)"), size, shape, index, offset, aliases))
    temporaries.sort(key=lambda b: (-b.size, b.allocation, b.offset))
    total = _TOTAL.search(text)
    return BufferAssignment(
        allocations=tuple(allocations),
        total_bytes=int(total[1]) if total else sum(a.size for a in allocations),
        peak_live_bytes=_peak_live(text),
        temporaries=tuple(temporaries),
    )


def load_buffer_assignment(path: Path) -> BufferAssignment:
    """Read a ``*buffer-assignment.txt`` and the sibling files XLA splits off it."""
    stem = path.name.removesuffix("buffer-assignment.txt")
    parts = [path, path.with_name(f"{stem}buffer-assignment-values.txt")]
    parts.append(path.with_name(f"{stem}live-range.txt"))
    return parse_buffer_assignment("\n".join(p.read_text() for p in parts if p.is_file()))


def human_bytes(n: int) -> str:
    """Binary units as XLA prints them: 22 B, 736.5 KiB, 1.2 GiB."""
    if n < 1024:
        return f"{n} B"
    size = n / 1024
    for unit in ("KiB", "MiB"):
        if size < 1024:
            return f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GiB"


def _clip(text: str, width: int = 40) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def format_peak_table(assignment: BufferAssignment, top: int = 10) -> str:
    """Totals by kind, the heap-simulated peak, then the ``top`` largest temporaries."""
    kinds = [("temporaries", "temp"), ("parameters", "parameter"), ("outputs", "output")]
    kinds += [("constants", "constant"), ("thread-local", "thread-local")]
    parts = [f"{label} {human_bytes(b)}" for label, k in kinds if (b := assignment.bytes_of(k))]
    lines = [f"total allocation {human_bytes(assignment.total_bytes)}: {', '.join(parts)}"]
    if assignment.peak_live_bytes is not None:
        lines.append(f"peak live {human_bytes(assignment.peak_live_bytes)} (heap simulation)")
    rows = [
        [i, b.name, human_bytes(b.size), _clip(b.shape), _clip(", ".join(b.aliases))]
        for i, b in enumerate(assignment.temporaries[:top], 1)
    ]
    if rows:
        headers = ["#", "temporary buffer", "size", "shape", "also holds"]
        lines += ["", tabulate(rows, headers=headers, colalign=("right", "left", "right"))]
    else:
        lines.append("no temporary buffers")
    return "\n".join(lines)


# ---- the dump: a child process with XLA_FLAGS set ---------------------------------------


@dataclass(frozen=True)
class DumpInfo:
    """Where the dump went, the kernel module's files in it and the parsed assignment."""

    out_dir: Path
    case_id: str
    buffer_assignment_file: Path
    hlo_file: Path | None
    assignment: BufferAssignment
    memory: dict[str, int]

    def describe(self, top: int = 10) -> str:
        head = f"HLO dump of {self.case_id}: {self.out_dir}\n"
        head += f"buffer assignment: {self.buffer_assignment_file}\n"
        head += f"optimized HLO: {self.hlo_file}\n" if self.hlo_file else ""
        return f"{head}\n{format_peak_table(self.assignment, top)}"


def dump_case_hlo(
    kernel_module: str,
    case_id: str,
    out_dir: Path,
    *,
    python: str = sys.executable,
    root: Path | None = None,
    timeout: float = 600,
) -> DumpInfo:
    """Dump one case's HLO and buffer assignment into ``out_dir`` from a fresh process."""
    out_dir = out_dir.resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "XLA_FLAGS": xla_dump_flags(out_dir, os.environ.get("XLA_FLAGS", ""))}
    env["JAX_ENABLE_COMPILATION_CACHE"] = "false"  # a cache hit compiles nothing, dumps nothing
    (out_dir / SUMMARY).unlink(missing_ok=True)
    command = [python, "-m", "ci_bench.measure.hlo", kernel_module, case_id, str(out_dir)]
    if root is not None:
        command.append(str(root.resolve()))
    try:
        proc = subprocess.run(
            command, env=env, capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired:
        raise ProfilingError(f"HLO dump of {case_id} timed out after {timeout:g} s") from None
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1].strip()
        raise ProfilingError(f"HLO dump of {case_id} failed: {last}")
    summary = json.loads((out_dir / SUMMARY).read_text())
    module = f"jit_{summary['module']}"
    found = sorted(
        out_dir.glob(f"*.{module}.*buffer-assignment.txt"), key=lambda p: p.stat().st_mtime_ns
    )
    if not found:
        raise ProfilingError(f"XLA wrote no {module} buffer-assignment file under {out_dir}")
    ba_file = found[-1]
    hlo = ba_file.with_name(ba_file.name.removesuffix("-buffer-assignment.txt") + ".txt")
    return DumpInfo(
        out_dir=out_dir,
        case_id=case_id,
        buffer_assignment_file=ba_file,
        hlo_file=hlo if hlo.is_file() else None,
        assignment=load_buffer_assignment(ba_file),
        memory=summary["memory"],
    )


def _named(fn: Callable[..., Any], name: str) -> Callable[..., Any]:
    """A plain wrapper with a fixed name, so the top-level module is ``jit_<name>``."""

    def kernel(*args: Any) -> Any:
        return fn(*args)

    kernel.__name__ = kernel.__qualname__ = name
    return kernel


def _child(kernel_module: str, case_id: str, out_dir: Path, root: Path | None) -> None:
    """In the dump process: compile and run one top-level jit of the case's Pallas kernel."""
    import jax

    from ci_bench.contract.matrix import find_case
    from ci_bench.contract.registry import load_kernels

    (spec,) = load_kernels([kernel_module], root).values()
    from ci_bench.measure.modes import concrete_workload

    case = find_case(spec, case_id)
    name = f"{PREFIX}{spec.name}"
    try:
        work = concrete_workload(spec, case, seed=SEED)  # a backward case: its VJP alone
        compiled = jax.jit(_named(work.fn, name)).lower(*work.args).compile()
        jax.block_until_ready(compiled(*work.args))
    except Exception as exc:
        raise ProfilingError(f"kernel failed: {one_line(exc)}") from exc
    stats = compiled.memory_analysis()
    fields = ("argument", "output", "alias", "temp", "generated_code")
    memory = {f: int(getattr(stats, f"{f}_size_in_bytes", 0) or 0) for f in fields}
    summary = {"kernel": spec.name, "case": case.id, "module": name, "memory": memory}
    (out_dir / SUMMARY).write_text(json.dumps(summary, indent=2) + "\n")


def main(argv: Sequence[str] | None = None) -> int:
    """The dump process: ``MODULE CASE_ID OUT_DIR [ROOT]``, written by ``dump_case_hlo``."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) not in (3, 4):
        print(
            "usage: python -m ci_bench.measure.hlo MODULE CASE_ID OUT_DIR [ROOT]", file=sys.stderr
        )
        return 2
    from ci_bench.errors import CiBenchError

    root = Path(args[3]) if len(args) == 4 else None
    try:
        _child(args[0], args[1], Path(args[2]), root)
    except CiBenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
