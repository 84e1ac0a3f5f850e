#!/usr/bin/env bash
# Issue 53 on a TPU host: this repository's kernels against XLA, on the chip, through the
# commands a user runs. Steps (any subset, in order; each under its own time limit):
#   gla-run   ci-bench run --profile ci --kernel gla       (Pallas against XLA's chunked GLA)
#   gla-fwd   the same, forward cases only
#   gla-tune  ci-bench tune --measure over GLA's chunk sizes (two ci cases, both dtypes)
#   mm-tune   ci-bench tune --measure 4 --write over every forward case of matmul's full
#             profile: the tuned file, copied to OUT
#   mm-tune-ci  the same over matmul's ci profile only (its 14 forward cases)
#   mm-tune-big the same over the full profile's forward cases from 1024³ up that the ci
#             profile lacks (B4, B16 of 1024³; 4096³), tiles 256-2048
#   gla-tune-ci ci-bench tune --measure 5 --write over GLA's bfloat16 ci forward cases
#   mm-tune-bwd ci-bench tune --measure 4 --write over the ci profile's backward cases (tiles
#             per problem dimension, 128-1024)
#   mm-tune-big-bwd the same over the full profile's backward cases from 1024³ up (256-1024:
#             K is an output dimension of both backward products, so its tile sets re-reads)
#   mm-tune-f32-bwd  the same over the full profile's float32 backward cases of 1024³ and
#             4096³ (tiles 256-1024): what the fused backward's float32 entries came from
#   mm-tune-1024-bf16  ci-bench tune --measure 4 --write over the full profile's bfloat16
#             forward cases of 1024³ (tiles 128-1024), at the model revision checked out
#   mm-tune-tail  ci-bench tune --measure 4 --write over the ci profile's B4-513³ cases, forward
#             and backward, tiles 128, 640 and 1024 (640: one block per 513 dimension, which
#             no power of two gives unfolded): what matmul 0.6.0's tuned file holds for them
#   mm-tune-whole-bwd  ci-bench tune --measure 4 --write over the ci profile's 513³ backward
#             cases, tiles 128, 512 and 1024 (1024: each dimension one whole 513 block, the
#             fused backward since matmul 0.8.0)
#   mm-tune-b16-f32-bwd  ci-bench tune --measure 8 --write over B16-1024³ float32's backward
#             (tiles 256-1024), then that case's full-profile run
#   mm-promote  ci-bench run --profile ci --kernel matmul, promoted (--tag "$TAG", default v0.4.0)
#   mm-1024-bf16  ci-bench run --profile full over 1024³ bfloat16, every mode
#   mm-1024   the same over 1024³ in both dtypes (B1, B4, B16; every mode)
#   mm-layouts  benchmarks/tpu_matmul_layouts.py: the matmul and XLA's at 513³ in the layouts
#             XLA stores them in, and row-major (what XLA's relayout copies cost)
#   mm-middle  benchmarks/tpu_matmul_batch_middle.py: the layouts the chip stores the profile's
#             batched shapes in, and the DMA kernel at 513³ reading XLA's batch-middle layout
#             (no relayout copies), forward and backward, beside the shipped kernel and XLA's
#   mm-middle-full  ci-bench run --profile full over the float32 cases whose arrays the chip
#             stores batch-middle (B4 and B16 of 127³, B16 of 513³; every mode): the DMA kernel
#   mm-profile-513  ci-bench profile of B4-513³'s float32 forward and backward, table and
#             JSON: the line on what runs beside the Pallas kernels (XLA's relayout copies)
#   mm-compare-prev  ci-bench compare of mm-promote's run against the baseline of the
#             version before ($PREV), as markdown: what the version changed on the chip
#   mm-f32    ci-bench run --profile full over 4096³ and B16-1024³ float32, every mode
#   gla-tune-all  ci-bench tune --measure 5 --write over every GLA ci forward case, both dtypes
#   gla-promote  ci-bench run --profile ci --kernel gla, promoted (--tag "$TAG", default v0.2.0)
#   gla-repromote  the GLA ci run (resumed once if its limit stops it), compared with the
#             shipped baseline, then promoted over it (--force, --tag "$TAG"): a new model
#             revision's figures for the same kernel
#   mm-depth  benchmarks/tpu_matmul_entrywise_depth.py: the DMA matmul by entries in VMEM
#   mm-whole-entry  benchmarks/tpu_matmul_whole_entry.py: the DMA matmul reading row-major
#             batched arrays (B4 and B16 of 1024³ and 128³, both dtypes, forward and
#             backward) beside the shipped tiles and XLA: whether B16-1024³ float32's
#             backward (1.25x XLA's tiled) is the pipeline's (1024³; -small: 128³)
#   hbm-streams  benchmarks/tpu_microbench_dma.py hbm-*: HBM rate by the streams a pipeline keeps
#             in flight (issue 51: tgmm's 783 GB/s against the model's 656.6)
#   hbm-shapes  benchmarks/tpu_microbench_hbm.py's hbm-shapes: strided against whole-row blocks,
#             tgmm's mix and grid with a copy body, a dot body, and megablox tgmm itself
#             (to OUT/hbm-shapes/microbench_dma.json)
#   mxu-chain  benchmarks/tpu_microbench_latency.py's mxu-chain: small dependent MXU products
#             a loop iteration (paged attention's q.k, exp, p.v without its copies)
#             (to OUT/mxu-chain/microbench_dma.json)
#   gla-precision  benchmarks/tpu_gla_precision.py: float32 GLA at HIGHEST against one pass
#   ci-compare  ci-bench run --profile ci, then ci-bench compare against baselines/ (markdown)
#   mm-run    ci-bench run --profile full --kernel matmul  (reads the tuned file if written)
#   mm-big    the same, its cases from 1024³ up only (issue 53's bar), to OUT/mm_big_N.json
#             (about 330 s on a v5e: alone in a call; 280 s stopped it at 32 of 36 cases)
#   vmem-probe  benchmarks/tpu_vmem_probe.py: the VMEM Mosaic needs per matmul tiling
#   vmem-probe-narrow  the same for bn 128 and one k step (to OUT/narrow/vmem_probe.json)
#   mm-ci     ci-bench run --profile ci --kernel matmul    (reads the tuned file if written)
#   mm-ci-compare  the same, then ci-bench compare against the shipped baseline (markdown)
#   gla-variants  benchmarks/tpu_gla_variants.py: the forward body's variants, timed and checked
#   model-validation  benchmarks/tpu_model_validation.py: the cost model against the chip
#   remodel-check  ci-bench remodel --check of the current baselines on the chip, the kernels
#             at ${AT:-HEAD}: "unchanged" when the model on the chip still writes what the
#             chip's runs wrote, or what `remodel --deviceless v5e` wrote on a CPU (revision
#             10's figures: the chip confirms the deviceless layouts); stale: exit 1; then
#             the remodel itself to OUT
#   ci-run    ci-bench run --profile ci (every kernel), to OUT/ci_N.json: N counts the runs
#   full      ci-bench run --profile full (every kernel): what a release tag promotes
#   benchmarks/tpu_kernels_check.sh OUT STEP...     # on the TPU host, from the repo's root
set -uo pipefail
out=${1:?usage: tpu_kernels_check.sh OUT STEP...}; shift
mkdir -p "$out"
log=$out/kernels.txt
step() {  # limit (s), label, then the command
  local limit=$1 label=$2; shift 2
  echo "== $label: $*" | tee -a "$log"
  local start=$SECONDS
  timeout "$limit" "$@" >>"$log" 2>&1
  echo "(exit $?, $((SECONDS - start)) s)" | tee -a "$log"
}
kernel_version() { python -c "import kernels.$1 as k; print(k.VERSION)"; }
for name in "$@"; do
  case $name in
  gla-run) step 300 gla-run ci-bench run --profile ci --kernel gla -o "$out/gla_ci.json" ;;
  gla-fwd)
    step 200 gla-fwd ci-bench run --profile ci --kernel gla --case 'gla/*/float32' \
      --case 'gla/*/bfloat16' -o "$out/gla_ci_forward.json" ;;
  gla-tune)
    step 300 gla-tune ci-bench tune --kernel gla --profile ci --chip v5e --measure 5 \
      --case 'gla/B1-T1024-H4-K64-V64/bfloat16' --case 'gla/B1-T1024-H4-K64-V64/float32' \
      --case 'gla/B4-T1024-H8-K128-V128/bfloat16' -o "$out/gla_tune.json" ;;
  mm-tune)  # a batch size at a time, so a time limit keeps the configs already written
    for batch in 1 4 16; do
      step 240 "mm-tune-B$batch" ci-bench tune --kernel matmul --profile full --chip v5e \
        --measure 4 --case "matmul/B$batch-*/bfloat16" --case "matmul/B$batch-*/float32" \
        --write --force -o "$out/mm_tune_B$batch.json"
      cp baselines/matmul_v*.tuned.v5e.json "$out/"
    done ;;
  mm-tune-ci)
    # Tiles to 1024: the ci profile's largest dimension is 1024, and a larger tile is the
    # same program (tiles are upper bounds). --write keeps each case as it is done.
    sizes=128,256,512,1024
    step 300 mm-tune-ci ci-bench tune --kernel matmul --profile ci --chip v5e --measure 4 \
      --case 'matmul/*/bfloat16' --case 'matmul/*/float32' --write --force \
      --values block_m=$sizes --values block_k=$sizes --values block_n=$sizes \
      -o "$out/mm_tune_ci.json"
    cp baselines/matmul_v*.tuned.v5e.json "$out/" ;;
  mm-tune-big)
    sizes=256,512,1024,2048
    step 280 mm-tune-big ci-bench tune --kernel matmul --profile full --chip v5e --measure 4 \
      --case 'matmul/B*-M4096-K4096-N4096/*[0-9]' \
      --case 'matmul/B4-M1024-K1024-N1024/*[0-9]' --case 'matmul/B16-M1024-K1024-N1024/*[0-9]' \
      --write --force \
      --values block_m=$sizes --values block_k=$sizes --values block_n=$sizes \
      -o "$out/mm_tune_big.json"
    cp baselines/matmul_v*.tuned.v5e.json "$out/" ;;
  mm-tune-bwd)
    step 280 mm-tune-bwd ci-bench tune --kernel matmul --profile ci --chip v5e --measure 4 \
      --case 'matmul/*/backward' --write --force --values block_m=512,1024 \
      --values block_k=128,256,512 --values block_n=512,1024 -o "$out/mm_tune_bwd.json"
    cp baselines/matmul_v*.tuned.v5e.json "$out/" ;;
  mm-tune-big-bwd)
    sizes=256,512,1024
    step 400 mm-tune-big-bwd ci-bench tune --kernel matmul --profile full --chip v5e --measure 4 \
      --case 'matmul/B*-M4096-K4096-N4096/*/backward' \
      --case 'matmul/B4-M1024-K1024-N1024/*/backward' \
      --case 'matmul/B16-M1024-K1024-N1024/*/backward' --write --force \
      --values block_m=$sizes --values block_k=$sizes --values block_n=$sizes \
      -o "$out/mm_tune_big_bwd.json"
    cp baselines/matmul_v*.tuned.v5e.json "$out/" ;;
  mm-tune-f32-bwd)
    sizes=256,512,1024
    step 300 mm-tune-f32-bwd ci-bench tune --kernel matmul --profile full --chip v5e \
      --measure 4 --case 'matmul/B*-M4096-K4096-N4096/float32/backward' \
      --case 'matmul/B*-M1024-K1024-N1024/float32/backward' --write --force \
      --values block_m=$sizes --values block_k=$sizes --values block_n=$sizes \
      -o "$out/tune_f32_bwd.json"
    cp baselines/matmul_v*.tuned.v5e.json "$out/" ;;
  mm-tune-1024-bf16)
    sizes=128,256,512,1024
    step 200 mm-tune-1024-bf16 ci-bench tune --kernel matmul --profile full --chip v5e \
      --measure 4 --case 'matmul/B*-M1024-K1024-N1024/bfloat16' --write --force \
      --values block_m=$sizes --values block_k=$sizes --values block_n=$sizes \
      -o "$out/tune_1024_bf16.json"
    cp baselines/matmul_v*.tuned.v5e.json "$out/" ;;
  mm-tune-tail)
    sizes=128,640,1024
    step 200 mm-tune-tail ci-bench tune --kernel matmul --profile ci --chip v5e --measure 4 \
      --case 'matmul/B4-M513-K513-N513/*' --write --force \
      --values block_m=$sizes --values block_k=$sizes --values block_n=$sizes \
      -o "$out/tune_tail.json"
    cp "baselines/matmul_v$(kernel_version matmul).tuned.v5e.json" "$out/" ;;
  mm-tune-whole-bwd)
    sizes=128,512,1024
    step 200 mm-tune-whole-bwd ci-bench tune --kernel matmul --profile ci --chip v5e \
      --measure 4 --case 'matmul/B*-M513-K513-N513/*/backward' --write --force \
      --values block_m=$sizes --values block_k=$sizes --values block_n=$sizes \
      -o "$out/tune_whole_bwd.json"
    cp "baselines/matmul_v$(kernel_version matmul).tuned.v5e.json" "$out/" ;;
  mm-tune-b16-f32-bwd)
    sizes=256,512,1024
    step 240 mm-tune-b16-f32-bwd ci-bench tune --kernel matmul --profile full --chip v5e \
      --measure 8 --case 'matmul/B16-M1024-K1024-N1024/float32/backward' --write --force \
      --values block_m=$sizes --values block_k=$sizes --values block_n=$sizes \
      -o "$out/tune_b16_f32_bwd.json"
    cp "baselines/matmul_v$(kernel_version matmul).tuned.v5e.json" "$out/"
    step 120 mm-b16-f32-bwd ci-bench run --profile full --kernel matmul \
      --case 'matmul/B16-M1024-K1024-N1024/float32/backward' -o "$out/mm_b16_f32_bwd.json" ;;
  mm-promote)
    step 200 mm-promote ci-bench run --profile ci --kernel matmul -o "$out/mm_ci.json"
    step 120 mm-promote-resume ci-bench run --profile ci --kernel matmul \
      --resume "$out/mm_ci.json"
    step 60 mm-promote-write ci-bench promote "$out/mm_ci.json" --tag "${TAG:-v0.4.0}"
    cp "baselines/matmul_v$(kernel_version matmul).json" "$out/" ;;
  mm-1024-bf16)
    step 200 mm-1024-bf16 ci-bench run --profile full --kernel matmul \
      --case 'matmul/*-M1024-*/bfloat16' --case 'matmul/*-M1024-*/bfloat16/*' \
      -o "$out/mm_1024_bf16.json" ;;
  mm-1024)
    step 300 mm-1024 ci-bench run --profile full --kernel matmul \
      --case 'matmul/*-M1024-*' --case 'matmul/*-M1024-*/*' -o "$out/mm_1024.json" ;;
  mm-layouts) step 200 mm-layouts python benchmarks/tpu_matmul_layouts.py --out "$out" ;;
  mm-middle) step 300 mm-middle python benchmarks/tpu_matmul_batch_middle.py --out "$out" ;;
  mm-middle-full)
    step 200 mm-middle-full ci-bench run --profile full --kernel matmul \
      --case 'matmul/B4-M127-K127-N127/float32*' --case 'matmul/B16-M127-K127-N127/float32*' \
      --case 'matmul/B16-M513-K513-N513/float32*' -o "$out/mm_middle_full.json" ;;
  mm-profile-513)
    for mode in float32 float32/backward; do
      step 120 "mm-profile-513 $mode" ci-bench profile --kernel matmul --profile ci \
        --case "matmul/B4-M513-K513-N513/$mode" --out "$out/profile_513"
      step 120 "mm-profile-513 $mode json" ci-bench profile --kernel matmul --profile ci \
        --case "matmul/B4-M513-K513-N513/$mode" --format json --out "$out/profile_513_json"
    done ;;
  mm-compare-prev)
    step 60 mm-compare-prev ci-bench compare "$out/mm_ci.json" \
      --baseline-version "${PREV:?PREV: the version to compare with}" \
      --markdown "$out/mm_compare_prev.md" ;;
  mm-f32)
    step 280 mm-f32 ci-bench run --profile full --kernel matmul \
      --case 'matmul/*-M4096-*/float32' --case 'matmul/*-M4096-*/float32/*' \
      --case 'matmul/B16-M1024-*/float32' --case 'matmul/B16-M1024-*/float32/*' \
      -o "$out/mm_f32.json" ;;
  gla-tune-all)
    step 200 gla-tune-all ci-bench tune --kernel gla --profile ci --chip v5e --measure 5 \
      --case 'gla/*/bfloat16' --case 'gla/*/float32' --write --force \
      -o "$out/gla_tune_ci.json"
    cp baselines/gla_v*.tuned.v5e.json "$out/" ;;
  gla-promote)
    step 300 gla-promote ci-bench run --profile ci --kernel gla -o "$out/gla_ci.json"
    step 60 gla-promote-write ci-bench promote "$out/gla_ci.json" --tag "${TAG:-v0.2.0}"
    cp baselines/gla_v*.json "$out/" ;;
  gla-repromote)  # the same kernel at a new model revision: compared, then promoted over it
    step 330 gla-repromote-run ci-bench run --profile ci --kernel gla -o "$out/gla_ci.json"
    step 150 gla-repromote-resume ci-bench run --profile ci --kernel gla \
      --resume "$out/gla_ci.json"
    step 60 gla-repromote-compare ci-bench compare "$out/gla_ci.json" \
      --markdown "$out/gla_compare.md"
    step 60 gla-repromote-write ci-bench promote "$out/gla_ci.json" \
      --tag "${TAG:?TAG: the release tag to record}" --force
    cp "baselines/gla_v$(kernel_version gla).json" "$out/" ;;
  mm-depth)
    step 200 mm-depth python benchmarks/tpu_matmul_entrywise_depth.py --out "$out" --repeats 30 ;;
  gla-precision)
    step 300 gla-precision python benchmarks/tpu_gla_precision.py --out "$out" ;;
  ci-compare)
    step 430 ci-compare-run ci-bench run --profile ci -o "$out/ci.json"
    step 60 ci-compare ci-bench compare "$out/ci.json" --markdown "$out/compare.md" ;;
  mm-big)
    n=1; while [ -e "$out/mm_big_$n.json" ]; do n=$((n + 1)); done
    step 420 "mm-big-$n" ci-bench run --profile full --kernel matmul --case 'matmul/*-M1024-*' \
      --case 'matmul/*-M1024-*/*' --case 'matmul/*-M4096-*' --case 'matmul/*-M4096-*/*' \
      -o "$out/mm_big_$n.json" ;;
  vmem-probe)
    step 140 vmem-probe python benchmarks/tpu_vmem_probe.py --out "$out" --deadline 125 ;;
  vmem-probe-narrow)
    mkdir -p "$out/narrow"
    step 140 vmem-probe-narrow python benchmarks/tpu_vmem_probe.py --set narrow \
      --out "$out/narrow" --deadline 125 ;;
  gla-tune-ci)
    step 130 gla-tune-ci ci-bench tune --kernel gla --profile ci --chip v5e --measure 5 \
      --case 'gla/*/bfloat16' --write --force -o "$out/gla_tune_ci.json"
    cp baselines/gla_v*.tuned.v5e.json "$out/" ;;
  ci-run)
    n=1; while [ -e "$out/ci_$n.json" ]; do n=$((n + 1)); done
    step 400 "ci-run-$n" ci-bench run --profile ci -o "$out/ci_$n.json" ;;
  mm-ci) step 150 mm-ci ci-bench run --profile ci --kernel matmul -o "$out/mm_ci.json" ;;
  mm-ci-compare)
    step 230 mm-ci-compare-run ci-bench run --profile ci --kernel matmul -o "$out/mm_ci.json"
    step 60 mm-ci-compare ci-bench compare "$out/mm_ci.json" --markdown "$out/mm_compare.md" ;;
  remodel-check)  # the current versions' baselines (older ones: another kernel at HEAD)
    files=(baselines/matmul_v"$(kernel_version matmul)".json baselines/gla_v"$(kernel_version gla)".json)
    step 200 remodel-check ci-bench remodel "${files[@]}" --check --at "${AT:-HEAD}"
    mkdir -p "$out/remodelled" && cp "${files[@]}" "$out/remodelled/" &&
      step 200 remodel ci-bench remodel "$out/remodelled" --at "${AT:-HEAD}" ;;
  gla-variants) step 300 gla-variants python benchmarks/tpu_gla_variants.py --out "$out" ;;
  mm-whole-entry)
    step 300 mm-whole-entry python benchmarks/tpu_matmul_whole_entry.py --sizes 1024 \
      --out "$out" ;;
  mm-whole-entry-small)
    step 200 mm-whole-entry-small python benchmarks/tpu_matmul_whole_entry.py --sizes 128 \
      --out "$out/small" ;;
  hbm-streams)
    step 120 hbm-streams python benchmarks/tpu_microbench_dma.py --out "$out/hbm" \
      --only hbm-streams,hbm-blocks,hbm-xla ;;
  hbm-shapes)
    step 120 hbm-shapes python benchmarks/tpu_microbench_dma.py --out "$out/hbm-shapes" \
      --only hbm-shapes ;;
  mxu-chain)
    step 120 mxu-chain python benchmarks/tpu_microbench_dma.py --out "$out/mxu-chain" \
      --only mxu-chain ;;
  model-validation)
    step 200 model-validation python benchmarks/tpu_model_validation.py --out "$out" \
      --deadline 170 ;;
  mm-run) step 420 mm-run ci-bench run --profile full --kernel matmul -o "$out/mm_full.json" ;;
  full) step 560 full ci-bench run --profile full -o "$out/full.json" ;;
  *) echo "unknown step $name" >&2; exit 2 ;;
  esac
done
tail -c 6000 "$log"
