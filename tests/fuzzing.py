"""Hostile inputs for ci-bench's readers and CLI, and the contract every answer must keep.

Shared by the bounded property tests (tests/test_fuzz.py, run by CI) and the long run
(benchmarks/fuzz.py). Each target takes one generated input, runs it against a fresh
workspace and returns None when the contract held, else a short failure signature:

- exit 0, 1 or 3 with no traceback, or exit 2 with exactly one line on stderr;
- never an internal error (exit 5) or an exception escaping ``main``;
- never a file written outside the workspace (baselines derived from hostile names).
"""

from __future__ import annotations

import json
import shutil
import tempfile
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from ci_bench.store.files import dump_model
from tests.factories import case, results
from tests.inproc import call

ID = "matmul/B1-M128-K128-N128/float32"
CONTRACT_CODES = {0, 1, 2, 3}


def valid_results() -> dict[str, Any]:
    return json.loads(dump_model(results([case(ID), case("matmul/B4-M128-K256-N128/float32")])))


def valid_baseline() -> dict[str, Any]:
    res = results([case(ID, mean_ms=1.1)])
    entry = {
        "device": json.loads(res.meta.device.model_dump_json()),
        "provenance": {
            "tag": "v0.1.0",
            "commit": "0" * 40,
            "ref": "refs/tags/v0.1.0",
            "promoted_at": "2026-11-01T12:00:00Z",
            "measured_at": "2026-11-01T12:00:00Z",
            "tool_version": "0.1.0",
            "profile": "smoke",
        },
        "settings": json.loads(res.meta.settings.model_dump_json()),
        "cases": json.loads(dump_model(res))["cases"],
    }
    return {"schema_version": 1, "kernel": "matmul", "version": "0.1.0", "entries": [entry]}


# --- generators ------------------------------------------------------------------------------

HOSTILE_TEXT = [
    "",
    "../../escaped",
    "/abs/olute",
    "a/b",
    "x\x00y",
    "line\nbreak",
    "|<img src=x>|",
    "</details>",
    "@octocat",
    "`",
    "k" * 300,
    "1.0",
    "v1.2.3",
    "0.1.0-rc.1",
    "caf\u00e9",
    "\u202e",
    "$\\frac{$",
]
HOSTILE_NUMBERS = [0, -1, 1, 2**31, 2**63, 2**64, -(2**64), 10**30, 1.5, -0.0, 1e308, 5e-324]
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.sampled_from(HOSTILE_NUMBERS),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(HOSTILE_TEXT),
    st.text(max_size=20),
)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)


def _paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    """Every path to a value inside a JSON document (the document itself included)."""
    found = [prefix]
    if isinstance(value, dict):
        for key, child in value.items():
            found += _paths(child, (*prefix, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found += _paths(child, (*prefix, index))
    return found


def _replace(doc: Any, path: tuple, new: Any, *, delete: bool = False) -> Any:
    if not path:
        return new
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    if delete and isinstance(parent, dict):
        del parent[path[-1]]
    else:
        parent[path[-1]] = new
    return doc


TEXT_EDITS = [
    lambda t: t.replace('"mean_ms": ', '"mean_ms": 1e999, "_": ', 1),
    lambda t: t.replace('"tflops": ', '"tflops": NaN, "_": ', 1),
    lambda t: t.replace('"complete": true', '"complete": false', 1),
    lambda t: t[: len(t) // 2],
    lambda t: "[" * 50_000 + "]" * 50_000,
    lambda t: '{"a":' * 2000 + "1" + "}" * 2000,
    lambda t: t.replace('"matmul"', '"../../escaped"'),
    lambda t: t.replace('"0.1.0"', '"0.1.0\\n"'),
    lambda t: t.replace('"matmul/', '"matmul/|</details>@x `'),
]


@st.composite
def mutated_document(draw: st.DrawFn, base: Callable[[], Any]) -> bytes:
    """A valid document with one or two hostile edits: values, keys, text or bytes."""
    doc = base()
    for _ in range(draw(st.integers(1, 2))):
        paths = _paths(doc)
        path = draw(st.sampled_from(paths))
        kind = draw(st.sampled_from(["value", "value", "delete", "extra"]))
        if kind == "value":
            doc = _replace(doc, path, draw(json_values))
        elif kind == "delete" and path:
            doc = _replace(doc, path, None, delete=True)
        elif kind == "extra" and isinstance(doc, dict):
            doc[draw(st.text(max_size=8))] = draw(json_values)
    text = json.dumps(doc)
    layer = draw(st.sampled_from(["json", "json", "text", "bytes"]))
    if layer == "text":
        text = draw(st.sampled_from(TEXT_EDITS))(json.dumps(base()))
    data = text.encode()
    if layer == "bytes":
        at = draw(st.integers(0, len(data)))
        data = (
            data[:at] + draw(st.sampled_from([b"\xff", b"\xe9", b"\x00", b"\xc0\x80"])) + data[at:]
        )
    return data


results_inputs = mutated_document(valid_results)
baseline_inputs = mutated_document(valid_baseline)

CONFIG_KEYS = [
    "kernels",
    "baselines-dir",
    "default-profile",
    "warmup",
    "repeats",
    "seed",
    "ab-repeats",
    "cost-model-factor",
    "adaptive-target",
    "compilation-cache-dir",
    "confirm",
    "thresholds",
    "fail-on",
    "github",
    "unknown-key",
]
TOML_VALUES = [
    "1",
    "-1",
    "0",
    str(2**64),
    "1e999",
    "inf",
    "nan",
    "-inf",
    "0.5",
    "true",
    '"x"',
    '""',
    '"../../x"',
    '"a\\u0000b"',
    "[]",
    '["kernels.matmul"]',
    "[1, 2]",
    "{}",
    '{ mean-slowdown = "x" }',
    "{ error = 1 }",
    "{ retries = 1e9 }",
    "[" * 400 + "]" * 400,
]


@st.composite
def config_inputs(draw: st.DrawFn) -> bytes:
    """A pyproject.toml: a ``[tool.ci-bench]`` of hostile keys and values, or broken TOML."""
    lines = ["[tool.ci-bench]"]
    for _ in range(draw(st.integers(0, 3))):
        key = draw(st.sampled_from(CONFIG_KEYS))
        value = draw(st.one_of(st.sampled_from(TOML_VALUES), st.integers().map(str)))
        lines.append(f"{key} = {value}")
    text = "\n".join(lines) + "\n"
    prefix = draw(st.sampled_from(["", "", "tool = 1\n", "[tool]\nci-bench = 1\n", "[tool\n"]))
    data = (prefix + text).encode()
    if draw(st.booleans()):
        at = draw(st.integers(0, len(data)))
        data = (
            data[:at] + draw(st.sampled_from([b"\xe9", b"\xff", b"\x00", b"\n[", b"="])) + data[at:]
        )
    return data


EVENT_NAMES = ["pull_request", "workflow_dispatch", "push", "release", "workflow_run"]


def _event_base(name: str) -> dict[str, Any]:
    sha = "a" * 40
    return {
        "pull_request": {
            "action": "opened",
            "pull_request": {
                "number": 2,
                "head": {"sha": sha, "repo": {"full_name": "o/r"}},
                "base": {"sha": "b" * 40, "ref": "main", "repo": {"full_name": "o/r"}},
            },
        },
        "workflow_dispatch": {"inputs": {"kernels": "matmul", "repeats": "5", "profile": "smoke"}},
        "push": {"ref": "refs/tags/v0.1.0"},
        "release": {"release": {"tag_name": "matmul-v0.1.0"}},
        "workflow_run": {
            "workflow_run": {
                "id": 1,
                "name": "benchmark",
                "event": "pull_request",
                "conclusion": "success",
                "head_sha": sha,
                "pull_requests": [{"number": 2}],
            }
        },
    }[name]


@st.composite
def event_inputs(draw: st.DrawFn) -> tuple[str, bytes]:
    name = draw(st.sampled_from(EVENT_NAMES))
    return name, draw(mutated_document(lambda: _event_base(name)))


SAFE_PATHS = ["out.json", "sub/dir/out.json", "valid.json", "folder", "valid.json/x", "b", ""]
FLAG_VALUES = ["0", "-1", "1", "nan", "inf", "-inf", "1e999", str(2**64), "", "x", "0.5", "3/2"]


@st.composite
def argv_inputs(draw: st.DrawFn) -> list[str]:
    """A command line of hostile flag values; nothing here can start a measurement."""
    values = st.one_of(st.sampled_from(FLAG_VALUES), st.sampled_from(SAFE_PATHS))
    command = draw(st.sampled_from(["compare", "merge", "promote", "run", "list"]))
    argv = [command]
    if command in ("compare", "promote"):
        argv.append(draw(st.sampled_from(["valid.json", "folder", "missing.json", "valid.json"])))
    options = {
        "compare": ["-o", "--markdown", "--baselines-dir", "--fail-on", "--baseline-version"],
        "merge": ["-o"],
        "promote": ["--baselines-dir", "--tag", "--force"],
        "run": [
            "--seed",
            "--repeats",
            "--warmup",
            "--max-time",
            "--adaptive",
            "--peak-tflops",
            "--shape",
            "--shard",
            "-o",
            "--compilation-cache",
            "--profile",
        ],
        "list": ["--profile", "--case", "--shard"],
    }[command]
    if command == "merge":
        argv += draw(
            st.lists(
                st.sampled_from(["valid.json", "valid.json", "folder"]), min_size=1, max_size=2
            )
        )
    for _ in range(draw(st.integers(0, 3))):
        flag = draw(st.sampled_from(options))
        argv += [flag] if flag == "--force" else [flag, draw(values)]
    if command == "run":
        # a selection that matches nothing: the flags are checked, nothing is measured
        argv += ["--kernel", "matmul", "--case", "matmul/B999999-*", "-q"]
    return argv


# --- the contract ----------------------------------------------------------------------------


@dataclass
class Workspace:
    """A throwaway project: valid files beside the hostile one, and a fence to watch."""

    root: Path  # nothing may appear here except inside ``work``
    work: Path

    @classmethod
    def create(cls) -> Workspace:
        root = Path(tempfile.mkdtemp(prefix="ci-bench-fuzz-"))
        work = root / "work"
        (work / "folder").mkdir(parents=True)
        (work / "b").mkdir()
        (work / "valid.json").write_text(json.dumps(valid_results()))
        (work / "pyproject.toml").write_text(
            '[tool.ci-bench]\nkernels = ["kernels.matmul"]\nbaselines-dir = "b"\n'
        )
        return cls(root, work)

    def outside(self) -> list[str]:
        return sorted(p.name for p in self.root.iterdir() if p.name != "work")

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


def judge(outcome_or_exc: Any, ws: Workspace) -> str | None:
    """None if the contract held, else a signature naming how it broke."""
    if isinstance(outcome_or_exc, BaseException):
        frame = traceback.extract_tb(outcome_or_exc.__traceback__)[-1]
        where = f"{Path(frame.filename).name}:{frame.lineno}"
        return f"exception {type(outcome_or_exc).__name__} at {where}"
    outcome = outcome_or_exc
    if ws.outside():
        return f"wrote outside its folder: {ws.outside()}"
    if "Traceback" in outcome.err:
        return "traceback on stderr"
    if outcome.code not in CONTRACT_CODES:
        first = outcome.err.strip().splitlines()[:1]
        kind = first[0].split(":")[2].strip() if first and "internal error" in first[0] else ""
        return f"exit {outcome.code} {kind}".strip()
    if outcome.code == 2 and len(outcome.lines) != 1:
        return f"exit 2 with {len(outcome.lines)} lines"
    return None


def _run(args: list[str], ws: Workspace, env: dict[str, str] | None = None) -> str | None:
    try:
        outcome = call(*args, cwd=ws.work, env=env)
    except BaseException as exc:  # an exception escaping main breaks the contract
        if isinstance(exc, KeyboardInterrupt):
            raise
        return judge(exc, ws)
    return judge(outcome, ws)


def check_results_file(data: bytes, ws: Workspace) -> str | None:
    path = ws.work / "hostile.json"
    path.write_bytes(data)
    for args in (
        ["compare", "hostile.json", "--baselines-dir", "b", "-o", "report.json"],
        ["merge", "hostile.json", "valid.json", "-o", "merged.json"],
        ["promote", "hostile.json", "--baselines-dir", "b"],
    ):
        failure = _run(args, ws)
        if failure:
            return f"{args[0]}: {failure}"
    return None


def check_baseline_file(data: bytes, ws: Workspace) -> str | None:
    (ws.work / "b" / "matmul_v0.1.0.json").write_bytes(data)
    for args in (
        ["compare", "valid.json", "--baselines-dir", "b"],
        ["promote", "valid.json", "--baselines-dir", "b", "--force"],
    ):
        failure = _run(args, ws)
        if failure:
            return f"{args[0]}: {failure}"
    return None


def check_config(data: bytes, ws: Workspace) -> str | None:
    (ws.work / "pyproject.toml").write_bytes(data)
    failure = _run(["compare", "valid.json"], ws)
    return f"compare: {failure}" if failure else None


def check_event(item: tuple[str, bytes], ws: Workspace) -> str | None:
    name, data = item
    event = ws.work / "event.json"
    event.write_bytes(data)
    env = {"GITHUB_EVENT_NAME": name, "GITHUB_EVENT_PATH": str(event)}
    args = ["ci", "--results", "valid.json", "--mode", "baseline", "--no-publish"]
    failure = _run([*args, "--out-dir", "o", "--baselines-dir", "b"], ws, env)
    return f"ci {name}: {failure}" if failure else None


def check_argv(argv: list[str], ws: Workspace) -> str | None:
    failure = _run(argv, ws)
    return f"{argv[0]}: {failure}" if failure else None


def check_plot(data: bytes, ws: Workspace) -> str | None:
    path = ws.work / "hostile.json"
    path.write_bytes(data)
    failure = _run(["plot", "hostile.json", "-o", "roofline.png"], ws)
    return f"plot: {failure}" if failure else None


TARGETS: dict[str, tuple[st.SearchStrategy[Any], Callable[[Any, Workspace], str | None]]] = {
    "results": (results_inputs, check_results_file),
    "baseline": (baseline_inputs, check_baseline_file),
    "config": (config_inputs(), check_config),
    "event": (event_inputs(), check_event),
    "argv": (argv_inputs(), check_argv),
    "plot": (results_inputs, check_plot),
}


def attempt(target: str, value: Any) -> str | None:
    """One input against a fresh workspace."""
    ws = Workspace.create()
    try:
        return TARGETS[target][1](value, ws)
    finally:
        ws.remove()
