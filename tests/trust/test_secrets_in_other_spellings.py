"""Secrets an automatic write may meet spelled another way than the scanner reads them: a hex
dump of a file that holds one (``xxd -p .env``, ``od``), and a token split by an invisible
character (a zero-width space, a soft hyphen) that a reader removes in one step. Both are
found and redacted whole; ordinary text, digests and hex of text without a secret are kept."""

from __future__ import annotations

import binascii
import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from server.service.trust.secret_scan.secret_files import secret_text, without_encoded
from server.service.trust.secret_scan.secrets import SecretPolicy, apply_policy, scan

GHP = "ghp_" + "Xq7Lm2Vt9RkP4sWz8NbC3dF6gH1jK5yTnQ0a"
ENV = f"GITHUB_TOKEN={GHP}\n"


def kept(text: str) -> str:
    """What an automatic write keeps of ``text`` (at least ``redact``)."""
    out, _ = apply_policy(text, SecretPolicy.redact)
    return without_encoded(out)[0]


def test_a_hex_dump_of_a_secret_is_found():
    dump = binascii.hexlify(ENV.encode()).decode()
    assert secret_text(f"$ xxd -p .env.local\n{dump}\n")
    assert dump not in kept(f"output: {dump}")


@pytest.mark.parametrize("mark", ["\u200b", "\u00ad", "\u2060", "\ufeff"])
def test_a_token_split_by_an_invisible_character_is_found(mark):
    split = GHP[:12] + mark + GHP[12:]
    assert secret_text(f"token: {split}")
    assert GHP[12:] not in kept(f"the token is {split} for CI")


def test_the_plain_forms_are_found():
    assert secret_text(ENV) and GHP not in kept(ENV)


MARKS = ["\u200b", "\u200c", "\u200d", "\u00ad", "\u2060", "\ufeff", "\u202e", "\U000e0041"]
PROSE = st.text(alphabet=string.ascii_letters + string.digits + " .,;!?()\n-", max_size=200)


def visible(text: str) -> str:
    return "".join(c for c in text if c not in MARKS)


def test_redaction_covers_the_invisible_characters_inside_the_token():
    out = kept("a\u200bb token " + GHP[:4] + "\u200b\u00ad" + GHP[4:] + "\u2060 end")
    assert out == "a\u200bb token [REDACTED:github_token]\u2060 end"


def test_a_hex_dump_wrapped_over_lines_is_redacted_whole():
    dump = binascii.hexlify(ENV.encode()).decode()
    lines = "\n".join(dump[i : i + 60] for i in range(0, len(dump), 60))
    assert (
        kept(f"$ xxd -p .env\n{lines}\n$ ls\n") == "$ xxd -p .env\n[REDACTED:github_token]\n$ ls\n"
    )


def test_hex_runs_that_are_not_text_or_hold_no_secret_are_kept():
    digest = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    words = binascii.hexlify(b"an ordinary line of a log, nothing secret").decode()
    text = f"sha256 {digest}\ncommit {digest[:40]}\n{words}\n"
    assert scan(text) == [] and kept(text) == text


@settings(max_examples=40, deadline=None)
@given(before=PROSE, after=PROSE, marks=st.lists(st.tuples(st.integers(1, len(GHP) - 1),
                                                             st.sampled_from(MARKS)),
                                                   min_size=1, max_size=4))  # fmt: skip
def test_a_token_with_invisible_characters_anywhere_inside_is_redacted(before, after, marks):
    token = GHP
    for at, mark in sorted(marks, reverse=True):
        token = token[:at] + mark + token[at:]
    out = kept(f"{before} {token} {after}")
    assert "[REDACTED:github_token]" in out
    assert not any(GHP[i : i + 8] in visible(out) for i in range(len(GHP) - 8))


@settings(max_examples=40, deadline=None)
@given(before=PROSE, after=PROSE, wrap=st.sampled_from([0, 32, 60]), upper=st.booleans())
def test_a_token_in_a_hex_run_is_redacted(before, after, wrap, upper):
    dump = binascii.hexlify(f"{before}\nGITHUB_TOKEN={GHP}\n".encode()).decode()
    dump = dump.upper() if upper else dump
    if wrap:
        dump = "\n".join(dump[i : i + wrap] for i in range(0, len(dump), wrap))
    out = kept(f"{after}\n{dump}\n{after}")
    assert "[REDACTED:github_token]" in out
    assert binascii.hexlify(GHP[4:20].encode()).decode() not in out.lower().replace("\n", "")


@settings(max_examples=40, deadline=None)
@given(parts=st.lists(st.one_of(PROSE, st.sampled_from(MARKS),
                                PROSE.map(lambda t: binascii.hexlify(t.encode()).decode()),
                                st.binary(min_size=16, max_size=64).map(bytes.hex)),
                      max_size=8))  # fmt: skip
def test_text_without_secrets_is_kept_unchanged(parts):
    text = " ".join(parts)
    assert scan(text) == []
    assert apply_policy(text, SecretPolicy.redact) == (text, [])


def test_both_spellings_are_read_when_the_one_pass_of_hints_cannot_tell(monkeypatch):
    from server.service.trust.secret_scan import secrets

    class Failed:  # RE2's Set reports nothing when its pass fails, not even the empty pattern
        def Match(self, raw):  # noqa: N802
            return []

    monkeypatch.setattr(secrets, "_HINTS", Failed())
    dump = binascii.hexlify(ENV.encode()).decode()
    assert kept(f"dump {dump} and {GHP[:9]}\u200b{GHP[9:]}") == (
        "dump [REDACTED:github_token] and [REDACTED:github_token]"
    )
