"""The strict pydantic base every public model shares."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from ci_bench.text import NAME_MAX, NAME_PATTERN, PARAM_PATTERN, SEMVER_PATTERN


class Model(BaseModel):
    """Strict base: unknown keys are errors, so typos never pass silently."""

    model_config = ConfigDict(extra="forbid", frozen=True)


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
