#!/usr/bin/env bash
# Issue 52 on a TPU host: a pull request that shrinks the matmul's tiles (512³ -> 128³),
# A/B'd with `unit-metrics = true` as the pull request's A/B job runs it: the verdict, then
# both sides' unit metrics and the comment's section saying what moved.
#   benchmarks/tpu_unit_metrics_ab.sh OUT      # on the TPU host, from the repo's root
set -uo pipefail
out=${1:?usage: tpu_unit_metrics_ab.sh OUT}; repo=$(mktemp -d)/pr
mkdir -p "$out" "$repo"
export PYTHONPATH="$PWD:${PYTHONPATH:-}"  # this repository's kernels/ for the toy to import
toy() {  # version, tile
  cat <<PY
import dataclasses
from kernels.matmul import SPEC as MATMUL, BlockSizes, tiled
SPEC = dataclasses.replace(MATMUL, name="toy", version="$1", pallas=tiled(BlockSizes($2, $2, $2)))
PY
}
cd "$repo" && git init -q -b main && git config user.email t@example.com && git config user.name t
printf '[tool.ci-bench]\nkernels = ["toy"]\nunit-metrics = true\nab-repeats = 50\n' >pyproject.toml
toy 0.1.0 512 >toy.py && git add . && git commit -qm "512³ tiles"
git checkout -qb pr && toy 0.2.0 128 >toy.py && git commit -qam "128³ tiles"
start=$SECONDS
ci-bench ab --base main --profile ci --case toy/B1-M1024-K1024-N1024/bfloat16 -o "$out/ab.json" \
  --markdown "$out/ab.md" >"$out/ab.txt" 2>&1
echo "ab exit $?, $((SECONDS - start)) s" | tee -a "$out/ab.txt"
grep -v -i -e hugepage -e warnings.warn "$out/ab.txt" | tail -20
sed -n '/Unit metrics of/,/<\/details>/p' "$out/ab.md"
