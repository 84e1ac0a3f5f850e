#!/usr/bin/env bash
# Issue 52's check on a TPU host: `ci-bench profile` of the project's matmul at 1024³ bf16
# with 128³ and with 512³ tiles, and of the GLA forward (ci profile), as a user runs it;
# then packs what `--read` needs elsewhere (each trace and the kernel's LLO dump files).
#   benchmarks/tpu_profile_check.sh OUT [WORK]     # on the TPU host, from the repo's root
# OUT gets profile.txt (the printed tables), profile.json and profiles.tar.gz.
set -uo pipefail
out=${1:?usage: tpu_profile_check.sh OUT [WORK]}; work=${2:-/tmp/profile-check}
mkdir -p "$out" "$work"
case=matmul/B1-M1024-K1024-N1024/bfloat16
run() {  # label, then ci-bench profile's arguments
  local label=$1; shift
  echo "== $label: ci-bench profile $*" | tee -a "$out/profile.txt"
  local start=$SECONDS
  timeout 240 ci-bench profile "$@" --out "$work/$label" >>"$out/profile.txt" 2>&1
  echo "(exit $?, $((SECONDS - start)) s)" | tee -a "$out/profile.txt"
}
run matmul-t128 --case "$case" --set block_m=128,block_k=128,block_n=128
run matmul-t512 --case "$case" --set block_m=512,block_k=512,block_n=512
run gla-fwd --case gla/B1-T1024-H4-K64-V64/bfloat16
for label in matmul-t128 matmul-t512 gla-fwd; do
  ci-bench profile --read "$work/$label" --format json >"$out/$label.json" 2>&1
done
# The traces (GLA's is 20 MB: left out) and each kernel's dump files that --read uses.
(cd "$work" && find matmul-t128 matmul-t512 -name '*.xplane.pb' &&
  find . -path '*/llo/*' \( -name '*schedule-analysis_final_bundles.txt' \
    -o -name '*register-pressure.txt' -o -name '*-final_bundles.txt' \) \
    \( -name '*matmul_tiled*' -o -name '*chunk_gla*' \)) >"$work/pack.txt"
tar czf "$out/profiles.tar.gz" -C "$work" -T "$work/pack.txt"
cat "$out/profile.txt"
