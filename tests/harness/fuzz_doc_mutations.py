"""Hostile edits of a parsed JSON seed document: each damages one thing and says what.

A mutation takes the document, the ``random.Random`` it draws from, the input it records
its notes and breakage on, and the file's kind; it returns the document (or, where the
damage cannot be parsed back, the bytes to write). ``DOC_MUTATIONS`` weighs them.
"""

from __future__ import annotations

import copy
import json
import random
import re
from collections.abc import Callable
from typing import Any

from tests.harness.fuzz_record import CANARY, GATES, HUGE_DIGITS, MARKUP, REQUIRED, STRICT, Input


def _leaves(doc: Any, prefix: tuple = ()) -> list[tuple]:
    found = []
    if isinstance(doc, dict):
        for key, child in doc.items():
            found += _leaves(child, (*prefix, key))
    elif isinstance(doc, list):
        for index, child in enumerate(doc):
            found += _leaves(child, (*prefix, index))
    else:
        found.append(prefix)
    return found


def _containers(doc: Any, prefix: tuple = ()) -> list[tuple]:
    found = [prefix] if isinstance(doc, dict) else []
    if isinstance(doc, dict):
        for key, child in doc.items():
            found += _containers(child, (*prefix, key))
    elif isinstance(doc, list):
        for index, child in enumerate(doc):
            found += _containers(child, (*prefix, index))
    return found


def _get(doc: Any, path: tuple) -> Any:
    for key in path:
        doc = doc[key]
    return doc


def _maybe(doc: Any, path: tuple) -> Any:
    """The value at ``path``, or None where the document has no such path."""
    for key in path:
        if not isinstance(doc, dict) or key not in doc:
            return None
        doc = doc[key]
    return doc


def _set(doc: Any, path: tuple, value: Any) -> Any:
    if not path:
        return value
    _get(doc, path[:-1])[path[-1]] = value
    return doc


def _meta(doc: Any) -> dict | None:
    """The results' ``meta`` object, if an earlier mutation left one."""
    meta = doc.get("meta") if isinstance(doc, dict) else None
    return meta if isinstance(meta, dict) else None


def _cases(doc: Any) -> list[dict]:
    """The document's case objects (a baseline's first entry's), whatever is left of them."""
    holder = doc
    if isinstance(doc, dict) and isinstance(doc.get("entries"), list) and doc["entries"]:
        holder = doc["entries"][0]
    cases = holder.get("cases") if isinstance(holder, dict) else None
    return [c for c in cases if isinstance(c, dict)] if isinstance(cases, list) else []


def _resolve(doc: Any, pattern: tuple, rng: random.Random) -> tuple | None:
    path: tuple = ()
    node = doc
    for key in pattern:
        if key == "*":
            if not isinstance(node, list) or not node:
                return None
            key = rng.randrange(len(node))
        elif not isinstance(node, dict) or key not in node:
            return None
        path, node = (*path, key), node[key]
    return path


Mutation = Callable[[Any, random.Random, Input, str], Any]  # doc -> doc (or bytes)


def m_drop_required(doc: Any, rng: random.Random, inp: Input, kind: str) -> Any:
    pattern = rng.choice(REQUIRED.get(kind, [()]))
    path = _resolve(doc, pattern, rng) if pattern else None
    if not path:
        return doc
    del _get(doc, path[:-1])[path[-1]]
    inp.breaks(f"{kind}: {'.'.join(map(str, path))} removed")
    return doc


def m_unknown_key(doc: Any, rng: random.Random, inp: Input, kind: str) -> Any:
    where = rng.choice(_containers(doc) or [()])
    target = _get(doc, where)
    if isinstance(target, dict):
        target[f"zz_{CANARY}"] = rng.choice([1, "x", None, [], {}])
        if kind in STRICT:
            inp.breaks(f"{kind}: unknown key")
    return doc


def m_schema_version(doc: Any, rng: random.Random, inp: Input, kind: str) -> Any:
    if isinstance(doc, dict) and "schema_version" in doc:
        doc["schema_version"] = rng.choice([99, 0, "2", True, None, 1.5, -1])
        inp.breaks(f"{kind}: schema_version")
    return doc


def _append_to_strings(doc: Any, rng: random.Random, payloads: list[str]) -> None:
    """One to four of the document's text fields, each with a payload appended."""
    strings = [p for p in _leaves(doc) if isinstance(_get(doc, p), str) and p]
    for path in rng.sample(strings, min(len(strings), rng.randint(1, 4))):
        _set(doc, path, _get(doc, path) + rng.choice(payloads))


def m_markup(doc: Any, rng: random.Random, inp: Input, kind: str) -> Any:
    _append_to_strings(doc, rng, MARKUP)
    inp.notes.append("markup in text fields")
    return doc


def m_number(doc: Any, rng: random.Random, inp: Input, kind: str) -> Any:
    numbers = [p for p in _leaves(doc) if type(_get(doc, p)) in (int, float) and p]
    values = [1e308, -1e308, 5e-324, 0, -1, 2**64, -(2**63), 1e-300, 3.5, 10**400]
    for path in rng.sample(numbers, min(len(numbers), rng.randint(1, 3))):
        _set(doc, path, rng.choice(values))
    inp.notes.append("extreme numbers")
    return doc


def m_huge_metrics(doc: Any, rng: random.Random, inp: Input, kind: str) -> Any:
    """Finite but extreme roofline figures (what a plot's axes must survive)."""
    value = rng.choice([1e308, 5e-324, 1e-300, 1e300])
    for case in _cases(doc):
        if isinstance(case.get("metrics"), dict):
            case["tflops"] = value
            case["metrics"]["arithmetic_intensity"] = value
            case["metrics"]["achieved_gbps"] = value
        if isinstance(case.get("median_ms"), float):
            case["median_ms"] = value  # a history line
    inp.notes.append(f"metrics {value:g}")
    return doc


def m_random_value(doc: Any, rng: random.Random, inp: Input, kind: str) -> Any:
    leaves = [p for p in _leaves(doc) if p]
    if leaves:
        path = rng.choice(leaves)
        value = rng.choice([None, True, "", "x", [], {}, 0, [1], {"a": 1}, "\u202e", "caf\u00e9"])
        _set(doc, path, value)
        inp.notes.append(f"{'.'.join(map(str, path))[-40:]} = {value!r}")
    return doc


def m_lone_surrogate(doc: Any, rng: random.Random, inp: Input, kind: str) -> bytes:
    strings = [p for p in _leaves(doc) if isinstance(_get(doc, p), str) and p]
    if not strings:
        return json.dumps(doc).encode()
    _set(doc, rng.choice(strings), "\ud800" + CANARY)
    inp.breaks(f"{kind}: a lone surrogate in a string")
    return json.dumps(doc).encode()  # ensure_ascii writes it as the escape \ud800


def m_timestamp(doc: Any, rng: random.Random, inp: Input, kind: str) -> Any:
    stamps = [
        p
        for p in _leaves(doc)
        if isinstance(_get(doc, p), str) and re.fullmatch(r"\d{4}-\d\d-\d\dT.*", _get(doc, p))
    ]
    for path in stamps[: rng.randint(1, 3)]:
        _set(
            doc,
            path,
            rng.choice(
                [
                    "2026-01-01T00:00:00",
                    "2026-01-01T00:00:00+14:00",
                    "2026-01-01T00:00:00-12:00",
                    "0001-01-01T00:30:00+01:00",
                    "9999-12-31T23:59:59-01:00",
                    "2026-02-30T00:00:00Z",
                ]
            ),
        )
    inp.notes.append("timestamps (naive, offsets, edges)")
    return doc


def m_duplicate_case(doc: Any, rng: random.Random, inp: Input, kind: str) -> Any:
    cases = _cases(doc)
    holder = doc["entries"][0] if kind == "baseline" and cases else doc
    if cases and isinstance(holder, dict) and isinstance(holder.get("cases"), list):
        holder["cases"].append(copy.deepcopy(rng.choice(cases)))
        inp.breaks(f"{kind}: a case id twice")
    return doc


def m_many_duplicates(doc: Any, rng: random.Random, inp: Input, kind: str) -> Any:
    """60,000 copies of one small error case (9 MB): a quadratic check hangs on it."""
    cases = _cases(doc)
    if kind != "results" or not cases:
        return doc
    case = cases[0]
    small = {k: case.get(k) for k in ("id", "kernel", "version", "params", "shape", "dtype")}
    small.update(status="error", error="x")
    doc["cases"] = [*cases, *[small] * 60_000]  # the cases as they were, damage included
    inp.breaks("results: 60,000 duplicate case ids")
    inp.notes.append("hang probe")
    return doc


def m_bad_name(doc: Any, rng: random.Random, inp: Input, kind: str) -> Any:
    name = rng.choice(["../../escaped", "/abs", "Matmul", "a" * 100, "x\x00y", ""])
    meta = _meta(doc)
    if kind == "results" and meta is not None and isinstance(meta.get("kernels"), dict):
        version = meta["kernels"].pop("matmul", "0.1.0")
        meta["kernels"][name] = version
        for case in _cases(doc):
            case["kernel"] = name
            case["id"] = str(case.get("id")).replace("matmul/", f"{name}/", 1)
    elif kind == "baseline" and isinstance(doc, dict):
        doc["kernel"] = name
    else:
        return doc
    inp.breaks(f"{kind}: kernel name {name[:20]!r}")
    return doc


def m_shard(doc: Any, rng: random.Random, inp: Input, kind: str) -> Any:
    meta = _meta(doc)
    if kind == "results" and meta is not None:
        meta["shard"] = rng.choice([f"1/{HUGE_DIGITS}", "0/2", "3/2", "x", "1/2/3"])
        inp.breaks("results: meta.shard not I/N")
    return doc


def m_incomplete(doc: Any, rng: random.Random, inp: Input, kind: str) -> Any:
    """Completeness the file claims against what it holds (the gate must not trust it)."""
    meta, cases = _meta(doc), _cases(doc)
    if kind != "results" or meta is None or len(cases) < 2 or inp.broken_by:
        return doc  # on a damaged file it could undo the damage (drop or rewrite its field)
    way = rng.choice(["false", "false-empty-matrix", "false-measured-matrix", "true-missing"])
    # Drop a case an earlier mutation did not touch, so its damage stays in the file.
    seed = _cases(inp.pristine) if inp.pristine is not None else []
    # A copy of a seed case (m_duplicate_case) is damage too: a case is clean only once.
    ids = [c.get("id") for c in cases]
    clean = [c for c in cases if c in seed and ids.count(c.get("id")) == 1]
    kept = [c for c in cases if c not in seed] + clean[:-1]
    if way in ("false-measured-matrix", "true-missing") and not clean:
        return doc
    if way.startswith("false"):
        meta["complete"], meta["finished_at"] = False, None
        if way == "false-empty-matrix":
            meta["matrix"] = []
        elif way == "false-measured-matrix":
            doc["cases"] = kept
            meta["matrix"] = [c.get("id") for c in kept]
        inp.notes.append(f"complete {way}")
        inp.breaks(f"results {way}", GATES)
    else:
        doc["cases"] = kept
        inp.notes.append("complete true, a case of the matrix missing")
        inp.breaks("results do not cover their matrix", frozenset({"promote"}))
    return doc


# Issue 31: what an independent fuzzer found with (workflow commands in text fields,
# finite but huge times, a matrix that is missing or holds no case id).
COMMANDS = [
    "\n::add-mask::" + CANARY,
    "\r::set-output name=verdict::" + CANARY,
    "\u0085::error::" + CANARY,
    "\u2028  ::warning::" + CANARY,
    "\u2029::stop-commands::" + CANARY,
    " ##[set-output name=verdict;]" + CANARY,
]


# Text fields the terminal table's footer prints (where the independent fuzzer found it).
PRINTED = [
    ("meta", "device", "cpu_model"),
    ("meta", "device", "device_kind"),
    ("meta", "device", "platform"),
    ("meta", "device", "jax"),
    ("meta", "profile"),
]


def m_workflow_commands(doc: Any, rng: random.Random, inp: Input, kind: str) -> Any:
    printed = [p for p in PRINTED if isinstance(_maybe(doc, p), str)]
    if printed and rng.random() < 0.5:
        path = rng.choice(printed)
        _set(doc, path, _get(doc, path) + rng.choice(COMMANDS))
    else:
        _append_to_strings(doc, rng, COMMANDS)
    inp.notes.append("workflow commands in text fields")
    return doc


def m_huge_times(doc: Any, rng: random.Random, inp: Input, kind: str) -> Any:
    """Finite times near the float limit: every ratio, bar and percentage must survive."""
    value = rng.choice([1e308, 1.7e308, 5e-324])
    for case in _cases(doc):
        stats = case.get("pallas")
        if isinstance(stats, dict) and isinstance(stats.get("samples_ms"), list):
            stats.update(mean_ms=value, median_ms=value, min_ms=value, max_ms=value, std_ms=0.0)
            stats["samples_ms"] = [value] * len(stats["samples_ms"])
    inp.notes.append(f"times {value:g}")
    return doc


def m_matrix(doc: Any, rng: random.Random, inp: Input, kind: str) -> Any:
    meta = doc.get("meta") if isinstance(doc, dict) else None
    if kind != "results" or not isinstance(meta, dict) or not isinstance(meta.get("matrix"), list):
        return doc
    if rng.random() < 0.5:
        meta["matrix"] = [*meta["matrix"], rng.choice([" ", "", "x", "/a", "Bad/x"])]
        inp.breaks("results: meta.matrix holds an entry that is no case id")
    else:
        if rng.random() < 0.5:
            meta["matrix"] = None
        else:
            del meta["matrix"]
        # Cutting the cases would cut an earlier mutation's damage too (the 10,000-run fuzz
        # reported files as refused-worthy whose damage this had removed): only a clean file.
        clean = not inp.broken_by
        if clean and doc.get("schema_version", 4) != 1 and len(doc.get("cases") or []) > 1:
            doc["cases"] = doc["cases"][:1]
            inp.breaks(
                "results: format 2+ without meta.matrix, part of the cases",
                frozenset({"compare", "promote"}),
            )
    return doc


DOC_MUTATIONS: list[tuple[Mutation, int]] = [
    (m_workflow_commands, 3),
    (m_huge_times, 1),
    (m_matrix, 1),
    (m_drop_required, 3),
    (m_unknown_key, 2),
    (m_schema_version, 1),
    (m_markup, 4),
    (m_number, 3),
    (m_huge_metrics, 2),
    (m_random_value, 4),
    (m_lone_surrogate, 1),
    (m_timestamp, 2),
    (m_duplicate_case, 1),
    (m_many_duplicates, 1),
    (m_bad_name, 1),
    (m_shard, 1),
    (m_incomplete, 3),
]
