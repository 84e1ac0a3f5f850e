"""The command registry: a subcommand is one module of ``ci_bench.commands`` and one line in
``parser.SUBCOMMANDS``; the parser, the dispatch, the modules and the help ``--help`` lists
without importing them cannot disagree."""

from __future__ import annotations

import argparse
import ast
import inspect
from pathlib import Path

import pytest

from ci_bench.commands import cli, parser
from tests.conftest import run_cli

COMMANDS_DIR = Path(parser.__file__).parent


def _subparsers() -> argparse._SubParsersAction:  # type: ignore[type-arg]
    built = parser.build_parser()
    return next(a for a in built._actions if isinstance(a, argparse._SubParsersAction))


@pytest.mark.parametrize("command", parser.SUBCOMMANDS, ids=lambda c: c.name)
def test_every_registered_module_has_a_name_register_and_run(command) -> None:
    module = command.load()
    assert command.name == module.NAME
    assert list(inspect.signature(module.register).parameters) == ["sub"]
    assert list(inspect.signature(module.run).parameters) == ["args", "env", "cwd", "out"]


def test_the_parser_has_exactly_the_registered_commands_in_registry_order() -> None:
    names = [command.name for command in parser.SUBCOMMANDS]
    assert len(set(names)) == len(names)
    assert list(_subparsers().choices) == names


def test_the_help_listed_without_the_modules_is_each_modules_own() -> None:
    """``ci-bench --help`` lists the registry's help lines; each must be what its module
    registers (the full parser), word for word."""
    registered = {a.dest: a.help for a in _subparsers()._choices_actions}
    assert registered == {c.name: c.help for c in parser.SUBCOMMANDS}
    lazy = parser.build_parser(["--help"])
    sub = next(a for a in lazy._actions if isinstance(a, argparse._SubParsersAction))
    assert {a.dest: a.help for a in sub._choices_actions} == registered


def test_a_command_line_builds_its_own_command_in_full_and_the_others_by_name() -> None:
    lazy = parser.build_parser(["list", "--kernel", "matmul"])
    sub = next(a for a in lazy._actions if isinstance(a, argparse._SubParsersAction))
    flags = {f for a in sub.choices["list"]._actions for f in a.option_strings}
    assert {"--kernel", "--case", "--profile"} <= flags
    assert {f for a in sub.choices["run"]._actions for f in a.option_strings} == {"-h", "--help"}
    args = lazy.parse_args(["list", "--kernel", "matmul"])
    assert (args.command, args.kernel) == ("list", ["matmul"])


def test_the_dispatch_runs_each_registered_module() -> None:
    for command in parser.SUBCOMMANDS:
        assert cli.COMMANDS[command.name] is command.load().run


def test_every_module_that_registers_a_command_is_in_the_registry() -> None:
    """A command module left out of SUBCOMMANDS would be dead code, not a command."""
    registered = {f"{command.module}.py" for command in parser.SUBCOMMANDS}
    for path in sorted(COMMANDS_DIR.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        if {"register", "run"} <= defined:
            assert path.name in registered, f"{path.name} is not in parser.SUBCOMMANDS"


def _parse_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exit_:
        parser.build_parser().parse_args(argv)
    assert exit_.value.code == 2
    return capsys.readouterr().err


def test_an_explicit_baselines_folder_must_exist_unless_read_at_another_commit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    typo = str(tmp_path / "typo")
    err = _parse_error(["ci", "--baselines-dir", typo], capsys)
    assert err == f"ci-bench: error: --baselines-dir {typo}: does not exist\n"
    args = parser.build_parser().parse_args(["ci", "--baselines-dir", typo, "--baselines-ref", "H"])
    assert args.baselines_dir == Path(typo)
    # promote creates the folder: an absent one is fine, a file in its place is not.
    assert parser.build_parser().parse_args(["promote", "r.json", "--baselines-dir", typo])
    (tmp_path / "file").write_text("x")
    err = _parse_error(["promote", "r.json", "--baselines-dir", str(tmp_path / "file")], capsys)
    assert "--baselines-dir" in err
    assert "not a directory" in err


def test_an_output_refusal_comes_before_the_missing_baselines_folder(tmp_path: Path) -> None:
    """Outputs are checked first, then the folders that must exist (the order of old)."""
    (tmp_path / "report.json").write_text("{}")
    done = run_cli(
        "compare", "r.json", "--baselines-dir", "typo", "-o", "report.json", cwd=tmp_path
    )
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1
    assert "--output report.json: already exists" in done.stderr
    assert "typo" not in done.stderr


def test_the_defaults_the_help_states_are_the_configs() -> None:
    """The flags' help reads ci_bench.defaults; the config must default to the same."""
    from ci_bench import defaults
    from ci_bench.pipeline.config import Config

    fields = Config.model_fields
    assert fields["warmup"].default == defaults.WARMUP
    assert fields["repeats"].default == defaults.REPEATS
    assert fields["seed"].default == defaults.SEED
    assert fields["adaptive_max_seconds"].default == defaults.ADAPTIVE_MAX_S
    assert fields["case_timeout"].default == defaults.CASE_TIMEOUT_S
