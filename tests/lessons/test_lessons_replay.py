"""The replay benchmark of lessons learned from sessions (``benchmarks/lessons_auto.py``) on a
tiny file in the Defects4J layout: its transcripts, its negative controls, its measures; and the
failure hook's query and relevance on the stores the replay builds."""

from __future__ import annotations

import json
from argparse import Namespace
from types import SimpleNamespace

from benchmarks import d4j_sessions as d4j
from benchmarks import lessons_auto
from retrieval.embedding.embedder import HashEmbedder
from server.service.learning.failure_lessons import pattern_of, query_text
from server.service.prompting import hook_context


def trace(exc: str, msg: str, method: str, test: str, line: int) -> str:
    return (f"{exc}: {msg}\n\tat org.acme.text.Wrapper.{method}(Wrapper.java:{line})\n"
            f"\tat org.acme.text.Wrapper.render(Wrapper.java:{line + 40})\n"
            f"\tat org.acme.text.WrapperTest.{test}(WrapperTest.java:{line // 10})\n"
            "\tat sun.reflect.NativeMethodAccessorImpl.invoke0(Native Method)\n")  # fmt: skip


def patch(path: str, method: str, fixed: str, buggy: str) -> str:
    return (f"diff --git a/{path} b/{path}\nindex 1..2 100644\n--- a/{path}\n+++ b/{path}\n"
            f"@@ -10,4 +10,4 @@ public class Wrapper\n     int {method}(String text, int width) {{\n"
            f"-        {fixed}\n+        {buggy}\n         return pos;\n     }}\n")  # fmt: skip


def bug(n: int, exc: str, msg: str, method: str, fixed: str, buggy: str) -> dict:
    tests = [f"org.acme.text.WrapperTest::test{method.title()}{i}" for i in range(3)]
    return {
        "project": "Acme", "bug_id": n, "active": True,
        "src_patch": patch(f"src/main/java/org/acme/text/Wrapper{n}.java", method, fixed, buggy),
        "trigger_tests": [{"test": t, "trace": trace(exc, msg, method, t.split("::")[1], 100 + 7 * n)}
                          for t in tests],
    }  # fmt: skip


BUGS = [
    bug(1, "java.lang.StringIndexOutOfBoundsException", "String index out of range: 12",
        "findWrapPos", "while (pos < text.length()) ++pos;", "while (pos <= text.length()) ++pos;"),
    bug(2, "java.lang.NullPointerException", "", "padRight", "if (text == null) return 0;", ""),
    bug(3, "junit.framework.AssertionFailedError", "expected:<3> but was:<4>", "countLines",
        "int pos = text.split(\"\\n\").length;", "int pos = text.split(\"\\n\").length + 1;"),
]  # fmt: skip


def test_a_fix_session_is_written_as_claude_code_writes_it(tmp_path):
    path = d4j.session(BUGS[0], "fix", tmp_path, "/acme")
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    kinds = [b["name"] for e in lines if isinstance(e["message"]["content"], list)
             for b in e["message"]["content"] if b.get("type") == "tool_use"]  # fmt: skip
    assert kinds == ["Bash", "Read", "Edit", "Bash"]
    failed = [b for e in lines if isinstance(e["message"]["content"], list)
              for b in e["message"]["content"] if b.get("is_error")]  # fmt: skip
    assert len(failed) == 1 and "String index out of range: 12" in failed[0]["content"]
    edit = next(b["input"] for e in lines if isinstance(e["message"]["content"], list)
                for b in e["message"]["content"] if b.get("name") == "Edit")  # fmt: skip
    assert "pos <= text" in edit["old_string"] and "pos < text" in edit["new_string"]
    said = lines[-1]["message"]["content"][0]["text"]
    assert "`findWrapPos` in `Wrapper1.java`" in said


def test_the_replay_learns_each_fix_and_nothing_from_the_controls(tmp_path, monkeypatch):
    data = tmp_path / "bugs.jsonl"
    data.write_text("".join(json.dumps(b) + "\n" for b in BUGS))
    monkeypatch.setattr(lessons_auto.tempfile, "tempdir", str(tmp_path))
    args = Namespace(file=str(data), projects=None, controls=-1, runner_controls=1, no_cache=True,
                     latency=0)  # fmt: skip
    res = lessons_auto.run(args, embedder=HashEmbedder())
    assert (res["bugs"], res["queries"], res["fix_sessions"]) == (3, 6, 3)
    assert res["episodes"] == 3 and res["lessons_created"] == 1.0 and res["new_lessons"] == 3
    assert res["control_sessions"] == 32 and res["false_lessons"] == 0
    assert res["runner_fix_sessions"] == res["runner_fix_episodes"] == 4
    assert res["fix_names_patched_file"] == 1.0
    assert res["recall@10"] == 1.0 and res["hand_recorded_recall@10"] == 1.0
    assert "lessons created for episodes" in lessons_auto.table(res)


def test_the_failure_hooks_query_is_the_error_its_test_and_innermost_frame():
    text = trace("java.lang.IllegalStateException", "closed", "flush", "testFlush", 50)
    p = pattern_of(text, "org.acme.text.WrapperTest::testFlush")
    assert (p["type"], p["message"]) == ("java.lang.IllegalStateException", "closed")
    assert p["stackTrace"].splitlines() == text.splitlines()[1:2]
    assert query_text(p) == ("java.lang.IllegalStateException: closed\n"
                             "Context: org.acme.text.WrapperTest::testFlush\n" + text.splitlines()[1])  # fmt: skip
    assert pattern_of("make: *** [all] Error 2", "make")["stackTrace"] is None


def test_a_short_query_is_embedded_once():
    """The relevance and find_similar_errors ask the same short text: one embedding."""
    seen = []
    svc = SimpleNamespace(engine=SimpleNamespace(
        lexical=SimpleNamespace(terms=lambda q: [], doc_freqs=lambda ts: {}, doc_count=lambda: 1),
        search=lambda text, f, k: seen.append(text) or []))  # fmt: skip
    short = "java.lang.IllegalStateException: closed\nContext: WrapperTest::testFlush"
    hook_context.lesson_scores(svc, None, short)
    hook_context.lesson_scores(svc, None, "word " * 60)
    assert seen == [short, " ".join(["word"] * hook_context.ERROR_QUERY_WORDS)]


def test_the_relevance_survives_a_store_that_grew_since_it_was_counted():
    """The record count is cached for a while, the term counts are not: a term may be counted
    in more records than the cached count (a worker wrote meanwhile)."""
    lex = SimpleNamespace(terms=lambda q: q.split(), doc_freqs=lambda ts: {t: 5 for t in ts},
                          doc_count=lambda: 2)  # fmt: skip
    svc = SimpleNamespace(engine=SimpleNamespace(lexical=lex))
    assert hook_context.coverage_mass(svc, "pool timeout") > 0
