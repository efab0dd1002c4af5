"""The Hopper kernel's tools (tools/README.md)."""
