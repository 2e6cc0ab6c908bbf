"""What the operator lets the web interface do (CFG-2): where its sessions run, with which
models, in which permission modes.

``serve.workspaces``, ``serve.models`` (besides ``model``) and ``serve.modes`` in the
configuration file. The modes are a ceiling: unset, a web session may take the configured
``mode`` and the stricter ones (``read-only`` < ``ask`` < ``trusted``), so a page never starts a
session wider than the operator's own, nor switches one there with ``/mode``. Nothing a client
sends changes them; a value outside them is refused with a coded error, nothing created.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..agent import Config
from ..errors import UserError
from ..ops import Mode
from ..providers import normalize_model_spec

__all__ = ["Allowed", "ModeNotAllowed", "ModelNotAllowed", "WorkspaceNotAllowed"]


class WorkspaceNotAllowed(UserError):
    code = "WORKSPACE_NOT_ALLOWED"


class ModelNotAllowed(UserError):
    code = "MODEL_NOT_ALLOWED"


class ModeNotAllowed(UserError):
    code = "MODE_NOT_ALLOWED"


class Allowed:
    """The operator's lists, read from the configuration ``operator()`` returns."""

    def __init__(self, operator: Callable[[], Config]) -> None:
        self.operator = operator

    def workspaces(self) -> list[str]:
        return [str(Path(w).expanduser().resolve()) for w in self.operator().serve.workspaces]

    def models(self) -> list[str]:
        config = self.operator()
        found = [*([config.model] if config.model else []), *config.serve.models]
        # As sessions store them (a script's path absolute), so a resume finds its own.
        return list(dict.fromkeys(normalize_model_spec(spec) for spec in found))

    def modes(self) -> tuple[Mode, ...]:
        """The modes a web session may take, strictest first."""
        config = self.operator()
        return config.serve.web_modes(config.mode)

    def default_mode(self) -> Mode:
        config = self.operator()
        return config.serve.web_mode(config.mode)

    def check_workspace(self, asked: str | None) -> Path:
        allowed = self.workspaces()
        if not allowed:
            raise WorkspaceNotAllowed(
                "this server runs no agent: its operator lists no workspace; add directories "
                "to serve.workspaces in the configuration file"
            )
        target = Path(asked).expanduser().resolve() if asked else Path(allowed[0])
        for root in map(Path, allowed):
            if target == root or root in target.parents:
                return target
        raise WorkspaceNotAllowed(
            f"workspace {asked!r} is not one the operator allows ({', '.join(allowed)}); "
            "pick one of them or ask the operator to add it to serve.workspaces"
        )

    def check_model(self, asked: str | None) -> str:
        allowed = self.models()
        spec = normalize_model_spec(asked) if asked else (allowed[0] if allowed else None)
        if spec is None or spec not in allowed:
            raise ModelNotAllowed(
                f"model {asked!r} is not one this server offers ({', '.join(allowed) or 'none'}); "
                "the operator lists them in model and serve.models"
            )
        return spec

    def check_mode(self, asked: str | None) -> Mode:
        """``asked`` if the ceiling allows it (none asked: the default mode)."""
        if not asked:
            return self.default_mode()
        allowed = self.modes()
        for mode in allowed:
            if mode == asked:
                return mode
        raise ModeNotAllowed(
            f"mode {asked!r} is not one this server's sessions may take ({', '.join(allowed)}); "
            "the operator lists them in serve.modes (unset: the configured mode and the "
            "stricter ones)"
        )

    def check_args(self, name: str, args: dict[str, Any]) -> None:
        """The ceiling on a control's value, wherever the request is run."""
        if name == "model":
            self.check_model(str(args.get("model") or "") or None)
        elif name == "mode" and args.get("mode"):
            self.check_mode(str(args["mode"]))

    def permits(self, control: str, value: str) -> bool:
        """Whether a control's value a page set earlier is still within the ceiling."""
        if control == "mode":
            return value in self.modes()
        if control == "model":
            return normalize_model_spec(value) in self.models()
        return True
