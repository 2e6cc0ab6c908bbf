"""The interactive terminal UI (textual): ``comal``, ``comal -c`` or ``comal --resume UUID``
without ``-p``."""

from ._app import ApprovalScreen, ComalApp

__all__ = ["ApprovalScreen", "ComalApp"]
