export MAX_JOBS=16 OMP_NUM_THREADS=1 PYTHONPATH=$PWD
F=csrc/cuda/sm80_backward.cu
nvidia-smi --query-gpu=name,clocks.sm,power.draw,power.limit --format=csv,noheader
python3 setup.py build_ext --inplace > $OUT/build.log 2>&1 || { tail -20 $OUT/build.log; exit 1; }
M="python3 -m bench.backward --d 64 128 --n 1024 16384 --budget 0.1"
$M --out $OUT/ab_v4 2>&1 | grep "^| [0-9]"
sed -i 's/#define FA_BWD_RED_V4 1/#define FA_BWD_RED_V4 0/' $F
python3 setup.py build_ext --inplace > /dev/null 2>&1; echo build $?
$M --out $OUT/ab_v2 2>&1 | grep "^| [0-9]"
python3 - <<'PY' > $OUT/choice.txt
import json, math, os
g = lambda n: math.exp(sum(math.log(r["tflops"]["fa"]) for r in json.load(open(os.environ["OUT"] + f"/ab_{n}.json"))["rows"]) / 8)
print("v4" if g("v4") >= g("v2") else "v2", g("v4"), g("v2"))
PY
cat $OUT/choice.txt
if grep -q "^v4" $OUT/choice.txt; then sed -i 's/#define FA_BWD_RED_V4 0/#define FA_BWD_RED_V4 1/' $F; python3 setup.py build_ext --inplace > /dev/null 2>&1; echo build $?; fi
grep -n "define FA_BWD_RED_V4" $F
timeout 280 bash tests/gpu.sh > $OUT/suite.txt 2>&1; echo suite rc $?
grep -E "passed|failed|FAILED|ERROR" $OUT/suite.txt | tail -12
timeout 130 python3 -m bench.backward --out $OUT/backward --budget 0.12 2>&1 | grep "^| [0-9]"
SANITIZE_ONLY=backward timeout 100 bash tests/sanitize.sh memcheck racecheck 2>&1 | tail -8
