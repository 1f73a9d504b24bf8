"""The measuring tools beside runs: the batch-size sweep, the largest batch, the inspection (operations that fall
back to the CPU, parity with a float64 reference), the launch benchmark; their registry, the set-up they share and
their results as rows for both front ends.

Owns: registry, toolkit, toolview, sweep, maxbatch, inspection, opcheck, launch. Uses: run, analysis, machine, data,
models, basics.
"""
