# Call 2, the same warm machine (the package built by call 1, FA_SM90_VAR_SKIP 2), carry
# [".peers/fa3", "build/ct", "build/ab2"]; build/ab2: sm90.cu built here by tools/sm90/ab --build-only
# with no define / FA_SM90_D64_SHORT_CAUSAL=2048 / 512.
set -u
source .peers/fa3/peers.sh install-fa3 > /dev/null 2>&1
BUILD=$PWD/build/ct timeout 150 python3 -m tools.sm90.cap_tune --prebuilt --variants vskip=FA_SM90_VAR_SKIP=2 base= --set var --rounds 1 > $OUT/var2.txt 2>&1
BUILD=$PWD/build/ct timeout 150 python3 -m tools.sm90.cap_tune --prebuilt --variants base= vskip=FA_SM90_VAR_SKIP=2 --set cap --rounds 1 > $OUT/cap1.txt 2>&1
BUILD=$PWD/build/ab2 timeout 150 python3 -m tools.sm90.ab --prebuilt --variants base= short2k=FA_SM90_D64_SHORT_CAUSAL=2048 short512=FA_SM90_D64_SHORT_CAUSAL=512 --points d64c512 d64c1k d64c2k d64c1kh d64c512h --rounds 2 > $OUT/short.txt 2>&1
