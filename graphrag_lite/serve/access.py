"""Who may reach `graphrag-lite serve`: without a key, only this machine, and only by its loopback names (all
of 127.0.0.0/8, ::1 and localhost); with a key, anyone who sends it. A key is checked before the index loads:
it is never blank, and long enough not to be guessed (16 characters or more)."""

from __future__ import annotations

import hmac
import ipaddress
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from graphrag_lite.errors import ConfigError

MIN_KEY_CHARS = 16
KEY_SETTINGS = "--api-key (or the GRAPHRAG_LITE_API_KEY environment variable)"
A_GOOD_KEY = "python -c 'import secrets; print(secrets.token_urlsafe(24))'"


def is_loopback(host: str) -> bool:
    """Whether `host` (an address, a bracketed IPv6 address or a name) is this machine's loopback: any
    address of 127.0.0.0/8, ::1, or localhost."""
    name = host.strip().removeprefix("[").removesuffix("]")
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return name.lower() == "localhost"


def checked_api_key(api_key: str | None) -> str | None:
    """The key as clients will send it (spaces around it dropped, as HTTP drops them from a header), or a
    ConfigError that says what to set: a blank key would let no one in, a short one anyone who guesses."""
    if api_key is None:
        return None
    key = api_key.strip()
    if not key:
        raise ConfigError(f"the API key is blank: set {KEY_SETTINGS} to a key of at least {MIN_KEY_CHARS} "
                          f"characters (one is printed by {A_GOOD_KEY}), or leave it unset to serve this "
                          "machine only")
    if len(key) < MIN_KEY_CHARS:
        raise ConfigError(f"the API key is {len(key)} characters long: {KEY_SETTINGS} needs at least "
                          f"{MIN_KEY_CHARS}, so that it cannot be guessed (one is printed by {A_GOOD_KEY})")
    return key


def check_binding(host: str, api_key: str | None) -> None:
    """Only this machine may reach a server without a key; a key given is checked (checked_api_key)."""
    if checked_api_key(api_key) or is_loopback(host):
        return
    raise ConfigError(f"serving on {host} lets other machines read the index: set an API key with {KEY_SETTINGS} "
                      "(clients send it as X-API-Key), or bind to a loopback address (127.0.0.1)")


def key_matches(headers: Headers, api_key: str) -> bool:
    """Whether the request sent the key, as an X-API-Key header or a Bearer token (compared in constant time)."""
    sent = headers.get("x-api-key")
    if sent is None:
        scheme, _, token = headers.get("authorization", "").partition(" ")
        sent = token if scheme.lower() == "bearer" else ""
    return hmac.compare_digest(sent.strip().encode(), api_key.encode())


class LoopbackHostsOnly:
    """A keyless server answers only requests addressed to a loopback name or address (the Host header): a web
    page cannot reach it through a name of its own that it rebinds to 127.0.0.1 (DNS rebinding)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            host = Headers(scope=scope).get("host", "")
            if not is_loopback(_name_in(host)):
                refused = PlainTextResponse(f"Invalid host header: a server without an API key answers only requests "
                                            f"addressed to this machine (localhost, 127.x.x.x, [::1]), not {host!r}",
                                            status_code=400)
                await refused(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _name_in(host: str) -> str:
    """The name or address of a Host header, without its port ("" when it is not one)."""
    try:
        return urlsplit(f"//{host}").hostname or ""
    except ValueError:  # "[::1", an unclosed bracket
        return ""
