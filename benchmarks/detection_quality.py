"""How often does each verdict cry wolf, and how often does it catch a real slowdown?

Runs K comparisons where both sides run identical code (A/A) and K where the head does a
known 10 % more work (11 instead of 10 units of the same Pallas computation), over a few
small cases, and prints for each method the false-alarm rate and the detection rate:

- spec:      the specification's rule alone (mean_ms more than 5 % above the baseline),
             on two separate measurements (baseline, then head);
- baseline:  ci-bench's verdict on the same two measurements (threshold + Mann-Whitney U,
             Benjamini-Hochberg across the cases, confirmation re-measurement);
- ab:        ci-bench's same-process A/B (paired rounds, Wilcoxon + BH, confirmation),
             with ``--ab-repeats`` rounds (the config's ab-repeats, 200);
- pr:        the pull-request verdict the workflows run (mode both): the A/B decides; a
             baseline excess is ``drift`` (a warning, never a PR regression) only when it
             is significant, confirmed by the A/B job's own measurement of the head,
             outside the A/B's interval and beyond twice what the head's two runs disagree
             by; otherwise it is information in the row.

    python benchmarks/detection_quality.py --trials 20 --json detection.json

Everything runs on this machine's CPU (Pallas in interpret mode); no test asserts these
figures, they are measured and printed.
"""

from __future__ import annotations

import argparse
import functools
import json
import platform
import random
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from ci_bench.contract.spec import Case, KernelSpec, MatrixProfile, Tolerance
from ci_bench.judge.ab import ab_report, judge_pairs
from ci_bench.judge.compare import compare
from ci_bench.judge.ladder import past_threshold
from ci_bench.judge.pr import pr_report
from ci_bench.measure.devices import fingerprint
from ci_bench.measure.harness import run_case, run_contestants
from ci_bench.measure.settings import HarnessSettings
from ci_bench.schema import CaseResult, FailPolicy, Results, RunMeta, RunSettings, Thresholds
from ci_bench.store.baselines import BaselineFile, Lookup, entry_from_results


def _work_kernel(a_ref, b_ref, o_ref, *, units: int):
    acc = jnp.zeros(o_ref.shape, jnp.float32)
    for u in range(units):  # distinct operands per unit: XLA cannot merge them
        acc += jnp.dot(a_ref[...] * (u + 1), b_ref[...], preferred_element_type=jnp.float32)
    # Normalised, the result is a @ b for any number of units: head and base agree, so
    # the same-process A/B passes its correctness gate and differs only in work.
    o_ref[...] = acc / (units * (units + 1) / 2)


@functools.partial(jax.jit, static_argnames="units")
def work(a: jax.Array, b: jax.Array, *, units: int) -> jax.Array:
    """``units`` matmuls of the same size in one Pallas kernel (cost ∝ units), = a @ b."""
    return pl.pallas_call(
        functools.partial(_work_kernel, units=units),
        out_shape=jax.ShapeDtypeStruct((a.shape[0], b.shape[1]), jnp.float32),
        interpret=jax.default_backend() == "cpu",
    )(a, b)


def make_spec(units: int) -> KernelSpec:
    def make_inputs(case: Case, key: jax.Array) -> tuple[jax.Array, jax.Array]:
        n = case["N"]
        ka, kb = jax.random.split(key)
        return jax.random.normal(ka, (n, n)), jax.random.normal(kb, (n, n)) / n**0.5

    sizes = MatrixProfile(({"N": 128}, {"N": 192}, {"N": 256}), ("float32",))
    return KernelSpec(
        name="work",
        version=f"{units}.0.0",
        pallas=functools.partial(work, units=units),
        native=lambda a, b: a @ b,
        reference=lambda a, b: jnp.matmul(a, b, precision=jax.lax.Precision.HIGHEST),
        make_inputs=make_inputs,
        flops=lambda c: 2 * units * c["N"] ** 3,
        bytes_accessed=lambda c: 3 * 4 * c["N"] ** 2,
        tolerances={"float32": Tolerance(1e-3, 1e-3)},
        matrix={"smoke": sizes, "ci": sizes, "full": sizes},
        shape_keys=("N",),
    )


def _results(cases: list[CaseResult], version: str) -> Results:
    now = datetime.now(UTC)
    meta = RunMeta(
        tool_version="detection-quality",
        started_at=now,
        finished_at=now,
        complete=True,
        profile="smoke",
        device=fingerprint(),
        settings=RunSettings(warmup=5, repeats=20, seed=0, interpret=True),
        kernels={"work": version},
    )
    return Results(meta=meta, cases=cases)


def _no_peaks(dtype: str) -> tuple[None, None]:
    return None, None


def trial(
    base_spec: KernelSpec,
    head_spec: KernelSpec,
    cases: list[Case],
    settings: HarnessSettings,
    ab_settings: HarnessSettings,
    t: Thresholds,
    rng: random.Random,
) -> dict[str, dict[str, float]]:
    """One comparison per case with each method; returns flags and seconds per method."""
    out: dict[str, dict[str, float]] = {}
    started = time.perf_counter()
    base = [run_case(base_spec, c, settings, _no_peaks) for c in cases]
    head = [run_case(head_spec, c, settings, _no_peaks) for c in cases]
    separate = time.perf_counter() - started
    means = []
    for b, h in zip(base, head, strict=True):
        if b.pallas is None or h.pallas is None:
            raise RuntimeError(f"a case failed: {b.error or h.error}")
        means.append((b.pallas.mean_ms, h.pallas.mean_ms))
    # The specification's rule: mean more than 5 % above the baseline.
    spec_flags = sum(h > b * (1 + t.mean_slowdown) for b, h in means)
    out["spec"] = {"flags": spec_flags, "seconds": separate}
    # ci-bench against a stored baseline: same two measurements, plus confirmation.
    started = time.perf_counter()
    entry = entry_from_results(_results(base, base_spec.version), "work", datetime.now(UTC), None)
    stored = BaselineFile(kernel="work", version=base_spec.version, entries=[entry])
    lookup = {"work": Lookup("work", head_spec.version, None, stored, None)}
    report = compare(_results(head, head_spec.version), lookup, t, FailPolicy())
    flagged = {v.id for v in report.cases if v.verdict == "regression"}
    if flagged:
        again = {
            c.id: run_case(head_spec, c, settings, _no_peaks) for c in cases if c.id in flagged
        }
        confirmed = [
            h.model_copy(update={"confirmation": again[h.id].pallas}) if h.id in again else h
            for h in head
        ]
        report = compare(_results(confirmed, head_spec.version), lookup, t, FailPolicy())
    flags = sum(v.verdict == "regression" for v in report.cases)
    out["baseline"] = {"flags": flags, "seconds": separate + time.perf_counter() - started}
    # ci-bench A/B: both in one process, paired rounds in shuffled order.
    started = time.perf_counter()
    pairs = [
        tuple(run_contestants([head_spec, base_spec], c, ab_settings, _no_peaks, rng=rng))
        for c in cases
    ]
    verdicts = judge_pairs(pairs, t)  # type: ignore[arg-type]
    flagged = {v.id for v in verdicts if v.verdict == "regression"}
    if flagged:
        redone = {}
        for c in cases:
            if c.id in flagged:
                h2, b2 = run_contestants([head_spec, base_spec], c, ab_settings, _no_peaks, rng=rng)
                redone[c.id] = (h2.pallas, b2.pallas)
        pairs = [
            (
                h.model_copy(update={"confirmation": redone[h.id][0]}),
                b.model_copy(update={"confirmation": redone[h.id][1]}),
            )
            if h.id in redone
            else (h, b)
            for h, b in pairs
        ]
        verdicts = judge_pairs(pairs, t)  # type: ignore[arg-type]
    out["ab"] = {
        "flags": sum(v.verdict == "regression" for v in verdicts),
        "seconds": time.perf_counter() - started,
    }
    # The PR verdict: both measurements above, the A/B deciding.
    heads = _results([h for h, _ in pairs], head_spec.version)
    ab = ab_report(heads, [b for _, b in pairs], "base", t, FailPolicy())
    pr = pr_report(report, ab, FailPolicy())
    out["pr"] = {
        "flags": sum(v.verdict == "regression" for v in pr.cases),
        "seconds": out["baseline"]["seconds"] + out["ab"]["seconds"],
    }
    out["drift"] = {"flags": sum(v.verdict == "drift" for v in pr.cases), "seconds": 0.0}
    # Baseline excesses the PR verdict keeps as information (one collapsed line), not drift.
    moved = [v for v in pr.cases if v.verdict != "drift" and v.mean_change is not None]
    info = sum(past_threshold(v.mean_change, v.tflops_ratio, t) is not None for v in moved)
    out["informational"] = {"flags": info, "seconds": 0.0}
    # The rule before issue 24, on the same measurements: any baseline excess past a
    # threshold and significant that the A/B did not decide was reported as drift.
    ab_by_id = {v.id: v for v in ab.cases}
    old = sum(
        v.verdict in ("regression", "improved", "toolchain")
        and ab_by_id[v.id].verdict not in ("regression", "improved", "error")
        for v in report.cases
        if v.id in ab_by_id
    )
    out["drift_before"] = {"flags": old, "seconds": 0.0}
    out["observed_ratio"] = {"flags": 0, "seconds": sum(h / b for b, h in means) / len(means)}
    return out


METHODS = ("spec", "baseline", "ab", "pr")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20, help="comparisons per scenario")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument(
        "--ab-repeats", type=int, default=200, help="A/B rounds (config ab-repeats)"
    )
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--base-units", type=int, default=10)
    parser.add_argument("--head-units", type=int, default=11)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="also write the figures here")
    args = parser.parse_args(argv)

    base_spec, head_spec = make_spec(args.base_units), make_spec(args.head_units)
    same_spec = make_spec(args.base_units)
    cases = base_spec.cases("smoke")
    settings = HarnessSettings(warmup=args.warmup, repeats=args.repeats, seed=args.seed)
    ab_settings = HarnessSettings(warmup=args.warmup, repeats=args.ab_repeats, seed=args.seed)
    t = Thresholds()
    rng = random.Random(args.seed)
    scenarios: dict[str, tuple[KernelSpec, KernelSpec]] = {
        "A/A (identical code)": (base_spec, same_spec),
        f"A/B (+{(args.head_units / args.base_units - 1):.0%} work)": (base_spec, head_spec),
    }
    summary: dict[str, dict[str, float]] = {}
    for name, (b, h) in scenarios.items():
        totals = {
            m: {"flags": 0.0, "seconds": 0.0}
            for m in (*METHODS, "drift", "informational", "drift_before", "observed_ratio")
        }
        for k in range(args.trials):
            got = trial(b, h, cases, settings, ab_settings, t, rng)
            for method, value in got.items():
                totals[method]["flags"] += value["flags"]
                totals[method]["seconds"] += value["seconds"]
            extra = ("drift", "informational", "drift_before")
            flags = json.dumps({m: got[m]["flags"] for m in (*METHODS, *extra)})
            print(f"{name}: trial {k + 1}/{args.trials} {flags}", file=sys.stderr)
        comparisons = args.trials * len(cases)
        summary[name] = {
            "comparisons": comparisons,
            "observed_mean_ratio": totals["observed_ratio"]["seconds"] / args.trials,
            **{f"{m}_rate": totals[m]["flags"] / comparisons for m in METHODS},
            "drift_rate": totals["drift"]["flags"] / comparisons,
            "informational_rate": totals["informational"]["flags"] / comparisons,
            "drift_before_rate": totals["drift_before"]["flags"] / comparisons,
            **{f"{m}_seconds_per_comparison": totals[m]["seconds"] / comparisons for m in METHODS},
        }
    command = "python benchmarks/detection_quality.py " + " ".join(
        argv if argv is not None else sys.argv[1:]
    )
    print(f"\n{command}")
    print(
        f"machine: {platform.processor() or platform.machine()}, jax {jax.__version__}, cases: "
        f"{', '.join(c.id for c in cases)}, warmup {args.warmup}, repeats {args.repeats}, "
        f"A/B rounds {args.ab_repeats}"
    )
    print(f"{'scenario':28} {'method':9} {'flagged':>9} {'s/comparison':>13}")
    for name, row in summary.items():
        label = "false alarms" if name.startswith("A/A") else "detected"
        for method in METHODS:
            rate, n = row[f"{method}_rate"], row["comparisons"]
            cost = row[f"{method}_seconds_per_comparison"]
            print(
                f"{name:28} {method:9} {rate:8.0%}  {cost:12.2f}  ({label}: {round(rate * n)}/{n})"
            )
        drift = round(row["drift_rate"] * row["comparisons"])
        info = round(row["informational_rate"] * row["comparisons"])
        goal = " (goal on identical code: at most 1/20)" if name.startswith("A/A") else ""
        print(
            f"{name:28} pr mode reported drift (a warning) in {drift}/{row['comparisons']} = "
            f"{row['drift_rate']:.1%}{goal}; a baseline excess kept as information (one "
            f"collapsed line) in {info}/{row['comparisons']}"
        )
        before = round(row["drift_before_rate"] * row["comparisons"])
        print(f"{name:28} the rule before issue 24 would have reported drift in {before}")
        print(f"{name:28} observed mean ratio head/base: {row['observed_mean_ratio']:.3f}")
    if args.json:
        figures = {"command": command, "args": vars(args), "summary": summary}
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
