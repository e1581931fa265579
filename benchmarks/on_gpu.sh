#!/usr/bin/env bash
# The GPU work, most needed first, for a lent GPU machine: call it from the last block of the
# on-device script that brings DALI there (`bash benchmarks/on_gpu.sh "$OUT" 1`, then in a second
# call on the same machine `... "$OUT" 2`), after the C++ operators are built. Each part fits one
# call of 600 s with the unpacking and the build:
#   part 1: a. the heavy recipes' files decoded on the GPU for their CPU steps ("gpu-decode"):
#              its check-gpu rows, then timed against decoding on the CPU and torchvision
#              (gpu_probe --decode, ~2.5 min);
#           b. the chain's pixel stages in the library's GPU operator: its check against DALI's
#              operators, then the heavy recipes timed with it and without (gpu_probe --tail, ~3 min);
#   part 2: every GPU check, then the bench with timm's recipe too (check-gpu --bench), and the
#           augmentation operator's order of samples on 16 threads (augment_order, seconds).
# What each writes lands under OUT (decode.txt, tail.txt, probe-extra*.json, check/, order.txt).
set -u
OUT=${1:-${OUT:-/tmp/out}}
PART=${2:-1}
mkdir -p "$OUT"
noise="ROI decode with fancy\|making JPEGs"
if [ "$PART" = 1 ]; then
  OUT=$OUT timeout 240 python3 -m benchmarks.gpu_probe --decode 2>&1 | grep -v "$noise" | tee "$OUT/decode.txt"
  mv "$OUT/probe-extra.json" "$OUT/probe-extra-decode.json" 2>/dev/null
  OUT=$OUT timeout 250 python3 -m benchmarks.gpu_probe --tail 2>&1 | grep -v "$noise" | tee "$OUT/tail.txt"
else
  timeout 480 python3 -m dali_loaders check-gpu --bench --recipe default --recipe resnet50 --recipe timm-ra \
    --out "$OUT/check" --budget 450 2>&1 | grep -v "$noise" | tail -90
  timeout 30 python3 -m benchmarks.augment_order --threads 16 --batch 128 --batches 20 --rounds 3 2>&1 | tee "$OUT/order.txt"
fi
