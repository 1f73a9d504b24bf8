"""The models a run trains: the built-in registry and its architectures, a user's own model file (imported only in
a run's process, after consent), and trained models saved as state_dict + JSON.

Owns: catalog (the built-ins as listed, no torch), counts (their parameters, cached), registry, architectures (the built-in networks), user, saved.
Uses: basics.
"""
