"""The desktop app: Qt views over the engine (which computes every number they show).

app (startup), window/ (the main window and its parts), setup/ (the run setup sidebar), plots/ (the live plots),
results/ (the results panel), tools_panel and setup_window (their windows), worker (the QThreads that run engine
calls and forward their events as signals), collector (garbage collected in the GUI thread only), banner, style,
settings, preferences, export.
"""
