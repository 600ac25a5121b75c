"""The quantitative performance model: the hardware's published limits and where a result sits against them.

Pure: no I/O, no JAX, no database. Figures in, figures out; the runners measure and the store keeps.
"""
