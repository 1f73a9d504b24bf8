"""MPS Studio: measure how fast PyTorch trains on your Mac's GPU (MPS) versus its CPU."""

__version__ = "0.1.0"
