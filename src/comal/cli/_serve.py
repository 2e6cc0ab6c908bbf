"""``comal serve`` (the proxy, HTTP API and dashboard) and ``comal keys`` (proxy API keys).

Register with ``app.add_typer(_serve.keys_app, name="keys")`` and the ``serve`` command as the
other command groups are registered.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from ..errors import UserError
from ._common import LEDGER_HELP, JsonOpt, coded_errors, emit_json, err, ledger, ledger_target, out

app = typer.Typer()
keys_app = typer.Typer(
    help="Proxy API keys: one tenant each, stored hashed.\n\nExample: comal keys add --tenant acme",
    no_args_is_help=True,
)


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.", min=1, max=65535)] = 8787,
    engine: Annotated[
        str | None, typer.Option(help="Context engine (default: the configuration's).")
    ] = None,
    context_window: Annotated[
        int | None, typer.Option(help="Cap the window (minimum with the model's).", min=1)
    ] = None,
    upstream_anthropic: Annotated[
        str, typer.Option(help="Anthropic API base URL.", envvar="COMAL_UPSTREAM_ANTHROPIC")
    ] = "https://api.anthropic.com",
    upstream_openai: Annotated[
        str, typer.Option(help="OpenAI API base URL (with /v1).", envvar="COMAL_UPSTREAM_OPENAI")
    ] = "https://api.openai.com/v1",
    output_reserve: Annotated[
        int | None, typer.Option(help="Output tokens the input is budgeted against.", min=1)
    ] = None,
    max_body: Annotated[int, typer.Option(help="Largest request body in bytes.", min=1024)] = 32
    << 20,
    no_dashboard: Annotated[
        bool, typer.Option("--no-dashboard", help="Serve no web dashboard.")
    ] = False,
    ledger_file: Annotated[
        str | None,
        typer.Option("--ledger", help=f"{LEDGER_HELP}."),
    ] = None,
    config_file: Annotated[
        Path | None,
        typer.Option(
            "--config",
            help="Configuration file (default: COMAL_CONFIG, else the per-user one): its rules "
            "judge recall calls, and its engine, engine_settings, context_window and "
            "output_reserve apply unless given here.",
        ),
    ] = None,
    allow_host: Annotated[
        list[str] | None,
        typer.Option(
            help="Also answer requests addressed to this host name (repeatable; adds to "
            "serve.allowed_hosts). Others are refused against DNS rebinding.",
        ),
    ] = None,
    allow_origin: Annotated[
        list[str] | None,
        typer.Option(
            help="Let web pages of this origin (scheme://host[:port]) call the server "
            "(repeatable; adds to serve.allowed_origins).",
        ),
    ] = None,
    workers: Annotated[
        int,
        typer.Option(
            help="Worker processes serving the one socket, all on the one ledger (SQLite for a "
            "few on one host, PostgreSQL for many hosts).",
            min=1,
            max=64,
        ),
    ] = 1,
) -> None:
    """Run the proxy (Anthropic /v1/messages, OpenAI /v1/chat/completions and /v1/responses),
    the HTTP API (/api, schema at /openapi.json) and the dashboard (/) in one process.

    Upstream keys: the client's own key headers go upstream unchanged, unless
    COMAL_UPSTREAM_ANTHROPIC_KEY / COMAL_UPSTREAM_OPENAI_KEY are set; comal's proxy keys never
    do. On an explicit loopback address with no proxy keys, one local tenant is served without
    a key; on any other address (--host 0.0.0.0 or '') `comal keys add` must make one first.
    Requests naming another host than the server's, and browser requests from other web pages,
    are refused (--allow-host, --allow-origin add to the configuration's serve section).

    With --workers N, N processes share the socket and the ledger; any of them may take any
    turn of any conversation (responses say which in x-comal-worker).

    Example: comal serve --port 8787 --context-window 128000 --workers 2
    """
    import os

    from ..agent import load_config
    from ..serve import ServeConfig, create_app
    from ..serve._run import listen_on, serve_forever

    with coded_errors(False):
        # The configuration file, as every command reads it (CFG-1); flags win over it. Loading
        # it enables its plugins: (engines, schemes, operations) before the app reads them.
        operator = load_config(config_file)
        settings = operator.serve
        config = ServeConfig(
            ledger=ledger_file if ledger_file is not None else ledger_target(),
            host=host,
            port=port,
            engine=engine or operator.engine,
            context_window=context_window or operator.context_window,
            upstream_anthropic=upstream_anthropic,
            upstream_openai=upstream_openai,
            upstream_anthropic_key=os.environ.get("COMAL_UPSTREAM_ANTHROPIC_KEY") or None,
            upstream_openai_key=os.environ.get("COMAL_UPSTREAM_OPENAI_KEY") or None,
            output_reserve=output_reserve or operator.output_reserve,
            max_body_bytes=max_body,
            dashboard=not no_dashboard,
            operator=operator,
            allowed_hosts=(*settings.allowed_hosts, *_checked_hosts(allow_host or [])),
            allowed_origins=(*settings.allowed_origins, *_checked_origins(allow_origin or [])),
            header_timeout=settings.header_timeout,
            body_timeout=settings.body_timeout,
            keep_alive_timeout=settings.keep_alive_timeout,
            max_connections=settings.max_connections,
        )
        if workers > 1:
            # Each worker opens its own ledger after the fork; here it is only created or
            # migrated once, so a bad target is a coded error before the banner.
            if str(config.ledger) == ":memory:":
                raise UserError(
                    "--workers needs a ledger the workers share: give a file or a "
                    "postgresql:// URL, not :memory:"
                )
            from ..ledger import open_ledger

            open_ledger(config.ledger, create=True).close()
            sock = listen_on(host, port)
        else:
            application = create_app(config)
            try:
                # A busy port is said here, before the banner, not by uvicorn after it.
                sock = listen_on(host, port)
            except BaseException:
                application.state.ledger.close()  # the app's own: its lifespan never runs
                raise
    where = f"http://{host}:{port}"
    err.print(f"comal serve on {where}  (ledger {config.ledger})")
    if not config.loopback:
        err.print(
            f"  not on a loopback address ({host!r}): every request needs a proxy key; clients "
            "that reach it by another name than the address need --allow-host NAME"
        )
    err.print(f"  Claude Code: ANTHROPIC_BASE_URL={where} claude")
    err.print(f"  OpenAI SDKs / Codex: base_url {where}/v1   dashboard: {where}/")
    if workers > 1:
        from ..serve._workers import serve_workers

        err.print(f"  {workers} workers on one socket and one ledger")
        status = serve_workers(lambda: create_app(config), host, port, sock, workers, say=err.print)
        if status:
            raise typer.Exit(status)
        return
    serve_forever(application, host, port, sock=sock)


def _checked_hosts(names: list[str]) -> list[str]:
    from ..agent import ServeSettings

    return _checked(ServeSettings, "allowed_hosts", "--allow-host", names)


def _checked_origins(origins: list[str]) -> list[str]:
    from ..agent import ServeSettings

    return _checked(ServeSettings, "allowed_origins", "--allow-origin", origins)


def _checked(model: Any, key: str, flag: str, values: list[str]) -> list[str]:
    """Flag values validated as the configuration file's are."""
    from pydantic import ValidationError

    try:
        return list(getattr(model.model_validate({key: values}), key))
    except ValidationError as exc:
        raise typer.BadParameter(exc.errors()[0]["msg"], param_hint=flag) from exc


@keys_app.command("add")
def keys_add(
    tenant: Annotated[str, typer.Option(help="The tenant the key opens.")],
    name: Annotated[str, typer.Option(help="A label, e.g. who holds it.")] = "",
    as_json: JsonOpt = False,
) -> None:
    """Create a proxy key for TENANT and print it once (only its sha256 is stored).

    Example: comal keys add --tenant acme --name ci
    """
    with coded_errors(as_json), ledger(create=True) as led:
        key, secret = led.add_proxy_key(tenant, name)
    if as_json:
        emit_json({**key.as_dict(), "key": secret})
        return
    out.print(secret)
    err.print(
        f"key {key.id} for tenant {tenant}: shown once, keep it; "
        f"revoke with `comal keys revoke {key.id}`"
    )


@keys_app.command("list")
def keys_list(
    tenant: Annotated[str | None, typer.Option(help="Only this tenant's keys.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """List proxy keys (ids, tenants, labels, when made and revoked; never the keys).

    Example: comal keys list --json
    """
    with coded_errors(as_json), ledger() as led:
        keys = led.proxy_keys(tenant=tenant)
    if as_json:
        emit_json([k.as_dict() for k in keys])
        return
    table = Table("id", "tenant", "name", "created", "revoked")
    for k in keys:
        table.add_row(k.id, k.tenant, k.name, k.created_at[:19], (k.revoked_at or "")[:19])
    out.print(table)


@keys_app.command("revoke")
def keys_revoke(
    key_id: Annotated[str, typer.Argument(help="The key's id (from `comal keys list`).")],
    as_json: JsonOpt = False,
) -> None:
    """Revoke a proxy key; requests with it are refused from now on.

    Example: comal keys revoke 2c4701713b4e
    """
    with coded_errors(as_json), ledger() as led:
        key = led.revoke_proxy_key(key_id)
    if as_json:
        emit_json(key.as_dict())
        return
    out.print(f"revoked {key.id} ({key.tenant}) at {key.revoked_at}")
