"""The injection and secret scans give every text of the corpus (:mod:`tests.scan_corpus`: the
adversarial set, the docs and service modules, attacks placed at every offset around the sizes
the scan cuts a text into, stretched by long gaps, in other cases and scripts, credentials
among runs of key words) the verdicts pinned when the scans last changed on purpose: the same
findings in the same order, the same excerpts, score and reason, the same secrets at the same
places. The fixture holds digests of those verdicts, never the texts (``python -m
tests.scan_corpus --diff REV`` lists the texts judged otherwise than at revision REV)."""

from __future__ import annotations

import pytest

from server.service.trust.injection_scan import injection
from server.service.trust.secret_scan import secrets
from tests import scan_corpus


def _check(name: str, texts: list[str]) -> None:
    expected = scan_corpus.fixture()["groups"][name]
    assert expected["texts"] == len(texts), "the corpus changed: rewrite the fixture"
    chunk = scan_corpus.CHUNK
    got = scan_corpus.chunk_digests(injection, secrets, texts)
    wrong = [i for i, (a, b) in enumerate(zip(got, expected["digests"], strict=True)) if a != b]
    report = []
    for i in wrong[:3]:
        for text in texts[i * chunk : (i + 1) * chunk]:
            report.append(f"{text[:120]!r}: {scan_corpus.verdict_of(injection, secrets, text)}")
    assert not wrong, f"{len(wrong)} chunks of {chunk} texts differ; among them:\n" + "\n".join(
        report
    )


def test_synthetic_texts_get_the_pinned_verdicts():
    _check("synthetic", scan_corpus.synthetic_texts())


def test_the_adversarial_set_docs_and_code_get_the_pinned_verdicts():
    texts = scan_corpus.pinned_texts()
    if texts is None:
        pytest.skip(f"needs the history of {scan_corpus.REFERENCE} (git)")
    _check("reference", texts)
