"""cwmtui: a trace debugger for code world models."""

__version__ = "0.1.0"
