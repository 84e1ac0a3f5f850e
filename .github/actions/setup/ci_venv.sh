#!/usr/bin/env bash
# Set up ci-bench for a workflow job, with the venv and JAX's compilation cache OUTSIDE the
# workspace, so they survive actions/checkout's `git clean -ffdx` on self-hosted runners.
# The `setup` action beside this file runs it; so can a job of your own.
#
#   ci_venv.sh CONSTRAINTS REQUIREMENT...
#   ci_venv.sh constraints/tpu.txt "ci-bench==0.2.0" -e . "jax[tpu]"   (TPU jobs)
#   ci_venv.sh - "ci-bench==0.2.0"                                      (comment job)
# REQUIREMENTs are pip's arguments (`-e .` installs the checkout editable); CONSTRAINTS is a
# pip constraints file, or - for none.
#
# Cache root: $CI_BENCH_CACHE, else $RUNNER_TOOL_CACHE/ci-bench, else ~/.cache/ci-bench.
#   venv-<key>/   dependencies. The key is the hash of what pip's resolver answers
#                 (`pip install --dry-run --report`: every distribution and version the
#                 install would use), the Python version and the workspace path (the
#                 editable install points at it). A comment or a reordered list in
#                 pyproject.toml resolves to the same set and reuses the venv; a changed
#                 pin or dependency builds a new one.
#   The newest $CI_BENCH_KEEP_VENVS venvs (default 3) are kept; older ones not in use by
#   another job are deleted, so a runner's disk does not fill with 1-2 GB venvs.
#   jax-<versions>/  JAX's persistent compilation cache, one per jax/jaxlib/libtpu triple.
# Writes CI_BENCH_VENV and CI_BENCH_JAX_CACHE to $GITHUB_ENV for the later steps.
set -euo pipefail

constraints="${1:--}"
shift || true
if [ "${constraints}" = "-" ]; then constraints=""; fi
if [ "$#" -eq 0 ]; then echo "ci_venv.sh: no requirement to install" >&2; exit 2; fi
if [ -n "${constraints}" ] && [ ! -f "${constraints}" ]; then
  echo "ci_venv.sh: constraints file ${constraints} not found: create it (ci-bench init" \
    "writes one pinning jax, jaxlib and libtpu) or pass constraints: -" >&2
  exit 2
fi
root="${CI_BENCH_CACHE:-${RUNNER_TOOL_CACHE:-${HOME}/.cache}/ci-bench}"
keep="${CI_BENCH_KEEP_VENVS:-3}"
mkdir -p "${root}"
python="${CI_BENCH_PYTHON:-python3}"
pip_args=(-q)
if [ -n "${constraints}" ]; then pip_args+=(-c "${constraints}"); fi

# What the install would be: the resolver's report, reduced to sorted name==version lines.
report="$(mktemp)"
trap 'rm -f "${report}"' EXIT
"${python}" -m pip install "${pip_args[@]}" --dry-run --ignore-installed \
  --report "${report}" "$@" >/dev/null
resolved="$("${python}" - "${report}" <<'PY'
import json, sys
report = json.load(open(sys.argv[1], encoding="utf-8"))
def row(item):
    """name==version, and for a direct URL (ci-bench pinned to a git commit) that URL and
    commit: two commits of one version are two venvs."""
    text = f"{item['metadata']['name'].lower()}=={item['metadata']['version']}"
    info = item.get("download_info", {}) if item.get("is_direct") else {}
    if info.get("url"):
        text += f" @ {info['url']}#{info.get('vcs_info', {}).get('commit_id', '')}"
    return text
rows = sorted(
    row(i)
    for i in report["install"]
    if not i.get("is_direct") or not i.get("download_info", {}).get("dir_info", {}).get("editable")
)
print("\n".join(rows))
PY
)"
key="$({ echo "${resolved}"; "${python}" -c 'import sys; print(sys.version)'
        echo "workspace=${PWD}"; } | sha256sum | cut -c1-16)"
venv="${root}/venv-${key}"

# One job at a time per venv: two runners sharing CI_BENCH_CACHE wait for each other here.
exec 9>"${venv}.lock"
flock 9
if [ ! -f "${venv}/.complete" ]; then
  rm -rf "${venv}"
  "${python}" -m venv "${venv}"
  "${venv}/bin/pip" install "${pip_args[@]}" --upgrade pip
  "${venv}/bin/pip" install "${pip_args[@]}" "$@"
  echo "${resolved}" > "${venv}/.resolved"
  touch "${venv}/.complete"
else
  # Dependencies are cached; only what is installed from this checkout is re-linked.
  editable=()
  while [ "$#" -gt 0 ]; do
    if [ "$1" = "-e" ] && [ "$#" -gt 1 ]; then editable+=(-e "$2"); shift; fi
    shift
  done
  if [ "${#editable[@]}" -gt 0 ]; then
    "${venv}/bin/pip" install "${pip_args[@]}" --no-deps "${editable[@]}"
  fi
fi
touch "${venv}/.used"

versions="$("${venv}/bin/python" - <<'PY'
from importlib.metadata import PackageNotFoundError, version
def v(name):
    try:
        return version(name)
    except PackageNotFoundError:
        return "none"
print(f"jax{v('jax')}-jaxlib{v('jaxlib')}-libtpu{v('libtpu')}")
PY
)"
flock -u 9

# Evict all but the newest $keep venvs (by last use); one another job holds is skipped.
mapfile -t venvs < <(ls -1dt "${root}"/venv-*/.used 2>/dev/null | sed 's|/.used$||')
for old in "${venvs[@]:${keep}}"; do
  [ "${old}" = "${venv}" ] && continue
  (
    exec 8>"${old}.lock"
    if flock -n 8; then rm -rf "${old}"; echo "ci-bench: evicted ${old}"; fi
  )
done

jax_cache="${root}/jax-${versions}"
mkdir -p "${jax_cache}"
echo "ci-bench: venv ${venv}, JAX compilation cache ${jax_cache}"
if [ -n "${GITHUB_ENV:-}" ]; then
  {
    echo "CI_BENCH_VENV=${venv}"
    echo "CI_BENCH_JAX_CACHE=${jax_cache}"
  } >> "${GITHUB_ENV}"
fi
