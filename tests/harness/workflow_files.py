"""What the workflow files say, read without running anything: which workflows an event
starts, which file a ``uses:`` names, a job's matrix legs and ``needs`` order, and the
``GITHUB_ENV`` / ``GITHUB_OUTPUT`` files a step writes."""

from __future__ import annotations

import fnmatch
import itertools
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from tests.harness.workflow_expressions import ExpressionError, evaluate

# ci-bench's own `.github` folder: its reusable workflows and composite actions.
GITHUB = Path(__file__).resolve().parents[2] / ".github"
WORKFLOWS = GITHUB / "workflows"
# Where a job's checkout of ci-bench itself (``repository: ci-bench/ci-bench``) is emulated
# from: this checkout's files, as the reusable workflows are.
CI_BENCH_REPOSITORY = "ci-bench/ci-bench"
# `uses:` of ci-bench's own reusable workflows and actions, from an adopter's repository
# (OWNER/ci-bench/...@ref) or this one (./...): both are this checkout's files here.
_OWN = re.compile(r"^(ci-bench/ci-bench/|\./)\.github/(workflows|actions)/([^@]+?)(?:@.+)?$")
# ci-bench's setup action from its own checkout at the pinned commit (``path: .ci-bench``).
_PINNED_ACTION = re.compile(r"^\./\.ci-bench/\.github/actions/([^@]+)$")


def load(name: str, folder: Path = WORKFLOWS) -> dict[str, Any]:
    """A workflow file; PyYAML reads the ``on`` key as True, so it is put back."""
    data = yaml.safe_load((folder / name).read_text(encoding="utf-8"))
    if True in data:
        data["on"] = data.pop(True)
    return data


def load_called(uses: str, folder: Path = WORKFLOWS, own: Path = GITHUB) -> dict[str, Any]:
    """The reusable workflow a job calls: ci-bench's own (``ci-bench/ci-bench/...@ref``)
    mapped onto ``own`` (this checkout's ``.github``), a local one (``./``) from the
    caller's folder."""
    match = _OWN.match(uses)
    if not match or match[2] != "workflows":
        raise ExpressionError(f"no emulation for the reusable workflow {uses}")
    return load(match[3], own / "workflows" if match[1] != "./" else folder)


def composite_action(uses: str, own: Path = GITHUB) -> Path | None:
    """The folder of one of ci-bench's own composite actions, or None for any other."""
    pinned = _PINNED_ACTION.match(uses)
    if pinned:
        return own / "actions" / pinned[1]
    match = _OWN.match(uses)
    if not match or match[2] != "actions":
        return None
    return own / "actions" / match[3]


def called_job_context(uses: str, repository: str, sha: str) -> dict[str, str]:
    """The ``job`` context inside a called workflow: the repository and commit of the
    workflow file itself (GitHub's ``job.workflow_*``), the pinned ref for another
    repository's (``owner/repo/.github/workflows/x.yml@ref``), the caller's for ``./``."""
    if uses.startswith("./"):
        return {
            "workflow_repository": repository,
            "workflow_sha": sha,
            "workflow_ref": f"{repository}/{uses[2:]}@{sha}",
        }
    path, _, ref = uses.partition("@")
    owner, name = path.split("/")[:2]
    return {
        "workflow_repository": f"{owner}/{name}",
        "workflow_sha": ref,
        "workflow_ref": uses,
    }


def triggers(workflow: Mapping[str, Any], event: str, payload: Mapping[str, Any]) -> bool:
    """Whether ``event`` starts ``workflow`` (event name, ``types`` and tag filters)."""
    on = workflow["on"]
    on = {on: None} if isinstance(on, str) else on
    on = dict.fromkeys(on) if isinstance(on, list) else on
    if event not in on:
        return False
    spec = on[event] or {}
    if "types" in spec and payload.get("action") not in spec["types"]:
        return False
    return event != "push" or _push_matches(spec, payload.get("ref", ""))


def _push_matches(spec: Mapping[str, Any], ref: str) -> bool:
    """A push's ``tags`` / ``branches`` filters, as GitHub applies them."""
    if ref.startswith("refs/tags/"):
        patterns = spec.get("tags")
        return patterns is not None and any(
            fnmatch.fnmatchcase(ref.removeprefix("refs/tags/"), p) for p in patterns
        )
    if "branches" not in spec:
        # Only a tags filter: branch pushes do not run it (GitHub's rule).
        return "tags" not in spec
    return any(fnmatch.fnmatchcase(ref.removeprefix("refs/heads/"), p) for p in spec["branches"])


def env_file(path: Path) -> dict[str, str]:
    """GITHUB_ENV lines: NAME=value, or NAME<<DELIMITER ... DELIMITER."""
    values: dict[str, str] = {}
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if "<<" in line and "=" not in line.split("<<")[0]:
            key, delimiter = line.split("<<", 1)
            end = lines.index(delimiter, i + 1)
            values[key] = "\n".join(lines[i + 1 : end])
            i = end + 1
            continue
        if "=" in line:
            key, value = line.split("=", 1)
            values[key] = value
        i += 1
    return values


def matrix_legs(spec: Any, context: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A ``strategy.matrix``'s legs (one empty leg without a matrix); an expression value
    (``${{ fromJSON(...) }}``) is evaluated first."""
    if not spec:
        return [{}]
    spec = {
        k: evaluate(v, context) if isinstance(v, str) and "${{" in v else v for k, v in spec.items()
    }
    keys = [k for k in spec if k not in ("include", "exclude")]
    return [
        dict(zip(keys, combo, strict=True)) for combo in itertools.product(*(spec[k] for k in keys))
    ]


def needs_of(job: Mapping[str, Any]) -> list[str]:
    """A job's ``needs:``, one name or a list, as a list."""
    needs = job.get("needs", [])
    return [needs] if isinstance(needs, str) else list(needs)


def ordered(jobs: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Jobs in file order, each after everything it needs."""
    order: list[str] = []
    pending = list(jobs)
    while pending:
        ready = next((n for n in pending if all(d in order for d in needs_of(jobs[n]))), None)
        if ready is None:
            raise ExpressionError(f"jobs with circular needs: {pending}")
        order.append(ready)
        pending.remove(ready)
    return [(name, jobs[name]) for name in order]
