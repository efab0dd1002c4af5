export MAX_JOBS=16 OMP_NUM_THREADS=1
python3 -m pip install --no-build-isolation --no-deps -e . -q 2>&1 | tail -2
python3 -m pytest -q tests/test_backward_kernel.py tests/test_backward.py 2>&1 | tail -8 | tee $OUT/tests2.txt
timeout 240 python3 -m bench.backward --out $OUT/backward --budget 0.2 2>&1 | grep -v "^{" | tail -30
