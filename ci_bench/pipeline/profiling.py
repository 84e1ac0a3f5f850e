"""``ci-bench profile``: each case traced in a worker, never here, and on a TPU read for the
specification's section 3.3 metrics.

libtpu reads ``LIBTPU_INIT_ARGS`` once, when a process opens the chip, and writes its LLO
dumps for every kernel that process compiles: so each case gets a worker of its own, started
with the metric flags and a dump folder of its own (``<out>/llo``), pinned to the first
chip. The trace is then read here (files only: no kernel code runs in this process). On a
host without a TPU the worker traces on its platform and the metrics are said to need one.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ci_bench.errors import InputError
from ci_bench.measure.kernel_process import KernelCodeError, KernelProcess
from ci_bench.measure.profiling import TraceInfo
from ci_bench.measure.unit_metrics import (
    has_counters,
    libtpu_args,
    metric_env,
    read_dumps,
    read_outside,
    read_trace,
    with_dumps,
)
from ci_bench.pipeline.kernels import HEAD, BaseWhere, describe_head, read_device
from ci_bench.pipeline.request import Request
from ci_bench.schema.report import CaseVerdict, Report, UnitMetricsPair
from ci_bench.schema.results import DeviceFingerprint
from ci_bench.schema.unit_metrics import KernelUnitMetrics, OutsideKernels
from ci_bench.text import one_line

NEEDS_TPU = "unit metrics (MXU, scalar ALU, spills, DMA) need a TPU: this trace ran on {platform}"
NO_COUNTERS = (
    "this trace has no unit counters: take it with `ci-bench profile` on a TPU (it sets "
    "LIBTPU_INIT_ARGS) or with LIBTPU_INIT_ARGS='{flags}'"
)
NO_PALLAS = "this trace holds no Pallas kernel (tpu_custom_call) on a TPU"


@dataclass(frozen=True)
class Profiled:
    """One case's (or one saved trace's) files, metrics and the line said instead of them."""

    case: str | None
    trace: TraceInfo | None
    metrics: tuple[KernelUnitMetrics, ...] = ()
    note: str | None = None
    files: tuple[Path, ...] = field(default_factory=tuple)
    module: str | None = None  # the kernel module that defines the case's kernel
    outside: OutsideKernels | None = None  # the XLA operations beside the kernels

    def as_json(self) -> dict[str, Any]:
        from ci_bench.report.unit_metrics import hints

        outside = self.outside
        return {
            "case": self.case,
            "trace": [str(p) for p in self.files],
            "metrics": [{**m.model_dump(mode="json"), "hints": hints(m)} for m in self.metrics],
            "note": self.note,
            "outside": None
            if outside is None
            else {
                "calls": outside.calls,
                "program_us": round(outside.program_us, 3),
                "us": round(outside.us, 3),
                "ops": {
                    k: {"per_call": n, "us": round(us, 3)} for k, (n, us) in outside.ops.items()
                },
            },
        }


def saved_traces(path: Path) -> list[Path]:
    """The traces ``--read`` means: the file itself, or in a folder the newest
    ``.xplane.pb`` of each trace folder under it (``profile --out`` with several cases
    writes one per case; the timestamped run folders sort by time)."""
    if path.is_file():
        return [path]
    newest: dict[Path, Path] = {}
    for found in sorted(path.rglob("*.xplane.pb")):
        run = found.parent  # jax's layout: <root>/plugins/profile/<run>/<host>.xplane.pb
        laid_out = run.parent.name == "profile" and run.parent.parent.name == "plugins"
        newest[run.parent.parent.parent if laid_out else found] = found
    if not newest:
        raise InputError(f"profile --read: no .xplane.pb at {path}")
    return [newest[root] for root in sorted(newest)]


def _dumps_beside(trace: Path) -> Path | None:
    """``llo/`` beside the trace folder ``profile --out`` wrote (at most three levels up
    from the file's run folder: <out>/trace/plugins/profile/<run>/)."""
    for folder in list(trace.parents)[:5]:
        if (folder / "llo").is_dir():
            return folder / "llo"
    return None


def read_saved(trace: Path, dumps: Path | None, case: str | None = None) -> Profiled:
    """The metrics of one saved ``.xplane.pb``, with the LLO dumps in ``dumps`` (default:
    ``llo`` beside the trace folder)."""
    from jax.profiler import ProfileData

    try:
        profile = ProfileData.from_file(str(trace))
    except Exception as exc:  # the reader's own error for a file that is no XSpace
        raise InputError(f"profile --read: {trace} is not a readable trace ({exc})") from None
    dumps = dumps if dumps is not None else _dumps_beside(trace)
    metrics = read_trace(profile)
    if not metrics:
        note = NO_PALLAS
    elif not has_counters(profile):
        note, metrics = NO_COUNTERS.format(flags=libtpu_args("", None)), []
    else:
        note = None
        if dumps is not None:
            metrics = with_dumps(metrics, read_dumps(dumps, [m.kernel for m in metrics]))
    return Profiled(case, None, tuple(metrics), note, (trace,), outside=read_outside(profile))


def profile_cases(
    request: Request,
    env: Mapping[str, str],
    cases: Sequence[tuple[str, str, Path]],
    *,
    runs: int,
    values: Mapping[str, Any],
) -> Iterator[Profiled]:
    """Each (kernel, case id, folder), in turn: traced in a worker of its own; read for
    metrics where the host has a TPU."""
    from ci_bench.measure.workers import pin_env

    device = read_device(env)
    on_tpu = device.platform == "tpu"
    pin = pin_env(device.platform, 0) if device.platform != "cpu" else None
    for kernel, case_id, folder in cases:
        worker_env = metric_env(env, (folder / "llo").resolve()) if on_tpu else dict(env)
        info, module = _trace_in_worker(
            request, worker_env, pin, kernel, case_id, folder, runs, values
        )
        files = info.xplane_files
        if on_tpu:
            saved = read_saved(files[0], folder / "llo", case_id)
            yield replace(saved, trace=info, files=files, module=module)
        else:
            note = NEEDS_TPU.format(platform=device.platform)
            yield Profiled(case_id, info, (), note, files, module)


def _trace_in_worker(
    request: Request,
    env: Mapping[str, str],
    pin: Mapping[str, str] | None,
    kernel: str,
    case_id: str,
    folder: Path,
    runs: int,
    values: Mapping[str, Any],
) -> tuple[TraceInfo, str]:
    origin: dict[str, str] = {}
    with KernelProcess(env, request.workers.case_timeout, pin) as process:
        specs = describe_head(process, request, origin)
        if kernel not in specs:
            known = ", ".join(specs)
            raise InputError(f"profile: {case_id}: unknown kernel {kernel!r} (known: {known})")
        try:
            answer = process.call(
                "ci_bench.measure.kernel_side:profile_head",
                list(request.modules),
                str(request.config.root),
                kernel,
                case_id,
                str((folder / "trace").resolve()),
                runs,
                request.harness.seed,
                dict(values),
                what=f"kernel {kernel}",
                doing="traced",
            )
        except KernelCodeError as exc:
            if exc.how == "failed":
                error = InputError(f"profile: {case_id}: {exc.cause}")
                error.exit_code = exc.exit_code
                raise error from None
            raise exc.on(HEAD) from None
    return TraceInfo.from_json(answer), origin[kernel]


UNIT_RUNS = 3  # traced calls per side: the figures are averaged over them
ANY_PLATFORM = "CI_BENCH_UNIT_METRICS_ANY_PLATFORM"
_SIDE = "ci_bench.measure.kernel_side"


def _side_metrics(
    request: Request,
    env: Mapping[str, str],
    folder: Path,
    call: tuple[str, tuple[Any, ...]],
    what: str,
) -> tuple[list[KernelUnitMetrics], str | None]:
    """One side of one case traced in a worker started with the metric flags, read here;
    a failure is the side's note, never the run's (the timed verdict stands)."""
    from ci_bench.measure.workers import pin_env

    worker_env = metric_env(env, folder / "llo")
    function, args = call
    try:
        with KernelProcess(worker_env, request.workers.case_timeout, pin_env("tpu", 0)) as process:
            answer = process.call(function, *args, what=what, doing="traced for unit metrics")
        saved = read_saved(TraceInfo.from_json(answer).xplane_files[0], folder / "llo")
    except (KernelCodeError, InputError) as exc:
        return [], one_line(str(exc))
    return list(saved.metrics), saved.note


def _case_pair(
    request: Request, env: Mapping[str, str], where: BaseWhere, v: CaseVerdict, folder: Path
) -> UnitMetricsPair:
    """Both sides of one slower case, each traced in a worker of its own."""
    root, seed = str(request.config.root), request.harness.seed
    head_trace, base_trace = str(folder / "head" / "trace"), str(folder / "base" / "trace")
    head_args = (list(request.modules), root, v.kernel, v.id, head_trace, UNIT_RUNS, seed, {})
    base_args = (where, v.kernel, v.id, base_trace, UNIT_RUNS, seed)
    head, head_note = _side_metrics(
        request,
        env,
        folder / "head",
        (f"{_SIDE}:profile_head", head_args),
        f"the head's kernel {v.kernel}",
    )
    base, base_note = _side_metrics(
        request,
        env,
        folder / "base",
        (f"{_SIDE}:profile_base", base_args),
        f"the base's kernel {v.kernel}",
    )
    notes = [f"{side}: {why}" for side, why in (("head", head_note), ("base", base_note)) if why]
    return UnitMetricsPair(head=head, base=base, note="; ".join(notes) or None)


def with_unit_metrics(
    report: Report,
    request: Request,
    env: Mapping[str, str],
    device: DeviceFingerprint | None,
    where: BaseWhere,
) -> Report:
    """Each case the A/B finds slower, with both sides' unit metrics (``unit-metrics``):
    traced after every timed pass, a worker per side and case, on the first chip."""
    import tempfile

    slower = [v for v in report.cases if v.verdict == "regression"]
    if not slower:
        return report
    # Tests only: the pass run on another platform (its traces then hold no TPU kernel), so
    # a CPU exercises the workers of both sides as a TPU runner does.
    anywhere = env.get(ANY_PLATFORM) == "1"
    if (device is None or device.platform != "tpu") and not anywhere:
        platform = device.platform if device is not None else "cpu"
        note = f"unit metrics need a TPU (this runner: {platform}); not collected"
        pairs = {v.id: UnitMetricsPair(note=note) for v in slower}
    else:
        with tempfile.TemporaryDirectory(prefix="ci-bench-units-") as tmp:
            pairs = {
                v.id: _case_pair(request, env, where, v, Path(tmp) / str(n))
                for n, v in enumerate(slower)
            }
    cases = [
        v.model_copy(update={"unit_metrics": pairs[v.id]}) if v.id in pairs else v
        for v in report.cases
    ]
    return report.model_copy(update={"cases": cases})
