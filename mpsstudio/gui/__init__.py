"""The desktop app: Qt views over the engine (which computes every number they show).

app (startup), window/ (the main window and its parts), setup/ (the run setup sidebar), plots/ (the live plots),
results/ (the results panel), tools/ (the Tools tab, its plots and settings sheets), setup_window (its window),
worker (the QThreads that run engine calls and forward their events as signals), collector (garbage collected in the GUI thread only), banner, style,
settings, preferences, export.
"""
