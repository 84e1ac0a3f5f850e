"""The front door stays true: README short and consistent with CI, the docs site builds
strictly, generated pages are current, and the figures the pages state are the code's."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from ci_bench.errors import ExitCode
from tests.conftest import run_cli

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"


def readme_commands() -> list[str]:
    """Every command line of the README's bash blocks, comments dropped."""
    text = README.read_text(encoding="utf-8")
    lines = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        for line in block.splitlines():
            line = re.sub(r"\s+#.*$", "", line).strip()
            if line:
                lines.append(line)
    return lines


def setup_commands() -> list[str]:
    """The README's commands for a fresh machine: the ones that create the venv."""
    return [c for c in readme_commands() if c.startswith("python3 -m venv .venv")]


def test_the_readme_is_one_screen_of_front_door():
    assert len(README.read_bytes()) <= 10 * 1024


def test_the_readme_has_two_setup_commands_run_and_the_ci_test_command():
    run, test = setup_commands()
    # The main job installs what `run` needs, not the test extra.
    assert "pip install -q -e . &&" in run
    assert "[test]" not in run
    assert run.endswith("ci-bench run --profile smoke")
    # The tests: the test extra, and exactly the command .ci/run ends with.
    assert "-e '.[test]'" in test
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").strip().splitlines()
    assert test.endswith(ci[-1]), (test, ci[-1])


def test_the_readme_shows_a_small_picture_of_the_comment():
    from PIL import Image

    picture = DOCS / "images" / "comment.png"
    assert "](docs/images/comment.png)" in README.read_text(encoding="utf-8")
    assert picture.stat().st_size <= 150_000  # scripts/comment_picture.py keeps it small
    with Image.open(picture) as image:
        assert image.width == 900  # the comment column the browser test renders


def test_every_relative_link_of_the_readme_and_docs_exists():
    pages = [README, *sorted(DOCS.glob("*.md"))]
    missing = []
    for page in pages:
        text = page.read_text(encoding="utf-8")
        for target in re.findall(r"\]\(([^)\s#]+)(?:#[^)]*)?\)", text):
            if re.match(r"[a-z]+:", target):
                continue
            if not (page.parent / target).exists():
                missing.append(f"{page.relative_to(ROOT)}: {target}")
    assert missing == []


def test_generated_pages_are_current():
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "docs_generate.py"), "--check"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def test_the_cli_reference_names_every_command_and_flag():
    import argparse

    from ci_bench.commands.parser import build_parser

    text = (DOCS / "CLI.md").read_text(encoding="utf-8")
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, command in sub.choices.items():
        assert f"\n## {name}\n" in text
        for action in command._actions:
            if action.help == argparse.SUPPRESS:  # hidden on purpose (a test-only switch)
                assert all(f"`{flag}`" not in text for flag in action.option_strings)
                continue
            for flag in action.option_strings:
                if flag not in ("-h", "--help"):
                    assert f"`{flag}`" in text, (name, flag)


def test_the_exit_code_table_is_the_enum():
    text = (DOCS / "REFERENCE.md").read_text(encoding="utf-8")
    section = text.split("## Exit codes", 1)[1].split("\n#", 1)[0]
    codes = [int(m) for m in re.findall(r"^\| (\d+) \|", section, re.M)]
    assert codes == sorted(int(c) for c in ExitCode)


def test_the_one_multi_line_run_block_is_where_the_actions_page_says():
    text = " ".join((DOCS / "GITHUB_ACTIONS.md").read_text(encoding="utf-8").split())
    assert 'gives 1, in `pages.yml` ("Build the site")' in text
    workflows = ROOT / ".github" / "workflows"
    found = {p.name: p.read_text().count("run: |") for p in sorted(workflows.glob("*.yml"))}
    assert {name: n for name, n in found.items() if n} == {"pages.yml": 1}


def test_site_exit_codes_are_what_the_history_page_says(tmp_path):
    text = (DOCS / "HISTORY.md").read_text(encoding="utf-8")
    assert 'exit 2 ("history folder not found")' in " ".join(text.split())
    gone = run_cli(
        "site", "--out", str(tmp_path / "a"), "--history", str(tmp_path / "nope"), cwd=tmp_path
    )
    assert gone.returncode == 2, gone.stderr
    assert "history folder not found" in gone.stderr
    (tmp_path / "empty").mkdir()
    empty = run_cli(
        "site", "--out", str(tmp_path / "b"), "--history", str(tmp_path / "empty"), cwd=tmp_path
    )
    assert empty.returncode == 3
    assert (tmp_path / "b" / "index.html").is_file()  # the page is still written
    assert "ci-bench record" in empty.stderr  # why, and what fills the history


@pytest.mark.skipif(
    not (Path(sys.executable).parent / "mkdocs").exists(), reason="the docs extra is missing"
)
def test_the_docs_site_builds_strictly(tmp_path):
    mkdocs = str(Path(sys.executable).parent / "mkdocs")
    done = subprocess.run(
        [mkdocs, "build", "--strict", "--quiet", "--site-dir", str(tmp_path / "site")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin"},
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "site" / "CLI" / "index.html").is_file()


def test_the_limits_the_reference_states_are_the_codes():
    from ci_bench.commands.record import KEEP_MAX
    from ci_bench.commands.validate import REPEATS_MAX, SHARDS_MAX, WORKERS_MAX
    from ci_bench.store.files import MAX_DEPTH, MAX_FILE_BYTES
    from ci_bench.store.history import DEFAULT_KEEP

    reference = " ".join((DOCS / "REFERENCE.md").read_text(encoding="utf-8").split())
    history = " ".join((DOCS / "HISTORY.md").read_text(encoding="utf-8").split())
    assert f"at most {MAX_FILE_BYTES // 2**20} MB" in reference
    assert f"JSON nested at most {MAX_DEPTH} deep" in reference
    assert f"`--repeats` and `--warmup` up to {REPEATS_MAX:,}" in reference
    assert f"`--workers` 1..{WORKERS_MAX}" in reference
    assert f"`--shard I/N` with N up to {SHARDS_MAX:,}" in reference
    assert f"`--keep` 1..{KEEP_MAX:,}" in reference
    assert f"the newest {DEFAULT_KEEP} records per device are kept" in history
