"""The long fuzz run: thousands of real processes over every subcommand, failures counted.

Same inputs and oracles as tests/test_fuzz.py (tests/harness/fuzzing.py and friends), but many
more, random, and it never stops at a failure. Each input runs in a real process: by
default a fork of this process with ci-bench already imported (a real exit code, real
signals, about 20x cheaper than a fresh interpreter), and ``--exec-share`` of them again
through a fresh ``python -m ci_bench.commands.cli`` (the real entry point). It prints the
inputs, runs and distinct failures per class (crash, hang, silent pass, false refusal,
invalid output, fault unreported) and writes them as JSON with ``--json``.

A share of the runs (``--signal-share``, 0.1) is sent SIGTERM or SIGINT at a log-uniform
moment of its life, as a cancelled CI job or a Ctrl-C: it must end with 143 or 130, soon,
without a traceback, its files valid and no worker left (tests/harness/fuzz_signals.py).

    python benchmarks/fuzz.py --runs 3000 --jobs 2 --seed 1 --json fuzz.json
    python benchmarks/fuzz.py --replay 1:417                       # one input, in detail

No test asserts these figures; they are measured and printed. Seeds (a real run and what
each command made of it) are cached in ``--seeds``. To fuzz another version of ci-bench
(e.g. before a fix), copy ``tests/fuzz*.py`` and this file into its checkout and run there.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import math
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]


CODE = HERE  # the checkout whose ci_bench is fuzzed: this one
sys.path.insert(0, str(HERE))

from tests.harness.fuzz_commands import make_input, subcommands, weights  # noqa: E402
from tests.harness.fuzz_seeds import Seeds, describe, make_seeds  # noqa: E402
from tests.harness.fuzz_signals import (  # noqa: E402
    MARK,
    RETURNED,
    SIGNAL_GRACE,
    judge_signalled,
    returned,
    returned_before,
)
from tests.harness.fuzzing import (  # noqa: E402
    ESCAPED,
    Failure,
    Outcome,
    Workspace,
    as_json,
    dump_failure,
    judge,
    run_exec,
    tmpfs_available,
)

KINDS = [
    "crash",
    "hang",
    "silent-pass",
    "false-refusal",
    "invalid-output",
    "fault-unreported",
    "injection",
]
# The fuzzer's own faults: counted apart (never a ci-bench failure), and never fatal to a run.
HARNESS = "harness-error"


@dataclass
class Running:
    index: int
    mode: str
    inp: object
    ws: Workspace
    pid: int
    deadline: float
    out: Path
    err: Path
    started: float
    proc: subprocess.Popen | None = None  # exec mode (its object reaps it, not waitpid)
    mark: str = ""  # in its environment, so its workers can be found after it ends
    signal_at: float | None = None  # when to send ``signum`` (a cancelled CI job)
    signum: int = signal.SIGTERM
    sent: int | None = None  # the signal sent while it ran
    sent_at: float = 0.0  # time.monotonic(), comparable with the run's RETURNED time

    def poll(self) -> int | None:
        """The exit code (negative: a signal), or None while it runs."""
        if self.proc is not None:
            return self.proc.poll()
        pid, status = os.waitpid(self.pid, os.WNOHANG)
        return None if pid == 0 else os.waitstatus_to_exitcode(status)

    def kill(self) -> None:
        with_group_killed(self.pid)
        if self.proc is not None:
            self.proc.wait()
        else:
            os.waitpid(self.pid, 0)


def generate(seeds: Seeds, seed: int, index: int, parsers: dict, disk: bool, only=()):
    rng = random.Random(f"{seed}:{index}")
    names = [n for n in parsers if n in only] if only else list(parsers)
    command = rng.choices(names, [weights(parsers)[n] for n in names])[0]
    return make_input(seeds, command, parsers[command], rng, disk=disk)


def _child(inp, ws: Workspace, env: dict[str, str], out: Path, err: Path) -> None:
    """In the forked process: become a ci-bench run and exit with its code."""
    code = 1
    try:
        os.setpgid(0, 0)
        for signum in (signal.SIGTERM, signal.SIGINT):  # a fresh process's, not the fuzzer's
            signal.signal(signum, signal.SIG_DFL)
        os.chdir(ws.work)
        os.environ.clear()
        os.environ.update(env)
        tempfile.tempdir = None  # read TMPDIR again
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        for fd, path in ((1, out), (2, err)):
            target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(target, fd)
        sys.stdout = io.TextIOWrapper(os.fdopen(1, "wb", closefd=False), line_buffering=True)
        sys.stderr = io.TextIOWrapper(
            os.fdopen(2, "wb", closefd=False), errors="backslashreplace", line_buffering=True
        )
        sys.argv = ["ci-bench", *inp.argv]
        from ci_bench.commands.cli import main

        try:
            code = main(list(inp.argv))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 2
        except BaseException:  # what the console script would print (exit 120, not 1)
            traceback.print_exc()
            code = ESCAPED
        returned(env)
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(int(code))


def start(index, mode, inp, seeds, parent, timeout) -> Running:
    ws = Workspace.create(seeds, inp, parent)
    mark = f"{os.getpid()}-{index}-{mode}"
    env = {**ws.env(seeds, inp), MARK: mark, RETURNED: str(ws.root / "returned")}
    out, err = ws.root / "stdout", ws.root / "stderr"
    proc = None
    if mode == "fork":
        pid = os.fork()
        if pid == 0:
            _child(inp, ws, env, out, err)
    else:
        with out.open("wb") as o, err.open("wb") as e:
            proc = subprocess.Popen(
                [sys.executable, "-m", "tests.harness.fuzz_entry", *inp.argv],
                cwd=ws.work,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=o,
                stderr=e,
                start_new_session=True,
            )
        pid = proc.pid
    now = time.perf_counter()
    return Running(index, mode, inp, ws, pid, now + timeout, out, err, now, proc, mark)


def finish(job: Running, code: int | None, parsers) -> tuple[list[Failure], Outcome]:
    read = lambda p: p.read_bytes().decode("utf-8", "backslashreplace") if p.exists() else ""  # noqa: E731
    outcome = Outcome(None, read(job.out), read(job.err))
    outcome.seconds = time.perf_counter() - job.started
    if code is None:
        outcome.hung = True
    else:
        outcome.code = code if code >= 0 else None
        outcome.signal = -code if code < 0 else None
    try:
        if job.sent is not None and not returned_before(job.ws.root / "returned", job.sent_at):
            parser = parsers[job.inp.command]
            signalled = judge_signalled(job.inp, outcome, job.ws, parser, job.sent, job.mark)
            return signalled, outcome
        return judge(job.inp, outcome, job.ws, parsers[job.inp.command]), outcome
    except Exception as exc:  # a fault of the oracles: reported, the run goes on
        where = traceback.extract_tb(exc.__traceback__)[-1]
        signature = f"judging: {type(exc).__name__} at {Path(where.filename).name}:{where.lineno}"
        return [Failure(HARNESS, signature, repr(exc))], outcome
    finally:
        job.ws.remove()


def fuzz(args: argparse.Namespace, seeds: Seeds) -> dict:
    import importlib

    # Imported once, before the forks, so each child starts with them (never jax: its
    # backend starts threads, which a fork must not copy).
    for module in ("ci_bench.commands.cli", "scipy.stats", "ruptures", "markdown_it"):
        importlib.import_module(module)

    parsers = subcommands()
    disk_why = tmpfs_available()
    if disk_why:
        print(f"full-disk fault skipped: {disk_why}")
    parent = Path(tempfile.mkdtemp(prefix="ci-bench-fuzz-"))
    rng = random.Random(args.seed)
    todo = []
    for index in range(args.runs):
        todo.append((index, "fork"))
        if rng.random() < args.exec_share:
            todo.append((index, "exec"))
    inputs = {}
    running: list[Running] = []
    failures: dict[str, Counter] = defaultdict(Counter)
    examples: dict[str, dict] = {}
    per_command: Counter = Counter()
    seconds: dict[str, list[float]] = defaultdict(list)
    runs = Counter()
    signalled: Counter = Counter()
    started = time.perf_counter()
    done = 0
    while todo or running:
        while todo and len(running) < args.jobs:
            index, mode = todo.pop(0)
            if index not in inputs:
                try:
                    inputs[index] = generate(
                        seeds, args.seed, index, parsers, disk_why is None, args.command
                    )
                except Exception as exc:  # a fault of the generator: reported, skipped
                    failures[HARNESS][f"generating: {type(exc).__name__}: {exc}"[:120]] += 1
                    inputs[index] = None
            inp = inputs[index]
            if inp is None:
                continue
            limit = args.timeout * (2 if inp.cost >= 5 else 1)
            job = start(index, mode, inp, seeds, parent, limit)
            chance = random.Random(f"{args.seed}:{index}:{mode}:signal")
            if chance.random() < args.signal_share:
                job.signal_at = job.started + 10 ** chance.uniform(
                    -2.5, math.log10(args.signal_within)
                )
                job.signum = chance.choice([signal.SIGTERM, signal.SIGINT])
            running.append(job)
            runs[mode] += 1
            per_command[inp.command] += mode == "fork"
        time.sleep(0.005)
        for job in list(running):
            code = job.poll()
            now = time.perf_counter()
            if code is None and job.sent is None and job.signal_at and now >= job.signal_at:
                with contextlib.suppress(OSError):
                    os.kill(job.pid, job.signum)  # the runner's cancel: to ci-bench alone
                    job.sent, job.sent_at = job.signum, time.monotonic()
                    job.deadline = min(job.deadline, now + SIGNAL_GRACE)
                    signalled[signal.Signals(job.signum).name] += 1
            if code is None and now < job.deadline:
                continue
            if code is None:
                job.kill()
            running.remove(job)
            found, outcome = finish(job, code, parsers)
            seconds[job.inp.command].append(outcome.seconds)
            for failure in found:
                failures[failure.kind][failure.signature] += 1
                key = f"{failure.kind}: {failure.signature}"
                examples.setdefault(
                    key,
                    {
                        "input": f"{args.seed}:{job.index}",
                        "mode": job.mode,
                        **dump_failure(failure, job.inp),
                    },
                )
            done += 1
            if done % 200 == 0:
                rate = done / (time.perf_counter() - started)
                distinct = sum(len(c) for c in failures.values())
                print(f"  {done} runs ({rate:.1f}/s), {distinct} distinct failures", flush=True)
                if args.json:  # what was found so far survives an interrupted run
                    partial = summary_of(args, inputs, runs, started, per_command, seconds)
                    write_figures(args.json, {**partial, **found_so_far(failures, examples)})
    shutil.rmtree(parent, ignore_errors=True)
    return {
        **summary_of(args, inputs, runs, started, per_command, seconds),
        "signalled": dict(signalled),
        **found_so_far(failures, examples),
    }


def summary_of(args, inputs, runs, started, per_command, seconds) -> dict:
    return {
        "code": str(CODE),
        "seed": args.seed,
        "inputs": sum(i is not None for i in inputs.values()),
        "runs": dict(runs),
        "seconds": round(time.perf_counter() - started, 1),
        "commands": dict(sorted(per_command.items())),
        "median_seconds": {k: round(sorted(v)[len(v) // 2], 2) for k, v in sorted(seconds.items())},
    }


def found_so_far(failures: dict, examples: dict) -> dict:
    return {"failures": {k: dict(failures[k]) for k in [*KINDS, HARNESS]}, "examples": examples}


def write_figures(path: Path, data: dict) -> None:
    path.write_text(as_json(data) + "\n")


def with_group_killed(pid: int) -> None:
    for target in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
        with contextlib.suppress(OSError):
            target()


def report(figures: dict) -> None:
    runs = figures["runs"]
    print(
        f"\n{figures['inputs']} inputs, {sum(runs.values())} runs "
        f"({runs.get('fork', 0)} forked, {runs.get('exec', 0)} fresh interpreters), "
        f"{figures['seconds']:.0f} s, code {figures['code']}"
    )
    print("per command: " + ", ".join(f"{k} {v}" for k, v in figures["commands"].items()))
    signalled = figures.get("signalled", {})
    print("signalled:   " + (", ".join(f"{k} {v}" for k, v in signalled.items()) or "none"))
    print("median s:    " + ", ".join(f"{k} {v}" for k, v in figures["median_seconds"].items()))
    total = 0
    for kind in [*KINDS, HARNESS]:
        found = figures["failures"][kind]
        total += len(found)
        print(f"{kind:17s} {sum(found.values()):5d} runs, {len(found):3d} distinct")
        for signature, count in sorted(found.items(), key=lambda kv: -kv[1]):
            example = figures["examples"].get(f"{kind}: {signature}", {}).get("input", "")
            print(f"    {count:4d} x {signature}  (e.g. --replay {example})")
    harness = len(figures["failures"][HARNESS])
    print(f"distinct failures: {total - harness} (and {harness} of the fuzzer itself)")


def replay(spec: str, seeds: Seeds, timeout: float, only=()) -> None:
    seed, index = (int(x) for x in spec.split(":"))
    parsers = subcommands()
    inp = generate(seeds, seed, index, parsers, tmpfs_available() is None, only)
    print(f"input {spec}: {inp.label()}\n  argv {inp.argv}\n  env {inp.env}\n  broken {inp.broken}")
    ws = Workspace.create(seeds, inp)
    try:
        outcome = run_exec(inp, ws, ws.env(seeds, inp), timeout)
        print(f"exit {outcome.code} (signal {outcome.signal}, hung {outcome.hung})")
        print(f"stderr: {outcome.err[-3000:]}\nstdout: {outcome.out[-1500:]}")
        for failure in judge(inp, outcome, ws, parsers[inp.command]):
            print(f"FAILURE {failure}\n  {failure.detail[-600:]}")
    finally:
        ws.remove()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3000, help="inputs to generate")
    parser.add_argument("--jobs", type=int, default=2, help="processes at a time")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--exec-share", type=float, default=0.05)
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds before a hang")
    parser.add_argument(
        "--signal-share",
        type=float,
        default=0.1,
        help="runs sent SIGTERM or SIGINT while running, as a cancelled CI job (default 0.1)",
    )
    parser.add_argument(
        "--signal-within",
        type=float,
        default=3.0,
        help="at most this many seconds after its start (log-uniform from 3 ms)",
    )
    parser.add_argument("--seeds", type=Path, help="seed project folder (made if absent)")
    parser.add_argument("--json", type=Path, help="write the figures here too")
    parser.add_argument("--replay", metavar="SEED:INDEX", help="run one input and show it")
    parser.add_argument(
        "--command",
        action="append",
        default=[],
        help="fuzz only this subcommand (repeatable; --replay takes the same)",
    )
    args = parser.parse_args()
    folder = args.seeds or Path(tempfile.gettempdir()) / "ci-bench-fuzz-seeds"
    seeds = make_seeds(folder, cache=folder.parent / f"{folder.name}-jax", code_root=CODE)
    if args.replay:
        replay(args.replay, seeds, args.timeout, args.command)
        return 0
    print(f"seeds in {folder}:\n{describe(seeds)}")
    figures = fuzz(args, seeds)
    report(figures)
    if args.json:
        write_figures(args.json, figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
