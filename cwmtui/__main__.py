"""``python -m cwmtui``: the same command line as ``cwmtui``."""

from .cli import entry

if __name__ == "__main__":
    entry()
