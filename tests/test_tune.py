"""``ci-bench tune``: tunables in the contract, the cost-model search through the CLI, tuned
configs written, validated by check-spec and read back from a kernel's own import."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from ci_bench.contract.spec import KernelSpec, SpecError
from ci_bench.contract.tunables import Tunables, TunablesError, divides
from ci_bench.errors import ExitCode
from kernels.matmul import SPEC as MATMUL
from kernels.matmul import TUNABLES as MATMUL_TUNABLES
from kernels.matmul import BlockSizes
from kernels.matmul.kernel import Blocks
from tests.conftest import REPO, run_cli, write_project

SMALL = ("--values", "block_m=128,256", "--values", "block_k=128,256", "--values", "block_n=128")
CASE_512 = "matmul/B1-M512-K512-N512/bfloat16"


def _tunables(**kw) -> Tunables:
    base = {
        "space": {"block": (128, 256)},
        "default": {"block": 128},
        "build": lambda c: lambda x: x,
    }
    return Tunables(**{**base, **kw})


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"space": {}}, "at least one knob"),
        ({"space": {"block": ()}}, "no candidate values"),
        ({"space": {"block": (128, 128)}}, "repeat one"),
        ({"space": {"block": (1.5,)}}, "not an int, str or bool"),
        ({"default": {"block": 512}}, "not one of its candidates"),
        ({"default": {"other": 128}}, "default names"),
        ({"build": 3}, "build is not callable"),
        ({"constraints": ("block | K",)}, "is not a Constraint"),
    ],
)
def test_tunables_refuse_what_cannot_be_searched(kw, message):
    with pytest.raises(TunablesError, match=message):
        _tunables(**kw)
    assert issubclass(TunablesError, SpecError)  # a kernel module with bad tunables: exit 2


def test_constraints_and_the_kernels_own_config_say_why_a_candidate_is_dropped():
    blocks = _tunables(
        space={"block": (128, 256, 384)},
        constraints=(divides("block", "K"),),
        config=lambda block: block if block != 256 else int("no"),
    )
    assert blocks.rejects({"block": 384}, {"K": 512}) == "breaks block | K (K=512)"
    assert blocks.rejects({"block": 256}, {"K": 512}).startswith("config refused: ValueError")
    assert blocks.rejects({"block": 128}, {"K": 512}) is None
    assert [c["block"] for c in blocks.candidates()] == [128, 256, 384]
    wider = blocks.with_values({"block": (512,)})
    assert wider.space["block"] == (128, 512)  # the default stays a candidate
    with pytest.raises(TunablesError, match="unknown tunable"):
        blocks.with_values({"nope": (1,)})
    with pytest.raises(SpecError, match="tunables must be a Tunables"):
        KernelSpec(**{**_spec_fields(), "tunables": {"block": (128,)}})


def _spec_fields() -> dict:
    import dataclasses

    return {f.name: getattr(MATMUL, f.name) for f in dataclasses.fields(MATMUL)}


def test_the_projects_matmul_declares_the_guides_tiling_and_keeps_its_case_ids():
    assert list(MATMUL_TUNABLES.space) == ["block_m", "block_k", "block_n"]
    assert dict(MATMUL_TUNABLES.default) == {"block_m": 512, "block_k": 512, "block_n": 1024}
    assert MATMUL.cases("smoke")[0].id == "matmul/B1-M128-K128-N128/float32"
    # A tile is an upper bound (matmul 0.2.0): one larger than its dimension is legal and
    # runs as the dimension's share, so the one default serves 128³ and 4096³ alike.
    small = {"B": 1, "M": 128, "K": 128, "N": 128}
    assert MATMUL_TUNABLES.rejects(dict(MATMUL_TUNABLES.default), small) is None
    assert BlockSizes(512, 512, 1024).within(128, 128, 128) == Blocks(128, 128, 128)
    # 513: two blocks of 384 where the tile is shorter, one whole 513 block where it is not
    assert BlockSizes(512, 512, 1024).within(513, 513, 513) == Blocks(384, 384, 513)
    assert BlockSizes(640, 640, 128).within(127, 513, 640) == Blocks(127, 513, 128)
    assert BlockSizes(512, 512, 1024).within(4096, 4096, 4096) == Blocks(512, 512, 1024)


def test_tune_ranks_every_candidate_per_chip_in_json_and_table(tmp_path):
    write_project(tmp_path, ["constrained_matmul"])  # the 0.1.0 tunables
    args = ("tune", "--kernel", "matmul", "--shape", "512,512,512", "--chip", "v5e", *SMALL)
    done = run_cli(*args, "--values", "block_n=128,1024", "--format", "json", "-q", cwd=tmp_path)
    assert done.returncode == ExitCode.OK, done.stderr
    doc = json.loads(done.stdout)
    assert (doc["kind"], doc["schema_version"], doc["meta"]["chips"]) == ("tune", 2, ["v5e"])
    (case,) = doc["cases"]
    assert case["id"] == CASE_512
    assert case["space"] == 8
    dropped = [c for c in case["candidates"] if c["why_not"]]
    assert {c["config"]["block_n"] for c in dropped} == {1024}  # larger than N: said why
    assert all("block_n <= N rounded up to 128" in c["why_not"] for c in dropped)
    kept = [c for c in case["candidates"] if not c["why_not"]]
    for c in kept:
        assert c["lowers"] is True
        assert c["steps"] > 0
        assert c["bytes"] > 0
        assert {"fits", "modelled_us", "bound", "rank", "bytes"} <= set(c["chips"]["v5e"])
    ranks = sorted(c["chips"]["v5e"]["rank"] for c in kept)
    assert ranks == list(range(1, len(kept) + 1))
    best = case["candidates"][case["best"]["v5e"]]
    assert best["chips"]["v5e"]["rank"] == 1
    assert best["chips"]["v5e"]["modelled_us"] == min(
        c["chips"]["v5e"]["modelled_us"] for c in kept
    )
    default = case["candidates"][case["default_index"]]
    assert default["default"]
    assert default["config"] == {
        "block_m": 128,
        "block_k": 128,
        "block_n": 128,
    }
    # 512³ bf16 at 256 x 256 tiles moves half the bytes of 128 x 128 ones: a faster tiling.
    assert best["config"]["block_m"] == 256
    assert best["config"]["block_k"] == 256
    table = run_cli(*args, "-q", cwd=tmp_path)
    assert table.returncode == ExitCode.OK, table.stderr
    assert "v5e: best (256, 256, 128)" in table.stdout
    assert f"- {CASE_512}: a tiling " in table.stdout
    assert "faster by the model exists on v5e: (256, 256, 128)" in table.stdout
    assert "(default)" in table.stdout
    assert "(128, 128, 128)" in table.stdout


def test_tune_refuses_kernels_without_tunables_and_bad_values_in_one_line(tmp_path):
    (tmp_path / "plain.py").write_text(
        "import dataclasses\nfrom kernels.matmul import SPEC as M\n"
        "SPEC = dataclasses.replace(M, name='plain', tunables=None)\n"
    )
    write_project(tmp_path, ["plain"])
    none = run_cli("tune", "--chip", "v5e", cwd=tmp_path)
    assert none.returncode == ExitCode.USAGE
    assert none.stderr.startswith("ci-bench: error: nothing to tune: no selected kernel")
    assert len(none.stderr.strip().splitlines()) == 1
    write_project(tmp_path, ["kernels.matmul"])
    bad = run_cli(
        "tune", "--shape", "256,256,256", "--kernel", "matmul", "--values", "bm=1", cwd=tmp_path
    )
    assert bad.returncode == ExitCode.USAGE
    assert "unknown tunable(s) bm; known: block_m, block_k, block_n" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1


def test_measure_refuses_on_a_cpu_and_times_the_top_k_with_the_default_when_forced(tmp_path):
    write_project(tmp_path, ["constrained_matmul"])  # the 0.1.0 tunables
    args = ("tune", "--kernel", "matmul", "--shape", "256,256,256", "--chip", "v5e", *SMALL)
    refused = run_cli(*args, "--measure", "2", cwd=tmp_path)
    assert refused.returncode == ExitCode.USAGE
    assert "interpret" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    forced = run_cli(
        *args, "--measure", "2", "--measure-on-cpu", "--repeats", "3", "--warmup", "0",
        "--format", "json", "-q", cwd=tmp_path,
    )  # fmt: skip
    assert forced.returncode == ExitCode.OK, forced.stderr
    (case,) = json.loads(forced.stdout)["cases"]
    measured = case["measured"]
    # The model's top 2, the candidate that ties with the second (issue 39: (128, 256, 128)
    # and (256, 128, 128) share rank 2, so a cut between them would be the enumeration's)
    # and the default (not among them).
    assert len(measured) == 4
    assert [m["default"] for m in measured] == [False, False, False, True]
    top = sorted(
        (c for c in case["candidates"] if c["chips"].get("v5e", {}).get("rank")),
        key=lambda c: c["chips"]["v5e"]["rank"],
    )[:3]
    assert [c["chips"]["v5e"]["rank"] for c in top] == [1, 2, 2]
    assert [m["config"] for m in measured[:3]] == [c["config"] for c in top]
    for m in measured:
        assert m["samples"] == 3
        assert m["median_ms"] > 0
        assert m["device_kind"] == "cpu"
        assert (m["ratio"] is None) == m["default"]
        if not m["default"]:
            assert m["ci_low"] <= m["ratio"] <= m["ci_high"]
            assert 0 <= m["p_value"] <= 1


def test_measure_records_a_config_that_does_not_compile_and_measures_the_next(tmp_path):
    """Issue 50: on a TPU v5e, tune --measure exited 5 on a tiling Mosaic refused
    (CompileTimeScopedVmemOom) that the model had ranked."""
    write_project(tmp_path, ["uncompilable_tiling"])
    done = run_cli(
        "tune", "--kernel", "refusing", "--shape", "256,256,256", "--chip", "v5e", *SMALL,
        "--measure", "1", "--measure-on-cpu", "--repeats", "2", "--warmup", "0",
        "--timer", "profiler", "--format", "json", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == ExitCode.OK, done.stderr
    (case,) = json.loads(done.stdout)["cases"]
    ranked = sorted(
        (c for c in case["candidates"] if c["chips"].get("v5e", {}).get("rank")),
        key=lambda c: c["chips"]["v5e"]["rank"],
    )
    assert ranked[0]["config"] == {"block_m": 256, "block_k": 256, "block_n": 128}
    (refused,) = case["not_compiled"]
    assert refused["config"] == ranked[0]["config"]
    assert refused["error"].startswith("RuntimeError: CompileTimeScopedVmemOom")
    # The next in the model's ranking is timed in its place, beside the default, by the
    # timer asked for (device time read from the trace).
    timed = [m["config"] for m in case["measured"]]
    assert ranked[0]["config"] not in timed
    assert timed[0] == ranked[1]["config"]
    assert [m["default"] for m in case["measured"]][-1] is True
    assert "does not compile here" in done.stderr


def test_write_force_never_carries_on_a_file_check_spec_refuses(tmp_path):
    """Issue 54 D9: --write --force kept another case's invalid entry (here: a config the
    SPEC refuses, and an entry of another chip's file), rewrote the file and exited 0."""
    write_project(tmp_path, ["constrained_matmul"])  # the 0.1.0 tunables
    args = ("tune", "--kernel", "matmul", "--shape", "512,512,512", "--chip", "v5e", *SMALL)
    assert run_cli(*args, "--write", "-q", cwd=tmp_path).returncode == ExitCode.OK
    path = tmp_path / "baselines" / "matmul_v0.1.0.tuned.v5e.json"
    data = json.loads(path.read_text())
    other = "matmul/B1-M256-K256-N256/bfloat16"
    bad = {**data["cases"][CASE_512], "params": {"B": 1, "M": 256, "K": 256, "N": 256}}
    data["cases"][other] = {**bad, "config": {**bad["config"], "block_k": 4096}}
    path.write_text(json.dumps(data))
    before = path.read_bytes()

    forced = run_cli(*args, "--write", "--force", "-q", cwd=tmp_path)
    assert forced.returncode == ExitCode.USAGE
    assert "holds what check-spec refuses, not rewritten" in forced.stderr
    assert f"{other}: config breaks block_k <= K" in forced.stderr
    assert len(forced.stderr.strip().splitlines()) == 1
    assert path.read_bytes() == before  # untouched


def test_write_refuses_a_file_it_may_not_replace_before_measuring_anything(tmp_path):
    """--write writes each case as it is done: a refusal found at the first write would
    stop the run with that case's measurement saved nowhere. It is refused up front."""
    write_project(tmp_path, ["constrained_matmul"])  # the 0.1.0 tunables
    args = ("tune", "--kernel", "matmul", "--shape", "512,512,512", "--chip", "v5e", *SMALL)
    assert run_cli(*args, "--write", "-q", cwd=tmp_path).returncode == ExitCode.OK
    out = tmp_path / "tune.json"
    again = run_cli(
        *args, "--write", "--measure", "1", "--measure-on-cpu", "--repeats", "2",
        "--warmup", "0", "-o", str(out), cwd=tmp_path,
    )  # fmt: skip
    assert again.returncode == ExitCode.USAGE
    assert "pass --force" in again.stderr
    assert "candidates" not in again.stderr  # nothing was searched
    assert "timing" not in again.stderr  # nor timed
    assert not out.exists()


def test_write_keeps_the_winner_check_spec_validates_it_and_a_kernel_reads_it(tmp_path):
    write_project(tmp_path, ["constrained_matmul"])  # the 0.1.0 tunables
    args = ("tune", "--kernel", "matmul", "--shape", "512,512,512", "--chip", "v5e", *SMALL)
    done = run_cli(*args, "--write", "-q", cwd=tmp_path)
    assert done.returncode == ExitCode.OK, done.stderr
    path = tmp_path / "baselines" / "matmul_v0.1.0.tuned.v5e.json"
    data = json.loads(path.read_text())
    assert (data["format"], data["schema_version"], data["chip"]) == ("ci-bench-tuned", 1, "v5e")
    entry = data["cases"][CASE_512]
    assert entry["config"] == {"block_m": 256, "block_k": 256, "block_n": 128}
    assert entry["default"] == {"block_m": 128, "block_k": 128, "block_n": 128}
    assert entry["modelled_us"] < entry["default_modelled_us"]
    again = run_cli(*args, "--write", "-q", cwd=tmp_path)
    assert again.returncode == ExitCode.USAGE
    assert "pass --force" in again.stderr
    assert run_cli(*args, "--write", "--force", "-q", cwd=tmp_path).returncode == ExitCode.OK

    ok = run_cli("check-spec", cwd=tmp_path)
    assert ok.returncode == ExitCode.OK, ok.stdout + ok.stderr
    entry["config"]["block_k"] = 4096  # larger than K: the SPEC's constraint refuses it
    path.write_text(json.dumps(data))
    bad = run_cli("check-spec", cwd=tmp_path)
    assert bad.returncode == ExitCode.USAGE
    assert f"matmul_v0.1.0.tuned.v5e.json: {CASE_512}: config breaks block_k <= K" in bad.stdout

    # A kernel's own import reads the file with ci_bench.spec alone (no pydantic, no schema).
    entry["config"]["block_k"] = 256
    path.write_text(json.dumps(data))
    (tmp_path / "my_kernel.py").write_text(
        textwrap.dedent(
            """\
            from pathlib import Path
            from ci_bench.spec import tuned_config

            DEFAULT = {"block_m": 128, "block_k": 128, "block_n": 128}
            HERE = Path(__file__).parent / "baselines"
            PARAMS = {"B": 1, "M": 512, "K": 512, "N": 512}
            ON_V5E = tuned_config(
                "matmul", "0.1.0", PARAMS, "bfloat16", directory=HERE, default=DEFAULT,
                chip="v5e")
            ON_V6E = tuned_config(
                "matmul", "0.1.0", PARAMS, "bfloat16", directory=HERE, default=DEFAULT,
                chip="v6e")
            OTHER = tuned_config(
                "matmul", "0.1.0", {**PARAMS, "M": 1024}, "bfloat16", directory=HERE,
                default=DEFAULT, chip="v5e")
            """
        )
    )
    probe = (
        "import json, sys, my_kernel as k; "
        "print(json.dumps([k.ON_V5E, k.ON_V6E, k.OTHER, "
        "sorted(m for m in sys.modules if m.startswith(('ci_bench', 'pydantic', 'jax')))]))"
    )
    read = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}, check=False,
    )  # fmt: skip
    assert read.returncode == 0, read.stderr
    on_v5e, on_v6e, other, loaded = json.loads(read.stdout)
    assert on_v5e == {"block_m": 256, "block_k": 256, "block_n": 128}
    assert on_v6e == other == {"block_m": 128, "block_k": 128, "block_n": 128}
    assert not [m for m in loaded if m.startswith(("pydantic", "jax", "ci_bench.schema"))]
    assert "ci_bench.store" not in loaded
    assert "ci_bench.measure" not in loaded


def test_a_broken_tuned_file_is_a_one_line_error_at_run_time(tmp_path):
    from ci_bench.spec import tuned_config

    (tmp_path / "k_v0.1.0.tuned.v5e.json").write_text('{"format": "something else"}')
    with pytest.raises(SpecError, match="not a tuned-configs file"):
        tuned_config("k", "0.1.0", {"M": 1}, "float32", directory=tmp_path, default={}, chip="v5e")
    assert tuned_config(
        "k", "0.1.0", {"M": 1}, "float32", directory=tmp_path, default={"b": 1}, chip="v6e"
    ) == {"b": 1}


def _tune_jax_flash_attention(dtype: str, exit_code: ExitCode) -> dict:
    """``ci-bench tune`` on v5e of the flash attention example's smallest case in ``dtype``,
    run as a user runs it; the one case's JSON."""
    done = run_cli(
        "tune", "--chip", "v5e", "--case", f"flash_attention/B1-H2-T256-D64/{dtype}",
        "--format", "json", "-q", cwd=REPO / "examples" / "flash_attention",
    )  # fmt: skip
    assert done.returncode == exit_code, done.stderr
    (case,) = json.loads(done.stdout)["cases"]
    return case


def test_jax_flash_attention_declares_tunables_from_its_documented_block_sizes():
    case = _tune_jax_flash_attention("bfloat16", ExitCode.OK)
    reasons = {c["why_not"].split(" (")[0] for c in case["candidates"] if c["why_not"]}
    assert {"breaks block_b | B", "breaks block_q | T", "breaks block_k_major | T"} <= reasons
    # jax's own BlockSizes refuses a block_k above block_k_major: its message is the reason.
    assert any("should be smaller than block_k_major" in r for r in reasons)
    best = case["candidates"][case["best"]["v5e"]]
    default = case["candidates"][case["default_index"]]
    assert default["config"] == {"block_b": 1, "block_q": 128, "block_k_major": 128, "block_k": 128}
    assert best["chips"]["v5e"]["modelled_us"] < default["chips"]["v5e"]["modelled_us"]


def test_tune_ranks_float32_flash_attention_since_its_dots_are_priced():
    """jax's flash attention on float32 inputs runs float32 x float32 dots at DEFAULT
    precision: unranked up to model revision 4 (their cost in Mosaic unmeasured), ranked
    since revision 5 (priced from the chip's microbenchmark), with a best named."""
    case = _tune_jax_flash_attention("float32", ExitCode.OK)
    assert case["space"] == 128
    assert case["best"]
    ranked = [c for c in case["candidates"] if c["chips"]]
    assert case["candidates"][case["default_index"]] in ranked
    assert len(ranked) > 1
    assert not any("float32 x float32 dot" in (c["why_not"] or "") for c in case["candidates"])


def test_the_faster_tiling_sentence_names_chip_config_and_both_times():
    from ci_bench.report.tune import faster_tiling
    from ci_bench.schema.tune import Candidate, CandidateChip, TunedCase

    def cand(config, us, default=False):
        on = CandidateChip(fits=True, modelled_us=us, bound="compute", bytes=1, rank=1)
        return Candidate(config=config, default=default, lowers=True, chips={"v5e": on})

    case = TunedCase(
        id="matmul/B1-M8192-K8192-N8192/bfloat16",
        kernel="matmul",
        version="0.1.0",
        params={"B": 1, "M": 8192, "K": 8192, "N": 8192},
        dtype="bfloat16",
        space=2,
        candidates=[
            cand({"bm": 128, "bk": 128, "bn": 128}, 91_836.0, default=True),
            cand({"bm": 512, "bk": 1024, "bn": 1024}, 6_099.0),
        ],
        best={"v5e": 1},
        default_index=0,
        seconds=0.0,
    )
    assert faster_tiling(case, "v5e") == (
        "a tiling 15.1x faster by the model exists on v5e: (512, 1024, 1024), 6.1 ms vs 91.8 ms"
    )
    assert faster_tiling(case, "v5e", threshold=20.0) is None
    assert faster_tiling(case, "v6e") is None


def test_check_spec_refuses_a_default_config_its_own_constraints_forbid(tmp_path):
    (tmp_path / "strict.py").write_text(
        textwrap.dedent(
            """\
            import dataclasses
            from ci_bench.spec import divides
            from kernels.matmul import SPEC as M, TUNABLES as T

            RULES = (divides("block_m", "M"),)
            SPEC = dataclasses.replace(
                M, name="strict", tunables=dataclasses.replace(T, constraints=RULES)
            )
            """
        )
    )
    write_project(tmp_path, ["strict"])
    done = run_cli("check-spec", cwd=tmp_path)
    assert done.returncode == ExitCode.USAGE, done.stdout + done.stderr
    assert (
        "tunables: the default config breaks block_m | M (B=1, M=127, K=513, N=255) on "
        "strict/B1-M127-K513-N255/float32" in done.stdout
    )


def test_tune_ranks_a_kernel_that_asks_jax_for_the_chip_and_never_a_partial_model(tmp_path):
    # emit_pipeline asks jax for the TPU generation while tracing: traced and lowered as
    # each chip, the plain candidates are ranked (before issue 29's seam: "does not trace").
    write_project(tmp_path, ["tunable_emit_pipeline"])
    args = ("tune", "--chip", "v5e", "--chip", "v6e", "-q")
    done = run_cli(*args, "--format", "json", cwd=tmp_path)
    assert done.returncode == ExitCode.OK, done.stderr
    (case,) = json.loads(done.stdout)["cases"]
    by = {(c["config"]["block_rows"], c["config"]["wrap"]): c for c in case["candidates"]}
    for rows in (64, 128, 256):
        plain = by[rows, "none"]
        assert plain["why_not"] is None, plain
        assert plain["lowers"] is True, plain
        assert not plain["host_error"]
        for chip in ("v5e", "v6e"):
            assert plain["chips"][chip]["lowers"] is True
            assert plain["chips"][chip]["rank"] is not None
        # A partial model (a loop the model cannot count) is shown unranked, with why.
        partial = by[rows, "while"]
        assert partial["why_not"].startswith("unranked: partial model, no modelled time: ")
        assert "dynamic trip count" in partial["why_not"]
        assert partial["chips"] == {}
        assert partial["lowers"] is None
        # This machine's failures are said as such, never "does not trace/lower".
        traced = by[rows, "host"]
        assert traced["host_error"] is True
        assert traced["why_not"].startswith("host error: tracing as v5e failed on this machine")
        lowered = by[rows, "lower_host"]
        assert lowered["host_error"] is True
        assert lowered["why_not"] is None
        assert lowered["lowers"] is None  # not "does not lower"
        assert "Unable to initialize backend" in lowered["lowering_error"]
        assert all(c["lowers"] is None and c["rank"] is None for c in lowered["chips"].values())
    for chip in ("v5e", "v6e"):
        assert case["candidates"][case["best"][chip]]["config"] == {
            "block_rows": 256,
            "wrap": "none",
        }
        ranked = [c for c in case["candidates"] if c["chips"].get(chip, {}).get("rank")]
        assert {c["config"]["wrap"] for c in ranked} == {"none"}
    table = run_cli(*args, cwd=tmp_path)
    assert table.returncode == ExitCode.OK, table.stderr
    assert "does not trace" not in table.stdout
    assert "do not lower" in table.stdout
    assert "0 do not lower, 6 host errors (this machine, not the kernel)" in table.stdout
    assert "3 x unranked: partial model, no modelled time:" in table.stdout
    assert "3 x lowering not checked (host error): lowering for tpu as v5e" in table.stdout
    assert "v5e: best (256, none)" in table.stdout


def test_tune_help_names_every_chip_the_model_knows():
    from ci_bench.measure.model.chips import CHIP_NAMES

    done = run_cli("tune", "--help", cwd=REPO)
    assert done.returncode == 0
    assert ", ".join(CHIP_NAMES) in " ".join(done.stdout.split())


def test_measure_times_one_config_per_program(tmp_path):
    """On a TPU v5e, ``tune --measure 4`` over matmul's 128³ cases timed 33 configs each
    (every tiling cuts to one 128³ block since matmul 0.2.0's tiles are upper bounds, so
    all of them tied): the same program timed 33 times. One config per program is timed."""
    write_project(tmp_path, ["kernels.matmul"])
    values = ("--values", "block_m=128,256", "--values", "block_k=128,256")
    done = run_cli(
        "tune", "--kernel", "matmul", "--shape", "128,128,128", "--chip", "v5e", *values,
        "--values", "block_n=128,1024", "--measure", "4", "--measure-on-cpu", "--repeats", "2",
        "--warmup", "0", "--format", "json", "-q", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == ExitCode.OK, done.stderr
    (case,) = json.loads(done.stdout)["cases"]
    reused = [c for c in case["candidates"] if c["same_as"] is not None]
    assert len(reused) >= 7  # every tiling is the one 128³ program
    timed = [m for m in case["measured"] if not m["default"]]
    assert len(timed) == 1
