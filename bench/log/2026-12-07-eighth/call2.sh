# Call 2 (device tool, no carry; call 1's machine warm, its build kept): the new tile test; d = 64
# windows on each tile (tools.sm90.grids --tiles: sm90_short_tile off / on, beside the dense call),
# two rounds in turn; then the d = 64 window grids.
set -u
t0=$(date +%s)
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader | tee $OUT/gpu.txt
python3 -c "import torch_flashattn" 2>/dev/null || { MAX_JOBS=16 python3 -m pip install --no-build-isolation --no-deps -e . -q > $OUT/build.txt 2>&1; echo "build rc $? $(( $(date +%s)-t0 )) s" >> $OUT/times.txt; }
OMP_NUM_THREADS=1 timeout 120 python3 -m pytest -q -n 16 -p no:cacheprovider -rfE --tb=short tests/test_variants_kernel.py -k "either_tile or packed_walk" > $OUT/targeted.txt 2>&1
echo "targeted rc $? $(( $(date +%s)-t0 )) s" >> $OUT/times.txt
timeout $(( 590 - $(date +%s) + t0 )) python3 -m tools.sm90.grids --tiles --rounds 2 > $OUT/tiles.txt 2>&1
echo "tiles rc $? $(( $(date +%s)-t0 )) s" >> $OUT/times.txt
cat $OUT/times.txt; tail -3 $OUT/targeted.txt; grep -v '^{' $OUT/tiles.txt | tail -16
