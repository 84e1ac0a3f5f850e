"""One coherent lowering section (issue 37, part 3): each line of the comment's lowering
section says one thing, and no two contradict each other.

"does not lower" only when export fails; "does not fit VMEM" its own line, with the
figures and what to change; one reason said once for the chips it holds on; nothing cut
mid-word; an emoji and a word that mean faster for faster; "no structural change" only
when there is none; chips named as chips (``TPU 7``).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

from ci_bench.report.comment_tables import model_cell
from ci_bench.report.sticky import lowering_section, sections_of
from ci_bench.schema import ChipChange, ModelChange
from ci_bench.schema.analysis import Analysis, AnalysisMeta, AnalyzedCase
from ci_bench.schema.lowering import LoweredCase, LoweringMeta, LoweringResults
from ci_bench.schema.report import CaseVerdict
from tests.harness import pipeline_fixtures
from tests.harness.pipeline_fixtures import keep
from tests.harness.pipeline_repo import failures

template, jax_cache = pipeline_fixtures.template, pipeline_fixtures.jax_cache
world = pipeline_fixtures.world
FIXTURES = Path(__file__).parent / "fixtures"
CHIPS = ["v4i", "v4", "v5e", "v5p", "v6e", "7", "7x", "8i"]


def test_a_case_that_lowers_everywhere_but_passes_its_vmem_limit_does_not_fit_vmem(world):
    """Through the workflows' own steps: the lower job of a pull request that adds a
    kernel whose blocks need 24 MiB under its own vmem_limit_bytes of 8 MiB."""
    kernel = (FIXTURES / "vmem_limit_kernel.py").read_text()
    pyproject = (
        (world.repo / "pyproject.toml")
        .read_text()
        .replace(
            'kernels = ["pipeline_kernel"]', 'kernels = ["pipeline_kernel", "vmem_limit_kernel"]'
        )
    )
    files = {"vmem_limit_kernel.py": kernel, "pyproject.toml": pyproject}
    head = world.commit("vmem", world.base, "a kernel with its own VMEM limit", files)
    world.on_pr(world.pull_request("opened", head), lowering=True)
    lower, relay = world.lowering_runs
    assert lower.result("lower") == "failure", failures(lower)  # a red check: it would not run
    assert relay.result("relay") == "success", failures(relay)
    body = world.the_comment()
    keep(world, body)
    section = sections_of(body.split("\n", 1)[1])["lowering"]
    lines = section.splitlines()
    assert "do not lower" not in section  # every case exports fine
    assert "✅ all 4 cases lower for TPU on all 8 target chips" in lines
    assert "❌ 1 of 4 cases do not fit VMEM (they lower; the TPU compiler would refuse them):" in (
        lines
    )
    (row,) = [line for line in lines if line.startswith("- `vmem_limit/M2048-N1024/float32`")]
    assert row == (
        "- `vmem_limit/M2048-N1024/float32`: on all 8 target chips: 24.00 MiB of VMEM (blocks, "
        "scratch, the body's values) exceed its vmem_limit_bytes of 8.00 MiB; the largest "
        "block is args\\[0\\] (1024×1024 float32, 2 buffers: 8.00 MiB). What to change: its "
        "vmem_limit_bytes "
        "(pltpu.CompilerParams) of at least 24.00 MiB on TPU v5e, TPU v5p, TPU v6e, TPU 7, "
        "TPU 7x and TPU 8i; smaller blocks on TPU v4i and TPU v4, whose VMEM is 16.00 MiB"
    )
    assert row.count("24.00 MiB of VMEM") == 1  # one reason, once, not per chip
    assert not re.search(r"\w…", section)  # nothing cut mid-word


def _analysis(*changes: tuple[str, ModelChange]) -> Analysis:
    meta = AnalysisMeta(
        tool_version="0", jax="0", profile="ci", chips=CHIPS, seed=42, base_ref="merge base abc"
    )
    cases = [
        AnalyzedCase(
            status="ok",
            hbm_bytes=1,
            id=cid,
            kernel="k",
            version="0.1.0",
            against=change,
        )
        for cid, change in changes
    ]
    return Analysis(verdict="pass", exit_code=0, meta=meta, cases=cases)


def _change(verdict: str, per_chip: dict[str, float], steps: float | None = None) -> ModelChange:
    chips = {c: ChipChange(base_us=1.0, head_us=1.0 + d, change=d) for c, d in per_chip.items()}
    pick = min if verdict == "improved" else max
    chip = pick(per_chip, key=per_chip.__getitem__)
    return ModelChange(
        verdict=verdict,
        reason=f"modelled {per_chip[chip]:+.1%} on {chip}",
        chip=chip,
        time_change=per_chip[chip],
        steps_ratio=steps,
        chips=chips,
    )


def test_faster_is_said_with_a_word_and_an_emoji_that_mean_faster_and_no_false_all_clear():
    faster = _change("improved", dict.fromkeys(CHIPS, -0.5) | {"7": -0.688}, steps=0.25)
    text = lowering_section(None, None, "abc", None, analysis=_analysis(("k/a", faster)))
    assert "🚀 1 case faster on TPU by the cost model against merge base abc:" in text
    assert "📉" not in text
    row = next(line for line in text.splitlines() if line.startswith("- `k/a`"))
    assert row == (
        "- `k/a`: modelled -68.8% on TPU 7; faster on all 8 target chips; grid steps ×0.25"
    )
    assert "no structural change" not in text  # a faster case is a change

    slower = _change("structural", {"v5e": 0.9, "v6e": 0.4, "7": -0.1})
    text = lowering_section(
        None, None, "abc", None, analysis=_analysis(("k/a", faster), ("k/b", slower))
    )
    assert "📐 1 case slower on TPU by the cost model against merge base abc" in text
    assert "- `k/b`: modelled +90.0% on TPU v5e; slower on TPU v5e and TPU v6e" in text
    assert "no structural change" not in text

    same = _change("pass", dict.fromkeys(CHIPS, 0.01))
    text = lowering_section(None, None, "abc", None, analysis=_analysis(("k/c", same)))
    assert "✅ no structural change by the cost model against merge base abc" in text


def test_a_base_whose_kernel_code_failed_is_said_never_no_structural_change():
    """Issue 57: the lower job's cost model against a merge base whose kernel hung while
    traced compared nothing for it; the section must not read as an all-clear."""
    why = "the merge base's kernel k hung while traced (timed out after 600 s)"
    analysis = _analysis(("k/a", None))
    meta = analysis.meta.model_copy(update={"base_failures": {"k": why}})
    text = lowering_section(
        None, None, "abc", None, analysis=analysis.model_copy(update={"meta": meta})
    )
    assert f"⚠️ not compared (k): {why}" in text
    assert "no structural change" not in text


def test_export_failures_and_vmem_misfits_are_two_lines_and_long_errors_end_on_a_word():
    when = datetime(2026, 10, 1, tzinfo=UTC)
    meta = LoweringMeta(
        tool_version="0",
        started_at=when,
        platform="tpu",
        profile="ci",
        jax="0",
        jaxlib="0",
        kernels={"k": "0.1.0"},
        chips=CHIPS,
    )
    long = "lowering for tpu failed: " + " ".join(["Mosaic cannot lower this shape"] * 40)
    cases = [
        LoweredCase(
            id="k/broken",
            kernel="k",
            version="0.1.0",
            params={},
            dtype="float32",
            platform="tpu",
            status="error",
            error=long,
        ),
        LoweredCase(
            id="k/big",
            kernel="k",
            version="0.1.0",
            params={},
            dtype="float32",
            platform="tpu",
            status="error",
            kind="mosaic",
            error="does not fit VMEM: on TPU v5e: 24.00 MiB of VMEM (blocks, scratch, the body's "
            "values) exceed "
            "the default scoped VMEM limit of 16.00 MiB",
        ),
    ]
    text = lowering_section(LoweringResults(meta=meta, cases=cases), None, "abc", None)
    lines = text.splitlines()
    assert "❌ 1 of 2 cases do not lower for TPU:" in lines
    assert "❌ 1 of 2 cases do not fit VMEM (they lower; the TPU compiler would refuse them):" in (
        lines
    )
    assert "- `k/big`: on TPU v5e: 24.00 MiB of VMEM (blocks, scratch, the body's values) " in (
        text
    )
    broken = next(line for line in lines if line.startswith("- `k/broken`"))
    kept = broken.removeprefix("- `k/broken`: ").removesuffix("…")
    assert broken.endswith("…")
    assert long.startswith(kept)
    assert long[len(kept)] == " ", broken[-40:]  # cut after a whole word
    assert "✅ 0 of" not in text


def test_the_comment_names_the_chip_a_model_change_is_on_as_a_chip():
    change = _change("improved", {"7": -0.71, "v5e": -0.2})
    verdict = CaseVerdict(id="k/a", kernel="k", verdict="pass", reason="", model=change)
    assert model_cell(verdict) == "🚀 -71% TPU 7"


def test_the_verdicts_structural_list_names_chips_as_chips():
    from ci_bench.report.comment import markdown_report
    from tests.harness.comment_data import STRUCTURAL, rich_pr_report

    text = markdown_report(rich_pr_report())
    structural = text[text.index("#### Structural (cost model, exact)") :].splitlines()[2]
    assert structural.startswith(f"- `{STRUCTURAL}`: modelled time on TPU v5e +38% (")
