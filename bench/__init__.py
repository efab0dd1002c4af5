# Benchmarks of torch-flashattn, run from the repository root as modules:
#   python3 -m bench.attention --preset cpu                          # time fa against SDPA -> bench/out/cpu.*
#   python3 -m bench.attention --preset cpu --out bench/results/cpu  # the committed result
#   python3 -m bench.readme_table bench/results/cpu.json             # refresh the tables shown from it
# Kernel development tools (sweeps, traces, ncu) are in tools/.
