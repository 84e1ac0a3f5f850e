"""``[tool.ci-bench]`` in pyproject.toml, validated; the defaults are the specification's.

Strict: TOML has types, so a value of the wrong type is an error naming the key and the type
it wants (``confirm = "yes"``, ``warmup = true``, ``cost-model-factor = "2"``), never
coerced into something the user did not write.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ci_bench.defaults import ADAPTIVE_MAX_S, CASE_TIMEOUT_S, REPEATS, SEED, WARMUP
from ci_bench.errors import InputError
from ci_bench.github.api import ApiSettings
from ci_bench.schema import FailPolicy, Thresholds
from ci_bench.schema.chips import TargetName
from ci_bench.schema.timers import TimerName
from ci_bench.store.files import read_text, too_deep

Profile = Literal["smoke", "ci", "full"]

# Bounds shared by a config key and its flag (commands.validate re-exports them):
# numpy/jax PRNG seeds are unsigned 32-bit; a larger seed fails deep inside jax.
SEED_MAX = 2**32 - 1
# Far beyond any sensible run, small enough that a typo cannot run for days.
REPEATS_MAX = 1_000_000
MAX_SECONDS = 7 * 24 * 3600.0


class Config(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        populate_by_name=True,
        alias_generator=lambda s: s.replace("_", "-"),
        allow_inf_nan=False,
    )

    kernels: list[str] = Field(default_factory=list, description="modules exposing SPEC")
    baselines_dir: Path = Path("baselines")
    default_profile: Profile = "smoke"
    pr_profile: Profile = "ci"
    release_profile: Profile = "full"
    promote_via: Literal["commit", "pull-request"] = "commit"
    # Pull requests: compare with the stored baseline, A/B against the PR's base, or both.
    pr_mode: Literal["baseline", "ab", "both"] = "both"
    # Re-measure cases flagged as regressions once before the verdict is final.
    confirm: bool = True
    # A/B on a TPU: each case the verdict finds slower gets its unit metrics (MXU, scalar
    # ALU, spills, DMA) on both sides, from a pass of its own after the timed ones.
    unit_metrics: bool = False
    # Shard jobs a pull request's matrix is split over (the benchmark workflow's matrix).
    shards: int = Field(2, ge=1, le=64)
    warmup: int = Field(WARMUP, ge=0, le=REPEATS_MAX)
    repeats: int = Field(REPEATS, ge=1, le=REPEATS_MAX)
    # A/B rounds: paired ratios need more rounds than the specification's 20 to see a 10 %
    # change on a noisy machine (benchmarks/detection_quality.py; README "Verdicts").
    ab_repeats: int = Field(200, ge=1, le=REPEATS_MAX)
    seed: int = Field(SEED, ge=0, le=SEED_MAX)
    # A FLOPs model further than this factor from XLA's count is flagged (MFU would lie).
    cost_model_factor: float = Field(2.0, gt=1, allow_inf_nan=False)
    # Adaptive sampling (off unless a target is set here or with --adaptive).
    adaptive_target: float | None = Field(None, gt=0, lt=1)
    adaptive_max_seconds: float = Field(ADAPTIVE_MAX_S, gt=0, le=MAX_SECONDS)
    compilation_cache_dir: Path | None = Path(".cache/jax")
    # How per-call times are taken; unset: the platform's default (wallclock everywhere).
    timer: TimerName | None = None
    # A case running longer than this is an error; its worker is killed and replaced.
    case_timeout: float = Field(CASE_TIMEOUT_S, gt=0)
    # CPU only: "kernel" lets each kernel pick its interpret mode; "tpu" runs every
    # pallas_call under jax's TPU interpreter (TPU-only kernels without `interpret`).
    cpu_interpret: Literal["kernel", "tpu"] = "kernel"
    # Kernels (by SPEC name) that run under jax's TPU interpreter on a CPU whatever
    # `cpu-interpret` says: TPU-only kernels beside kernels that interpret themselves.
    cpu_interpret_tpu: list[str] = Field(default_factory=list)
    # TPU chips and GPUs the cost model judges and the lowering check lowers for (jax's
    # names and h100/h200/b200, schema/chips.py); empty: the runner's accelerator, else
    # (on a CPU) every TPU chip it knows.
    target_chips: list[TargetName] = Field(default_factory=list)
    # The lower role's tiling hint (docs/TUNE.md): the model's best tiling beats the
    # shipped default by more than this ratio; 0 turns the search off.
    tune_hint: float = Field(1.5, ge=0, allow_inf_nan=False)
    tune_hint_max_candidates: int = Field(64, ge=1, le=4096)
    tune_hint_max_seconds: float = Field(120.0, gt=0, le=MAX_SECONDS)
    thresholds: Thresholds = Thresholds()
    fail_on: FailPolicy = FailPolicy()
    github: ApiSettings = ApiSettings()
    # Where the config was read from; relative paths above resolve against it.
    root: Path = Field(Path(), exclude=True)

    @field_validator("baselines_dir", "compilation_cache_dir", mode="before")
    @classmethod
    def _usable_path(cls, value: object) -> object:
        """A path is a TOML string (strict mode takes no str for a Path by itself)."""
        if isinstance(value, str):
            if not value or "\x00" in value or len(value) > 4096:
                raise ValueError("not a usable path")
            return Path(value)
        return value


MAX_CONFIG_BYTES = 1024 * 1024
# [tool.ci-bench] nests three levels (thresholds, fail-on, github); deeper is hostile.
MAX_CONFIG_DEPTH = 16


# What a strict validation error wants, in TOML's words.
_EXPECTED = {
    "bool_type": "a boolean (true or false)",
    "int_type": "an integer",
    "float_type": "a number",
    "string_type": "a string",
    "list_type": "an array",
    "dict_type": "a table",
    "model_type": "a table",
    "is_instance_of": "a string",
}
_TOML_TYPE = {bool: "boolean", int: "integer", float: "number", str: "string", list: "array"}


def config_error(path: Path, exc: ValidationError) -> InputError:
    """``file: [tool.ci-bench] key: expected TYPE, got TYPE value`` (or pydantic's words)."""
    err = exc.errors()[0]
    key = ".".join(str(p) for p in err["loc"]) or "(table)"
    expected = _EXPECTED.get(err["type"])
    if expected:
        value = err.get("input")
        got = _TOML_TYPE.get(type(value), "table" if isinstance(value, dict) else "value")
        text = str(value).lower() if isinstance(value, bool) else str(value)
        shown = "" if isinstance(value, dict | list) else f" {text[:40]!r}"
        why = f"expected {expected}, got {got}{shown}"
    else:
        why = " ".join(str(err["msg"]).split())[:200]
    return InputError(f"{path}: [tool.ci-bench] {key}: {why}")


def _read_toml(path: Path) -> dict[str, Any]:
    """A TOML file as a table: UTF-8, bounded, every failure one line naming the file."""
    text = read_text(path, "config", limit=MAX_CONFIG_BYTES)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{path}: invalid TOML: {exc}") from None
    except RecursionError:
        raise InputError(f"{path}: invalid TOML: nested too deeply") from None


def _section(data: dict[str, Any], path: Path) -> dict[str, Any] | None:
    """``[tool.ci-bench]`` or None; a ``tool`` or section of the wrong type is an error."""
    tool = data.get("tool")
    if tool is None:
        return None
    if not isinstance(tool, dict):
        raise InputError(f"{path}: tool: must be a table, got {type(tool).__name__}")
    table = tool.get("ci-bench")
    if table is None:
        return None
    if not isinstance(table, dict):
        raise InputError(f"{path}: tool.ci-bench: must be a table, got {type(table).__name__}")
    if too_deep(table, MAX_CONFIG_DEPTH):
        raise InputError(f"{path}: [tool.ci-bench] is nested deeper than {MAX_CONFIG_DEPTH} levels")
    return table


def find_pyproject(start: Path) -> Path | None:
    """The nearest pyproject.toml with a ``[tool.ci-bench]`` table, walking up.

    A pyproject.toml that cannot be read or parsed is an error, never skipped: skipping it
    would run with defaults the user did not choose.
    """
    for folder in (start, *start.parents):
        candidate = folder / "pyproject.toml"
        try:
            present = candidate.exists() or candidate.is_symlink()
        except OSError as exc:
            raise InputError(f"{candidate}: cannot read the config: {exc.strerror}") from None
        # Anything named pyproject.toml is read: a folder or a dangling link there fails
        # loudly instead of being skipped for defaults the user did not choose.
        if present and _section(_read_toml(candidate), candidate) is not None:
            return candidate
    return None


def load_config(path: Path | None, cwd: Path) -> Config:
    """Read the config file (or the nearest pyproject.toml); no file means defaults."""
    path = path or find_pyproject(cwd)
    if path is None:
        return Config(root=cwd)
    table = _section(_read_toml(path), path) or {}
    try:
        config = Config.model_validate({**table, "root": path.parent.resolve()}, strict=True)
    except ValidationError as exc:
        raise config_error(path, exc) from None
    return config


def resolve(config: Config, path: Path) -> Path:
    """A config path made absolute against the config file's folder."""
    return path if path.is_absolute() else config.root / path
