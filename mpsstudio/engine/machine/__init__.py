"""The machine a run measures: its devices (CPU, the Apple GPU through MPS, CUDA GPUs) and whether they work, the
environment every result carries, what else the host is doing, the Apple platform facts, and the energy meters.

Owns: apple (torch-free Apple facts: minimum macOS, MPS variables), devices, precision (which precisions a device
runs), probe, environment, host, energy. Uses: basics.
"""
