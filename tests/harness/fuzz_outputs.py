"""Read back what a command wrote, with ci-bench's own readers, and look for injected markup.

``check_file`` and ``check_stdout`` return None when the output is valid for its reader,
else a short reason. JSON must be strict (no ``NaN``/``Infinity``, which JSON readers
refuse); ci-bench's own formats must read back through ci-bench; markdown must carry no
HTML, link, image, heading or @mention made of input text (the canary ``ZQX`` marks input
text); the dashboard's links must be http(s).
"""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path
from typing import Any

from tests.harness.fuzz_inputs import CANARY, Input

EVIL = "evil.example"
TEXT_FILES = (".json", ".jsonl", ".md", ".html", ".js", ".txt", ".css", ".toml")


def strict_json(text: str) -> tuple[Any, str | None]:
    """The value, or why ``text`` is not JSON every reader accepts."""

    def refuse(literal: str) -> None:
        raise ValueError(f"{literal} is not JSON")

    try:
        return json.loads(text, parse_constant=refuse), None
    except ValueError as exc:
        return None, f"not strict JSON ({' '.join(str(exc).split())[:80]})"


def _ci_bench_reader(value: Any, path: Path) -> str | None:
    """Read a ci-bench format back with ci-bench's reader for it."""
    from ci_bench.errors import InputError
    from ci_bench.schema import BASELINE_READABLE, RESULTS_READABLE, BaselineFile, Report, Results
    from ci_bench.store.files import read_model

    if not isinstance(value, dict):
        return None
    if "entries" in value and "kernel" in value:
        model, versions, what = BaselineFile, BASELINE_READABLE, "baseline"
    elif value.get("kind") == "analysis":
        from ci_bench.schema.analysis import ANALYSIS_READABLE, Analysis

        model, versions, what = Analysis, ANALYSIS_READABLE, "analysis"
    elif value.get("kind") == "lowering":
        from ci_bench.schema.lowering import LoweringResults

        model, versions, what = LoweringResults, None, "lowering"
    elif "verdict" in value and "cases" in value:
        model, versions, what = Report, None, "report"
    elif "meta" in value and "cases" in value:
        model, versions, what = Results, RESULTS_READABLE, "results"
    else:
        return None
    try:
        read_model(path, model, what=what, schema_version=versions)
    except InputError as exc:
        why = str(exc).replace(str(path), path.name)  # one cause, one signature
        return f"{what} file unreadable by ci-bench ({why[:100]})"
    return None


OWN_TAGS = {"<sub>", "</sub>", "<br>", "<details>", "</details>", "<summary>", "</summary>"}


def markup_problem(markdown: str) -> str | None:
    """Input text that would render as HTML, a link, an image, a heading or a mention."""
    from markdown_it import MarkdownIt

    tokens = MarkdownIt("commonmark").enable("table").parse(markdown)
    stack = list(tokens)
    heading = False
    while stack:
        token = stack.pop(0)
        if token.type in ("code_inline", "code_block", "fence"):
            continue
        after = stack[0] if stack else None  # the text a tag wraps: <b>ZQX</b>
        wrapped = after is not None and after.type == "text" and CANARY in after.content
        # ci-bench's own tags (the footer's <sub>, <details>) around escaped input text are
        # its layout, not HTML from input: only a tag the input could have written counts.
        wrapped = wrapped and token.content.strip().lower() not in OWN_TAGS
        if token.type == "html_block" and CANARY in token.content:
            return "raw HTML from input"
        if token.type == "html_inline" and (CANARY in token.content or wrapped):
            return "raw HTML from input"
        if token.type in ("link_open", "image"):
            href = str(token.attrs.get("href") or token.attrs.get("src") or "")
            if EVIL in href or CANARY in href or "javascript:" in href.lower():
                return "a link from input"
        if token.type == "heading_open":
            heading = True
        elif token.type == "heading_close":
            heading = False
        if token.type == "text":
            if heading and CANARY in token.content:
                return "a heading from input"
            if f"@{CANARY}" in token.content:
                return "an @mention from input"
            if re.search(rf"https?://{re.escape(EVIL)}", token.content):
                return "an autolink from input"
        stack[0:0] = token.children or []
    return None


def annotation_problem(text: str) -> str | None:
    """A workflow command (``::warning::``) started by input text."""
    for line in text.splitlines():
        if re.match(r"^::[\w-]+[^:]*::", line):
            if re.match(r"^::[\w-]+[^:]*::\S*" + CANARY, line):
                return "a workflow command from input"
            message = line.split("::", 2)[2]
            if "::" in message:
                return "an unescaped '::' in an annotation"
    return None


# ci-bench's own annotations (github.outputs.annotations): the only commands it gives.
_OWN_COMMAND = re.compile(r"^::(error|warning|notice) title=ci-bench[^:]*::")


def injection_problem(text: str) -> str | None:
    """The workflow-command oracle: a line a runner would read as a command that ci-bench
    did not mean to give. Lines split at every break Python knows (U+0085, U+2028, ...) as
    well as the runner's CR and LF; ``::`` counts after leading whitespace, ``##[``
    anywhere (the runner's older command form)."""
    for line in text.splitlines():
        if "##[" in line:
            return "a ##[ workflow command in the output"
        stripped = line.lstrip()
        if stripped.startswith("::") and not (line == stripped and _OWN_COMMAND.match(line)):
            return f"a workflow command in the output ({stripped[:12]!r}…)"
    return None


def _site_data(text: str) -> str | None:
    value, problem = strict_json(text)
    if problem:
        return f"site data: {problem}"
    links = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for key, child in item.items():
                if key in ("url", "pr_url", "repo_url") and isinstance(child, str):
                    links.append(child)
                stack.append(child)
        elif isinstance(item, list):
            stack.extend(item)
    bad = [u for u in links if not re.match(r"^https?://", u)]
    return f"site link is not http(s): {bad[0][:40]!r}" if bad else None


def _outputs_file(text: str) -> str | None:
    """GITHUB_OUTPUT's multi-line form: ``name<<DELIM`` ... ``DELIM``."""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        match = re.fullmatch(r"([\w-]+)<<(\S+)", lines[i])
        if not match:
            return f"GITHUB_OUTPUT line {i + 1} is not name<<DELIMITER"
        end = lines.index(match[2], i + 1) if match[2] in lines[i + 1 :] else -1
        if end < 0:
            return "GITHUB_OUTPUT value never closed"
        i = end + 1
    return None


def check_file(path: Path, rel: str, inp: Input) -> str | None:
    """Why the file a command wrote is not valid for its reader (None: it is)."""
    name = path.name
    if not name.endswith(TEXT_FILES) and inp.env.get("GITHUB_OUTPUT") != rel:
        return None  # a chart, a trace: not text
    data = path.read_bytes()
    if data.startswith(b"\x89PNG"):  # a chart under whatever name it was given
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return f"{name}: not UTF-8"
    if inp.env.get("GITHUB_OUTPUT") == rel:
        return _outputs_file(text)
    markdown_targets = {b for a, b in itertools.pairwise(inp.argv) if a == "--markdown"}
    if rel in markdown_targets:  # markdown under whatever name it was given
        return markup_problem(text)
    if name == "data.js":
        return _site_data(text.removeprefix("window.CI_BENCH_DATA = ").rstrip().rstrip(";"))
    if name.endswith(".json"):
        value, problem = strict_json(text)
        if problem:
            return f"{name}: {problem}"
        if name == "data.json":
            return _site_data(text)
        return _ci_bench_reader(value, path)
    if name.endswith(".jsonl"):
        from ci_bench.errors import InputError
        from ci_bench.store.history import parse_jsonl

        try:
            parse_jsonl(text, str(path))
        except InputError as exc:
            return f"history unreadable by ci-bench ({str(exc)[:100]})"
        return None
    if name.endswith(".md") or inp.env.get("GITHUB_STEP_SUMMARY") == rel:
        return markup_problem(text)
    if name.endswith(".html"):
        return "markup from input in the page" if f"<b>{CANARY}" in text else None
    if name == "pyproject.toml":  # init's edit: a file every TOML reader (and pip) reads
        import tomllib

        try:
            tool = tomllib.loads(text).get("tool", {})
        except tomllib.TOMLDecodeError as exc:
            return f"pyproject.toml no longer parses ({str(exc)[:60]})"
        table = tool.get("ci-bench") if isinstance(tool, dict) else None
        if not isinstance(table, dict) or not isinstance(table.get("kernels"), list):
            return "pyproject.toml: [tool.ci-bench] kernels not a list after init"
    return None


def check_stdout(inp: Input, out: str) -> str | None:
    argv = inp.argv
    formats = [b for a, b in itertools.pairwise(argv) if a == "--format"]
    fmt = formats[-1] if formats else None  # argparse keeps the last
    wants_json = (
        inp.command == "schema"
        or (inp.command == "export" and "-o" not in argv and "--output" not in argv)
        or (fmt == "json" and inp.command != "export")
    )
    if wants_json and out.strip():
        _, problem = strict_json(out)
        if problem:
            return problem
    markdown = inp.command == "ci" or fmt == "markdown"
    if markdown:
        lines = [line for line in out.splitlines() if not line.startswith("::")]
        problem = markup_problem("\n".join(lines))
        if problem:
            return problem
    return annotation_problem(out)
