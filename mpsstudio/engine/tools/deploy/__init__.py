"""The model outside PyTorch: its export (TorchScript, a torch.export program, a Core ML package, loaded back and
compared), Core ML's conversion and where it places each operation, the agreement of an artifact with PyTorch, and
the deploy benchmark (inference on each device and Core ML's compute units).

Owns: export, coreml, coreml_plan, artifacts, deploybench. Uses: tools (toolkit, opcheck, sweep), models, machine,
basics.
"""
