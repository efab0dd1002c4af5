# Call 1 (device tool, kind nvidia-h100-x1, carry [".peers/fa3", "build/ab"]; build/ab: base.so,
# skip1.so, skip2.so, sm90.cu built on the development machine with FA_SM90_CAUSAL_SKIP=0 / 1 / 2).
# The tree: 2da39e2 (the commit adding FA_SM90_CAUSAL_SKIP, default 0) with tiles.h's default
# set to 2, as tree.txt shows; ab.py failed at once (the package was not built yet: ab_failed_import.txt).
set -u
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader | tee $OUT/gpu.txt
git log --oneline -1 > $OUT/tree.txt; git diff --stat >> $OUT/tree.txt
source .peers/fa3/peers.sh install-fa3 > $OUT/fa3_install.txt 2>&1
t0=$(date +%s)
( MAX_JOBS=16 python3 -m pip install --no-build-isolation --no-deps -e . -q > $OUT/build.txt 2>&1; echo "build rc $? $(( $(date +%s)-t0 )) s" >> $OUT/build.txt ) &
BUILD=$PWD/build/ab timeout 200 python3 -m tools.sm90.ab --prebuilt --variants base= skip1=FA_SM90_CAUSAL_SKIP=1 skip2=FA_SM90_CAUSAL_SKIP=2 --rounds 2 > $OUT/ab.txt 2>&1
wait
OMP_NUM_THREADS=1 FA_FAILURES=$OUT/failures.txt timeout 330 bash tests/gpu.sh > $OUT/suite.txt 2>&1

# Call 2, the same warm machine (the package built by call 1): reading 1.
BUILD=$PWD/build/ab timeout 105 python3 -m tools.sm90.ab --prebuilt --variants base= skip2=FA_SM90_CAUSAL_SKIP=2 skip1=FA_SM90_CAUSAL_SKIP=1 --points d64c2k d64c4k d64c8k d256c2k d256c4k d128c4k d64c16k --rounds 1

# Call 3, the same warm machine: reading 2, the columns in another order.
BUILD=$PWD/build/ab timeout 50 python3 -m tools.sm90.ab --prebuilt --variants skip2=FA_SM90_CAUSAL_SKIP=2 base= skip1=FA_SM90_CAUSAL_SKIP=1 --points d64c2k d64c4k d256c2k d128c4k d64c8k d64c4kh --rounds 1

# Call 4, the same warm machine, torch_flashattn/hf.py's `mask_function is None` mend in the tree.
timeout 33 python3 -m pytest -q -p no:cacheprovider -x "tests/test_hf_masks.py::test_mask_rules_compile_in_one_graph"
