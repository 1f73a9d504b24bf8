"""The measuring tools beside runs: the batch-size sweep, the largest batch, the inspection (operations that fall
back to the CPU, parity with a float64 reference), the launch benchmark, the model outside PyTorch (deploy/); their
registry (each tool's row, its options), the set-up they share and their results as rows for both front ends.

Owns: registry, argspec, chosen, toolkit, toolview, sweep, maxbatch, maxbatch_answer, inspection, opcheck, launch; deploy/, diagnose/,
records/, tune/. Uses: run, analysis, machine, data, models, basics.
"""
