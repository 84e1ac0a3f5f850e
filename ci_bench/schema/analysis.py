"""``ci-bench analyze`` output: every selected case's cost model, versioned (docs/FORMATS.md).

Each case is a ``CaseModel`` (the contract's ``id``, ``hbm_bytes``, ``ideal_bytes``,
``vmem_bytes``, ``grid_steps``, ``flops``, ``chips``, ``calls``; a partial case's times null,
``schema.withheld``) with its identity and, with ``--base``, the model's verdict against the
base ref's kernel.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ci_bench.schema.base import Model
from ci_bench.schema.report import ModelChange, RunState
from ci_bench.schema.withheld import WithheldModel

ANALYSIS_SCHEMA_VERSION = 4
# 2: a case may be ``partial`` (parts not modelled: no modelled time, never judged) and the
# verdict ``partial``; chips v4i, 7, 8i; ``vmem_warning`` per chip. 3: ``--base`` records
# the run states of the comparison (``same-code``: both sides traced a kernel from one file)
# and the verdict ``same_code``. 4: a ``partial`` case carries no time: every per-chip time
# (``modelled_us``, ``compute_us``, ``memory_us``, ``overhead_us``, ``mfu_ceiling``,
# ``bound``, a GPU's ``vector_us``) is null, in the case and in its calls; older files read
# the same (their partial times are dropped on reading). Later in 4 (optional, issue 57):
# ``meta.base_failures``. Versions 1 to 3 are still read.
ANALYSIS_READABLE = (1, 2, 3, 4)


class AnalyzedCase(WithheldModel):
    """One case of ``ci-bench analyze``: its model, and (``--base``) the model's verdict
    against the base ref's kernel."""

    id: str
    kernel: str
    version: str
    errors: list[str] = Field(
        default_factory=list, description="target chips whose VMEM the case does not fit"
    )
    against: ModelChange | None = Field(
        None, description="--base: the model's verdict against the base ref's kernel"
    )


class AnalysisMeta(Model):
    tool_version: str
    jax: str
    profile: str | None
    chips: list[str] = Field(description="the target chips")
    seed: int
    base_ref: str | None = None
    seconds: float | None = Field(None, ge=0, description="wall time of the whole analysis")
    base_failures: dict[str, str] = Field(
        default_factory=dict,
        description="--base: kernel -> why its base could not be modelled (hung, crashed or "
        "failed while imported, traced or modelled); its cases are not compared",
    )


class Analysis(Model):
    """``ci-bench analyze --format json`` / ``--output``: a small versioned document."""

    schema_version: Literal[1, 2, 3, 4] = ANALYSIS_SCHEMA_VERSION
    kind: Literal["analysis"] = "analysis"
    verdict: Literal[
        "pass", "structural", "improved", "error", "not_modelled", "partial", "same_code"
    ]
    exit_code: int
    meta: AnalysisMeta
    cases: list[AnalyzedCase]
    run_states: list[RunState] = Field(
        default_factory=list,
        description="--base: facts about the comparison (same-code: nothing compared), v3",
    )
