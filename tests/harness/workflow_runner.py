"""Run this repository's GitHub Actions workflows locally, from their own YAML.

A small emulation of the Actions runner for the pipeline test: it reads
``.github/workflows/*.yml``, decides which workflows an event triggers, evaluates job and
step ``if:`` conditions and the ``${{ }}`` expressions the workflows use, and runs each
job's ``run:`` steps with bash, in ``needs`` order, in a clone of a real git repository,
with the Actions environment (``GITHUB_EVENT_PATH``, ``GITHUB_OUTPUT``, ``GITHUB_ENV``,
``GITHUB_STEP_SUMMARY``, ``GITHUB_API_URL``, ...). ``uses:`` steps are emulated: checkout
clones the repository at the requested ref, upload/download-artifact copy folders. Steps
named ``Install...`` are skipped: the test's own environment stands in for the venv they
would build (``installed`` sets the variables they would write to ``GITHUB_ENV``).

The expression evaluator covers the subset the workflows use (literals, contexts, ``!``,
``==``, ``!=``, ``&&``, ``||``, parentheses and a few functions); anything else raises,
so a workflow change this emulation does not understand fails the test loudly.
"""

from __future__ import annotations

import fnmatch
import itertools
import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

WORKFLOWS = Path(__file__).resolve().parents[2] / ".github" / "workflows"
CONTEXTS = ("github", "inputs", "matrix", "needs", "vars", "env", "steps", "runner", "strategy")


class ExpressionError(Exception):
    """An expression outside the subset this emulation understands."""


# -- expressions ---------------------------------------------------------------------------

_TOKEN = re.compile(
    r"\s*(?:(?P<str>'(?:[^']|'')*')|(?P<num>\d+(?:\.\d+)?)|(?P<op>==|!=|&&|\|\||<=|>=|[!()<>,])"
    r"|(?P<name>[A-Za-z_][A-Za-z0-9_-]*(?:\.[A-Za-z_*][A-Za-z0-9_-]*)*))"
)


def _tokens(text: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    text = text.strip()
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if not match or match.end() == pos:
            raise ExpressionError(f"cannot read {text[pos:]!r} in {text!r}")
        kind = match.lastgroup or ""
        out.append((kind, match.group(kind)))
        pos = match.end()
    return out


def truthy(value: Any) -> bool:
    """GitHub's truthiness: false, 0, '', null are false; everything else is true."""
    return value not in (None, False, 0, "")


def _equal(a: Any, b: Any) -> bool:
    """GitHub compares strings case-insensitively; null and '' are both empty."""
    a, b = ("" if a is None else a), ("" if b is None else b)
    if isinstance(a, str) and isinstance(b, str):
        return a.lower() == b.lower()
    return a == b


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict | list):
        return json.dumps(value)
    return str(value)


class _Parser:
    def __init__(self, text: str, context: Mapping[str, Any], functions: Mapping[str, Callable]):
        self.text, self.tokens, self.pos = text, _tokens(text), 0
        self.context, self.functions = context, functions

    def parse(self) -> Any:
        value = self._or()
        if self.pos != len(self.tokens):
            raise ExpressionError(f"unexpected {self.tokens[self.pos][1]!r} in {self.text!r}")
        return value

    def _peek(self) -> str | None:
        return self.tokens[self.pos][1] if self.pos < len(self.tokens) else None

    def _take(self, expected: str | None = None) -> tuple[str, str]:
        if self.pos >= len(self.tokens):
            raise ExpressionError(f"unexpected end of {self.text!r}")
        token = self.tokens[self.pos]
        if expected is not None and token[1] != expected:
            raise ExpressionError(f"expected {expected!r}, got {token[1]!r} in {self.text!r}")
        self.pos += 1
        return token

    def _or(self) -> Any:
        value = self._and()
        while self._peek() == "||":
            self._take()
            right = self._and()
            value = value if truthy(value) else right
        return value

    def _and(self) -> Any:
        value = self._compare()
        while self._peek() == "&&":
            self._take()
            right = self._compare()
            value = right if truthy(value) else value
        return value

    def _compare(self) -> Any:
        value = self._unary()
        while self._peek() in ("==", "!="):
            op = self._take()[1]
            right = self._unary()
            value = _equal(value, right) if op == "==" else not _equal(value, right)
        return value

    def _unary(self) -> Any:
        if self._peek() == "!":
            self._take()
            return not truthy(self._unary())
        return self._primary()

    def _primary(self) -> Any:
        kind, text = self._take()
        if text == "(":
            value = self._or()
            self._take(")")
            return value
        if kind == "str":
            return text[1:-1].replace("''", "'")
        if kind == "num":
            return float(text) if "." in text else int(text)
        if kind != "name":
            raise ExpressionError(f"unexpected {text!r} in {self.text!r}")
        if text in ("true", "false", "null"):
            return {"true": True, "false": False, "null": None}[text]
        if self._peek() == "(":
            self._take("(")
            args = []
            while self._peek() != ")":
                args.append(self._or())
                if self._peek() == ",":
                    self._take(",")
            self._take(")")
            if text not in self.functions:
                raise ExpressionError(f"unknown function {text}() in {self.text!r}")
            return self.functions[text](*args)
        root, *path = text.split(".")
        if root not in self.context:
            raise ExpressionError(f"unknown context {root!r} in {self.text!r}")
        value: Any = self.context[root]
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        return value


def _format(template: str, *args: Any) -> str:
    return re.sub(r"\{(\d+)\}", lambda m: _text(args[int(m.group(1))]), template)


def evaluate(
    text: str, context: Mapping[str, Any], status: Mapping[str, bool] | None = None
) -> Any:
    """One expression (``${{ }}`` optional around the whole of it)."""
    text = text.strip()
    if text.startswith("${{") and text.endswith("}}") and text.count("${{") == 1:
        text = text[3:-2]
    status = status or {}
    functions: dict[str, Callable] = {
        "always": lambda: True,
        "success": lambda: status.get("success", True),
        "failure": lambda: status.get("failure", False),
        "cancelled": lambda: False,
        "format": _format,
        "contains": lambda hay, needle: (
            any(_equal(x, needle) for x in hay)
            if isinstance(hay, list)
            else _text(needle).lower() in _text(hay).lower()
        ),
        "startsWith": lambda s, p: _text(s).lower().startswith(_text(p).lower()),
        "fromJSON": lambda text: json.loads(_text(text)),
        "toJSON": lambda value: json.dumps(value, indent=2),
    }
    return _Parser(text, context, functions).parse()


def interpolate(text: Any, context: Mapping[str, Any]) -> str:
    """Replace every ``${{ expr }}`` in a string with the expression's value as text."""
    if not isinstance(text, str):
        return _text(text)
    return re.sub(
        r"\$\{\{(.*?)\}\}", lambda m: _text(evaluate(m.group(1), context)), text, flags=re.S
    )


def condition(text: Any, context: Mapping[str, Any], status: Mapping[str, bool]) -> bool:
    """An ``if:``: no status function in it means ``success() && (...)``, as on GitHub."""
    if text is None:
        return status.get("success", True)
    if isinstance(text, bool):
        return text
    source = str(text)
    value = truthy(evaluate(source, context, status))
    if not re.search(r"\b(always|success|failure|cancelled)\(", source):
        value = value and status.get("success", True)
    return value


# -- workflows -----------------------------------------------------------------------------


def load(name: str, folder: Path = WORKFLOWS) -> dict[str, Any]:
    """A workflow file; PyYAML reads the ``on`` key as True, so it is put back."""
    data = yaml.safe_load((folder / name).read_text(encoding="utf-8"))
    if True in data:
        data["on"] = data.pop(True)
    return data


# `uses:` of ci-bench's own reusable workflows and actions, from an adopter's repository
# (OWNER/ci-bench/...@ref) or this one (./...): both are this checkout's files here.
_OWN = re.compile(r"^(ci-bench/ci-bench/|\./)\.github/(workflows|actions)/([^@]+?)(?:@.+)?$")
# ci-bench's setup action from its own checkout at the pinned commit (``path: .ci-bench``).
_PINNED_ACTION = re.compile(r"^\./\.ci-bench/\.github/actions/([^@]+)$")
# Where a job's checkout of ci-bench itself (``repository: ci-bench/ci-bench``) is emulated
# from: this checkout's files, as the reusable workflows are.
CI_BENCH_REPOSITORY = "ci-bench/ci-bench"


def load_called(uses: str, folder: Path = WORKFLOWS) -> dict[str, Any]:
    """The reusable workflow a job calls: ci-bench's own (``ci-bench/ci-bench/...@ref``)
    mapped onto this checkout's file, a local one (``./``) from the caller's folder."""
    match = _OWN.match(uses)
    if not match or match[2] != "workflows":
        raise ExpressionError(f"no emulation for the reusable workflow {uses}")
    return load(match[3], WORKFLOWS if match[1] != "./" else folder)


def composite_action(uses: str) -> Path | None:
    """The folder of one of ci-bench's own composite actions, or None for any other."""
    pinned = _PINNED_ACTION.match(uses)
    if pinned:
        return WORKFLOWS.parent / "actions" / pinned[1]
    match = _OWN.match(uses)
    if not match or match[2] != "actions":
        return None
    return WORKFLOWS.parent / "actions" / match[3]


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
    if event == "push":
        ref = payload.get("ref", "")
        if ref.startswith("refs/tags/"):
            patterns = spec.get("tags")
            return patterns is not None and any(
                fnmatch.fnmatchcase(ref.removeprefix("refs/tags/"), p) for p in patterns
            )
        if "branches" not in spec:
            # Only a tags filter: branch pushes do not run it (GitHub's rule).
            return "tags" not in spec
        return any(
            fnmatch.fnmatchcase(ref.removeprefix("refs/heads/"), p) for p in spec["branches"]
        )
    return True


@dataclass
class StepResult:
    name: str
    outcome: str  # success, failure, skipped
    output: str = ""


@dataclass
class JobResult:
    job: str
    matrix: dict[str, Any]
    result: str  # success, failure, skipped
    steps: list[StepResult] = field(default_factory=list)
    workspace: Path | None = None
    summary: str = ""
    outputs: dict[str, str] = field(default_factory=dict)

    def step(self, name: str) -> StepResult:
        return next(s for s in self.steps if s.name.startswith(name))


@dataclass
class WorkflowRun:
    workflow: str
    run_id: int
    concurrency_group: str | None
    jobs: list[JobResult]
    artifacts: Path
    name: str = ""  # the workflow's `name:`
    event: str = ""
    payload: dict[str, Any] = field(default_factory=dict)

    @property
    def conclusion(self) -> str:
        """GitHub's: failure if any job failed, else success (skipped jobs do not count)."""
        return "failure" if any(j.result == "failure" for j in self.jobs) else "success"

    def job(self, name: str) -> list[JobResult]:
        return [j for j in self.jobs if j.job == name]

    def result(self, name: str) -> str:
        """needs.<job>.result: a matrix job failed if any leg failed."""
        results = {j.result for j in self.job(name)}
        for outcome in ("failure", "cancelled", "success"):
            if outcome in results:
                return outcome
        return "skipped"

    @property
    def ran(self) -> list[str]:
        return [j.job for j in self.jobs if j.result != "skipped"]


@dataclass
class Runner:
    """Runs workflows for events against ``origin`` (a git repository) in ``root``."""

    origin: Path
    root: Path
    api_url: str
    repository: str
    token: str
    installed: dict[str, str]  # what the skipped Install steps would write to GITHUB_ENV
    variables: dict[str, str] = field(default_factory=dict)  # the repository's `vars`
    path_prefix: str = ""  # prepended to PATH, e.g. the venv's bin
    lose: set[tuple[str, str]] = field(default_factory=set)  # (job, matrix json): runner lost
    run_ids: itertools.count = field(default_factory=lambda: itertools.count(9001))
    # Every run so far, by id: another run's artifacts (download-artifact's run-id).
    runs: dict[int, WorkflowRun] = field(default_factory=dict)
    # A template for workflow_run payloads (GitHub's webhook example), filled per run.
    workflow_run_example: dict[str, Any] | None = None
    # Files outside every workspace that a self-hosted runner keeps between jobs.
    tool_cache: Path | None = None
    # Run the Install steps (the setup action) for real instead of standing in for them:
    # every job's (True) or these jobs' only.
    run_install: bool | frozenset[str] = False
    # The repository's workflows (an adopter's); ci-bench's own reusable ones are this
    # checkout's.
    workflows: Path = WORKFLOWS
    # Environment every job gets on top of the runner's (e.g. JAX_PLATFORMS=cpu).
    extra_env: dict[str, str] = field(default_factory=dict)
    # Every checkout of another repository: (repository, ref, path), for the tests to see
    # what a job ran at which commit.
    foreign_checkouts: list[tuple[str, str, str]] = field(default_factory=list)

    def dispatch(
        self, event: str, payload: dict[str, Any], ref: str, sha: str, target: str | None = None
    ) -> list[WorkflowRun]:
        """Every workflow this event triggers, run to completion.

        A ``workflow_dispatch`` starts only the workflow it names (``target``), as on GitHub.
        """
        if event == "workflow_dispatch" and target is None:
            raise ExpressionError("a workflow_dispatch names its workflow")
        runs = []
        for path in sorted(self.workflows.glob("*.yml")):
            if target is not None and path.name != target:
                continue
            workflow = load(path.name, self.workflows)
            if triggers(workflow, event, payload):
                runs.append(self.run(path.name, workflow, event, payload, ref, sha))
        for done in list(runs):
            runs += self._chained(done, ref, sha)
        return runs

    def _chained(self, done: WorkflowRun, ref: str, sha: str) -> list[WorkflowRun]:
        """Workflows a finished run starts (``on: workflow_run``), with GitHub's payload:
        the run's id, name, event, head commit and conclusion; for a pull request from
        this repository its number, for a fork none (GitHub lists none)."""
        started = []
        for path in sorted(self.workflows.glob("*.yml")):
            workflow = load(path.name, self.workflows)
            spec = (
                (workflow["on"] or {}).get("workflow_run")
                if isinstance(workflow["on"], dict)
                else None
            )
            if not spec or done.name not in spec.get("workflows", []):
                continue
            payload = json.loads(json.dumps(self.workflow_run_example or {}))
            pr = done.payload.get("pull_request") or {}
            head_repo = ((pr.get("head") or {}).get("repo") or {}).get("full_name")
            fork = head_repo is not None and head_repo != self.repository
            run = payload.setdefault("workflow_run", {})
            run.update(
                id=done.run_id,
                name=done.name,
                event=done.event,
                conclusion=done.conclusion,
                status="completed",
                head_sha=(pr.get("head") or {}).get("sha") or sha,
                pull_requests=[] if fork or not pr else [{"number": pr.get("number")}],
                head_repository={"full_name": head_repo or self.repository},
            )
            payload["action"] = "completed"
            payload.setdefault("repository", {})["full_name"] = self.repository
            started.append(self.run(path.name, workflow, "workflow_run", payload, ref, sha))
        return started

    def run(
        self,
        name: str,
        workflow: dict[str, Any],
        event: str,
        payload: dict[str, Any],
        ref: str,
        sha: str,
    ) -> WorkflowRun:
        run_id = next(self.run_ids)
        folder = self.root / f"run-{run_id}"
        artifacts = folder / "artifacts"
        artifacts.mkdir(parents=True)
        event_path = folder / "event.json"
        event_path.write_text(json.dumps(payload), encoding="utf-8")
        inputs = {}
        if event == "workflow_dispatch":
            declared = (workflow["on"]["workflow_dispatch"] or {}).get("inputs", {})
            inputs = {k: v.get("default", "") for k, v in declared.items()}
            inputs.update(payload.get("inputs") or {})
        github = {
            "event_name": event,
            "event": payload,
            "repository": self.repository,
            "server_url": "https://github.com",
            "ref": ref,
            "sha": sha,
            "run_id": str(run_id),
            "token": self.token,
            "workflow": workflow.get("name", name),
        }
        context = {"github": github, "inputs": inputs, "vars": self.variables, "env": {}}
        context["job"] = called_job_context(f"./.github/workflows/{name}", self.repository, sha)
        group = None
        # The run's group: its own, or (a caller) that of the workflow it calls.
        called = [
            load_called(j["uses"], self.workflows) for j in workflow["jobs"].values() if "uses" in j
        ]
        for spec in [workflow.get("concurrency"), *(c.get("concurrency") for c in called)]:
            if spec:
                group = interpolate(spec["group"] if isinstance(spec, dict) else spec, context)
                break
        base_env = {
            "CI": "true",
            "GITHUB_ACTIONS": "true",
            "GITHUB_EVENT_NAME": event,
            "GITHUB_EVENT_PATH": str(event_path),
            "GITHUB_REPOSITORY": self.repository,
            "GITHUB_REF": ref,
            "GITHUB_SHA": sha,
            "GITHUB_RUN_ID": str(run_id),
            "GITHUB_WORKFLOW": str(github["workflow"]),
            "GITHUB_API_URL": self.api_url,
            "GITHUB_SERVER_URL": "https://github.com",
        }
        jobs: list[JobResult] = []
        self._jobs(name, workflow, context, base_env, folder, artifacts, jobs, run_id, group)
        finished = WorkflowRun(
            name, run_id, group, jobs, artifacts, workflow.get("name", name), event, payload
        )
        self.runs[run_id] = finished
        return finished

    def _jobs(
        self,
        name: str,
        workflow: dict[str, Any],
        context: dict[str, Any],
        base_env: dict[str, str],
        folder: Path,
        artifacts: Path,
        jobs: list[JobResult],
        run_id: int,
        group: str | None,
    ) -> str:
        """Every job of ``workflow`` in needs order, appended to ``jobs``; a job that calls a
        reusable workflow (``uses:``) runs the called workflow's jobs in its place, with its
        ``with:`` as ``inputs``. Returns the combined result (a caller job's ``needs``)."""
        done: dict[str, str] = {}
        outputs: dict[str, dict[str, str]] = {}
        workflow_env = {k: interpolate(v, context) for k, v in (workflow.get("env") or {}).items()}
        base_env = {**base_env, **workflow_env}
        context = {**context, "env": {**context.get("env", {}), **workflow_env}}
        for job_name, job in _ordered(workflow["jobs"]):
            needs = job.get("needs", [])
            needs = [needs] if isinstance(needs, str) else needs
            needs_ctx = {n: {"result": done[n], "outputs": outputs.get(n, {})} for n in needs}
            status = {
                "success": all(done[n] == "success" for n in needs),
                "failure": any(done[n] == "failure" for n in needs),
            }
            job_ctx = {**context, "needs": needs_ctx}
            if not condition(job.get("if"), job_ctx, status):
                jobs.append(JobResult(job_name, {}, "skipped"))
                done[job_name] = "skipped"
                continue
            if "uses" in job:  # a reusable workflow: its jobs run here
                called = load_called(job["uses"], self.workflows)
                declared = ((called["on"] or {}).get("workflow_call") or {}).get("inputs") or {}
                given = {k: interpolate(v, job_ctx) for k, v in (job.get("with") or {}).items()}
                inputs = {k: v.get("default", "") for k, v in declared.items()} | given
                job_info = called_job_context(
                    job["uses"], self.repository, context["github"]["sha"]
                )
                inner = {**context, "inputs": inputs, "job": job_info}
                done[job_name] = self._jobs(
                    name, called, inner, base_env, folder, artifacts, jobs, run_id, group
                )
                continue
            legs = _matrix(job.get("strategy", {}).get("matrix"), job_ctx)
            # Matrix legs run side by side, as on GitHub (the shards' runners).
            with ThreadPoolExecutor(max_workers=len(legs)) as pool:
                futures = []
                for matrix in legs:
                    key = (job_name, json.dumps(matrix, sort_keys=True))
                    if key in self.lose:  # the runner went away: no steps, no artifact
                        futures.append(None)
                        continue
                    workspace = folder / f"{job_name}-{len(jobs) + len(futures)}"
                    leg_ctx = {**job_ctx, "matrix": matrix}
                    futures.append(
                        pool.submit(
                            self._job,
                            job_name,
                            job,
                            matrix,
                            leg_ctx,
                            base_env,
                            workspace,
                            artifacts,
                        )
                    )
                for matrix, future in zip(legs, futures, strict=True):
                    lost = JobResult(job_name, matrix, "failure")
                    jobs.append(lost if future is None else future.result())
            done[job_name] = WorkflowRun(name, run_id, group, jobs, artifacts).result(job_name)
            for leg in (j for j in jobs if j.job == job_name):
                outputs.setdefault(job_name, {}).update(leg.outputs)
        results = set(done.values())
        for outcome in ("failure", "cancelled", "success"):
            if outcome in results:
                return outcome
        return "skipped"

    def _job(
        self,
        name: str,
        job: dict[str, Any],
        matrix: dict[str, Any],
        context: dict[str, Any],
        base_env: dict[str, str],
        workspace: Path,
        artifacts: Path,
    ) -> JobResult:
        files = workspace.parent / f"{workspace.name}-files"
        files.mkdir(parents=True)
        summary = files / "summary.md"
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "CI_BENCH"))},
            **base_env,
            "GITHUB_WORKSPACE": str(workspace),
            "GITHUB_STEP_SUMMARY": str(summary),
            "RUNNER_TEMP": str(files),
            "RUNNER_TOOL_CACHE": str(self.tool_cache or files / "tool-cache"),
            **self.extra_env,
        }
        env["PATH"] = (
            f"{self.path_prefix}{os.pathsep}{env['PATH']}" if self.path_prefix else env["PATH"]
        )
        job_env = {k: interpolate(v, context) for k, v in (job.get("env") or {}).items()}
        env.update(job_env)
        result = JobResult(name, matrix, "success", workspace=workspace)
        failed = False
        steps_ctx: dict[str, dict[str, Any]] = {}
        for index, step in enumerate(job["steps"]):
            step_name = str(step.get("name") or step.get("uses") or step.get("run", ""))
            step_ctx = {**context, "env": {**job_env}, "steps": steps_ctx}
            status = {"success": not failed, "failure": failed}
            if not condition(step.get("if"), step_ctx, status):
                result.steps.append(StepResult(step_name, "skipped"))
                continue
            step_env = {k: interpolate(v, step_ctx) for k, v in (step.get("env") or {}).items()}
            real = self.run_install is True or (
                isinstance(self.run_install, frozenset) and name in self.run_install
            )
            if step_name.startswith("Install") and not real:
                env.update(self.installed)
                result.steps.append(StepResult(step_name, "skipped"))
                continue
            if "uses" in step and composite_action(step["uses"]) is not None:
                with_ = {k: interpolate(v, step_ctx) for k, v in (step.get("with") or {}).items()}
                outcome, text = self._composite(step["uses"], with_, context, env, workspace, files)
                result.steps.append(StepResult(step_name, outcome, text))
            elif "uses" in step:
                with_ = {k: interpolate(v, step_ctx) for k, v in (step.get("with") or {}).items()}
                outcome = self._uses(step["uses"], with_, workspace, artifacts, base_env)
                result.steps.append(StepResult(step_name, outcome))
            else:
                script = interpolate(step["run"], step_ctx)
                outcome, text, outputs = self._script(
                    script, {**env, **step_env}, env, workspace, files, f"{index}"
                )
                result.steps.append(StepResult(step_name, outcome, text))
                if step.get("id"):
                    steps_ctx[step["id"]] = {"outputs": outputs, "outcome": outcome}
            if result.steps[-1].outcome == "failure" and not step.get("continue-on-error"):
                failed = True
        result.result = "failure" if failed else "success"
        result.summary = summary.read_text(encoding="utf-8") if summary.exists() else ""
        final_ctx = {**context, "steps": steps_ctx}
        result.outputs = {
            k: interpolate(v, final_ctx) for k, v in (job.get("outputs") or {}).items()
        }
        return result

    def _script(
        self,
        script: str,
        env: dict[str, str],
        job_env: dict[str, str],
        workspace: Path,
        files: Path,
        key: str,
    ) -> tuple[str, str, dict[str, str]]:
        """One ``run:`` with bash as the runner does; what it writes to GITHUB_ENV joins
        ``job_env`` for the later steps. Returns (outcome, output, step outputs)."""
        env_file, output = files / f"env-{key}", files / f"output-{key}"
        env_file.touch()
        output.touch()
        done = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script],
            cwd=workspace,
            env={**env, "GITHUB_ENV": str(env_file), "GITHUB_OUTPUT": str(output)},
            capture_output=True,
            text=True,
            timeout=1200,
            check=False,
        )
        job_env.update(_env_file(env_file))
        outcome = "success" if done.returncode == 0 else "failure"
        return outcome, done.stdout + done.stderr, _env_file(output)

    def _composite(
        self,
        action: str,
        with_: dict[str, str],
        context: dict[str, Any],
        env: dict[str, str],
        workspace: Path,
        files: Path,
    ) -> tuple[str, str]:
        """A composite action of this repository (``./.github/actions/X`` or
        ``ci-bench/ci-bench/.github/actions/X@ref``, mapped onto this checkout): its steps
        run with its ``inputs`` and ``GITHUB_ACTION_PATH``."""
        folder = composite_action(action)
        assert folder is not None
        spec = yaml.safe_load((folder / "action.yml").read_text(encoding="utf-8"))
        declared = spec.get("inputs") or {}
        inputs = {k: str(v.get("default", "")) for k, v in declared.items()} | with_
        ctx = {**context, "inputs": inputs}
        texts = []
        for index, step in enumerate(spec["runs"]["steps"]):
            step_env = {k: interpolate(v, ctx) for k, v in (step.get("env") or {}).items()}
            run_env = {**env, **step_env, "GITHUB_ACTION_PATH": str(folder)}
            outcome, text, _ = self._script(
                interpolate(step["run"], ctx), run_env, env, workspace, files, f"a{index}"
            )
            texts.append(text)
            if outcome == "failure":
                return "failure", "".join(texts)
        return "success", "".join(texts)

    def _uses(
        self,
        action: str,
        with_: dict[str, str],
        workspace: Path,
        artifacts: Path,
        base_env: dict[str, str],
    ) -> str:
        name = action.split("@")[0]
        if name == "actions/checkout" and with_.get("repository", self.repository) not in (
            self.repository,
            "",
        ):
            if with_["repository"] != CI_BENCH_REPOSITORY:
                return "failure"  # no emulation of any other repository
            # ci-bench itself at the pinned ref: this checkout's .github (its actions).
            target = workspace / with_.get("path", ".")
            target.mkdir(parents=True, exist_ok=True)
            (target / ".github").symlink_to(WORKFLOWS.parent, target_is_directory=True)
            self.foreign_checkouts.append((with_["repository"], with_.get("ref", ""), str(target)))
            return "success"
        if name == "actions/checkout":
            ref = with_.get("ref") or base_env["GITHUB_SHA"]
            depth = [] if with_.get("fetch-depth") == "0" else ["--depth", "1"]
            target = workspace / with_["path"] if with_.get("path") else workspace
            steps = [
                ["git", "clone", "-q", *depth, "--no-local", f"file://{self.origin}", str(target)],
                ["git", "-C", str(target), "fetch", "-q", "origin", ref],
                ["git", "-C", str(target), "checkout", "-q", "--detach", "FETCH_HEAD"],
            ]
            for command in steps:
                if subprocess.run(command, capture_output=True, check=False).returncode:
                    return "failure"  # e.g. a branch that does not exist (yet)
            return "success"
        if name == "actions/upload-pages-artifact":
            with_ = {"name": "github-pages", "path": with_.get("path", "_site")}
            name = "actions/upload-artifact"
        if name == "actions/deploy-pages":
            return "success" if (artifacts / "github-pages").is_dir() else "failure"
        if name == "actions/upload-artifact":
            source = workspace / with_["path"]
            if not source.exists():
                if with_.get("if-no-files-found") in ("ignore", "warn"):
                    return "success"
                return "failure"
            target = artifacts / with_["name"]
            target.mkdir(parents=True, exist_ok=True)
            if source.is_dir():
                shutil.copytree(source, target, dirs_exist_ok=True)
            else:
                shutil.copy2(source, target / source.name)
            return "success"
        if name == "actions/download-artifact":
            if with_.get("run-id"):  # another run's artifacts (needs a token, as on GitHub)
                other = self.runs.get(int(with_["run-id"]))
                if other is None or not with_.get("github-token"):
                    return "failure"
                artifacts = other.artifacts
            pattern = with_.get("pattern") or with_.get("name") or "*"
            target = workspace / with_.get("path", ".")
            found_any = False
            for found in sorted(artifacts.iterdir()):
                if fnmatch.fnmatchcase(found.name, pattern):
                    found_any = True
                    merge = with_.get("merge-multiple") == "true" or "name" in with_
                    shutil.copytree(
                        found, target if merge else target / found.name, dirs_exist_ok=True
                    )
            # A named artifact that does not exist fails the step, as on GitHub.
            return "failure" if "name" in with_ and not found_any else "success"
        raise ExpressionError(f"no emulation for the action {action}")


def _env_file(path: Path) -> dict[str, str]:
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


def _matrix(spec: Any, context: Mapping[str, Any]) -> list[dict[str, Any]]:
    if not spec:
        return [{}]
    spec = {
        k: evaluate(v, context) if isinstance(v, str) and "${{" in v else v for k, v in spec.items()
    }
    keys = [k for k in spec if k not in ("include", "exclude")]
    return [
        dict(zip(keys, combo, strict=True)) for combo in itertools.product(*(spec[k] for k in keys))
    ]


def _ordered(jobs: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Jobs in file order, each after everything it needs."""
    order: list[str] = []
    pending = list(jobs)
    while pending:
        for name in pending:
            needs = jobs[name].get("needs", [])
            needs = [needs] if isinstance(needs, str) else needs
            if all(n in order for n in needs):
                order.append(name)
                pending.remove(name)
                break
        else:
            raise ExpressionError(f"jobs with circular needs: {pending}")
    return [(name, jobs[name]) for name in order]
