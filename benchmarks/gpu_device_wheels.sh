#!/usr/bin/env bash
# The wheels benchmarks/gpu_device_check.sh installs on a GPU machine that reaches no
# package index: ci-bench's dependencies that machine lacks (its image has jax 0.11.2 with
# the CUDA 13 plugin, numpy, scipy, tabulate, absl-py, requests; no pydantic, PyGithub,
# ruptures, tomlkit), for CPython 3.12 on x86-64 Linux, downloaded here into DIR (default
# .whl, which .git/info/exclude should ignore) to be carried with the working tree; and
# ci-bench's own wheel, built here from this working tree (pure Python; that machine's
# setuptools may predate the one pyproject.toml needs). Run it again after a change.
# Usage: benchmarks/gpu_device_wheels.sh [DIR]
set -euo pipefail
dir=${1:-.whl}
mkdir -p "$dir"
platforms=()
for p in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64 \
         manylinux2014_x86_64 manylinux1_x86_64 manylinux_2_34_x86_64; do
  platforms+=(--platform "$p")
done
# One version of each (two stop the install there); pinned to what this repository tests.
wanted=(
  pydantic==2.14.4 pydantic-core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5
  PyGithub==2.10.0 PyJWT==2.15.1 PyNaCl==1.6.2 cryptography==50.0.2 cffi==2.1.1
  pycparser==3.12 Deprecated==1.3.1 ruptures==1.1.10 tomlkit==0.15.2
)
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
  --implementation cp "${platforms[@]}" -d "$dir" "${wanted[@]}"
rm -f "$dir"/ci_bench-*.whl
python3 -m pip wheel -q --no-deps -w "$dir" .
du -sh "$dir"
