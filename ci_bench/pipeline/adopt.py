"""``ci-bench init``: what a kernel repository needs to adopt ci-bench, as files (pure).

Four caller workflows of ci-bench's reusable workflows at this installed version, a
``[tool.ci-bench]`` block, a constraints template pinning the TPU toolchain this jax was
released with, and ``baselines/README.md``. ``plan_files`` says for each file whether it is
new, unchanged, or would replace something different; the command writes nothing when a
file would be replaced without ``--force``, so a half-adopted repository never results.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import tomlkit

from ci_bench import HOMEPAGE, REPOSITORY, __version__, docs_url
from ci_bench.errors import InputError
from ci_bench.schema.platforms import PLATFORM
from ci_bench.text import one_line

Action = Literal["create", "unchanged", "replace", "conflict"]


COMMIT = re.compile(r"[0-9a-f]{40}")


# The label beside a pinned commit: never a version (a commit is not a tag, and zizmor's
# ref-version-mismatch compares such comments with the tag's commit).
PIN_LABEL = "# pinned: ci-bench init --pin"
INSTALLED_LABEL = "# the ci-bench commit installed where init ran"


def _uses(workflow: str, version: str, pin: str | None = None, label: str = PIN_LABEL) -> str:
    """A reusable workflow by tag, or by commit (``pin``, with what it is as a comment):
    the form zizmor's default persona accepts, since a tag can be moved."""
    where = f"{REPOSITORY}/.github/workflows/{workflow}"
    return f"{where}@{pin}  {label}" if pin else f"{where}@v{version}"


def package_at(pin: str) -> str:
    """ci-bench itself at the pinned commit, as pip installs it (the reusable workflows'
    ``ci-bench`` input): the package matches the YAML, whatever version that commit is."""
    return f"git+{HOMEPAGE}@{pin}"


def _with(platform: str, pin: str | None, release: bool = False) -> str:
    """A caller's ``with:``: the package at the pinned commit, and on runners other than
    TPU's (the reusable workflows' defaults) their labels, install and constraints."""
    entries = [f"      ci-bench: {package_at(pin)}\n"] if pin else []
    if platform != "tpu":
        entry = PLATFORM[platform]
        labels = json.dumps(list(entry.release_labels if release else entry.runner_labels))
        entries += [
            f"      runner: '{labels}'\n",
            f"      install: -e . {entry.install}\n",
            f"      constraints: constraints/{platform}.txt\n",
        ]
    return "    with:\n" + "".join(entries) if entries else ""


def callers(
    version: str, pin: str | None = None, label: str = PIN_LABEL, platform: str = "tpu"
) -> dict[str, str]:
    """The caller workflows, short enough to audit: the pipeline is in the called ones.
    ``pin``: the ci-bench commit every caller runs (the reusable workflows then run their
    setup action at that same commit, and install the package from it). ``platform``: the
    self-hosted runners' (tpu, gpu)."""
    docs = docs_url("docs/ADOPTING.md")

    def uses(workflow: str) -> str:
        return f"    uses: {_uses(workflow, version, pin, label)}\n"

    return {
        ".github/workflows/benchmark.yml": (
            f"# ci-bench on every pull request and manual run: {docs}\n"
            "on:\n"
            "  pull_request_target: {types: [opened, synchronize, reopened, labeled, unlabeled]}"
            "  # zizmor: ignore[dangerous-triggers] label-gated in ci-bench's plan job\n"
            "  workflow_dispatch:\n"
            "jobs:\n"
            "  ci-bench:\n"
            f"{uses('ci-bench.yml')}"
            "    permissions: {contents: read, pull-requests: write}\n"
            "    cache-mode: none  # no actions cache is written from a pull request's run\n"
            + _with(platform, pin)
        ),
        ".github/workflows/release.yml": (
            "# A release tag (v1.2.0, or <kernel>-v0.2.0) promotes the baselines.\n"
            'on: {push: {tags: ["v*", "*-v*"]}}\n'
            "jobs:\n"
            "  ci-bench:\n"
            f"{uses('ci-bench-release.yml')}"
            "    permissions: {contents: write, pull-requests: write}\n"
            + _with(platform, pin, release=True)
        ),
        ".github/workflows/lower.yml": (
            "# Every pull request, forks included: lowering, cost model, correctness.\n"
            "name: lower\n"
            "on: {pull_request: {types: [opened, synchronize, reopened]}}\n"
            "jobs:\n"
            "  ci-bench:\n"
            f"{uses('ci-bench-lower.yml')}"
            "    permissions: {contents: read}\n" + _with("tpu", pin)
        ),
        ".github/workflows/lower-relay.yml": (
            "# The lowering check's result into the sticky comment (runs no PR code).\n"
            "on: {workflow_run: {workflows: [lower], types: [completed]}}"
            "  # zizmor: ignore[dangerous-triggers] default-branch code, the artifact as data\n"
            "jobs:\n"
            "  ci-bench:\n"
            f"{uses('ci-bench-relay.yml')}"
            "    permissions: {actions: read, contents: read, pull-requests: write}\n"
            "    cache-mode: none\n" + _with("tpu", pin)
        ),
    }


def yaml_lines(text: str) -> int:
    """The lines an adopter keeps and reads: neither blank nor a comment."""
    return sum(
        1 for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")
    )


def config_block(
    kernels: Sequence[str], tpu_only: Sequence[str] = (), targets: Sequence[str] = ()
) -> str:
    """The ``[tool.ci-bench]`` block: the kernel modules, the kernels (by SPEC name) that run
    on a CPU only under jax's TPU interpreter, and the target chips (``init --platform gpu``:
    the GPUs the lowering check and the cost model are about)."""
    listed = ", ".join(f'"{k}"' for k in kernels)
    block = f"[tool.ci-bench]\nkernels = [{listed}]\n"
    if targets:
        names = ", ".join(f'"{k}"' for k in targets)
        block += "# The GPUs the lowering check and the cost model are about: keep yours.\n"
        block += f"target-chips = [{names}]\n"
    if tpu_only:
        names = ", ".join(f'"{k}"' for k in tpu_only)
        block += (
            "# TPU-only kernels (no `interpret` argument): jax's TPU interpreter on a CPU.\n"
            f"cpu-interpret-tpu = [{names}]\n"
        )
    return block


def with_config(
    pyproject: str | None,
    kernels: Sequence[str],
    force: bool,
    tpu_only: Sequence[str] = (),
    targets: Sequence[str] = (),
) -> tuple[Action, str]:
    """The pyproject.toml with ``[tool.ci-bench] kernels`` (and ``cpu-interpret-tpu`` when
    some kernels are TPU-only): added, kept, or (``force``) set.

    The file is parsed as TOML (``tomllib``), so the table is found however it is spelled
    (``[tool."ci-bench"]``, dotted keys, an inline table) and only those keys are ever
    changed: the adopter's other settings stay. A new table is appended when that parses;
    otherwise, and for every edit, ``tomlkit`` (which keeps comments, order and formatting)
    writes it. Whatever is returned parses to the old data with those keys set, or nothing
    is: a file that is not valid TOML, or an array of tables, is refused.
    """
    text = pyproject or ""
    data = _toml(text, "pyproject.toml")
    current = _table(data)
    wanted: dict[str, list[str]] = {"kernels": list(kernels)}
    if tpu_only:
        wanted["cpu-interpret-tpu"] = list(tpu_only)
    if targets:
        wanted["target-chips"] = list(targets)
    if current is not None and all(current.get(k) == v for k, v in wanted.items()):
        return "unchanged", text
    if current is not None and any(k in current for k in wanted) and not force:
        return "conflict", text
    expected = json.loads(json.dumps(data, default=str))
    expected.setdefault("tool", {}).setdefault("ci-bench", {}).update(wanted)
    action: Action = "create" if current is None or "kernels" not in current else "replace"
    if current is None:  # appended as its own table when the file allows (most do)
        block = config_block(
            wanted["kernels"], wanted.get("cpu-interpret-tpu", ()), wanted.get("target-chips", ())
        )
        appended = (text.rstrip("\n") + "\n\n" if text.strip() else "") + block
        if _parses_to(appended, expected):
            return action, appended
    edited = _edited(text, wanted)
    if edited is None or not _parses_to(edited, expected):
        settings = "; ".join(f"{k} = {json.dumps(v)}" for k, v in wanted.items())
        raise InputError(
            "pyproject.toml: [tool.ci-bench] could not be edited without changing anything "
            f"else; nothing was written (set {settings} there by hand)"
        )
    return action, edited


def _toml(text: str, source: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(
            f"{source}: not valid TOML ({one_line(str(exc), 160)}); nothing was written: "
            "fix the file first"
        ) from None


def _table(data: dict[str, Any]) -> dict[str, Any] | None:
    """``[tool.ci-bench]`` as parsed, None when absent; refused when it is not one table."""
    tool = data.get("tool")
    if tool is None:
        return None
    if not isinstance(tool, dict):
        kind = "an array of tables ([[tool]])" if isinstance(tool, list) else "not a table"
        raise InputError(f"pyproject.toml: tool is {kind}; nothing was written: fix it by hand")
    table = tool.get("ci-bench")
    if table is None or isinstance(table, dict):
        return table
    kind = "an array of tables ([[tool.ci-bench]])" if isinstance(table, list) else "not a table"
    raise InputError(
        f"pyproject.toml: tool.ci-bench is {kind}, ci-bench reads one [tool.ci-bench] table; "
        "nothing was written: fix it by hand"
    )


def _edited(text: str, wanted: dict[str, list[str]]) -> str | None:
    """The ``wanted`` keys set in place through tomlkit, or None where tomlkit cannot."""
    try:
        doc = tomlkit.parse(text)
        tool = doc.get("tool")
        if tool is None:
            doc["tool"] = tool = tomlkit.table(is_super_table=True)
        table = tool.get("ci-bench")
        if table is None:  # inline inside an inline ``tool = {…}``, else a table of its own
            inline = isinstance(tool, tomlkit.items.InlineTable)
            table = tomlkit.inline_table() if inline else tomlkit.table()
            table.update(wanted)
            tool["ci-bench"] = table
        else:
            table.update(wanted)
        return tomlkit.dumps(doc)
    except Exception:  # tomlkit's own errors on spellings it cannot edit: checked by the caller
        return None


def _parses_to(text: str, expected: Any) -> bool:
    """Does ``text`` parse, to exactly ``expected`` (compared as JSON, so NaN equals NaN)?"""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return False
    normal = json.dumps(data, default=str, sort_keys=True)
    return normal == json.dumps(expected, default=str, sort_keys=True)


def constraints_template(
    jax_version: str,
    jaxlib_version: str,
    libtpu: str | None = None,
    *,
    platform: str = "tpu",
    pins: Mapping[str, str | None] | None = None,
) -> str:
    """``constraints/<platform>.txt``: the platform table's header, jax, jaxlib and each
    toolchain package at the version jax's extra names (``pins``; TPU: ``libtpu``), or a
    comment saying where to find it."""
    entry = PLATFORM[platform]
    found = {"libtpu": libtpu, **(pins or {})}
    lines = [f"jax=={jax_version}", f"jaxlib=={jaxlib_version}"]
    for alternatives in entry.toolchain:
        name = alternatives[0]
        version = found.get(name)
        where = f"<the version jax's {entry.extra} extra names>"
        lines.append(f"{name}=={version}" if version else f"# {name}=={where}")
    return entry.constraints_header + "\n".join(lines) + "\n"


def constraints_files(
    jax_version: str,
    jaxlib_version: str,
    pins: Mapping[str, str | None],
    platforms: Sequence[str] = ("tpu",),
) -> dict[str, str]:
    """What ``init`` writes under constraints/, one file per platform the runners are
    (``init --platform``: tpu, the default, or gpu)."""
    return {
        f"constraints/{p}.txt": constraints_template(
            jax_version, jaxlib_version, platform=p, pins=pins
        )
        for p in platforms
    }


BASELINES_README = """\
# Baselines

Reference numbers for each kernel version, one file per version:
`<kernel>_v<version>.json`, written by ci-bench when a release tag is pushed
(`.github/workflows/release.yml`): `v1.2.0` for every kernel, `<kernel>-v0.2.0` for one.
A file holds one entry per device; a pull request is compared with this folder as it is at
its base commit, so it cannot move its own goalposts. Edit by hand only to delete an entry.
Format and method: {docs}
"""


# What ci-bench's commands leave in a repository: the JAX compilation cache (config
# compilation-cache-dir's default), ``preview``'s and ``ci``'s output folders.
GITIGNORED = (".cache/jax/", "ci-bench-preview/", "ci-bench-out/")
GITIGNORE_HEAD = "# ci-bench: what its commands leave here (written by ci-bench init)"
GitignoreAction = Literal["create", "add to", "unchanged"]


def _ignored(entry: str, have: set[str]) -> bool:
    """The entry, or a folder above it, is a line of the file already (with or without
    its leading or trailing slash)."""
    parts = entry.strip("/").split("/")
    for depth in range(1, len(parts) + 1):
        folder = "/".join(parts[:depth])
        if {folder, f"{folder}/", f"/{folder}", f"/{folder}/"} & have:
            return True
    return False


def with_gitignore(current: str | None) -> tuple[GitignoreAction, str, list[str]]:
    """``.gitignore`` with ci-bench's lines added where missing: nothing removed, nothing
    twice, so a second ``init`` leaves it unchanged. Returns the action, the text and the
    lines added."""
    have = {line.strip() for line in (current or "").splitlines()}
    missing = [entry for entry in GITIGNORED if not _ignored(entry, have)]
    if not missing:
        return "unchanged", current or "", []
    text = current or ""
    if text and not text.endswith("\n"):
        text += "\n"
    block = ([] if GITIGNORE_HEAD in have else [GITIGNORE_HEAD]) + missing
    text += ("\n" if text.strip() else "") + "\n".join(block) + "\n"
    return ("create" if current is None else "add to"), text, missing


@dataclass(frozen=True)
class Planned:
    path: str
    action: Action
    text: str


def plan_files(
    existing: Mapping[str, str | None], wanted: Mapping[str, str], *, force: bool
) -> list[Planned]:
    """For each wanted file: new, the same, or different (replaced only with ``force``)."""
    planned = []
    for path, text in wanted.items():
        current = existing.get(path)
        if current is None:
            planned.append(Planned(path, "create", text))
        elif current == text:
            planned.append(Planned(path, "unchanged", text))
        else:
            planned.append(Planned(path, "replace" if force else "conflict", text))
    return planned


CHECKLIST = """\
Runner-side checklist (organisation settings > Actions > Runner groups):
  1. The pull-request {kind} runners (labels {labels}) in a group of their own.
     Workflow access: selected workflows, ci-bench's reusable one at the ref your callers
     use:
     {repository}/.github/workflows/ci-bench.yml@{ref}
     (for a reusable workflow, the group admits the called workflow, by that ref).
  2. The release runners ({release}) in a second group that never runs
     pull-request code: {repository}/.github/workflows/ci-bench-release.yml@{ref}.
  3. Labels: `benchmark` (a fork's commit may be measured) and `benchmark-accept` (this
     commit's slowdowns are an accepted trade-off).
  4. Settings > Actions > General: require approval for outside collaborators; restrict
     who can label (triage and above).
  5. Each {kind} runner: Python 3.11+, python3-venv, git, flock; disk for a ~2 GB venv.{extra}
"""
_GPU_RUNNER = (
    "\n     One GPU job per runner (one worker per visible GPU); the NVIDIA driver is the\n"
    "     runner's (the fingerprint records it: a driver bump reads as toolchain)."
)


def checklist(version: str = __version__, pin: str | None = None, platform: str = "tpu") -> str:
    """The runner-side checklist for ``platform``'s runners, naming the reusable workflows
    at the ref the callers use (a runner group's selected workflows must match it: a pinned
    commit, else the tag)."""
    entry = PLATFORM[platform]
    return CHECKLIST.format(
        repository=REPOSITORY,
        ref=pin or f"v{version}",
        kind=platform.upper(),
        labels=", ".join(entry.runner_labels),
        release=", ".join(entry.release_labels),
        extra=_GPU_RUNNER if platform == "gpu" else "",
    )
