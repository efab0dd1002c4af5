# Benchmarks of torch-flashattn, run from the repository root as modules:
#   python3 -m bench.attention --preset cpu      # time fa against SDPA, write bench/results/cpu.*
#   python3 -m bench.readme_table bench/results/cpu.json   # refresh the README table from it
