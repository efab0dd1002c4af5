"""Kernel development tools: tuning sweeps, traces, Nsight Compute and power scripts, GPU-session
scripts (tools/README.md). Not part of the installed package."""
