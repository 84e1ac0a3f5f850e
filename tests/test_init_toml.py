"""Issue 31: ``init`` edits ``[tool.ci-bench]`` however pyproject.toml spells it, or refuses.

Each spelling is one the independent fuzzer used: ``init`` appended a second table (a file
no TOML parser reads), cut a multi-line string with ``--force``, or appended to a file that
was already invalid. Driven through the CLI in this process.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.harness.inproc import assert_one_line_error, call


def init_with(tmp_path: Path, text: str, *flags: str):
    (tmp_path / "pyproject.toml").write_text(text)
    return call("init", "--kernels", "pkg.ops", *flags, cwd=tmp_path)


def parsed(tmp_path: Path) -> dict:
    import tomllib

    return tomllib.loads((tmp_path / "pyproject.toml").read_text())


@pytest.mark.parametrize(
    "text",
    [
        '[tool."ci-bench"]\nkernels = ["old"]\nrepeats = 3\n',
        "[tool.'ci-bench']\nkernels = ['old']\nrepeats = 3\n",
        'tool.ci-bench.kernels = ["old"]\ntool.ci-bench.repeats = 3\n',
        'tool = {ci-bench = {kernels = ["old"], repeats = 3}}\n',
        '[tool]\nci-bench = {kernels = ["old"], repeats = 3}\n',
        '[tool.ci-bench]\nkernels = ["old"]\nrepeats = 3\nnote = """\n[project]\nx\n"""\n',
    ],
)
def test_init_edits_the_table_however_it_is_spelled(tmp_path, text):
    refused = init_with(tmp_path, text)
    assert_one_line_error(refused, "would replace pyproject.toml")
    assert (tmp_path / "pyproject.toml").read_text() == text
    forced = init_with(tmp_path, text, "--force")
    assert forced.code == 0, forced.err
    table = parsed(tmp_path)["tool"]["ci-bench"]
    assert table["kernels"] == ["pkg.ops"]
    assert table["repeats"] == 3  # the rest kept
    assert init_with(tmp_path, (tmp_path / "pyproject.toml").read_text()).code == 0


@pytest.mark.parametrize(
    "text",
    ["", '[project]\nname = "x"\n', "tool = {black = {line-length = 99}}\n", "tool.black.x = 1\n"],
)
def test_init_adds_the_table_to_any_valid_file(tmp_path, text):
    done = init_with(tmp_path, text)
    assert done.code == 0, done.err
    assert parsed(tmp_path)["tool"]["ci-bench"] == {"kernels": ["pkg.ops"]}


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ('[[tool.ci-bench]]\nkernels = ["old"]\n', "array of tables"),
        ("[[tool]]\nx = 1\n", "array of tables"),
        ("[tool.ci-bench\nkernels = 1\n", "not valid TOML"),
        ('[project]\nname = "x"\nname = "y"\n', "not valid TOML"),
    ],
)
def test_init_refuses_what_it_cannot_edit_and_writes_nothing(tmp_path, text, needle):
    done = init_with(tmp_path, text, "--force")
    assert_one_line_error(done, "pyproject.toml", needle)
    assert (tmp_path / "pyproject.toml").read_text() == text
    assert not (tmp_path / ".github").exists()
