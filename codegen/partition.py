"""A partition of coordinates or speeds into dependent and independent ones.

The dependent indices are chosen (by the model, or per call); the independent
ones are their complement in ascending order, the order of the independent
state x = [q_i, u_i] everywhere (the generated C computes the same complement
in make_partition). This is the one place Python computes it.
"""

from __future__ import annotations


def complement(count, dependent):
    """The indices 0..count-1 not in ``dependent``, ascending."""
    dependent = set(dependent)
    return [i for i in range(count) if i not in dependent]
