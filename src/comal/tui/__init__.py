"""The interactive terminal UI (textual): ``comal`` or ``comal --resume UUID`` without ``-p``."""

from ._app import AgentFactory, ApprovalScreen, ComalApp, TuiSession

__all__ = ["AgentFactory", "ApprovalScreen", "ComalApp", "TuiSession"]
