#!/usr/bin/env python3
"""Regenerate tests/openapi/openapi-trimmed.json from GitHub's published OpenAPI description.

The tests validate every request and response of the fake GitHub server against GitHub's
own description. The full document is 11 MB; the tests need only the paths ci-bench (and a
CI benchmark service generally) calls, plus every component those paths reference.

Usage (needs npm, network to the npm registry; run from the repository root)::

    python3 scripts/trim_github_openapi.py            # npm pack, trim, write
    python3 scripts/trim_github_openapi.py --check    # exit 1 if the committed file differs
    python3 scripts/trim_github_openapi.py --tarball octokit-openapi-23.0.2.tgz
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

PACKAGE = "@octokit/openapi"
VERSION = "23.0.2"
MEMBER = "package/generated/api.github.com.json"
OUTPUT = Path(__file__).resolve().parents[1] / "tests" / "openapi" / "openapi-trimmed.json"
TOP_LEVEL = ("openapi", "info", "tags", "servers", "externalDocs")
PATHS = (
    "/repos/{owner}/{repo}",
    "/repos/{owner}/{repo}/issues/{issue_number}",
    "/repos/{owner}/{repo}/issues/{issue_number}/comments",
    "/repos/{owner}/{repo}/issues/comments/{comment_id}",
    "/repos/{owner}/{repo}/issues/{issue_number}/labels",
    "/repos/{owner}/{repo}/issues/{issue_number}/labels/{name}",
    "/repos/{owner}/{repo}/pulls",
    "/repos/{owner}/{repo}/pulls/{pull_number}",
    "/repos/{owner}/{repo}/pulls/{pull_number}/files",
    "/repos/{owner}/{repo}/collaborators/{username}/permission",
    "/repos/{owner}/{repo}/contents/{path}",
    "/repos/{owner}/{repo}/git/refs",
    "/repos/{owner}/{repo}/git/ref/{ref}",
    "/repos/{owner}/{repo}/git/refs/{ref}",
    "/repos/{owner}/{repo}/check-runs",
    "/repos/{owner}/{repo}/check-runs/{check_run_id}",
    "/repos/{owner}/{repo}/commits/{ref}",
    "/repos/{owner}/{repo}/compare/{basehead}",
    "/repos/{owner}/{repo}/actions/runs/{run_id}/artifacts",
    "/repos/{owner}/{repo}/actions/artifacts/{artifact_id}/{archive_format}",
    "/repos/{owner}/{repo}/releases/tags/{tag}",
    "/user",
    "/rate_limit",
)


def trim(full: dict[str, Any], paths: tuple[str, ...] = PATHS) -> dict[str, Any]:
    """The listed paths (all their operations) and the transitive closure of their refs.

    Components are kept in the order a depth-first walk of the kept paths first meets them
    (sections too), which is the order the committed file has.
    """
    missing = [p for p in paths if p not in full["paths"]]
    if missing:
        raise SystemExit(f"not in the description: {', '.join(missing)}")
    out: dict[str, Any] = {key: full[key] for key in TOP_LEVEL if key in full}
    out["paths"] = {p: full["paths"][p] for p in paths}
    kept: dict[str, dict[str, Any]] = {}

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "$ref" and isinstance(value, str) and value.startswith("#/components/"):
                    section, _, name = value.removeprefix("#/components/").partition("/")
                    if name not in kept.setdefault(section, {}):
                        kept[section][name] = full["components"][section][name]
                        walk(kept[section][name])
                else:
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(out["paths"])
    out["components"] = kept
    return out


def _npm_pack(folder: Path) -> Path:
    spec = f"{PACKAGE}@{VERSION}"
    done = subprocess.run(
        ["npm", "pack", spec, "--silent"], cwd=folder, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise SystemExit(f"npm pack {spec} failed: {done.stderr.strip()}")
    return folder / done.stdout.strip().splitlines()[-1]


def _load(tarball: Path) -> dict[str, Any]:
    with tarfile.open(tarball) as archive:
        member = archive.extractfile(MEMBER)
        if member is None:
            raise SystemExit(f"{tarball}: no {MEMBER}")
        return json.load(member)


def render(document: dict[str, Any]) -> str:
    return json.dumps(document, indent=1)  # no final newline, as first published


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tarball", type=Path, help="an already downloaded npm tarball")
    parser.add_argument("--output", type=Path, default=OUTPUT)
    parser.add_argument("--check", action="store_true", help="compare, do not write")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        tarball = args.tarball or _npm_pack(Path(tmp))
        text = render(trim(_load(tarball)))
    if args.check:
        same = args.output.is_file() and args.output.read_text(encoding="utf-8") == text
        print(f"{args.output}: {'identical' if same else 'DIFFERS'}")
        return 0 if same else 1
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text, encoding="utf-8")
    print(f"wrote {args.output} ({len(text)} characters, {len(PATHS)} paths)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
