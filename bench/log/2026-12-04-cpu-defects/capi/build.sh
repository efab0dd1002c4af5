#!/bin/sh
# usage: ./build.sh file.c  -> ./file (ASan+UBSan) and ./file.O2 (plain -O2)
set -e
C=/work/main/csrc
b=$(basename "$1" .c)
gcc -std=c11 -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer -Wno-psabi -fopenmp -I$C "$1" $C/fa_cpu.c $C/fa_common.c -lm -o "$b"
gcc -std=c11 -O2 -Wno-psabi -fopenmp -I$C "$1" $C/fa_cpu.c $C/fa_common.c -lm -o "$b.O2"
