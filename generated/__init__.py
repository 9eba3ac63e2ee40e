"""Models built by codegen (python -m codegen build NAME)."""
