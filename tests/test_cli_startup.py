"""``--version`` and ``--help`` answer at once: they import no command module and nothing
of jax, pydantic, numpy or PyGithub; a command imports its own module, not the others'.
(Start-up times are printed by benchmarks/startup.py, never asserted.)"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ci_bench.commands import parser

HEAVY = ("jax", "jaxlib", "pydantic", "numpy", "github", "tabulate", "matplotlib")
# A fresh interpreter runs the entry point, then prints the modules it imported.
PROBE = """
import json, sys
from ci_bench.commands import cli
try:
    code = cli.main({argv!r})
except SystemExit as exc:
    code = exc.code
sys.stdout = sys.__stdout__
print(json.dumps({{"code": code, "modules": sorted(sys.modules)}}))
"""


def _imported(argv: list[str]) -> tuple[int, set[str]]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(argv=argv)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    last = json.loads(done.stdout.strip().splitlines()[-1])
    return last["code"], set(last["modules"])


def _commands(modules: set[str]) -> set[str]:
    own = {f"ci_bench.commands.{c.module}" for c in parser.SUBCOMMANDS}
    return modules & own


@pytest.mark.parametrize("argv", [["--version"], ["--help"], []], ids=str)
def test_version_and_help_import_no_command_and_nothing_heavy(argv: list[str]) -> None:
    code, modules = _imported(argv)
    assert code == (2 if not argv else 0)
    assert _commands(modules) == set()
    assert {m.split(".")[0] for m in modules} & set(HEAVY) == set()


def test_a_commands_help_imports_its_module_only() -> None:
    code, modules = _imported(["merge", "--help"])
    assert code == 0
    assert _commands(modules) == {"ci_bench.commands.merge"}
    assert "jax" not in modules
