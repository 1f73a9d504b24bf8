"""The run setup sidebar: its widgets (form.py, advanced.py, widgets.py), the panel that gives them meaning
(panel.py and its parts: catalog, choices, configs, summary; rules.py: the form's rules and names, no Qt), a checked
folder's summary window (folder_summary.py) and the consent a user's model file needs before its code runs
(model_files.py)."""
