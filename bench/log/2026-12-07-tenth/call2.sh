# Call 2 (device tool, carry [".peers/fa4a"], right after call 1 on the same warm machine): the first half
# of FlashAttention-4's wheel stashed under $HOME.
bash .peers/fa4a/peers.sh stash
