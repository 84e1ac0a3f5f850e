#!/usr/bin/env bash
# The device check for NVIDIA GPUs (issue 40): one script, under 5 minutes on one H200.
#
# On a GPU machine that reaches no package index (Python 3.12, jax 0.11.2, jaxlib, the CUDA
# 13 plugin, Triton, numpy preinstalled; no pydantic, PyGithub, ruptures, tomlkit), run from
# the repository's root with the wheels of benchmarks/gpu_device_wheels.sh carried in DIR:
#
#   benchmarks/gpu_device_check.sh --wheels .whl --out "$OUT"
#
# It installs ci-bench with --no-deps beside those wheels (into a folder of its own, nothing
# of the machine's changed), then on the smoke profile of the project's kernels:
#   1. lower --platform cuda as the GPU (Triton / Mosaic GPU as each kernel chose)
#   2. analyze --chip GPU (the cost model: modelled time, physical floor)
#   3. run with the wallclock timer, then with the profiler timer (device events)
#   4. CUPTI's kernel times (jax's Mosaic GPU profiler), forward cases
# and prints per case: device time vs wall clock, CUPTI, measured vs modelled vs the floor,
# correctness; then modelled/measured per kernel (benchmarks/gpu_device_report.py). Every
# step's exit code is printed; a failed step does not stop the next. It is also the first
# run of ci-bench under jax 0.11 (the versions are printed first).
#
# Options: --wheels DIR (default .whl), --out DIR (default ./gpu-check), --chip NAME (the
# GPU's name in ci-bench's table, default h200), --repeats N (default 20), --python PY
# (default python3), --site DIR (where ci-bench and the wheels go, default
# /tmp/ci-bench-site), --dry-run (print the steps, run nothing). Exit: 0 when every step
# ran, 1 when one failed, 2 for bad arguments.
set -uo pipefail

wheels=.whl out=./gpu-check chip=h200 repeats=20 python=python3 site=/tmp/ci-bench-site
dry=0
usage() { echo "usage: $0 [--wheels DIR] [--out DIR] [--chip NAME] [--repeats N] [--python PY] [--site DIR] [--dry-run]" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --wheels|--out|--chip|--repeats|--python|--site)
      [ $# -ge 2 ] || { echo "$0: $1 needs a value" >&2; usage; }
      case "$1" in
        --wheels) wheels=$2 ;; --out) out=$2 ;; --chip) chip=$2 ;;
        --repeats) repeats=$2 ;; --python) python=$2 ;; --site) site=$2 ;;
      esac
      shift 2 ;;
    --dry-run) dry=1; shift ;;
    -h|--help) sed -n '2,26p' "$0"; exit 0 ;;
    *) echo "$0: unknown argument $1" >&2; usage ;;
  esac
done
case "$repeats" in ''|*[!0-9]*|0) echo "$0: --repeats wants a positive integer, got $repeats" >&2; exit 2 ;; esac
case "$chip" in h100|h200|b200) ;; *) echo "$0: --chip wants h100, h200 or b200, got $chip" >&2; exit 2 ;; esac
[ -f pyproject.toml ] && [ -d ci_bench ] || { echo "$0: run it from ci-bench's repository root" >&2; exit 2; }

failed=0
step() {  # step NAME COMMAND...: run (or print) one step, its exit code and seconds
  local name=$1; shift
  echo "== $name: $*"
  [ "$dry" = 1 ] && return 0
  local start=$SECONDS
  "$@"
  local rc=$?
  echo "== $name: exit $rc in $((SECONDS - start)) s"
  [ "$rc" = 0 ] || failed=1
  return 0
}

[ "$dry" = 1 ] || mkdir -p "$out" "$site"
if [ "$dry" = 0 ] && ! ls "$wheels"/*.whl >/dev/null 2>&1; then
  echo "$0: no wheels in $wheels (benchmarks/gpu_device_wheels.sh $wheels, on a machine with pip)" >&2
  exit 2
fi
# ci-bench (its wheel, built from this tree by gpu_device_wheels.sh) and its missing
# dependencies into a folder of their own, --no-deps; the kernels are read from here.
step install "$python" -m pip install -q --no-index --no-deps --no-compile \
  --no-cache-dir --upgrade --target "$site" "$wheels"/*.whl
if [ "$dry" = 0 ] && ! ls "$wheels"/ci_bench-*.whl >/dev/null 2>&1; then
  step install-ci-bench "$python" -m pip install -q --no-index --no-deps --no-build-isolation \
    --no-compile --no-cache-dir --upgrade --target "$site" .
fi
export PYTHONPATH="$site:$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
ci=("$python" -m ci_bench.commands.cli)
step versions "$python" -c "import jax, jaxlib, ci_bench, sys; print('python', sys.version.split()[0], 'jax', jax.__version__, 'jaxlib', jaxlib.__version__, 'ci-bench', ci_bench.__version__, 'from', ci_bench.__file__, jax.devices())"
step lower "${ci[@]}" lower --platform cuda --profile smoke --chip "$chip" -q -o "$out/lower.json" --force
step analyze "${ci[@]}" analyze --chip "$chip" --profile smoke -q -o "$out/analysis.json" --force
step run-wallclock "${ci[@]}" run --profile smoke --timer wallclock --repeats "$repeats" -o "$out/wall.json" --force
step run-profiler "${ci[@]}" run --profile smoke --timer profiler --repeats "$repeats" -o "$out/device.json" --force
step cupti "$python" benchmarks/gpu_cupti_check.py "$out/cupti.json" --iterations "$repeats"
step report "$python" benchmarks/gpu_device_report.py "$out" --chip "$chip"
exit "$failed"
