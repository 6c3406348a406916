"""The one-time scrub of learned lessons redacts secrets in the keys of a stored object too; two
keys that redact to the same text both keep their values (the second replaced the first)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from server.service.learning import lesson_scrub

GHP = "ghp_" + "Xq7Lm2Vt9RkP4sWz8NbC3dF6gH1jK5yTnQ0a"
OTHER = "ghp_" + "Lm2Vt9RkP4sWz8NbC3dF6gH1jK5yTnQ0aXq7"


def leaves(value) -> list:
    if isinstance(value, dict):
        return [x for v in value.values() for x in leaves(v)]
    if isinstance(value, list):
        return [x for v in value for x in leaves(v)]
    return [value]


def test_two_keys_that_redact_alike_keep_both_values():
    doc = {"learned": {"env": {GHP: "first value", OTHER: "second value", "plain": 3}}}
    out = lesson_scrub.scrubbed(doc, lesson_scrub.Scrubbed())
    assert GHP not in repr(out) and OTHER not in repr(out)
    assert sorted(map(str, leaves(out))) == ["3", "first value", "second value"]


@settings(max_examples=30, deadline=None)
@given(
    st.lists(
        st.sampled_from([GHP, OTHER, f"key {GHP}", "[REDACTED:github_token]", "k"]),
        min_size=1,
        max_size=6,
        unique=True,
    ),
    st.data(),
)
def test_no_value_is_lost_whatever_the_keys(keys, data):
    values = [data.draw(st.integers()) for _ in keys]
    out = lesson_scrub.scrubbed(dict(zip(keys, values, strict=True)), lesson_scrub.Scrubbed())
    assert sorted(out.values()) == sorted(values)
    assert all(GHP not in k and OTHER not in k for k in out)
