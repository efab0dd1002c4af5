#!/bin/sh
# cmp.sh NAME [ref]: outputs of /tmp/cw/NAME{,_dec,_bwd} against ref/ (the base build), bit for bit; "ref" writes ref/
cd /tmp/cw; D=out_$1; [ "$2" = ref ] && D=ref; mkdir -p $D; n=0; bad=0
chk() { n=$((n+1)); [ "$2" = ref ] || cmp -s ref/$1 $D/$1 || { echo "DIFF $1"; bad=$((bad+1)); }; }
for N in 84 130 200 1024; do for d in 40 64 128 256; do for c in 0 1; do
  OUTF=$D/f_${N}_${d}_${c}.bin REPS=1 ./$1 $N $d $c >/dev/null; chk f_${N}_${d}_${c}.bin $2
done; done; done
for s in "8 1 4096 64" "8 4 1000 128" "4 3 777 40" "2 5 300 256"; do set -- $s $2; for c in 0 1; do
  G=$1 NQ=$2 OUTF=$D/dec_$1_$2_$3_$4_$c.bin REPS=1 ./$NAME_dec $3 $4 $c >/dev/null 2>&1; done; set -- ; done
