"""The split of the benign texts the injection model is fit, tuned and measured on
(benchmarks/judge.py): by group, so near-copies never straddle it."""

from __future__ import annotations

from benchmarks.judge import SPLITS, group, session_family, split_of


def test_a_session_family_is_one_group():
    assert session_family("0a1b2c3d_2") == session_family("0a1b2c3d_4") == "0a1b2c3d"
    assert session_family("answer_0a1b2c3d_1") == "0a1b2c3d"
    assert session_family("0a1b2c3d_abs_1") == "0a1b2c3d"
    assert session_family("sharegpt_ErOTMZ3_223") == session_family("sharegpt_ErOTMZ3_7")
    assert session_family("ultrachat_100380") != session_family("ultrachat_100956")
    assert split_of("lme:0a1b2c3d_2:5") == split_of("lme:answer_0a1b2c3d_1:0")


def test_files_and_conversations_are_groups():
    assert group("repo:docs/a.md:1-9") == group("repo:docs/a.md:40-60") == "docs/a.md"
    assert split_of("locomo:conv-26:D1:3") == split_of("locomo:conv-26:D9:1")
    assert group("scifact:123") != group("scifact:124")


def test_claude_code_transcripts_are_only_measured():
    assert all(split_of(f"cc:transcript-{i}:0") == "report" for i in range(20))


def test_the_splits_are_about_half_a_quarter_and_a_quarter():
    splits = [split_of(f"scifact:{i}") for i in range(4000)]
    share = {k: splits.count(k) / len(splits) for k in SPLITS}
    assert abs(share["fit"] - 0.5) < 0.03
    assert abs(share["tune"] - 0.25) < 0.03 and abs(share["report"] - 0.25) < 0.03
