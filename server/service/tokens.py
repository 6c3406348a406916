"""Where the bearer tokens of ``server.auth.TokenStore`` live when PostgreSQL is the store:
its ``pm_tokens`` table, shared by every daemon (``retrieval/pg/tokens.py``)."""

from __future__ import annotations


def load_tokens(store_url: str) -> dict[str, dict]:
    from retrieval.pg.tokens import load_tokens as load

    return load(store_url)


def save_tokens(store_url: str, data: dict[str, dict]) -> None:
    from retrieval.pg.tokens import save_tokens as save

    save(store_url, data)


__all__ = ["load_tokens", "save_tokens"]
