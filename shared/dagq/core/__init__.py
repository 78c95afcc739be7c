"""The pure, deterministic core of dagq: definitions, validation, conditions and the engine.

Nothing in this package performs I/O, reads a clock or draws random numbers.
"""
