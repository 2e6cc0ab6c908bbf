"""Proxy keys on both ledger backends: hashed, checked, revoked, the same way (LED-4).

# covers: LED-4
"""

from __future__ import annotations

from pathlib import Path

import pytest

from _pg_support import BACKENDS, open_store


@pytest.mark.parametrize("backend", BACKENDS)
def test_proxy_keys_on_each_backend(backend: str, tmp_path: Path) -> None:
    with open_store(backend, tmp_path) as store:
        led = store.open()
        try:
            assert not led.has_active_proxy_keys()
            key, secret = led.add_proxy_key("acme", "ci")
            other, _ = led.add_proxy_key("globex")
            assert secret.startswith(f"comal_{key.id}_")
            assert led.check_proxy_key(secret) == key
            assert led.check_proxy_key(secret[:-1] + ("A" if secret[-1] != "A" else "B")) is None
            assert led.check_proxy_key(f"comal_{other.id}_{secret.split('_', 2)[2]}") is None
            assert led.check_proxy_key("not a key") is None
            assert [k.id for k in led.proxy_keys(tenant="acme")] == [key.id]
            assert led.has_active_proxy_keys()
            revoked = led.revoke_proxy_key(key.id)
            assert revoked.revoked_at is not None and not revoked.active
            assert led.check_proxy_key(secret) is None
            assert led.revoke_proxy_key(key.id).revoked_at == revoked.revoked_at
            led.revoke_proxy_key(other.id)
            assert not led.has_active_proxy_keys()
        finally:
            led.close()
