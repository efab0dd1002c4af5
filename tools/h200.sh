#!/usr/bin/env bash
# One call on the GPU machine: build, then the stages named on the command line, logs under $OUT.
# The results record the sources' commit from git; where the machine's copy of .git lags the
# working tree, give it: FA_GIT_COMMIT=<git rev-parse HEAD, run here> tools/h200.sh ...
# Benchmark results land under $OUT; copy the ones that back a table into bench/results/.
#
#   tools/h200.sh tests sanitize bench memory        # stages: test suite random tests sanitize bench memory
#                                                    #         grid model decode dsweep examples sm90 ncu sm80tune
#                                                    #         fp32test ncusrc ncu80 decodegap quant trace longkeys
#
# test: the whole pytest suite; suite: the same on 16 workers with the tensors past 2³¹ elements
# afterwards on 2 (they need tens of GiB each), summaries and slowest tests in $OUT/suite*.log;
# random: tests/test_random.py's large profile (400 cases of N <= 4096 per CUDA kernel family);
# tests: file by file with time limits (tools/h200_tests.sh); examples: examples/*.py;
# sm90: the Hopper kernel's SASS census, smoke check, tests and tile sweep (tools/sm90/run.sh);
# ncu: Nsight Compute on the decode kernels and the Hopper kernel (tools/decode_ncu.sh, tools/sm90/ncu.sh);
# ncusrc: the Hopper kernel's warp stalls per SASS instruction (tools/sm90/ncu_source.sh); ncu80: the
# sm_80 kernel beside SDPA's flash backend at d = 256 (tools/sm80/ncu_compare.sh);
# sanitize: tests/sanitize.sh; bench: the full FlashAttention grid ($OUT/gpu.*, bench/results/gpu.*); grid: fa
# against SDPA flash and cuDNN on it ($OUT/gpu_sm90.*, bench/results/gpu_sm90.*); memory:
# bench/memory.py; model: bench/model.py ($OUT/model.*); decode: bench/decode.py ($OUT/decode.*);
# dsweep: the decode split-count sweep (tools/decode_sweep.py); decodegap: where a decode call's fixed
# cost goes, ours and cuDNN's (tools/decode_gap.py);
# sm80tune / fp32test: the standalone kernel harnesses; quant: the Hopper grid's last round, split by
# the rule, whole and forced into 2-4 parts (tools/sm90/quant.py); trace: where the Hopper kernel's tile time goes
# (tools/sm90/trace.py, clock64 stamps from a build with FA_SM90_TRACE); longkeys: accuracy over
# 2^25 + 1000 keys (tools/long_keys.py).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export MAX_JOBS=${MAX_JOBS:-16} PYTHONUNBUFFERED=1
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
stamp build
python3 -m pip install --no-build-isolation --no-deps -e . -q 2>&1 | grep -v -i warning | tail -5
status=0
for stage in "$@"; do
    stamp "$stage"
    case $stage in
    test) python3 -m pytest -q -n 16 tests 2>&1 | tee "$OUT/pytest.log" | tail -15 ;;
    suite) { # -v: each result is logged as it lands, so a run cut short by its limit still names its failures
             timeout 470 python3 -m pytest -v -n 16 -rfE --tb=short -p no:cacheprovider --durations=12 \
                 -k "not 2g_elements" tests > "$OUT/suite.log" 2>&1
             r1=$?
             timeout 60 python3 -m pytest -q -n 2 -rfE --tb=short -p no:cacheprovider -k "2g_elements" \
                 tests/test_extreme.py > "$OUT/suite_2g.log" 2>&1
             r2=$?
             [ $r1 -eq 124 ] && echo "suite: cut off by its time limit"
             grep -hE " (FAILED|ERROR) " "$OUT/suite.log" | sed 's/^\[gw[0-9]*\] *\[ *[0-9]*%\] //' | sort -u | cut -c1-300 | head -40
             grep -hE "^(FAILED|ERROR)|passed|failed" "$OUT/suite.log" "$OUT/suite_2g.log" | cut -c1-300 | tail -20
             [ $r1 -eq 0 ] && [ $r2 -eq 0 ]; } ;;
    random) FA_RANDOM_CASES=400 FA_RANDOM_MAX_N=4096 timeout 500 python3 -m pytest -q -n 16 -rfE --tb=short \
                -p no:cacheprovider -k "cuda" tests/test_random.py > "$OUT/random.log" 2>&1
            r=$?; grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/random.log" | cut -c1-300 | tail -20; [ $r -eq 0 ] ;;
    tests) OUT="$OUT" bash tools/h200_tests.sh 2>&1 | tee "$OUT/tests.log" ;;
    examples) for e in examples/*.py; do echo "== $e"; timeout 120 python3 "$e" || echo "-> $e failed"; done \
                  2>&1 | tee "$OUT/examples.log"; ! grep -q -- "-> examples" "$OUT/examples.log" ;;
    sm90) OUT="$OUT" bash tools/sm90/run.sh 2>&1 | tee "$OUT/sm90.log" | tail -60 ;;
    ncu) { OUT="$OUT" bash tools/decode_ncu.sh; OUT="$OUT" bash tools/sm90/ncu.sh; } 2>&1 | tail -120 ;;
    ncusrc) OUT="$OUT" bash tools/sm90/ncu_source.sh 2>&1 | tail -80 ;;
    ncu80) OUT="$OUT" bash tools/sm80/ncu_compare.sh 2>&1 | tail -90 ;;
    sanitize) tests/sanitize.sh 2>&1 | tee "$OUT/sanitize.log" | tail -20 ;;
    bench) python3 -m bench.attention --preset gpu --out "$OUT/gpu" 2>&1 | tail -120 ;;
    grid) python3 -m bench.attention --device cuda --providers fa sdpa-flash sdpa-cudnn --dtype bf16 fp16 \
              --d 64 128 256 --n 512 1k 2k 4k 8k 16k --causal both --budget 0.1 --out "$OUT/gpu_sm90" 2>&1 | tail -90 ;;
    memory) python3 -m bench.memory --out "$OUT/memory" 2>&1 | tail -12 ;;
    model) python3 -m bench.model --out "$OUT" 2>&1 | tee "$OUT/model.log" | tail -80 ;;
    decode) python3 -m bench.decode --out "$OUT/decode" 2>&1 | tail -30 ;;
    decodegap) python3 -m tools.decode_gap 2>&1 | tee "$OUT/decode_gap.log" | tail -20 ;;
    dsweep) python3 -m tools.decode_sweep 2>&1 | tee "$OUT/decode_sweep.log" | tail -30 ;;
    quant) python3 -m tools.sm90.quant --parts 2 3 4 2>&1 | tee "$OUT/quant.txt" | tail -12 ;;
    trace) { python3 -m tools.sm90.trace; python3 -m tools.sm90.trace --d 64 --shapes 16x32x1024 4x32x4096; } 2>&1 \
               | tee "$OUT/trace.txt" | tail -40 ;;
    sm80tune) bash tools/sm80/run.sh 2>&1 | tee "$OUT/sm80tune.log" | tail -60 ;;
    fp32test) bash tools/fp32/run.sh 2>&1 | tee "$OUT/fp32test.log" | tail -60 ;;
    longkeys) timeout 90 python3 -m tools.long_keys 2>&1 | tee "$OUT/long_keys.txt" ;;
    *) echo "unknown stage $stage"; status=2 ;;
    esac
    [ "${PIPESTATUS[0]}" -ne 0 ] && status=1
done
stamp done
exit $status
