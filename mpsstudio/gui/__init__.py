"""The desktop app: Qt views over the engine."""
