"""Fuzz inputs: mutations of real seed files, hostile flags, paths and environments.

Every input is classified up front: ``broken`` says why it is invalid for the command (an
exit 0 on it is a silent pass), ``valid`` that it must be accepted (an exit 2 on it is a
false refusal); neither means only the crash, hang and output oracles apply. Mutations are
drawn from a ``random.Random``, so an input is reproduced from its seed and index alone.

The record and its vocabulary live in ``fuzz_record``, the document mutations in
``fuzz_doc_mutations``; this module adds the byte-level damage and the draw between them,
and re-exports both (the fuzzer's modules import from here).
"""

from __future__ import annotations

import json
import random
import re

from tests.harness.fuzz_doc_mutations import (
    COMMANDS,
    DOC_MUTATIONS,
    PRINTED,
    Mutation,
    m_bad_name,
    m_drop_required,
    m_duplicate_case,
    m_huge_metrics,
    m_huge_times,
    m_incomplete,
    m_lone_surrogate,
    m_many_duplicates,
    m_markup,
    m_matrix,
    m_number,
    m_random_value,
    m_schema_version,
    m_shard,
    m_timestamp,
    m_unknown_key,
    m_workflow_commands,
)
from tests.harness.fuzz_record import (
    CANARY,
    CONFIG_READERS,
    DEVICE,
    DIR,
    EVENT_READERS,
    FIFO,
    GATES,
    HUGE_DIGITS,
    MARKUP,
    REMOVE,
    REQUIRED,
    STRICT,
    Input,
    symlink_to,
)

__all__ = [
    "CANARY",
    "COMMANDS",
    "CONFIG_READERS",
    "DEVICE",
    "DIR",
    "DOC_MUTATIONS",
    "EVENT_READERS",
    "FIFO",
    "GATES",
    "HUGE_DIGITS",
    "MARKUP",
    "PRINTED",
    "REMOVE",
    "REQUIRED",
    "STRICT",
    "Input",
    "Mutation",
    "m_bad_name",
    "m_drop_required",
    "m_duplicate_case",
    "m_huge_metrics",
    "m_huge_times",
    "m_incomplete",
    "m_lone_surrogate",
    "m_many_duplicates",
    "m_markup",
    "m_matrix",
    "m_number",
    "m_random_value",
    "m_schema_version",
    "m_shard",
    "m_timestamp",
    "m_unknown_key",
    "m_workflow_commands",
    "mutate_json",
    "symlink_to",
    "text_mutation",
]


def text_mutation(
    data: bytes, rng: random.Random, inp: Input, kind: str, only: frozenset[str] | None = None
) -> bytes:
    """Byte- and text-level damage: always broken for a JSON reader."""
    text = data.decode()
    way = rng.choice(["truncate", "byte", "nonfinite", "deep", "empty", "array", "deep-huge"])
    if way == "truncate":
        stripped = text.rstrip()
        out = stripped[: rng.randrange(1, max(2, len(stripped) - 1))].encode()
    elif way == "byte":
        at = rng.randrange(len(data) + 1)
        out = data[:at] + rng.choice([b"\xff", b"\xc0\x80", b"\xed\xa0\x80", b"\x80"]) + data[at:]
    elif way == "nonfinite":
        literal = rng.choice(["NaN", "Infinity", "-Infinity", "1e999", "-1e999"])
        # After a key's colon, pretty or compact (a history line has no spaces).
        for number in (r'(?<=":)(\s*)-?\d+\.\d+([eE]-?\d+)?', r'(?<=":)(\s*)-?\d+'):
            out = re.sub(number, rf"\g<1>{literal}", text, count=1).encode()
            if out != data:
                break
        if out == data:  # no number to damage: this input is not broken
            inp.notes.append(f"{kind}: no number for {literal}")
            return data
    elif way == "deep":
        depth = rng.choice([65, 200, 3000])
        out = text.replace('"cases": [', '"cases": [' + "[" * depth + "]" * depth + ",", 1)
        out = (out if out != text else "[" * depth + "]" * depth).encode()
    elif way == "deep-huge":
        out = ("[" * 200_000 + "]" * 200_000).encode()
    elif way == "empty":
        out = rng.choice([b"", b"   \n"])
    else:
        out = b"[" + data + b"]"
    inp.breaks(f"{kind}: {way}", only)
    return out


def mutate_json(seed: bytes, rng: random.Random, inp: Input, kind: str) -> bytes:
    """A seed file with one or two hostile edits (or none: a valid reformatting)."""
    roll = rng.random()
    if roll < 0.08:
        doc = json.loads(seed)
        inp.valid = not inp.broken_by
        inp.notes.append(f"{kind} reformatted")
        return json.dumps(
            doc, indent=rng.choice([None, 1, 4]), sort_keys=rng.random() < 0.5
        ).encode()
    if roll < 0.3:
        return text_mutation(seed, rng, inp, kind)
    doc = json.loads(seed)
    inp.pristine = json.loads(seed)
    ops, weights = zip(*DOC_MUTATIONS, strict=True)
    for _ in range(rng.randint(1, 2)):
        op = rng.choices(ops, weights)[0]
        inp.notes.append(op.__name__[2:])
        doc = op(doc, rng, inp, kind)
        if isinstance(doc, bytes):
            return doc
    return json.dumps(doc, indent=2).encode()
