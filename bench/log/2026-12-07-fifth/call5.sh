# Call 5, right after call 4 on the same machine: the whole suite on call 4's package build (kept there).
set -u
t0=$(date +%s)
python3 -c "import torch_flashattn, os; print(torch_flashattn.__file__)" > $OUT/build5.txt 2>&1
OMP_NUM_THREADS=1 FA_FAILURES=$OUT/failures.txt timeout $(( ${CAP:-570} - $(date +%s) + t0 )) bash tests/gpu.sh > $OUT/suite.txt 2>&1
echo "suite rc $? $(( $(date +%s)-t0 )) s" >> $OUT/build5.txt
cat $OUT/build5.txt; tail -4 $OUT/suite.txt
