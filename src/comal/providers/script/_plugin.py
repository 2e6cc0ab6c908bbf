"""The built-in plugin of the ``script:`` model (:class:`ScriptModel`)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from ...plugins import hookimpl
from .._errors import ProviderConfigError
from .._schemes import ModelSpec, ProviderContext, ProviderScheme
from ._format import load_script
from ._model import SCRIPT_PREFIX, ScriptModel

__all__ = ["ScriptScheme", "comal_providers"]


class ScriptScheme(ProviderScheme):
    """``script:PATH``: replies from a JSON-lines script, at the session's position. A work
    step ``n`` of a scripted session reads ``PATH.children/n.jsonl``."""

    scheme = "script"
    description = "replies from a JSON-lines script file, at the session's position in it"

    def parse(self, spec: str) -> ModelSpec:
        path = spec.removeprefix(SCRIPT_PREFIX)
        if not path:
            raise ProviderConfigError(f"model spec {spec!r} names no script; write 'script:PATH'")
        return ModelSpec(self.scheme, path)

    def normalize(self, spec: str) -> str:
        # Stored absolute in the session, so a resume from elsewhere finds the same file.
        path = spec.removeprefix(SCRIPT_PREFIX)
        return SCRIPT_PREFIX + str(Path(path).expanduser().resolve()) if path else spec

    def model_name(self, spec: str) -> str:
        return "script"

    def work_step(self, spec: str, n: int) -> str:
        # A scripted coordinator's step n reads its own replies, beside the coordinator's.
        path = Path(self.parse(spec).model)
        return SCRIPT_PREFIX + str(path.with_name(path.name + ".children") / f"{n}.jsonl")

    def check(self, spec: str, env: Mapping[str, str]) -> None:
        load_script(self.parse(spec).model)

    def build(self, spec: str, ctx: ProviderContext) -> ScriptModel:
        path = self.parse(spec).model
        if ctx.ledger is None or ctx.scope is None:
            raise ProviderConfigError(
                f"{spec!r} reads its position in the script from a session's ledger, and none "
                "was given; run it as the agent's model (comal -p ... --model script:PATH)"
            )
        return ScriptModel(path, ctx.ledger, ctx.scope, served=ctx.served)


@hookimpl
def comal_providers() -> tuple[ProviderScheme, ...]:
    return (ScriptScheme(),)
