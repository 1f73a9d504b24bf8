"""Icons and other files the app loads at run time through importlib.resources."""
