"""The results file (``ci-bench run --output``): a public contract, versioned.

Format history lives in docs/FORMATS.md. Bump ``RESULTS_SCHEMA_VERSION`` on any change that
an older reader would misread; readers refuse other versions with a clear message.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from typing import Any, Literal

from pydantic import (
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)

from ci_bench.schema.base import (
    CaseId,
    Dtype,
    ImplName,
    KernelName,
    Mode,
    Model,
    ParamName,
    ShardText,
    UtcDatetime,
    Version,
)
from ci_bench.schema.measures import (  # noqa: F401 -- re-exported: the results file's parts
    Bound,
    BytesModelCheck,
    CompiledStats,
    CompileTimes,
    Correctness,
    CostCheckStatus,
    CostModelCheck,
    CostSource,
    DispatchOverhead,
    MemoryStats,
    Metrics,
    XlaCost,
)
from ci_bench.schema.timers import SPECIFICATION_TIMER, TimerName
from ci_bench.schema.withheld import WithheldModel
from ci_bench.text import NAME

RESULTS_SCHEMA_VERSION = 6
# Versions this ci-bench reads: 1 lacks ``meta.matrix`` (read as unknown); 1 and 2 lack the
# per-case ``model`` (read as not modelled: no model verdict); 1 to 3 hold forward cases of
# the implementations pallas and native only (read so). 5: a case's model may be ``partial``
# (no modelled time) and a chip may carry ``vmem_warning``; chips v4i, 7, 8i. 6: a partial
# case's model carries no time (null; older files' partial times are withheld on reading).
RESULTS_READABLE = (1, 2, 3, 4, 5, 6)

CaseStatus = Literal["ok", "error"]
# The error of a contestant that was fine, or never ran, but could not be timed because
# another one of its case failed (an A/B pair, a worker that died): not its own failure.
NOT_MEASURED = "not measured:"


def _finite_non_negative(value: float, what: str) -> float:
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{what} must be a finite, non-negative number, got {value}")
    return value


class TimingStats(Model):
    """The specification's benchmark_single statistics plus median and raw samples."""

    mean_ms: float
    min_ms: float
    max_ms: float
    std_ms: float = Field(description="population standard deviation, as in the specification")
    median_ms: float
    samples_ms: list[float] = Field(description="every timed repeat, in run order")
    warmup: int = Field(ge=0)
    median_ci_rel_width: float | None = Field(
        None, description="achieved precision: 95 % CI width of the median / median"
    )

    @field_validator("mean_ms", "min_ms", "max_ms", "std_ms", "median_ms")
    @classmethod
    def _finite(cls, value: float) -> float:
        return _finite_non_negative(value, "timing")

    @field_validator("samples_ms")
    @classmethod
    def _samples(cls, value: list[float]) -> list[float]:
        if not value:
            raise ValueError("at least one sample is required")
        for sample in value:
            _finite_non_negative(sample, "sample")
        return value

    @property
    def repeats(self) -> int:
        return len(self.samples_ms)


class DeviceFingerprint(Model):
    """Where a result was measured; ``identity`` decides comparability."""

    platform: str
    device_kind: str
    device_count: int = Field(ge=0)
    cpu_model: str
    hostname: str
    python: str
    jax: str
    jaxlib: str
    libtpu: str | None = None
    # The platform's other toolchain (GPU: the CUDA plugin, PJRT, the driver), name ->
    # version (ci_bench.schema.platforms); written only when there is one.
    toolchain: dict[str, str] | None = None

    @model_serializer(mode="wrap")
    def _without_empty_toolchain(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if self.toolchain is None and isinstance(data, dict):
            data.pop("toolchain", None)
        return data

    @property
    def identity(self) -> str:
        """Hardware identity: results from different identities are never compared."""
        base = f"{self.platform}:{self.device_kind}"
        return f"{base}:{self.cpu_model}" if self.platform == "cpu" else base

    @property
    def software(self) -> str:
        tpu = f" libtpu {self.libtpu}" if self.libtpu else ""
        more = "".join(f" {name} {v}" for name, v in sorted((self.toolchain or {}).items()))
        return f"jax {self.jax} jaxlib {self.jaxlib}{tpu}{more}"


class OtherImplementation(Model):
    """An implementation timed beside the subject and the baseline in the same rounds."""

    timing: TimingStats | None = None
    speedup: float | None = Field(None, description="baseline mean_ms / this mean_ms")
    compile_ms: float | None = None
    correctness: Correctness | None = None
    gradients: dict[str, Correctness] = Field(
        default_factory=dict, description="per differentiated input (backward modes)"
    )
    analysis: CompiledStats | None = None


class Implementations(Model):
    """Which implementation ``pallas`` and ``native`` hold, and the others timed with them.

    Files before version 3 had exactly pallas (the subject) and native (the baseline)."""

    subject: ImplName = "pallas"
    baseline: ImplName = "native"
    others: dict[ImplName, OtherImplementation] = Field(default_factory=dict)


class CaseResult(Model):
    """One case. The specification's keys sit at the top level; ``pallas`` and ``native``
    are the subject's and the baseline's numbers (``implementations`` names them)."""

    id: CaseId
    kernel: KernelName
    version: Version
    params: dict[ParamName, int]
    shape: list[int]
    dtype: Dtype
    mode: Mode = Field(
        "forward", description="forward, backward (the VJP alone) or forward+backward"
    )
    status: CaseStatus
    error: str | None = None
    pallas: TimingStats | None = None
    native: TimingStats | None = None
    speedup: float | None = None
    tflops: float | None = None
    metrics: Metrics | None = None
    compile: CompileTimes = CompileTimes()
    confirmation: TimingStats | None = Field(
        None, description="the Pallas kernel re-measured after a regression was flagged"
    )
    analysis: dict[str, CompiledStats] = Field(
        default_factory=dict, description="'pallas' and 'native': memory and XLA cost"
    )
    cost_check: CostModelCheck | None = None
    bytes_check: BytesModelCheck | None = None
    correctness: Correctness | None = None
    gradients: dict[str, Correctness] = Field(
        default_factory=dict,
        description="backward modes: the subject's gradient per differentiated input, "
        "against jax.vjp of the float32 reference",
    )
    implementations: Implementations = Implementations()
    dispatch: dict[str, DispatchOverhead] = Field(
        default_factory=dict, description="'pallas' and 'native'; empty under wallclock"
    )
    inputs_ms: float | None = Field(None, ge=0, description="time make_inputs took")
    traceback: str | None = Field(
        None, description="full traceback of a failed case (logs and files, never comments)"
    )
    model: WithheldModel | None = Field(
        None,
        description="the cost model read from the traced Pallas grid (version 3; null in "
        "older files): exact HBM bytes, grid steps, VMEM and modelled time per TPU chip "
        "(times null for a partial case, version 6)",
    )

    @property
    def peak_bytes(self) -> int | None:
        """The Pallas executable's peak memory, the figure the memory verdict compares."""
        stats = self.analysis.get("pallas")
        return stats.memory.peak_bytes if stats and stats.memory else None

    def _id_matches(self) -> bool:
        """The id is ``<kernel>/<params>/<dtype>[/<mode>]`` of this case; the params may come
        in another key order (JSON objects are unordered: ``jq -S`` sorts them)."""
        tokens = [f"{k}{v}" for k, v in self.params.items()]
        suffix = "" if self.mode == "forward" else f"/{self.mode}"
        if self.id == f"{self.kernel}/{'-'.join(tokens)}/{self.dtype}{suffix}":
            return True
        parts = self.id.split("/")
        tail = [self.dtype] if self.mode == "forward" else [self.dtype, self.mode]
        return (
            len(parts) == 2 + len(tail)
            and parts[0] == self.kernel
            and parts[2:] == tail
            and all(v >= 0 for v in self.params.values())  # no "-" inside a token
            and sorted(parts[1].split("-")) == sorted(tokens)
        )

    @model_validator(mode="after")
    def _consistent(self) -> CaseResult:
        if not self._id_matches():
            raise ValueError(
                f"case id {self.id[:80]!r} is not <kernel>/<params>/<dtype>[/<mode>] of this "
                "case (forward cases carry no mode)"
            )
        if self.status == "ok":
            if self.pallas is None or self.native is None or self.tflops is None:
                raise ValueError("an ok case needs pallas, native and tflops")
            if self.error is not None:
                raise ValueError("an ok case has no error")
        elif not self.error:
            raise ValueError("an error case needs an error message")
        return self


class RunSettings(Model):
    warmup: int = Field(ge=0)
    repeats: int = Field(ge=1, description="fixed repeats, or the minimum when adaptive")
    adaptive_target: float | None = Field(
        None, description="adaptive sampling: target relative CI width of the median"
    )
    adaptive_max_seconds: float | None = None
    seed: int
    interpret: bool = Field(description="Pallas ran in interpret mode (CPU)")
    interpret_mode: Literal["kernel", "tpu"] | None = Field(
        None,
        description="CPU: 'kernel' (each kernel's own interpret choice) or 'tpu' "
        "(every pallas_call under jax's TPU interpreter)",
    )
    kernel_interpret: dict[str, Literal["kernel", "tpu"]] = Field(
        default_factory=dict,
        description="CPU: the kernels whose mode is not interpret_mode (config "
        "cpu-interpret-tpu, a SPEC's cpu_interpret), by name",
    )
    lowered_for: str | None = Field(None, description="run --lower: the platform checked")
    compilation_cache: str | None = None
    timer: TimerName = Field(
        SPECIFICATION_TIMER,
        description="how per-call times were taken; different timers never compare",
    )

    def comparable(self, other: RunSettings) -> bool:
        """Same measurement method: everything but where the compilation cache lives and
        the per-kernel interpreters (files before issue 41 never recorded them)."""
        skip = {"compilation_cache", "kernel_interpret"}
        return self.model_dump(exclude=skip) == other.model_dump(exclude=skip)

    def interpreters(self, kernels: Iterable[str]) -> list[str | None]:
        """The CPU interpret mode each of ``kernels`` ran under (None: an older file's
        kernel's own), for a banner that names the interpreter."""
        return [self.kernel_interpret.get(k, self.interpret_mode) for k in kernels]


class GitInfo(Model):
    commit: str | None = None
    ref: str | None = None
    dirty: bool | None = None


class RunMeta(Model):
    tool_version: str
    started_at: UtcDatetime
    finished_at: UtcDatetime | None = None
    complete: bool = Field(description="false while a run is in progress or was interrupted")
    profile: str | None
    shard: ShardText | None = None
    case_globs: list[str] = Field(default_factory=list, description="--case filters")
    adhoc: bool = Field(False, description="one ad-hoc --shape case, not a profile")
    git: GitInfo = GitInfo()
    device: DeviceFingerprint
    settings: RunSettings
    kernels: dict[KernelName, Version] = Field(description="kernel name -> version")
    matrix: list[CaseId] | None = Field(
        None,
        description="every case id the selection expands to before sharding: what a complete "
        "run measures (null in version 1 files)",
    )

    @field_validator("shard")
    @classmethod
    def _shard_in_range(cls, value: str | None) -> str | None:
        """``I/N`` with I at most N, for each shard a merge joined (``1/4+2/4``)."""
        for part in value.split("+") if value else ():
            index, count = (int(x) for x in part.split("/"))
            if index > count:
                raise ValueError(f"{part}: the shard index is past the shard count")
        return value

    @field_validator("matrix")
    @classmethod
    def _matrix_ids(cls, value: list[str] | None) -> list[str] | None:
        """Each entry names its kernel (``kernel/…``): an unmeasured case's verdict and the
        merge take the kernel from it."""
        for at, case_id in enumerate(value or ()):
            kernel, slash, _ = case_id.partition("/")
            if not slash or not NAME.fullmatch(kernel):
                raise ValueError(f"entry {at} ({case_id[:80]!r}) is not a case id kernel/…")
        return value

    @property
    def subset(self) -> bool:
        """Only part of the profile ran: absent baseline cases are not 'missing'."""
        return bool(self.case_globs or self.adhoc or self.shard)


class Results(Model):
    """A results file: ``ci-bench run --output``."""

    schema_version: Literal[1, 2, 3, 4, 5, 6] = RESULTS_SCHEMA_VERSION
    meta: RunMeta
    cases: list[CaseResult]

    @model_validator(mode="before")
    @classmethod
    def _unique_ids_first(cls, data: object) -> object:
        """Duplicate ids are counted before any case is validated: a file of 60,000 copies
        of one case is refused after one linear pass, not 60,000 case validations."""
        cases = data.get("cases") if isinstance(data, dict) else None
        if isinstance(cases, list):
            raw = (c.get("id") for c in cases if isinstance(c, dict))
            ids = Counter(i for i in raw if isinstance(i, str))  # others fail their field
            dup = sorted(i for i, n in ids.items() if n > 1)
            if dup:
                more = f" (+{len(dup) - 3} more)" if len(dup) > 3 else ""
                raise ValueError(f"duplicate case ids: {', '.join(dup[:3])}{more}")
        return data

    @model_validator(mode="after")
    def _consistent(self) -> Results:
        # Counted, not searched: a file of 60,000 repeated ids is checked in linear time.
        counts = Counter(c.id for c in self.cases)
        if len(counts) != len(self.cases):
            dup = sorted(i for i, n in counts.items() if n > 1)
            more = f" (+{len(dup) - 3} more)" if len(dup) > 3 else ""
            raise ValueError(f"duplicate case ids: {', '.join(dup[:3])}{more}")
        for case in self.cases:
            if self.meta.kernels.get(case.kernel) != case.version:
                raise ValueError(
                    f"case {case.id} is {case.kernel} v{case.version}, but meta.kernels "
                    f"says {self.meta.kernels.get(case.kernel, 'nothing')}"
                )
        return self

    def uncovered(self) -> tuple[list[str], list[str]]:
        """(ids of ``meta.matrix`` with no case, case ids outside it); ([], []) when the
        file does not know its matrix (format 1). Completeness judged from the cases held,
        never from ``meta.complete`` alone."""
        if self.meta.matrix is None:
            return [], []
        held = {c.id for c in self.cases}
        matrix = set(self.meta.matrix)
        missing = [i for i in self.meta.matrix if i not in held]
        return missing, [c.id for c in self.cases if c.id not in matrix]
