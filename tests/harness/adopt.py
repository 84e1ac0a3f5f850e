"""What the adoption tests share: the adopter fixture library, the pinned commit, zizmor."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ADOPTER = Path(__file__).parents[1] / "fixtures" / "adopter"
# The ci-bench commit an adopter pins its callers to (the emulation maps it onto this
# checkout, as it maps the reusable workflows).
PIN = "0123456789abcdef0123456789abcdef01234567"
ZIZMOR = Path(sys.executable).parent / "zizmor"


def zizmor(repo: Path) -> subprocess.CompletedProcess[str]:
    """zizmor's default persona (no config, offline) on the caller workflows."""
    return subprocess.run(
        [str(ZIZMOR), "--offline", "--no-config", ".github/workflows"],
        cwd=repo,
        capture_output=True,
        text=True,
        check=False,
    )
