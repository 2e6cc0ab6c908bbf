"""The browser task's operations (WEB-1): open, snapshot, click, fill, deploy, publish.

Every one is judged and receipted by the house like a native operation. Opening and reading
are reads; a click or a fill has effects nobody can know (``unknown``: never replayed after a
crash); a deploy writes the deploy target and a publish leaves for a remote one — each of those
two records its intent before acting and has a recovery adapter (:mod:`._recover`).
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ..errors import ComalError
from ..messages import sha256_hex
from ..ops import CallContext, Effect, Operation, ToolOutput
from ._artifact import build_artifact
from ._browser import Tab, browser_host
from ._deploy import deploy
from ._errors import NoPage, OriginRefused, PublishBlocked, TargetError
from ._page import Snap, click, fill, open_url, snap
from ._recover import (
    blocked_publish,
    finish_gate,
    finish_operation,
    last_opened,
    published_here,
    recover_deploy,
    recover_operation,
    recover_publish,
)
from ._settings import ChromeSettings, settings_of
from ._targets import Seen, Target, target_for

__all__ = ["SNAPSHOT_EVENT", "chrome_operations", "settings_of"]

SNAPSHOT_EVENT = "chrome_snapshot"
_TEXT_CAP = 6_000


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


class OpenArgs(_Args):
    url: str = Field(min_length=1, max_length=4_000, description="An http(s) URL to open.")


class NoArgs(_Args):
    pass


class ClickArgs(_Args):
    selector: str = Field(min_length=1, max_length=2_000, description="A Playwright selector.")


class FillArgs(ClickArgs):
    value: str = Field(max_length=100_000, description="The text to type into the field.")


def _tab(ctx: CallContext, st: ChromeSettings) -> Tab:
    host = browser_host(st.executable)
    downloads = ctx.need_workspace().root / "downloads"
    origins = st.allowed()
    return host.call(lambda: host.tab(ctx.scope.session, origins, downloads), st.timeout)


def _on_page(ctx: CallContext, st: ChromeSettings) -> tuple[Tab, dict[str, Any]]:
    """The session's page; after a restart, the last address ChromeOpen observed is opened
    again (a read) — never a click or fill that came after it."""
    tab = _tab(ctx, st)
    host, ms = browser_host(st.executable), st.timeout * 1000
    if str(host.call(lambda: tab.page.url, st.timeout)) != "about:blank":
        return tab, {}
    opened = last_opened(ctx.ledger, ctx.scope)
    if opened is None:
        raise NoPage(f"{ctx.operation} needs a page: open one with ChromeOpen first")
    url, receipt = opened
    host.call(lambda: open_url(tab, url, ms), st.timeout)
    return tab, {"restored": {"url": url, "from_receipt": receipt, "replayed": "nothing"}}


def _refusals(refused: list[Any]) -> list[dict[str, str]]:
    return [r.as_dict() for r in refused]


def _open(args: OpenArgs, ctx: CallContext) -> ToolOutput:
    st = settings_of(ctx)
    origins = st.allowed()
    if not origins.allows(args.url):
        raise OriginRefused(
            f"{args.url} is not within the allowed origins ({', '.join(origins.describe())}); "
            "only the operator's plugin_settings.chrome.origins widen them"
        )
    tab = _tab(ctx, st)
    host = browser_host(st.executable)
    status, refused = host.call(lambda: open_url(tab, args.url, st.timeout * 1000), st.timeout)
    page = host.call(lambda: snap(tab, st.timeout * 1000), st.timeout)
    seen: dict[str, Any] = {"url": args.url, "final_url": page.url, "status": status}
    seen["snapshot"] = page.digest
    seen["refused"] = _refusals(refused)
    stopped = [r for r in refused if r.page]
    if status is None or stopped:
        why = "; ".join(f"{r.url}: {r.why}" for r in stopped or refused) or "no response"
        raise OriginRefused(f"{args.url} was not opened: {why}")
    lines = [f"opened {page.url} ({status}) title {page.title!r}", f"snapshot {page.digest}"]
    lines += [f"refused {r.url}: {r.why}" for r in refused]
    return ToolOutput("\n".join(lines), observations=seen)


def _store(ctx: CallContext, page: Snap) -> tuple[int, str | None]:
    png = page.png or b""
    shot = "sha256:" + sha256_hex(png) if png else None
    body = {
        "v": 1, "call_id": ctx.call_id, "url": page.url, "title": page.title,
        "text": page.text, "tree": page.tree, "snapshot": page.digest,
        "screenshot": {"mime": "image/png", "size": len(png), "sha256": shot,
                       "data": base64.b64encode(png).decode()},
    }  # fmt: skip
    return ctx.ledger.add_record(ctx.scope, "event", SNAPSHOT_EVENT, body).id, shot


def _snapshot(args: NoArgs, ctx: CallContext) -> ToolOutput:
    st = settings_of(ctx)
    tab, restored = _on_page(ctx, st)
    host = browser_host(st.executable)
    page = host.call(lambda: snap(tab, st.timeout * 1000, pixels=True), st.timeout)
    record, shot = _store(ctx, page)
    size = len(page.png or b"")
    text = page.text if len(page.text) <= _TEXT_CAP else page.text[:_TEXT_CAP] + "…[cut]"
    lines = [
        f"page {page.url} title {page.title!r}",
        f"snapshot {page.digest} (evidence record {record})",
        "accessibility tree:", page.tree, "text:", text,
        # LIM-6: what was kept is a reference; the pixels were not sent with this text.
        f"[screenshot image/png, {size:,} bytes, {shot}, kept as evidence record {record}; its "
        "pixels are not in this result, so they have not been seen here: a model without "
        "vision, or any model reading this text, has only the tree and text above]",
    ]  # fmt: skip
    seen = {"url": page.url, "snapshot": page.digest, "screenshot": shot, "evidence": record}
    return ToolOutput("\n".join(lines), observations=seen | restored)


def _acted(name: str, ctx: CallContext, act: Any) -> ToolOutput:
    st = settings_of(ctx)
    tab, restored = _on_page(ctx, st)
    host = browser_host(st.executable)
    before, after, refused = host.call(lambda: act(tab, st.timeout * 1000), st.timeout * 3)
    seen = {"before": before.digest, "after": after.digest, "url": after.url}
    seen |= {"refused": _refusals(refused)} | restored
    lines = [f"{name} on {before.url}: snapshot {before.digest} → {after.digest}"]
    lines += [f"now at {after.url}"] if after.url != before.url else []
    lines += [f"refused {r.url}: {r.why}" for r in refused]
    return ToolOutput("\n".join(lines), observations=seen)


def _click(args: ClickArgs, ctx: CallContext) -> ToolOutput:
    return _acted("click", ctx, lambda tab, ms: click(tab, args.selector, ms))


def _fill(args: FillArgs, ctx: CallContext) -> ToolOutput:
    return _acted("fill", ctx, lambda tab, ms: fill(tab, args.selector, args.value, ms))


def _deploy_intent(args: NoArgs, ctx: CallContext) -> dict[str, Any]:
    st = settings_of(ctx)
    if st.deploy is None:
        raise TargetError("no deploy target is configured (plugin_settings.chrome.deploy)")
    from ._deploy import observe_deploy

    artifact = build_artifact(ctx.need_workspace(), st.build_dir)
    try:
        before = observe_deploy(st.deploy.url)
    except TargetError:
        before = None  # nothing answers yet: the deploy is what makes it answer
    target = {"url": st.deploy.url, "dir": st.deploy.dir}
    return {"digest": artifact.digest, "target": target, "before": before}


def _deploy(args: NoArgs, ctx: CallContext) -> ToolOutput:
    st = settings_of(ctx)
    assert st.deploy is not None and ctx.intent is not None
    artifact = build_artifact(ctx.need_workspace(), st.build_dir)
    if artifact.digest != ctx.intent["digest"]:
        raise TargetError("the build output changed since the intent was recorded; deploy again")
    seen = deploy(artifact, st.deploy, st.timeout)
    obs = {"digest": artifact.digest, "observed": seen, "url": st.deploy.url}
    if seen != artifact.digest:
        why = f"the target answers {seen!r}, not {artifact.digest}"
        return ToolOutput(f"deployed, but {why}", is_error=True, observations=obs, uncertain=True)
    return ToolOutput(
        f"deployed {artifact.digest} ({len(artifact.files)} files); {st.deploy.url} answers "
        "with it",
        observations=obs | {"postcondition": True},
    )


def _publish_intent(args: NoArgs, ctx: CallContext) -> dict[str, Any]:
    st = settings_of(ctx)
    if st.publish is None:
        raise TargetError("no publish target is configured (plugin_settings.chrome.publish)")
    target = target_for(st.publish)
    human = ctx.approved or ctx.surface != "model"
    blocked = blocked_publish(ctx.ledger, ctx.scope, target.describe())
    if blocked is not None and not human:
        raise PublishBlocked(
            f"an earlier ChromePublish to this target is unresolved ({blocked}); the model "
            "cannot insist: a human approves a new publish (or publishes with comal call)"
        )
    artifact = build_artifact(ctx.need_workspace(), st.build_dir)
    before = target.observe()
    done = published_here(ctx.ledger, ctx.scope, target.describe(), artifact.digest)
    identity = done.observations.get("identity") if done is not None else None
    if done is not None and identity is not None and identity == before.identity:
        # The target still holds what this task published: answered from that receipt, not
        # sent again (a second PUT, or a second commit of the same tree).
        first = done.observations.get("already_published")  # the receipt that published
        already = (
            dict(first)
            if isinstance(first, Mapping)
            else {"receipt": done.record_id, "call_id": done.call_id, "identity": identity}
        )
        return {
            "digest": artifact.digest, "target": target.describe(), "before": before.as_dict(),
            "expected": identity, "already": already,
        }  # fmt: skip
    intent = {
        "digest": artifact.digest, "target": target.describe(), "before": before.as_dict(),
        "expected": target.expected(artifact, before),
    }  # fmt: skip
    # The snapshot of the page as it was when publishing was decided (WEB-2).
    try:
        host = browser_host(st.executable)
        tab, restored = _on_page(ctx, st)
        page = host.call(lambda: snap(tab, st.timeout * 1000, pixels=True), st.timeout)
        record, _ = _store(ctx, page)
        shot: dict[str, Any] = {"digest": page.digest, "evidence": record, "url": page.url}
        intent["snapshot"] = shot | restored
    except ComalError as exc:  # no page to show (none opened) is no reason not to publish
        intent["snapshot"] = {"missing": f"[{exc.code}] {exc}"[:300]}
    return intent


def _publish(args: NoArgs, ctx: CallContext) -> ToolOutput:
    st = settings_of(ctx)
    assert st.publish is not None and ctx.intent is not None
    intent = ctx.intent
    artifact = build_artifact(ctx.need_workspace(), st.build_dir)
    if artifact.digest != intent["digest"]:
        raise TargetError("the build output changed since the intent was recorded; publish again")
    target = target_for(st.publish)
    if intent.get("already"):
        return _already(target, artifact.digest, intent)
    before = Seen(intent["before"]["identity"], intent["before"]["tag"])
    target.publish(artifact, before)
    now = target.observe()
    obs = {"target": intent["target"], "digest": artifact.digest, "expected": intent["expected"]}
    obs |= {"identity": now.identity, "tag": now.tag, "postcondition": now.identity == intent[
        "expected"]}  # fmt: skip
    if now.identity != intent["expected"]:
        why = f"the target now shows {now.identity}, not {intent['expected']}"
        obs["reason"] = why
        return ToolOutput(f"published, but {why}", is_error=True, observations=obs, uncertain=True)
    return ToolOutput(
        f"published {artifact.digest}; the target's identity is {now.identity}", observations=obs
    )


def _already(target: Target, digest: str, intent: Mapping[str, Any]) -> ToolOutput:
    """A publish of what the target already holds from this task: nothing is sent; one read
    says it still holds it."""
    done, now = intent["already"], target.observe()
    obs = {"target": intent["target"], "digest": digest, "expected": intent["expected"]}
    obs |= {"identity": now.identity, "tag": now.tag, "already_published": done}
    if now.identity != intent["expected"]:
        why = f"the target now shows {now.identity}, not {intent['expected']}: it changed"
        obs |= {"postcondition": False, "reason": why}
        return ToolOutput(
            f"not published: {why} since it was read; nothing was sent. Publish again",
            is_error=True, observations=obs,
        )  # fmt: skip
    return ToolOutput(
        f"already published {digest}: the target still shows {now.identity}, as receipt "
        f"{done['receipt']} (call {done['call_id']}) recorded; nothing was sent",
        observations=obs | {"postcondition": True},
    )


def chrome_operations() -> list[Operation]:
    return [
        Operation(
            "ChromeOpen",
            "Open a URL in the governed browser (only origins the operator allows; every "
            "request, redirect, frame and popup is checked).",
            OpenArgs, _open, effects=(Effect("read"),),
        ),
        Operation(
            "ChromeSnapshot",
            "Read the open page: its text, its accessibility tree and a screenshot, kept as "
            "evidence with digests.",
            NoArgs, _snapshot, effects=(Effect("read"),),
        ),
        Operation(
            "ChromeClick",
            "Click an element of the open page (its effects are unknown: never repeated after "
            "an interruption).",
            ClickArgs, _click, effects=(Effect("unknown"),),
        ),
        Operation(
            "ChromeFill",
            "Type text into a field of the open page (effects unknown, never repeated after an "
            "interruption).",
            FillArgs, _fill, effects=(Effect("unknown"),),
        ),
        Operation(
            "ChromeDeploy",
            "Deploy the workspace's build output to the configured deploy target and observe "
            "it answering.",
            NoArgs, _deploy, effects=(Effect("write"),), intent=_deploy_intent,
            recover=recover_deploy,
        ),
        Operation(
            "ChromePublish",
            "Publish the build output to the configured remote target (asked by default); "
            "its receipt carries the target's identity.",
            NoArgs, _publish, effects=(Effect("publish"),), intent=_publish_intent,
            recover=recover_publish, asks=True,
        ),
        recover_operation(),
        finish_operation(finish_gate),
    ]  # fmt: skip
