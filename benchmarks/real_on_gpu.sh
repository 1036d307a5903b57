#!/bin/bash
# The GPU figures of prhsim real (docs/real.md, "Throughput"), in one call on a machine with one NVIDIA GPU:
# the training step against the padded eager baseline, eager and compiled, then the whole pipeline once
# (prhsim real smoke: export, DINOv2-S/14 features, one epoch of good-view BERT-S at batch 256, evaluation),
# then prhsim prh extract against the model alone for random BERT-B and DINOv2-B/14 (bench_extract.py).
#
#   bash benchmarks/real_on_gpu.sh [OUT]        # OUT (default real-gpu) receives the five reports
set -euo pipefail
out=${1:-real-gpu}
mkdir -p "$out"
python benchmarks/bench_real_step.py --model bert-s --batch-size 256 --steps 20 2>&1 | tee "$out/step-eager.txt"
python benchmarks/bench_real_step.py --model bert-s --batch-size 256 --steps 20 --compile default 2>&1 \
    | tee "$out/step-compiled.txt"
python -m prhsim real smoke --out "$out/smoke" --compile default 2>&1 | tee "$out/smoke.txt"
cp "$out/smoke/smoke.json" "$out/smoke.json"
for m in bert-b dinov2-b; do python benchmarks/bench_extract.py --device cuda --model "$m" 2>&1 | tee "$out/extract-$m.txt"; done
