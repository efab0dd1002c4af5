# Call 2, right after call 1 on the same machine: the whole suite on call 1's package build (kept
# there; VAR_SKIP 2 and VAR_LEAD 1 by default, tree.txt).
set -u
t0=$(date +%s)
python3 -c "import torch_flashattn, os; print(torch_flashattn.__file__)" > $OUT/build2.txt 2>&1
OMP_NUM_THREADS=1 FA_FAILURES=$OUT/failures.txt timeout $(( ${CAP:-570} - $(date +%s) + t0 )) bash tests/gpu.sh > $OUT/suite.txt 2>&1
echo "suite rc $? $(( $(date +%s)-t0 )) s" >> $OUT/build2.txt
cat $OUT/build2.txt; tail -4 $OUT/suite.txt
