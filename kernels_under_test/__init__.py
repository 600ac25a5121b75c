"""The default KernelWatch suite, and the example to copy: one module per kernel family.

Each module declares benchmarks with ``runners.suite.benchmark``; each benchmark returns a ``Case`` carrying
the jitted function, its inputs, an independent numpy reference and a FLOP/byte model.
"""
