"""The request: flags + ``[tool.ci-bench]`` + the GitHub event, resolved ONCE into one value.

Everything below the command layer takes a ``Request`` (or plain values from it), never the
argparse namespace. Defaults are resolved here and nowhere else: a flag wins over the event,
the event over the config, the config over the built-in default. Pure: no jax, no files.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ci_bench.errors import InputError
from ci_bench.github.context import Dispatch, Event, PullRequest, Release
from ci_bench.measure.settings import Adaptive, HarnessSettings
from ci_bench.schema import FailPolicy, Thresholds
from ci_bench.schema.baseline import ANY_KERNEL
from ci_bench.schema.shard import Shard
from ci_bench.schema.verdicts import CONFIGURABLE, STATE
from ci_bench.text import NAME, SEMVER, split_list

if TYPE_CHECKING:  # the config's type only: reading it (files) stays in pipeline.config
    from ci_bench.pipeline.config import Config

Mode = Literal["baseline", "ab", "both"]
MODES: tuple[Mode, ...] = ("baseline", "ab", "both")
BaseKind = Literal["merge-base", "ref", "default-branch"]


@dataclass(frozen=True)
class AbBase:
    """What the A/B measures the head against.

    ``merge-base``: the commit a pull request branched from (``ref`` is the PR's base
    commit; the merge base of it and the head is taken in the checkout), so a PR behind its
    base branch is never charged with what landed there since. ``ref``: a ref given by hand.
    ``default-branch``: the default branch's head (a manual run that names no base).
    """

    kind: BaseKind
    ref: str


@dataclass(frozen=True)
class Selection:
    """What to run: kernels, case globs and a profile, or one ad-hoc shape; this shard."""

    kernels: tuple[str, ...] = ()
    case_globs: tuple[str, ...] = ()
    profile: str | None = None  # None for an ad-hoc --shape case
    shard: Shard | None = None
    shape: tuple[int, ...] | None = None
    dtype: str = "bfloat16"

    @property
    def adhoc(self) -> bool:
        return self.shape is not None


@dataclass(frozen=True)
class BaselineSource:
    """Where baselines come from: the store folder, explicit files, a pinned version."""

    folder: Path
    files: tuple[Path, ...] = ()
    # Read the folder as it is at this commit (a PR's base), not from the working tree.
    ref: str | None = None
    # kernel -> version; "*" (a bare version) applies to every kernel that has that file.
    pins: Mapping[str, str] = field(default_factory=dict)


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
    mode: Mode = "baseline"
    base: AbBase | None = None
    confirm: bool = True
    peak_tflops: float | None = None
    peak_gbps: float | None = None
    compilation_cache: Path | None = None
    output: Path | None = None
    out_dir: Path = Path("ci-bench-out")
    results_path: Path | None = None
    ab_report: Path | None = None  # an A/B report measured by another job (mode both)
    report_dir: Path | None = None  # the comment and relay roles: the downloaded artifact
    fmt: str = "table"
    quiet: bool = False
    publish: bool = True
    comment: bool = True
    promote_via: str = "commit"
    release: Release | None = None
    # Issue 13: worker processes (None: one per local accelerator), the per-case time limit,
    # and a results file to resume.
    workers: int | None = None
    case_timeout: float = 600.0
    resume: Path | None = None
    cpu_interpret: str = "kernel"  # CPU: "kernel" or "tpu" (jax's TPU interpreter)
    # Per kernel (config cpu-interpret-tpu, SPECs' cpu_interpret) unless the flag was given.
    cpu_interpret_forced: bool = False
    cpu_interpret_tpu: tuple[str, ...] = ()
    lower: str | None = None  # run --lower: check each case lowers for this platform first


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
    target = flags.get("adaptive")
    target = config.adaptive_target if target is None else target
    max_seconds = flags.get("max_time")
    max_seconds = config.adaptive_max_seconds if max_seconds is None else max_seconds
    if target is not None and not 0 < target < 1:
        raise InputError("--adaptive wants a relative width between 0 and 1, e.g. 0.01")
    _positive("--max-time", max_seconds)
    seed = flags.get("seed")
    return HarnessSettings(
        timer=flags.get("timer") or config.timer,
        warmup=config.warmup if warmup is None else warmup,
        repeats=repeats,
        seed=config.seed if seed is None else seed,
        cost_model_factor=config.cost_model_factor,
        adaptive=Adaptive(target=target, max_seconds=max_seconds) if target else None,
    )


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
    if flags.get("base"):
        return AbBase("ref", str(flags["base"]))
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
    dispatch = event if isinstance(event, Dispatch) else None
    kernels = split_list(flags.get("kernel")) or (dispatch.kernels if dispatch else [])
    if isinstance(event, Release) and event.kernel is not None:
        kernels = [event.kernel]
    globs = list(flags.get("case") or []) or (dispatch.cases if dispatch else [])
    shape = _shape(flags["shape"]) if flags.get("shape") is not None else None
    if shape is not None and len(kernels) != 1:
        raise InputError("--shape needs exactly one --kernel")
    shard = Shard.parse(flags["shard"]) if flags.get("shard") else None
    selection = Selection(
        kernels=tuple(kernels),
        case_globs=() if shape else tuple(globs),
        profile=None if shape else _profile(flags, config, event),
        shard=shard,
        shape=shape,
        dtype=flags.get("dtype") or "bfloat16",
    )
    repeats = flags.get("repeats")
    if repeats is None and dispatch is not None:
        repeats = dispatch.repeats
    mode = _mode(flags, config, event)
    if flags.get("results") and mode != "baseline" and not flags.get("ab_report"):
        # Judging measured results (a report job): an A/B is measured elsewhere and handed
        # in with --ab-report; without one, only the baseline comparison can be made here.
        if flags.get("mode"):
            raise InputError(f"--results with --mode {mode} needs --ab-report FILE")
        mode = "baseline"
    fail_on = flags.get("fail_on") or (dispatch.fail_on if dispatch else None)
    pinned = flags.get("baseline_version") or (dispatch.baseline_version if dispatch else None)
    # Config paths resolve against the config file's folder (``pipeline.config.resolve``:
    # an absolute path stays as it is, which is what ``/`` does).
    folder = flags.get("baselines_dir") or config.root / config.baselines_dir
    cache = None
    if not flags.get("no_compilation_cache"):
        chosen = flags.get("compilation_cache") or config.compilation_cache_dir
        cache = config.root / chosen if chosen else None
    return Request(
        config=config,
        modules=tuple(dict.fromkeys([*config.kernels, *split_list(flags.get("kernel_module"))])),
        selection=selection,
        harness=_harness(flags, config, config.repeats if repeats is None else repeats),
        ab_harness=_harness(flags, config, config.ab_repeats if repeats is None else repeats),
        thresholds=config.thresholds,
        policy=parse_fail_on(fail_on, config.fail_on),
        baselines=BaselineSource(
            folder=Path(folder),
            files=tuple(flags.get("baseline") or ()),
            ref=_baselines_ref(flags, event),
            pins=parse_pins(pinned),
        ),
        mode=mode,
        base=_base(flags, event, mode),
        confirm=config.confirm and not flags.get("no_confirm"),
        peak_tflops=_positive("--peak-tflops", flags.get("peak_tflops")),
        peak_gbps=_positive("--peak-gbps", flags.get("peak_gbps")),
        compilation_cache=cache,
        output=flags.get("output"),
        out_dir=flags.get("out_dir") or Path("ci-bench-out"),
        results_path=flags.get("results"),
        ab_report=flags.get("ab_report"),
        report_dir=flags.get("report_dir"),
        fmt=flags.get("format") or "table",
        quiet=bool(flags.get("quiet")),
        publish=not flags.get("no_publish"),
        comment=not (flags.get("no_comment") or flags.get("no_publish")),
        promote_via=flags.get("promote_via") or config.promote_via,
        release=event if isinstance(event, Release) else None,
        workers=_at_least_one("--workers", flags.get("workers")),
        case_timeout=_positive("--case-timeout", flags.get("case_timeout")) or config.case_timeout,
        resume=flags.get("resume"),
        cpu_interpret=flags.get("cpu_interpret") or config.cpu_interpret,
        cpu_interpret_forced=flags.get("cpu_interpret") is not None,
        cpu_interpret_tpu=tuple(config.cpu_interpret_tpu),
        lower=flags.get("lower"),
    )


def _at_least_one(name: str, value: int | None) -> int | None:
    if value is not None and value < 1:
        raise InputError(f"{name} must be >= 1")
    return value
