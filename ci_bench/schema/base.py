"""The strict pydantic base every public model shares."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Model(BaseModel):
    """Strict base: unknown keys are errors, so typos never pass silently."""

    model_config = ConfigDict(extra="forbid", frozen=True)


KEBAB = ConfigDict(
    extra="forbid",
    frozen=True,
    populate_by_name=True,
    alias_generator=lambda s: s.replace("_", "-"),
)
