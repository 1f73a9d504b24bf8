"""An MLX run beside PyTorch's (RunConfig.framework "mlx"): the set-up (the twin, its weights from PyTorch's model,
parity), the measured loop, and parity itself. Imported only where an MLX run runs: MLX is optional."""
