#!/bin/sh
# build.sh NAME: the worktree's fa_cpu.c into /tmp/cw/NAME (forward harness), NAME_bwd, NAME_dec
set -e
F="-std=c11 -O3 -DNDEBUG -fopenmp -ffp-contract=fast -fno-trapping-math -Wall -Wextra -Wno-psabi"
cd /work/cpuwt
gcc $F -g -c csrc/fa_cpu.c -Icsrc -o /tmp/cw/$1.o
cd /tmp/cw
gcc $F -g bench2.c $1.o fa_common.o -I/work/cpuwt/csrc -lm -o $1
gcc $F -g bwd.c $1.o fa_common.o -I/work/cpuwt/csrc -lm -o $1_bwd
gcc $F -g dec.c $1.o fa_common.o -I/work/cpuwt/csrc -lm -o $1_dec
