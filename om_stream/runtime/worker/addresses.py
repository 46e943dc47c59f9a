"""How the settings that name a host, a port or a URL must be written: checks of the text only, no network.

A broker or a node that does not answer yet is not a settings error (brokers may start after the worker, and the
start-up connection checks handle it); a value that can never name an address is, and the worker refuses it before
it starts (``preflight``).

* ``host_port_list("kafka-0:9092,kafka-1:9092", default_port=9092)``: comma separated ``host[:port]``, the host a DNS
  name or an IP address (IPv6 in brackets: ``[::1]:9092``), the port 1-65535.
* ``http_url("https://api.example.com/v1")``: ``http`` or ``https``, a host, a port 1-65535 if given.
* ``shown_url``: a URL as an error message may show it, without the user and password it may carry.

Each check returns None when the value is usable, else one sentence saying what is wrong.
"""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import urlsplit

__all__ = ["host_port_list", "http_url", "shown_url"]

# RFC 1123 labels; "_" too, which container runtimes allow in service names and resolvers answer
_LABEL = re.compile(r"^(?!-)[A-Za-z0-9_-]{1,63}(?<!-)$")


def _host(host: str) -> str | None:
    if not host:
        return "the host is empty"
    if host.startswith("[") and host.endswith("]"):
        try:
            ipaddress.IPv6Address(host[1:-1])
        except ValueError:
            return f"{host} is not an IPv6 address"
        return None
    if ":" in host:
        return f"{host!r} looks like an IPv6 address: write it in brackets, [{host}]"
    if len(host) > 253 or not all(_LABEL.match(label) for label in host.removesuffix(".").split(".")):
        return f"{host!r} is not a host name or an IP address"
    return None


def _port(text: str) -> str | None:
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        return f"the port {text!r} is not a number from 1 to 65535"
    return None


def host_port_list(value: str, *, default_port: int) -> str | None:
    """Why ``value`` is not a comma separated list of ``host[:port]`` (None: it is). ``default_port`` is what a
    host without a port gets; it only appears in messages."""
    items = [item.strip() for item in value.split(",")]
    if not value.strip():
        return f"no address given (expected host:port, e.g. 127.0.0.1:{default_port})"
    for item in items:
        if not item:
            return "an empty entry between commas"
        if "://" in item:
            return f"{item!r}: give host:port without a scheme"
        if item.startswith("["):
            host, closed, rest = item.partition("]")
            host += "]"
            if not closed or (rest and not rest.startswith(":")):
                return f"{item!r}: expected [IPv6]:port"
            port = rest[1:] if rest else None
        elif item.count(":") > 1:
            host, port = item, None  # an unbracketed IPv6 address: _host says how to write it
        else:
            host, sep, tail = item.partition(":")
            port = tail if sep else None
        problem = _host(host) or (_port(port) if port is not None else None)
        if problem:
            return f"{item!r}: {problem}"
    return None


def http_url(value: str) -> str | None:
    """Why ``value`` is not an http(s) URL with a host (None: it is)."""
    try:
        parts = urlsplit(value.strip())
        port = parts.port  # raises ValueError when out of range or not a number
    except ValueError as exc:
        return f"not a URL ({exc})"
    if parts.scheme not in ("http", "https"):
        return "expected an http:// or https:// URL"
    if not parts.hostname:
        return "the URL names no host"
    problem = _host(f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname)
    if problem:
        return problem
    if port == 0:
        return "the port 0 is not a number from 1 to 65535"
    return None


def shown_url(value: str) -> str:
    """``value`` without the credentials a URL may carry (``https://user:secret@host`` → ``https://***@host``) and
    without its query (an API key sometimes travels there): what an error message may show."""
    text = value.strip()
    scheme, sep, rest = text.partition("://")
    if not sep:
        scheme, rest = "", text
    rest, query, _ = rest.partition("?")
    authority, slash, path = rest.partition("/")
    if "@" in authority:
        authority = "***@" + authority.rpartition("@")[2]
    return (f"{scheme}://" if sep else "") + authority + slash + path + ("?..." if query else "")
