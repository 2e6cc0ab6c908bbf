"""comal: a context engine and governed runtime for long-running LLM agents."""

from .errors import ComalError

__version__ = "0.1.0"

__all__ = ["ComalError", "__version__"]
