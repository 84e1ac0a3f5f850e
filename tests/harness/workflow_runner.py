"""Run this repository's GitHub Actions workflows locally, from their own YAML.

A small emulation of the Actions runner for the pipeline test: it reads
``.github/workflows/*.yml``, decides which workflows an event triggers, evaluates job and
step ``if:`` conditions and the ``${{ }}`` expressions the workflows use
(``workflow_expressions``), and runs each job's ``run:`` steps with bash, in ``needs``
order, in a clone of a real git repository, with the Actions environment
(``GITHUB_EVENT_PATH``, ``GITHUB_OUTPUT``, ``GITHUB_ENV``, ``GITHUB_STEP_SUMMARY``,
``GITHUB_API_URL``, ...). What a step does is decided from its ``uses:`` or ``run:``
(``workflow_steps``), never its name: ``uses:`` steps are emulated (checkout clones the
repository at the requested ref, upload/download-artifact copy folders), ci-bench's own
composite actions run their steps, and install steps (ci-bench's setup action, a ``run:``
that pip-installs) are skipped: the test's own environment stands in for the venv they
would build (``installed`` sets the variables they would write to ``GITHUB_ENV``).
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from tests.harness.workflow_expressions import (
    ExpressionError,
    condition,
    evaluate,
    interpolate,
    truthy,
)
from tests.harness.workflow_files import (
    CI_BENCH_REPOSITORY,
    GITHUB,
    WORKFLOWS,
    called_job_context,
    composite_action,
    env_file,
    load,
    load_called,
    matrix_legs,
    needs_of,
    ordered,
    triggers,
)
from tests.harness.workflow_results import (
    JobResult,
    Leg,
    RunState,
    StepResult,
    WorkflowRun,
    combined,
    workflow_run_payload,
)
from tests.harness.workflow_steps import (
    ACTION,
    COMPOSITE,
    INSTALL,
    Call,
    kind_of,
    label_of,
    run_action,
)

__all__ = [
    "CI_BENCH_REPOSITORY",
    "WORKFLOWS",
    "ExpressionError",
    "JobResult",
    "Runner",
    "StepResult",
    "WorkflowRun",
    "called_job_context",
    "composite_action",
    "condition",
    "evaluate",
    "interpolate",
    "load",
    "load_called",
    "triggers",
    "truthy",
]


@dataclass
class Runner:
    """Runs workflows for events against ``origin`` (a git repository) in ``root``."""

    origin: Path
    root: Path
    api_url: str
    repository: str
    token: str
    installed: dict[str, str]  # what the skipped install steps would write to GITHUB_ENV
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
    # Run the install steps (the setup action, pip) for real instead of standing in for them:
    # every job's (True) or these jobs' only.
    run_install: bool | frozenset[str] = False
    # The repository's workflows (an adopter's); ci-bench's own reusable ones are this
    # checkout's.
    workflows: Path = WORKFLOWS
    # ci-bench's own .github (its reusable workflows and composite actions): this checkout's.
    own: Path = GITHUB
    # Environment every job gets on top of the runner's (e.g. JAX_PLATFORMS=cpu).
    extra_env: dict[str, str] = field(default_factory=dict)
    # Every checkout of another repository: (repository, ref, path), for the tests to see
    # what a job ran at which commit.
    foreign_checkouts: list[tuple[str, str, str]] = field(default_factory=list)
    # Called with (workflow file, job name) before each job starts: what happens on GitHub
    # while a run is under way (a maintainer removes a label, another run ends first).
    before_job: Callable[[str, str], None] | None = None
    # Every install step's ``with:`` (the setup action's requirements), by job.
    installs: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    # An install run for real gets these requirements in place of the given ones: ci-bench
    # pinned to a commit (``git+…@<commit>``) is this checkout's wheel here, as its
    # repository at that commit is this checkout's .github.
    packages: dict[str, str] = field(default_factory=dict)
    # GitHub Enterprise Server: ``job.workflow_sha`` and ``job.workflow_repository`` are
    # empty there (GitHub's contexts reference: "not available on GitHub Enterprise Server").
    enterprise: bool = False

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
        """Workflows a finished run starts (``on: workflow_run``), with GitHub's payload."""
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
            payload = workflow_run_payload(self.workflow_run_example, done, self.repository, sha)
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
            load_called(j["uses"], self.workflows, self.own)
            for j in workflow["jobs"].values()
            if "uses" in j
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
        self._jobs(
            RunState(name, run_id, group, base_env, artifacts, folder, jobs), workflow, context
        )
        finished = WorkflowRun(
            name, run_id, group, jobs, artifacts, workflow.get("name", name), event, payload
        )
        self.runs[run_id] = finished
        return finished

    def _jobs(self, run: RunState, workflow: dict[str, Any], context: dict[str, Any]) -> str:
        """Every job of ``workflow`` in needs order, appended to ``run.jobs``; a job that
        calls a reusable workflow (``uses:``) runs the called workflow's jobs in its place,
        with its ``with:`` as ``inputs``. Returns the combined result (a caller's ``needs``)."""
        done: dict[str, str] = {}
        outputs: dict[str, dict[str, str]] = {}
        workflow_env = {k: interpolate(v, context) for k, v in (workflow.get("env") or {}).items()}
        run = replace(run, base_env={**run.base_env, **workflow_env})
        context = {**context, "env": {**context.get("env", {}), **workflow_env}}
        for job_name, job in ordered(workflow["jobs"]):
            needs = needs_of(job)
            needs_ctx = {n: {"result": done[n], "outputs": outputs.get(n, {})} for n in needs}
            status = {
                "success": all(done[n] == "success" for n in needs),
                "failure": any(done[n] == "failure" for n in needs),
            }
            job_ctx = {**context, "needs": needs_ctx}
            if self.before_job is not None:
                self.before_job(run.name, job_name)
            if not condition(job.get("if"), job_ctx, status):
                run.jobs.append(JobResult(job_name, {}, "skipped"))
                done[job_name] = "skipped"
            elif "uses" in job:  # a reusable workflow: its jobs run here
                done[job_name] = self._call(run, job, job_ctx, context)
            else:
                done[job_name] = self._legs(run, job_name, job, job_ctx)
                for leg in (j for j in run.jobs if j.job == job_name):
                    outputs.setdefault(job_name, {}).update(leg.outputs)
        return combined(done.values())

    def _call(
        self, run: RunState, job: dict[str, Any], job_ctx: dict[str, Any], context: dict[str, Any]
    ) -> str:
        """A job that calls a reusable workflow: the called jobs, with ``with:`` as inputs."""
        called = load_called(job["uses"], self.workflows, self.own)
        declared = ((called["on"] or {}).get("workflow_call") or {}).get("inputs") or {}
        given = {k: interpolate(v, job_ctx) for k, v in (job.get("with") or {}).items()}
        inputs = {k: v.get("default", "") for k, v in declared.items()} | given
        job_info = called_job_context(job["uses"], self.repository, context["github"]["sha"])
        if self.enterprise:
            job_info = {**job_info, "workflow_sha": "", "workflow_repository": ""}
        return self._jobs(run, called, {**context, "inputs": inputs, "job": job_info})

    def _legs(
        self, run: RunState, job_name: str, job: dict[str, Any], job_ctx: dict[str, Any]
    ) -> str:
        """A job's matrix legs, side by side as on GitHub (the shards' runners); a lost
        runner's leg fails with no steps and no artifact. Returns the job's result."""
        legs = matrix_legs(job.get("strategy", {}).get("matrix"), job_ctx)
        with ThreadPoolExecutor(max_workers=len(legs)) as pool:
            futures = []
            for matrix in legs:
                if (job_name, json.dumps(matrix, sort_keys=True)) in self.lose:
                    futures.append(None)
                    continue
                workspace = run.folder / f"{job_name}-{len(run.jobs) + len(futures)}"
                leg = Leg(job_name, job, matrix, {**job_ctx, "matrix": matrix}, workspace)
                futures.append(pool.submit(self._job, run, leg))
            for matrix, future in zip(legs, futures, strict=True):
                lost = JobResult(job_name, matrix, "failure")
                run.jobs.append(lost if future is None else future.result())
        return combined(j.result for j in run.jobs if j.job == job_name)

    def _job(self, run: RunState, leg: Leg) -> JobResult:
        """One job (one matrix leg): its steps in order in a fresh workspace."""
        leg.files.mkdir(parents=True)
        summary = leg.files / "summary.md"
        leg.env.update(
            {
                **{
                    k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "CI_BENCH"))
                },
                **run.base_env,
                "GITHUB_WORKSPACE": str(leg.workspace),
                "GITHUB_STEP_SUMMARY": str(summary),
                "RUNNER_TEMP": str(leg.files),
                "RUNNER_TOOL_CACHE": str(self.tool_cache or leg.files / "tool-cache"),
                **self.extra_env,
            }
        )
        if self.path_prefix:
            leg.env["PATH"] = f"{self.path_prefix}{os.pathsep}{leg.env['PATH']}"
        leg.job_env = {
            k: interpolate(v, leg.context) for k, v in (leg.spec.get("env") or {}).items()
        }
        leg.env.update(leg.job_env)
        result = JobResult(leg.name, leg.matrix, "success", workspace=leg.workspace)
        result.runs_on = interpolate(leg.spec.get("runs-on", ""), leg.context)
        failed = False
        for index, step in enumerate(leg.spec["steps"]):
            step_ctx = {**leg.context, "env": {**leg.job_env}, "steps": leg.steps}
            if not condition(step.get("if"), step_ctx, {"success": not failed, "failure": failed}):
                result.steps.append(StepResult(label_of(step), "skipped"))
                continue
            result.steps.append(self._step(run, leg, step, step_ctx, index))
            if result.steps[-1].outcome == "failure" and not step.get("continue-on-error"):
                failed = True
        result.result = "failure" if failed else "success"
        result.summary = summary.read_text(encoding="utf-8") if summary.exists() else ""
        final_ctx = {**leg.context, "steps": leg.steps}
        result.outputs = {
            k: interpolate(v, final_ctx) for k, v in (leg.spec.get("outputs") or {}).items()
        }
        return result

    def _step(
        self, run: RunState, leg: Leg, step: dict[str, Any], step_ctx: dict[str, Any], index: int
    ) -> StepResult:
        """One step that runs, handled by what it does (``workflow_steps.kind_of``)."""
        label, kind = label_of(step), kind_of(step, self.own)
        step_env = {k: interpolate(v, step_ctx) for k, v in (step.get("env") or {}).items()}
        with_ = {k: interpolate(v, step_ctx) for k, v in (step.get("with") or {}).items()}
        if kind == INSTALL:
            self.installs.append((leg.name, dict(with_)))
            for given, stand_in in self.packages.items():
                with_ = {k: v.replace(given, stand_in) for k, v in with_.items()}
        if kind == INSTALL and not self._installs_for_real(leg.name):
            leg.env.update(self.installed)
            return StepResult(label, "skipped", inputs=with_)
        if "uses" in step and kind in (INSTALL, COMPOSITE):
            outcome, text = self._composite(step["uses"], with_, leg)
            return StepResult(label, outcome, text)
        if kind == ACTION:
            call = Call(with_, leg.workspace, run.artifacts, run.base_env["GITHUB_SHA"])
            return StepResult(label, run_action(self, step["uses"], call))
        script = interpolate(step["run"], step_ctx)
        outcome, text, outputs = self._script(script, {**leg.env, **step_env}, leg, f"{index}")
        if step.get("id"):
            leg.steps[step["id"]] = {"outputs": outputs, "outcome": outcome}
        return StepResult(label, outcome, text)

    def _installs_for_real(self, job: str) -> bool:
        return self.run_install is True or (
            isinstance(self.run_install, frozenset) and job in self.run_install
        )

    def _script(
        self, script: str, env: dict[str, str], leg: Leg, key: str
    ) -> tuple[str, str, dict[str, str]]:
        """One ``run:`` with bash as the runner does; what it writes to GITHUB_ENV joins the
        job's environment for the later steps. Returns (outcome, output, step outputs)."""
        env_path, output = leg.files / f"env-{key}", leg.files / f"output-{key}"
        env_path.touch()
        output.touch()
        done = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script],
            cwd=leg.workspace,
            env={**env, "GITHUB_ENV": str(env_path), "GITHUB_OUTPUT": str(output)},
            capture_output=True,
            text=True,
            timeout=1200,
            check=False,
        )
        leg.env.update(env_file(env_path))
        outcome = "success" if done.returncode == 0 else "failure"
        return outcome, done.stdout + done.stderr, env_file(output)

    def _composite(self, action: str, with_: dict[str, str], leg: Leg) -> tuple[str, str]:
        """A composite action of this repository (``./.github/actions/X`` or
        ``ci-bench/ci-bench/.github/actions/X@ref``, mapped onto ``own``): its steps run
        with its ``inputs`` and ``GITHUB_ACTION_PATH``."""
        folder = composite_action(action, self.own)
        assert folder is not None
        spec = yaml.safe_load((folder / "action.yml").read_text(encoding="utf-8"))
        declared = spec.get("inputs") or {}
        inputs = {k: str(v.get("default", "")) for k, v in declared.items()} | with_
        ctx = {**leg.context, "inputs": inputs}
        texts = []
        for index, step in enumerate(spec["runs"]["steps"]):
            step_env = {k: interpolate(v, ctx) for k, v in (step.get("env") or {}).items()}
            run_env = {**leg.env, **step_env, "GITHUB_ACTION_PATH": str(folder)}
            outcome, text, _ = self._script(
                interpolate(step["run"], ctx), run_env, leg, f"a{index}"
            )
            texts.append(text)
            if outcome == "failure":
                return "failure", "".join(texts)
        return "success", "".join(texts)
