"""Models built by codegen (python -m codegen build NAME).

``import generated.NAME`` works when the directory holding this package (the
repository root) is on ``sys.path``; ``codegen.load("NAME")`` works from anywhere.
"""
