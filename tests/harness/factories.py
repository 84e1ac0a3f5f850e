"""Deterministic results and baselines for tests that must not depend on timing."""

from __future__ import annotations

from datetime import UTC, datetime

from ci_bench.judge.stats import stats_of
from ci_bench.measure.roofline import compute_metrics, tflops_of
from ci_bench.schema import (
    CaseResult,
    CompiledStats,
    CompileTimes,
    Correctness,
    DeviceFingerprint,
    GitInfo,
    MemoryStats,
    Results,
    RunMeta,
    RunSettings,
)

CPU = DeviceFingerprint(
    platform="cpu",
    device_kind="cpu",
    device_count=1,
    cpu_model="Test CPU 9000",
    hostname="runner-1",
    python="3.11.7",
    jax="0.10.2",
    jaxlib="0.10.2",
)
V5E = CPU.model_copy(update={"platform": "tpu", "device_kind": "TPU v5 lite", "device_count": 4})


def samples(mean_ms: float, n: int = 20, spread: float = 0.01) -> list[float]:
    """n samples around mean_ms (seconds), a fixed zig-zag of +-spread relative."""
    return [mean_ms / 1e3 * (1 + spread * ((i % 5) - 2) / 2) for i in range(n)]


def case(
    cid: str = "matmul/B1-M128-K128-N128/float32",
    mean_ms: float = 1.0,
    native_ms: float = 2.0,
    *,
    version: str = "0.1.0",
    spread: float = 0.01,
    status: str = "ok",
    peak_bytes: int | None = None,
    n: int = 20,
) -> CaseResult:
    kernel, params_text, dtype = cid.split("/")
    params = {p[0]: int(p[1:]) for p in params_text.split("-")}
    base = {
        "id": cid,
        "kernel": kernel,
        "version": version,
        "params": params,
        "shape": list(params.values()),
        "dtype": dtype,
        "compile": CompileTimes(pallas_ms=300.0, native_ms=100.0),
    }
    if status != "ok":
        return CaseResult(**base, status="error", error="RuntimeError: boom")
    pallas = stats_of(samples(mean_ms, n, spread=spread), warmup=5)
    native = stats_of(samples(native_ms, n, spread=spread), warmup=5)
    flops = 2 * params.get("B", 1) * params.get("M", 1) * params.get("K", 1) * params.get("N", 1)
    return CaseResult(
        **base,
        status="ok",
        pallas=pallas,
        native=native,
        speedup=native.mean_ms / pallas.mean_ms,
        tflops=tflops_of(flops, pallas.mean_ms),
        analysis={"pallas": memory(peak_bytes)} if peak_bytes else {},
        metrics=compute_metrics(
            flops=flops,
            bytes_accessed=flops // 10,
            mean_ms=pallas.mean_ms,
            peak_tflops=None,
            peak_gbps=None,
        ),
        correctness=Correctness(
            ok=True,
            max_abs_err=1e-6,
            max_rel_err=1e-6,
            atol=1e-2,
            rtol=1e-2,
            mismatched=0,
            elements=16384,
        ),
    )


def memory(peak_bytes: int) -> CompiledStats:
    third = peak_bytes // 3
    return CompiledStats(
        memory=MemoryStats(
            argument_bytes=third,
            output_bytes=third,
            temp_bytes=peak_bytes - 2 * third,
            alias_bytes=0,
            generated_code_bytes=0,
            peak_bytes=peak_bytes,
        )
    )


def results(
    cases: list[CaseResult],
    *,
    device: DeviceFingerprint = CPU,
    profile: str | None = "smoke",
    kernels: dict[str, str] | None = None,
    commit: str = "0123456789abcdef0123456789abcdef01234567",
    shard: str | None = None,
    matrix: list[str] | None = None,
    complete: bool = True,
) -> Results:
    return Results(
        meta=RunMeta(
            tool_version="0.1.0",
            started_at=datetime(2026, 11, 1, 12, 0, tzinfo=UTC),
            finished_at=datetime(2026, 11, 1, 12, 5, tzinfo=UTC),
            complete=complete,
            profile=profile,
            shard=shard,
            git=GitInfo(commit=commit, ref="refs/heads/main", dirty=False),
            device=device,
            settings=RunSettings(warmup=5, repeats=20, seed=42, interpret=device.platform == "cpu"),
            kernels=kernels or {c.kernel: c.version for c in cases},
            # A run names its matrix (results format 2 on): by default, the cases it holds
            # (a shard's matrix is the whole selection: the caller says it, or none).
            matrix=[c.id for c in cases] if matrix is None and shard is None else matrix,
        ),
        cases=cases,
    )


def adhoc_spec(fn, make, dtype: str = "float32", flops=lambda c: 0, name: str = "adhoc"):
    """A KernelSpec around any callable (a kernel written in a test), its inputs from
    ``make(case, key)``, one smoke case ``{"N": 1}`` in ``dtype``: what the cost model's
    tests analyse."""
    from ci_bench.contract.spec import KernelSpec, MatrixProfile, Tolerance

    return KernelSpec(
        name=name,
        version="0.1.0",
        pallas=fn,
        native=fn,
        reference=fn,
        make_inputs=make,
        flops=flops,
        bytes_accessed=lambda c: 0,
        tolerances={dtype: Tolerance(atol=1, rtol=1)},
        matrix={"smoke": MatrixProfile(({"N": 1},), (dtype,))},
        shape_keys=("N",),
    )
