"""The strict pydantic base every public model shares."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from ci_bench.text import HTTP_URL as HTTP_URL
from ci_bench.text import NAME_MAX, NAME_PATTERN, PARAM_PATTERN, SEMVER_PATTERN

# Field-name sets shared between frozen instances (see ``Model.model_post_init``); bounded,
# though a schema's models set only a few distinct combinations of their fields.
_FIELD_SETS: dict[frozenset[str], set[str]] = {}
_FIELD_SETS_MAX = 4096


class Model(BaseModel):
    """Strict base: unknown keys are errors, so typos never pass silently."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    def model_post_init(self, context: Any, /) -> None:
        """Instances that set the same fields share one field-name set.

        pydantic keeps a set of the fields given per instance; for a results file's models
        those sets were over half their memory (docs/SCALE.md). A frozen model never adds
        to its set, and ``model_copy`` copies it before changing it, so sharing is safe.
        """
        fields = self.__pydantic_fields_set__
        key = frozenset(fields)
        shared = _FIELD_SETS.get(key)
        if shared is None:
            if len(_FIELD_SETS) >= _FIELD_SETS_MAX:
                return
            shared = _FIELD_SETS[key] = fields
        object.__setattr__(self, "__pydantic_fields_set__", shared)


KEBAB = ConfigDict(
    extra="forbid",
    frozen=True,
    populate_by_name=True,
    allow_inf_nan=False,
    alias_generator=lambda s: s.replace("_", "-"),
)


# The kernel contract's name rules (ci_bench.text): names become file names and markdown, so
# a file that breaks them is refused on reading.
KernelName = Annotated[str, Field(pattern=NAME_PATTERN)]
Version = Annotated[str, Field(pattern=SEMVER_PATTERN, max_length=NAME_MAX)]
ParamName = Annotated[str, Field(pattern=PARAM_PATTERN)]
# A case id (<kernel>/<params>/<dtype> where the case is at hand): printable, bounded.
CaseId = Annotated[str, Field(pattern=r"^[^\x00-\x1f\x7f]{1,512}$")]
Dtype = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]{0,31}$")]
# What a case times (ci_bench.contract.spec.MODES): files before version 3 are all forward.
Mode = Literal["forward", "backward", "forward+backward"]
# An implementation's name in a SPEC (pallas, native, or a variant's name).
ImplName = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]{0,31}$")]


def _aware_utc(value: datetime) -> datetime:
    """Every timestamp as aware UTC: a naive one is read as UTC (what ci-bench writes), an
    offset is converted, so timestamps from any file compare and sort without a crash."""
    try:
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    except OverflowError:  # 0001-01-01T00:30+01:00 has no UTC time in datetime's range
        raise ValueError("timestamp out of range once converted to UTC") from None


UtcDatetime = Annotated[datetime, AfterValidator(_aware_utc)]
# A git commit (SHA-1 or SHA-256, abbreviated or whole) and a plain http(s) link target.
GIT_SHA = re.compile(r"[0-9a-f]{7,64}")
# A GitHub account as GitHub allows it (an app's bot account ends in [bot]).
GITHUB_LOGIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]{0,38}(\[bot\])?")
# ``--shard I/N`` as recorded in a results file, or the shards a merge holds ("1/4+2/4").
SHARD = re.compile(r"[1-9]\d{0,5}/[1-9]\d{0,5}(\+[1-9]\d{0,5}/[1-9]\d{0,5})*")


def matching(pattern: re.Pattern[str], what: str, limit: int = 2048) -> AfterValidator:
    """A string validator with a message a person can act on (not the regex itself)."""

    def check(value: str) -> str:
        if len(value) > limit or not pattern.fullmatch(value):
            raise ValueError(f"not {what}: {value[:40]!r}")
        return value

    return AfterValidator(check)


GitSha = Annotated[str, matching(GIT_SHA, "a git commit (7 to 64 hex digits)")]
GitHubLogin = Annotated[str, matching(GITHUB_LOGIN, "a GitHub login")]
HttpUrl = Annotated[str, matching(HTTP_URL, "a plain http(s) URL")]
ShardText = Annotated[str, matching(SHARD, "I/N (e.g. 1/4), or shards joined by +", 64_000)]


def json_text(value: Any, *, indent: int | None = 2, compact: bool = False) -> str:
    """Strict JSON text with a newline: never ``NaN``/``Infinity``, which JSON readers refuse.

    A non-finite number here is a bug in the code that built ``value``: it raises.
    """
    separators = (",", ":") if compact else None
    text = json.dumps(
        value, indent=indent, allow_nan=False, separators=separators, sort_keys=compact
    )
    return text + "\n"
