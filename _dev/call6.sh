#!/bin/bash
export MAX_JOBS=16
t0=$(date +%s)
python3 setup.py build_ext --inplace > /tmp/build.log 2>&1 || { tail -50 /tmp/build.log; exit 1; }
echo "build $(( $(date +%s) - t0 )) s"
export PYTHONPATH=$PWD
timeout 120 python3 -m pytest -q -n 16 -p no:cacheprovider -rfE --tb=short tests/test_backward_kernel.py tests/test_hf_keywords.py tests/test_hf_models.py tests/test_hf_masks.py tests/test_dropin.py -k "cuda_graph or hf or dropin or softcap_and_sinks" > $OUT/tests.txt 2>&1
grep -E "^FAILED|Error" $OUT/tests.txt | head -20 | cut -c1-250
tail -1 $OUT/tests.txt
echo "tests $(( $(date +%s) - t0 )) s"
R=$PWD; cd $OUT && timeout 90 python3 $R/examples/train_gpt.py --device cuda --dtype bf16 --steps 300 > train_gpt_cuda_bf16.txt 2>&1; cat train_gpt_cuda_bf16.txt | tail -12
echo "train $(( $(date +%s) - t0 )) s"
