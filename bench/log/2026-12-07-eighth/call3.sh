# Call 3 (device tool, carry [".peers/fa4a"], the machine of calls 1-2 still warm): FA4's first half.
bash .peers/fa4a/peers.sh stash > $OUT/stash.txt 2>&1; echo "stash rc $?"; tail -2 $OUT/stash.txt
