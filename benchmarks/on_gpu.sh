#!/usr/bin/env bash
# The GPU work, most needed first, for a lent GPU machine: call it from the last block of the
# on-device script that brings DALI there (`bash benchmarks/on_gpu.sh "$OUT"`), after the C++
# operators are built. It fits one call of 600 s with the unpacking and the build:
#   1. the chain's pixel stages in the library's GPU operator: its check against DALI's
#      operators, then the heavy recipes timed with it and without (gpu_probe --tail, ~3 min);
#   2. every GPU check, then the bench with timm's recipe too (check-gpu --bench, the rest).
#   3. the augmentation operator's order of samples on 16 threads (augment_order, seconds).
# What each writes lands under OUT (tail.txt, probe-extra.json, check/, order.txt).
set -u
OUT=${1:-${OUT:-/tmp/out}}
mkdir -p "$OUT"
noise="ROI decode with fancy\|making JPEGs"
timeout 230 python3 -m benchmarks.gpu_probe --tail 2>&1 | grep -v "$noise" | tee "$OUT/tail.txt"
timeout 280 python3 -m dali_loaders check-gpu --bench --recipe default --recipe resnet50 --recipe timm-ra \
  --out "$OUT/check" --budget 250 2>&1 | grep -v "$noise" | tail -70
# 3. the augmentation operator's sample order on this machine's threads (seconds)
timeout 30 python3 -m benchmarks.augment_order --threads 16 --batch 128 --batches 20 --rounds 3 2>&1 | tee "$OUT/order.txt"
