#!/usr/bin/env bash
# Set up ci-bench for a workflow job, with the venv and JAX's compilation cache OUTSIDE the
# workspace, so they survive actions/checkout's `git clean -ffdx` on self-hosted runners.
#
#   scripts/ci_venv.sh CONSTRAINTS TARGET [REQUIREMENT...]
#   scripts/ci_venv.sh constraints/tpu.txt . "jax[tpu]"     (TPU jobs)
#   scripts/ci_venv.sh - ".[plot]"                          (report job: no constraints)
# TARGET is installed editable (this checkout); REQUIREMENTs beside it.
#
# Cache root: $CI_BENCH_CACHE, else $RUNNER_TOOL_CACHE/ci-bench, else ~/.cache/ci-bench.
#   venv-<key>/   dependencies; key = hash of CONSTRAINTS, pyproject.toml, the arguments and the
#                 workspace path (the editable install points at it), so a runner never
#                 shares one with another runner's workspace.
#   jax-<versions>/  JAX's persistent compilation cache, one per jax/jaxlib/libtpu triple.
# Writes CI_BENCH_VENV and CI_BENCH_JAX_CACHE to $GITHUB_ENV for the later steps.
set -euo pipefail

constraints="${1:--}"
target="${2:-.}"
shift 2 || shift $#
if [ "${constraints}" = "-" ]; then constraints=""; fi
root="${CI_BENCH_CACHE:-${RUNNER_TOOL_CACHE:-${HOME}/.cache}/ci-bench}"
mkdir -p "${root}"

key="$({ [ -n "${constraints}" ] && cat "${constraints}"; cat pyproject.toml
        echo "target=${target} requirements=$* workspace=${PWD}"; } | sha256sum | cut -c1-16)"
venv="${root}/venv-${key}"
pip_args=(-q)
if [ -n "${constraints}" ]; then pip_args+=(-c "${constraints}"); fi

# One job at a time per venv: two runners sharing CI_BENCH_CACHE wait for each other here.
exec 9>"${venv}.lock"
flock 9
if [ ! -f "${venv}/.complete" ]; then
  rm -rf "${venv}"
  python3 -m venv "${venv}"
  "${venv}/bin/pip" install "${pip_args[@]}" --upgrade pip
  "${venv}/bin/pip" install "${pip_args[@]}" -e "${target}" "$@"
  touch "${venv}/.complete"
else
  # Dependencies are cached; only ci-bench itself (this checkout) is re-linked.
  "${venv}/bin/pip" install "${pip_args[@]}" --no-deps -e "${target}"
fi
flock -u 9

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
jax_cache="${root}/jax-${versions}"
mkdir -p "${jax_cache}"
echo "ci-bench: venv ${venv}, JAX compilation cache ${jax_cache}"
if [ -n "${GITHUB_ENV:-}" ]; then
  {
    echo "CI_BENCH_VENV=${venv}"
    echo "CI_BENCH_JAX_CACHE=${jax_cache}"
  } >> "${GITHUB_ENV}"
fi
