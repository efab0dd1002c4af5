#!/usr/bin/env bash
# sm90.cu of tree /tmp/sass/$1 to a cubin for sm_90a with setup.py's nvcc flags (ptxas -v in ptxas.txt).
cd /tmp/sass/$1 && nvcc -O3 -DNDEBUG -std=c++17 -lineinfo --expt-relaxed-constexpr -DFA_WITH_CUDA=1 -Icsrc -Icsrc/cuda \
  -D__CUDA_NO_HALF_OPERATORS__ -D__CUDA_NO_HALF_CONVERSIONS__ -D__CUDA_NO_BFLOAT16_CONVERSIONS__ -D__CUDA_NO_HALF2_OPERATORS__ \
  -Xptxas -v -arch=sm_90a -cubin csrc/cuda/sm90.cu -o sm90.cubin > ptxas.txt 2>&1; echo "$1 rc $?"
