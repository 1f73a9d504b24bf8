"""Names the setup form's parts share: the item data of special entries and the model-file warning."""

MODEL_FILE_WARNING = "⚠︎ Loading a model file runs its code; only choose files you trust."
CHOOSE_FILE = "\x00choose-model-file"  # item data of the "Choose .py file…" entry
RUN_SCRIPT = "\x00run-training-script"  # item data of the "Your Training Script…" entry (Run Your Training Script…)
