"""The request: flags + ``[tool.ci-bench]`` + the GitHub event, resolved ONCE into one value.

Everything below the command layer takes a ``Request`` (or plain values from it), never the
argparse namespace. Which value wins is decided here: a flag over the event, the event over
the config, the config over the built-in default (the values live in ``ci_bench.defaults``
and the config's fields; only the output format's "table" is spelled here). Pure: no jax, no files.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ci_bench.defaults import DTYPE, OUT_DIR
from ci_bench.errors import InputError
from ci_bench.github.context import Dispatch, Event, PullRequest, Release
from ci_bench.measure.settings import Adaptive, HarnessSettings
from ci_bench.pipeline.parts import (
    AbBase,
    BaselineSource,
    CpuInterpret,
    Inputs,
    Outputs,
    Publishing,
    Selection,
    Workers,
)
from ci_bench.schema import FailPolicy, Thresholds
from ci_bench.schema.baseline import ANY_KERNEL
from ci_bench.schema.shard import Shard
from ci_bench.schema.verdicts import CONFIGURABLE, STATE
from ci_bench.text import NAME, SEMVER, split_list

if TYPE_CHECKING:  # the config's type only: reading it (files) stays in pipeline.config
    from ci_bench.pipeline.config import Config

Mode = Literal["baseline", "ab", "both"]
MODES: tuple[Mode, ...] = ("baseline", "ab", "both")


@dataclass(frozen=True)
class Request:
    """One command's whole intent, validated and frozen."""

    config: Config
    modules: tuple[str, ...]
    selection: Selection
    harness: HarnessSettings  # the measured run (and baseline comparison)
    ab_harness: HarnessSettings  # A/B rounds: more repeats by default (config ab-repeats)
    thresholds: Thresholds
    policy: FailPolicy
    baselines: BaselineSource
    mode: Mode
    base: AbBase | None
    confirm: bool
    release: Release | None
    peak_tflops: float | None
    peak_gbps: float | None
    compilation_cache: Path | None
    outputs: Outputs
    inputs: Inputs
    workers: Workers
    cpu: CpuInterpret
    publishing: Publishing
    lower: str | None  # run --lower: check each case lowers for this platform first


def parse_fail_on(text: str | None, default: FailPolicy) -> FailPolicy:
    """``error,noisy`` -> policy; ``none`` -> regressions only; None -> ``default``."""
    if text is None:
        return default
    states = set(split_list(text)) - {"none"}
    unknown = states - set(CONFIGURABLE)
    if unknown:
        raise InputError(
            f"--fail-on: unknown state(s) {', '.join(sorted(unknown))}; "
            f"choose from {', '.join(CONFIGURABLE)} or none"
        )
    return FailPolicy(**{STATE[s].field: s in states for s in CONFIGURABLE})


def parse_pins(text: str | None) -> dict[str, str]:
    """``0.1.0`` (every kernel that has it) or ``matmul=0.1.0,gla=0.2.0``."""
    pins: dict[str, str] = {}
    for item in split_list(text):
        kernel, sep, version = item.rpartition("=")
        name = kernel.strip() if sep else ANY_KERNEL
        version = version.strip()
        if not SEMVER.fullmatch(version) or (sep and not NAME.fullmatch(name)):
            raise InputError(
                f"baseline version: {item!r} is neither VERSION nor KERNEL=VERSION "
                "(e.g. 0.1.0 or matmul=0.1.0,gla=0.2.0)"
            )
        pins[name] = version
    return pins


def _positive(name: str, value: float | None) -> float | None:
    if value is not None and not (math.isfinite(value) and value > 0):
        raise InputError(f"{name} must be a positive finite number, got {value}")
    return value


def _shape(text: str) -> tuple[int, ...]:
    try:
        dims = tuple(int(x) for x in text.split(","))
    except ValueError:
        raise InputError(f"--shape wants comma-separated integers, got {text!r}") from None
    if not dims or any(d < 1 for d in dims):
        raise InputError(f"--shape wants positive integers, got {text!r}")
    return dims


def _harness(flags: Mapping[str, Any], config: Config, repeats: int) -> HarnessSettings:
    warmup = flags.get("warmup")
    if warmup is not None and warmup < 0:
        raise InputError("--warmup must be >= 0")
    if repeats < 1:
        raise InputError("--repeats must be >= 1")
    adaptive = _adaptive(flags, config)
    seed = flags.get("seed")
    return HarnessSettings(
        timer=flags.get("timer") or config.timer,
        warmup=config.warmup if warmup is None else warmup,
        repeats=repeats,
        seed=config.seed if seed is None else seed,
        cost_model_factor=config.cost_model_factor,
        adaptive=adaptive,
    )


def _adaptive(flags: Mapping[str, Any], config: Config) -> Adaptive | None:
    """Repeat until the interval is this narrow (relative), within this many seconds."""
    target = flags.get("adaptive")
    target = config.adaptive_target if target is None else target
    max_seconds = flags.get("max_time")
    max_seconds = config.adaptive_max_seconds if max_seconds is None else max_seconds
    if target is not None and not 0 < target < 1:
        raise InputError("--adaptive wants a relative width between 0 and 1, e.g. 0.01")
    _positive("--max-time", max_seconds)
    return Adaptive(target=target, max_seconds=max_seconds) if target else None


def _mode(flags: Mapping[str, Any], config: Config, event: Event | None) -> Mode:
    chosen = flags.get("mode")
    if chosen is None and isinstance(event, Dispatch):
        chosen = event.mode
    if chosen is None:
        chosen = config.pr_mode if isinstance(event, PullRequest) else "baseline"
    if isinstance(event, Release):
        chosen = "baseline"  # a release measures and promotes; nothing to A/B
    if chosen not in MODES:
        raise InputError(f"mode: {chosen!r} is not baseline, ab or both")
    return chosen


def _base(flags: Mapping[str, Any], event: Event | None, mode: Mode) -> AbBase | None:
    if isinstance(flags.get("ab_base"), AbBase):  # the plan job's decision
        return flags["ab_base"]
    given = flags.get("base")
    if given is not None and not str(given).strip():  # never a silent "no base"
        raise InputError("--base: an empty ref names no commit (give a branch, tag or commit)")
    if given:
        return AbBase("ref", str(given))
    if isinstance(event, PullRequest):
        return AbBase("merge-base", event.base_sha)
    if isinstance(event, Dispatch) and event.base:
        return AbBase("ref", event.base)
    if isinstance(event, Dispatch) and event.default_branch:
        return AbBase("default-branch", event.default_branch)
    if mode != "baseline":
        raise InputError("A/B mode needs a base: --base REF, or a pull request's base commit")
    return None


def _baselines_ref(flags: Mapping[str, Any], event: Event | None) -> str | None:
    """A pull request reads baselines from its base commit; ``--baselines-ref ''`` opts out."""
    given = flags.get("baselines_ref")
    if given is not None:
        return given or None
    if isinstance(event, PullRequest) and not flags.get("baselines_dir"):
        return event.base_sha
    return None


def _profile(flags: Mapping[str, Any], config: Config, event: Event | None) -> str:
    """The one place the default profile is decided."""
    if flags.get("profile"):
        return str(flags["profile"])
    if isinstance(event, PullRequest):
        return config.pr_profile
    if isinstance(event, Dispatch) and event.profile:
        return event.profile
    if isinstance(event, Release):
        return config.release_profile
    return config.default_profile


def build_request(flags: Mapping[str, Any], config: Config, event: Event | None = None) -> Request:
    """Flags (argparse's ``vars``; absent keys mean "not given") + config + event."""
    selection = _selection(flags, config, event)
    repeats = _repeats(flags, event)
    mode = _judging_mode(flags, _mode(flags, config, event))
    return Request(
        config=config,
        modules=tuple(dict.fromkeys([*config.kernels, *split_list(flags.get("kernel_module"))])),
        selection=selection,
        harness=_harness(flags, config, config.repeats if repeats is None else repeats),
        ab_harness=_harness(flags, config, config.ab_repeats if repeats is None else repeats),
        thresholds=config.thresholds,
        policy=parse_fail_on(_from_dispatch(flags, event, "fail_on"), config.fail_on),
        baselines=_baselines(flags, config, event),
        mode=mode,
        base=_base(flags, event, mode),
        confirm=config.confirm and not flags.get("no_confirm"),
        release=event if isinstance(event, Release) else None,
        peak_tflops=_positive("--peak-tflops", flags.get("peak_tflops")),
        peak_gbps=_positive("--peak-gbps", flags.get("peak_gbps")),
        compilation_cache=_compilation_cache(flags, config),
        outputs=_outputs(flags),
        inputs=_inputs(flags),
        workers=_workers(flags, config),
        cpu=_cpu(flags, config),
        publishing=_publishing(flags, config),
        lower=flags.get("lower"),
    )


def _from_dispatch(flags: Mapping[str, Any], event: Event | None, name: str) -> Any:
    """A flag, else the manual run's input of the same name (None: neither)."""
    return flags.get(name) or (getattr(event, name) if isinstance(event, Dispatch) else None)


def _kernels(flags: Mapping[str, Any], event: Event | None) -> list[str]:
    if isinstance(event, Release) and event.kernel is not None:
        return [event.kernel]  # a kernel tag selects that kernel
    return split_list(flags.get("kernel")) or (event.kernels if isinstance(event, Dispatch) else [])


def _outputs(flags: Mapping[str, Any]) -> Outputs:
    return Outputs(
        out_dir=flags.get("out_dir") or OUT_DIR,
        output=flags.get("output"),
        fmt=flags.get("format") or "table",
        quiet=bool(flags.get("quiet")),
    )


def _inputs(flags: Mapping[str, Any]) -> Inputs:
    return Inputs(
        results=flags.get("results"),
        ab_report=flags.get("ab_report"),
        report_dir=flags.get("report_dir"),
        resume=flags.get("resume"),
    )


def _workers(flags: Mapping[str, Any], config: Config) -> Workers:
    count = _at_least_one("--workers", flags.get("workers"))
    timeout = _positive("--case-timeout", flags.get("case_timeout"))
    return Workers(count=count, case_timeout=timeout or config.case_timeout)


def _cpu(flags: Mapping[str, Any], config: Config) -> CpuInterpret:
    given = flags.get("cpu_interpret")
    return CpuInterpret(
        mode=given or config.cpu_interpret,
        forced=given is not None,
        tpu_kernels=tuple(config.cpu_interpret_tpu),
    )


def _publishing(flags: Mapping[str, Any], config: Config) -> Publishing:
    publish = not flags.get("no_publish")
    return Publishing(
        publish=publish,
        comment=publish and not flags.get("no_comment"),
        promote_via=flags.get("promote_via") or config.promote_via,
    )


def _selection(flags: Mapping[str, Any], config: Config, event: Event | None) -> Selection:
    kernels = _kernels(flags, event)
    shape = _shape(flags["shape"]) if flags.get("shape") is not None else None
    if shape is not None and len(kernels) != 1:
        raise InputError("--shape needs exactly one --kernel")
    if shape is not None:  # one ad-hoc case: no globs, no profile
        return Selection(
            kernels=tuple(kernels), shard=_shard(flags), shape=shape, dtype=_dtype(flags)
        )
    return Selection(
        kernels=tuple(kernels),
        case_globs=tuple(_case_globs(flags, event)),
        profile=_profile(flags, config, event),
        shard=_shard(flags),
        dtype=_dtype(flags),
    )


def _case_globs(flags: Mapping[str, Any], event: Event | None) -> list[str]:
    return list(flags.get("case") or []) or (event.cases if isinstance(event, Dispatch) else [])


def _shard(flags: Mapping[str, Any]) -> Shard | None:
    return Shard.parse(flags["shard"]) if flags.get("shard") else None


def _dtype(flags: Mapping[str, Any]) -> str:
    return flags.get("dtype") or DTYPE


def _repeats(flags: Mapping[str, Any], event: Event | None) -> int | None:
    repeats = flags.get("repeats")
    if repeats is None and isinstance(event, Dispatch):
        return event.repeats
    return repeats


def _judging_mode(flags: Mapping[str, Any], mode: Mode) -> Mode:
    """Judging measured results (a report job): an A/B is measured elsewhere and handed in
    with --ab-report; without one, only the baseline comparison can be made here."""
    if not flags.get("results") or mode == "baseline" or flags.get("ab_report"):
        return mode
    if flags.get("mode"):
        raise InputError(f"--results with --mode {mode} needs --ab-report FILE")
    return "baseline"


def _baselines(flags: Mapping[str, Any], config: Config, event: Event | None) -> BaselineSource:
    # Config paths resolve against the config file's folder (``pipeline.config.resolve``:
    # an absolute path stays as it is, which is what ``/`` does).
    folder = flags.get("baselines_dir") or config.root / config.baselines_dir
    return BaselineSource(
        folder=Path(folder),
        files=tuple(flags.get("baseline") or ()),
        ref=_baselines_ref(flags, event),
        pins=parse_pins(_from_dispatch(flags, event, "baseline_version")),
    )


def _compilation_cache(flags: Mapping[str, Any], config: Config) -> Path | None:
    if flags.get("no_compilation_cache"):
        return None
    chosen = flags.get("compilation_cache") or config.compilation_cache_dir
    return config.root / chosen if chosen else None


def _at_least_one(name: str, value: int | None) -> int | None:
    if value is not None and value < 1:
        raise InputError(f"{name} must be >= 1")
    return value
