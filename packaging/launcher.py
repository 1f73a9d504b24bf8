"""PyInstaller entry script for "MPS Studio": all startup logic lives in mpsstudio.frozen (importable, tested)."""

from mpsstudio.frozen import main

if __name__ == "__main__":
    main()
