"""A pipeline role's status file: how a job ended, for the jobs after it (versioned).

Each role writes ``status-<role>[-<shard>].json`` into its output folder before it exits,
whatever happened, so the comment job can say why a run reached no verdict (a kernel
module that no longer imports, an A/B that crashed) instead of leaving the old verdict up.
The file comes from a job that ran pull-request code: it is data, validated and escaped.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ci_bench.schema.base import Model

STATUS_SCHEMA_VERSION = 1


class RoleStatus(Model):
    schema_version: Literal[1] = STATUS_SCHEMA_VERSION
    role: str = Field(pattern=r"^[a-z]{1,16}$")
    shard: str | None = Field(None, pattern=r"^\d{1,3}/\d{1,3}$")
    exit_code: int = Field(ge=0, le=255)
    error: str | None = Field(None, max_length=2000)
    head_sha: str | None = Field(None, pattern=r"^[0-9a-fA-F]{4,64}$")
