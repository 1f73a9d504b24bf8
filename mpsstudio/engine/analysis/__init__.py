"""What runs mean: a run's summary from its windows, its stability verdict, the checked read-back of any run that
comes from outside (a run's process, an imported file, a history row), comparisons with their speedup intervals,
repeated comparisons, the verdict in words, energy figures (J/sample, watts) and the evaluation (per-class accuracy).

Owns: summary, stability, runcheck, compare, repeat, verdict, energy, evaluation. Uses: basics. No torch.
"""
