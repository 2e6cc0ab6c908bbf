"""Measured anchor + estimated delta (TOK-2).

After a request the provider reports how many input tokens it saw; that is the exact size of the
prompt up to the last entry it contained (``last_seq``). The next count then only estimates what
was appended since, instead of re-estimating everything. The anchor holds only while the prefix
it measured is unchanged, so it is keyed by everything that shapes that prefix: model, reasoning
effort, tool catalog, configuration and checkpoint. A caller that rewrites history below
``last_seq`` (stage-1 references, a new checkpoint) must change one of those keys.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from ._usage import Usage

__all__ = ["Anchor", "AnchorKey", "InputEstimate", "estimate_input"]


@dataclass(frozen=True, slots=True)
class AnchorKey:
    """What must be unchanged for a measured prefix to still be valid."""

    model: str
    effort: str | None
    catalog_digest: str
    config_digest: str
    checkpoint_id: int | None


@dataclass(frozen=True, slots=True)
class Anchor:
    """The provider-measured input of the request whose prompt ended at entry ``last_seq``."""

    measured_input: int
    last_seq: int
    model: str
    effort: str | None
    catalog_digest: str
    config_digest: str
    checkpoint_id: int | None

    def __post_init__(self) -> None:
        if self.measured_input < 0:
            raise ValueError(f"measured_input must be >= 0, not {self.measured_input}")

    @property
    def key(self) -> AnchorKey:
        return AnchorKey(
            self.model, self.effort, self.catalog_digest, self.config_digest, self.checkpoint_id
        )

    @classmethod
    def from_usage(cls, usage: Usage, *, last_seq: int, key: AnchorKey) -> Anchor | None:
        """The anchor a request's usage gives, or ``None`` when the provider did not report the
        input size (an unknown is never an anchor of 0)."""
        total = usage.input_total
        if total is None:
            return None
        return cls(
            measured_input=total,
            last_seq=last_seq,
            model=key.model,
            effort=key.effort,
            catalog_digest=key.catalog_digest,
            config_digest=key.config_digest,
            checkpoint_id=key.checkpoint_id,
        )


@dataclass(frozen=True, slots=True)
class InputEstimate:
    """The input size to budget with. ``measured`` is False when no valid anchor was used;
    displays then mark the number as an estimate (``ctx ~``)."""

    tokens: int
    measured: bool
    basis: str

    @property
    def marker(self) -> str:
        """``"ctx"`` for a measured basis, ``"ctx ~"`` for a pure estimate."""
        return "ctx" if self.measured else "ctx ~"


def _changed(anchor: Anchor, current: AnchorKey) -> list[str]:
    old = anchor.key
    return [f.name for f in fields(AnchorKey) if getattr(old, f.name) != getattr(current, f.name)]


def estimate_input(
    anchor: Anchor | None,
    *,
    current: AnchorKey,
    delta_tokens: int,
    estimated_total: int,
) -> InputEstimate:
    """Input size for the next request.

    ``delta_tokens`` is the estimate of everything appended after ``anchor.last_seq``;
    ``estimated_total`` the estimate of the whole prompt, used when there is no anchor or its
    key no longer matches ``current``.
    """
    if delta_tokens < 0 or estimated_total < 0:
        raise ValueError("token estimates must be >= 0")
    if anchor is None:
        return InputEstimate(estimated_total, measured=False, basis="estimate: no measured anchor")
    changed = _changed(anchor, current)
    if changed:
        return InputEstimate(
            estimated_total,
            measured=False,
            basis=(
                f"estimate: anchor at seq {anchor.last_seq} invalid ({', '.join(changed)} changed)"
            ),
        )
    return InputEstimate(
        anchor.measured_input + delta_tokens,
        measured=True,
        basis=(
            f"measured {anchor.measured_input:,} up to seq {anchor.last_seq}"
            f" + {delta_tokens:,} estimated"
        ),
    )
