"""How cases are measured: plain frozen settings, built once by the command layer (no jax)."""

from __future__ import annotations

from dataclasses import dataclass

from ci_bench.schema.timers import TimerName as TimerName


@dataclass(frozen=True)
class Adaptive:
    """Sample until the median's confidence interval is ``target`` wide (relative) or the
    case has used ``max_seconds``; checked every ``check_every`` rounds past the minimum."""

    target: float = 0.01
    max_seconds: float = 30.0
    check_every: int = 5
    max_repeats: int = 100_000


@dataclass(frozen=True)
class HarnessSettings:
    warmup: int = 5
    repeats: int = 20
    seed: int = 42
    # Flag a case whose FLOPs model and XLA's count differ by more than this factor.
    cost_model_factor: float = 2.0
    adaptive: Adaptive | None = None
    # How a call is timed (ci_bench.measure.timers); None: the platform's default, which the
    # command layer resolves once the device is known.
    timer: TimerName | None = None
    # CPU only: "kernel" lets each kernel choose; "tpu" runs every pallas_call under jax's
    # TPU interpreter. Applied in every process that measures (workers included).
    interpret_mode: str = "kernel"
    # (kernel, mode) where a kernel's mode is not ``interpret_mode`` (config
    # cpu-interpret-tpu, the SPEC's cpu_interpret): set before each of its cases.
    kernel_interpret: tuple[tuple[str, str], ...] = ()
    # run --lower: each case must lower for this platform before it is measured.
    lower: str | None = None

    def interpret_for(self, kernel: str) -> str:
        """The CPU interpret mode this kernel's cases run in."""
        return dict(self.kernel_interpret).get(kernel, self.interpret_mode)
