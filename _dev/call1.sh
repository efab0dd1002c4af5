set -x
export MAX_JOBS=16 OMP_NUM_THREADS=1
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv
python3 -m pip install --no-build-isolation --no-deps -e . -q 2>&1 | tail -2
python3 -m pytest -q -x tests/test_backward_kernel.py 2>&1 | tail -15 | tee $OUT/tests1.txt
python3 -m pytest -q tests/test_backward.py tests/test_older_gpus.py tests/test_parallel.py 2>&1 | tail -5 | tee -a $OUT/tests1.txt
timeout 200 python3 -m bench.backward --out $OUT/backward --budget 0.2 2>&1 | grep -v "^{" | tail -40
