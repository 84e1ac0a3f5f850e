"""A shard of the matrix: runner ``index`` of ``count`` (``--shard 2/4``), a plain value.

Shared by the contract (which cases a shard runs), the judge and the store (which shards a
merged run covers), so it lives below all three.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ci_bench.errors import SelectionError


@dataclass(frozen=True)
class Shard:
    """Runner ``index`` (1-based) of ``count``, as in the Actions matrix ``--shard 2/4``."""

    index: int
    count: int

    @classmethod
    def parse(cls, text: str) -> Shard:
        match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
        if not match:
            raise SelectionError(f"--shard wants I/N (e.g. 1/4), got {text!r}")
        index, count = int(match[1]), int(match[2])
        if not 1 <= index <= count:
            raise SelectionError(f"--shard {text}: index must be between 1 and {count}")
        return cls(index, count)

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"
