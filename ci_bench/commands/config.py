"""``[tool.ci-bench]`` in pyproject.toml, validated; the defaults are the specification's."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ci_bench.errors import InputError
from ci_bench.github.api import ApiSettings
from ci_bench.schema import FailPolicy, Thresholds
from ci_bench.store.files import validation_message

Profile = Literal["smoke", "ci", "full"]


class Config(BaseModel):
    model_config = ConfigDict(
        extra="forbid", populate_by_name=True, alias_generator=lambda s: s.replace("_", "-")
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
    warmup: int = Field(5, ge=0)
    repeats: int = Field(20, ge=1)
    # A/B rounds: paired ratios need more rounds than the specification's 20 to see a 10 %
    # change on a noisy machine (benchmarks/detection_quality.py; README "Verdicts").
    ab_repeats: int = Field(200, ge=1)
    seed: int = 42
    # A FLOPs model further than this factor from XLA's count is flagged (MFU would lie).
    cost_model_factor: float = Field(2.0, gt=1)
    # Adaptive sampling (off unless a target is set here or with --adaptive).
    adaptive_target: float | None = Field(None, gt=0, lt=1)
    adaptive_max_seconds: float = Field(30.0, gt=0)
    compilation_cache_dir: Path | None = Path(".cache/jax")
    # How per-call times are taken; unset: the platform's default (wallclock everywhere).
    timer: Literal["wallclock", "profiler"] | None = None
    # A case running longer than this is an error; its worker is killed and replaced.
    case_timeout: float = Field(600.0, gt=0)
    # CPU only: "kernel" lets each kernel pick its interpret mode; "tpu" runs every
    # pallas_call under jax's TPU interpreter (TPU-only kernels without `interpret`).
    cpu_interpret: Literal["kernel", "tpu"] = "kernel"
    thresholds: Thresholds = Thresholds()
    fail_on: FailPolicy = FailPolicy()
    github: ApiSettings = ApiSettings()
    # Where the config was read from; relative paths above resolve against it.
    root: Path = Field(Path(), exclude=True)


def find_pyproject(start: Path) -> Path | None:
    """The nearest pyproject.toml with a ``[tool.ci-bench]`` table, walking up."""
    for folder in (start, *start.parents):
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            try:
                data = tomllib.loads(candidate.read_text())
            except (tomllib.TOMLDecodeError, OSError):
                continue
            if "ci-bench" in data.get("tool", {}):
                return candidate
    return None


def load_config(path: Path | None, cwd: Path) -> Config:
    """Read the config file (or the nearest pyproject.toml); no file means defaults."""
    path = path or find_pyproject(cwd)
    if path is None:
        return Config(root=cwd)
    try:
        data = tomllib.loads(path.read_text())
    except OSError as exc:
        raise InputError(f"{path}: cannot read config: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{path}: invalid TOML: {exc}") from None
    table = data.get("tool", {}).get("ci-bench", {})
    try:
        config = Config.model_validate({**table, "root": path.parent.resolve()})
    except ValidationError as exc:
        raise InputError(f"{path}: [tool.ci-bench] {validation_message(exc)}") from None
    return config


def resolve(config: Config, path: Path) -> Path:
    """A config path made absolute against the config file's folder."""
    return path if path.is_absolute() else config.root / path
