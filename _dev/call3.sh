export MAX_JOBS=16 OMP_NUM_THREADS=1
F=csrc/cuda/sm80_backward.cu
B="python3 -m bench.backward --d 64 128 --n 1024 4096 16384 --budget 0.15"
python3 setup.py build_ext --inplace > $OUT/build.log 2>&1; echo build $?
python3 -m pytest -q -x tests/test_backward_kernel.py -k "sinks_causal_window and Nq257" 2>&1 | grep -E "Error|passed|failed" | head -5
$B --out $OUT/v_red2 2>&1 | grep "^|"
sed -i 's/#define FA_BWD_RED_V2 1/#define FA_BWD_RED_V2 0/' $F
python3 setup.py build_ext --inplace > /dev/null 2>&1; echo build $?
$B --out $OUT/v_atomic 2>&1 | grep "^|"
sed -i 's/#define FA_BWD_RED_V2 0/#define FA_BWD_RED_V2 1/; s/#define FA_BWD_BN 128/#define FA_BWD_BN 64/; s/#define FA_BWD_MIN_CTAS 1/#define FA_BWD_MIN_CTAS 2/' $F
python3 setup.py build_ext --inplace > /dev/null 2>&1; echo build $?
$B --out $OUT/v_bn64 2>&1 | grep "^|"
python3 -m pytest -q tests/test_backward_kernel.py -k "plain or causal_top_left or window" 2>&1 | tail -2
