"""Switching both ways: the official memory server's memory.jsonl and the seed's lesson.json,
through ``pattern-memory import-graph`` / ``export-graph`` (real store, hashing embedder)."""

from __future__ import annotations

import json

import pytest

from server.cli import main

# Written exactly as @modelcontextprotocol/server-memory saves its graph: JSON.stringify per line,
# entities first, then relations.
OFFICIAL = [
    {"type": "entity", "name": "John_Smith", "entityType": "person",
     "observations": ["Speaks fluent Spanish", "Graduated in 2019", "Prefers morning meetings"]},
    {"type": "entity", "name": "Anthropic", "entityType": "organization", "observations": ["AI safety company"]},
    {"type": "entity", "name": "Tokyo", "entityType": "city", "observations": []},
    {"type": "entity", "name": "Ünïcødé_名前", "entityType": "thing", "observations": ["naïve café ☕"]},
    {"type": "relation", "from": "John_Smith", "to": "Anthropic", "relationType": "works_at"},
    {"type": "relation", "from": "John_Smith", "to": "Tokyo", "relationType": "visited"},
    {"type": "relation", "from": "Anthropic", "to": "John_Smith", "relationType": "employs"},
]  # fmt: skip

LESSON = {
    "name": "NPM_VERSION_MISMATCH_01", "entityType": "lesson",
    "observations": ["Error occurs when using incompatible package versions", "Resolution requires version pinning"],
    "errorPattern": {"type": "dependency", "message": "Cannot find package @shadcn/ui", "context": "package installation"},
    "metadata": {"severity": "high", "environment": {"os": "windows", "nodeVersion": "18.x"},
                 "createdAt": "2025-02-13T13:21:58.523Z", "updatedAt": "2025-02-13T13:22:21.336Z",
                 "frequency": 1, "successRate": 1.0},
    "verificationSteps": [{"command": "pnpm add shadcn@latest", "expectedOutput": "Successfully installed shadcn",
                           "successIndicators": ["added shadcn"]}],
}  # fmt: skip


def js_lines(rows) -> str:
    return "".join(json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n" for r in rows)


@pytest.fixture
def cli(tmp_path, monkeypatch, capsys):
    for key, value in {
        "PATTERN_HOME": str(tmp_path / "home"), "PATTERN_EMBEDDER": "hash",
        "PATTERN_PROJECT_ID": "proj", "PATTERN_AGENT_ID": "agent",
    }.items():  # fmt: skip
        monkeypatch.setenv(key, value)

    def run(*argv: str) -> dict:
        capsys.readouterr()
        assert main(list(argv)) == 0
        return json.loads(capsys.readouterr().out)

    return run


def test_memory_jsonl_round_trip_is_byte_identical(cli, tmp_path):
    src = tmp_path / "memory.jsonl"
    src.write_text(js_lines(OFFICIAL), encoding="utf-8")
    res = cli("import-graph", str(src))
    assert (res["entities"], res["relations"], res["observations"], res["skipped"]) == (4, 3, 5, [])
    out = tmp_path / "exported.jsonl"
    res = cli("export-graph", str(out))
    assert (res["entities"], res["relations"], res["lessons"]) == (4, 3, 0)
    assert out.read_text(encoding="utf-8") == src.read_text(encoding="utf-8")
    # importing the export again changes nothing (idempotent merge)
    res = cli("import-graph", str(out))
    assert (res["entities"], res["relations"], res["observations"]) == (0, 0, 0)
    cli("export-graph", str(out))
    assert out.read_text(encoding="utf-8") == src.read_text(encoding="utf-8")


def test_lessons_round_trip_as_array_and_as_lines(cli, tmp_path):
    second = {**LESSON, "name": "PY_IMPORT_02",
              "errorPattern": {"type": "ModuleNotFoundError", "message": "No module named 'yaml'",
                               "context": "pytest", "stackTrace": 'File "t.py", line 1, in <module>'}}  # fmt: skip
    arr = tmp_path / "lesson.json"
    arr.write_text(json.dumps([LESSON]), encoding="utf-8")
    lines = tmp_path / "more-lessons.json"
    lines.write_text(js_lines([second]), encoding="utf-8")
    res = cli("import-graph", str(arr), str(lines))
    assert res["lessons"] == 2 and res["skipped"] == []
    graph, lessons = tmp_path / "g.jsonl", tmp_path / "l.json"
    res = cli("export-graph", str(graph), "--lessons", str(lessons))
    assert res["lessons"] == 2
    assert [json.loads(x) for x in lessons.read_text().splitlines()] == [
        LESSON,
        second,
    ]  # timestamps kept
    assert graph.read_text() == ""  # only lessons in this graph
    # without --lessons, lessons travel inside memory.jsonl as entity rows (the official server
    # reads them as entities of type "lesson"), and come back as lessons
    cli("export-graph", str(graph), "--force")  # it held the lessons alone: kept as a backup
    rows = [json.loads(x) for x in graph.read_text().splitlines()]
    assert rows[0] == {"type": "entity", **LESSON}
    assert rows[0]["observations"] == LESSON["observations"]
    assert cli("import-graph", str(graph))["skipped"] == [
        "lesson NPM_VERSION_MISMATCH_01: already exists",
        "lesson PY_IMPORT_02: already exists",
    ]


def test_bad_rows_are_reported_and_dangling_relations_kept_pending(cli, tmp_path):
    src = tmp_path / "memory.jsonl"
    nowhere = {
        "type": "relation",
        "from": "John_Smith",
        "to": "Nowhere",
        "relationType": "lives_in",
    }
    rows = OFFICIAL[:2] + [
        nowhere,
        {"type": "entity", "name": "", "entityType": "x", "observations": []},
        {
            "type": "entity",
            "name": "Anthropic",
            "entityType": "organization",
            "observations": ["Makes Claude"],
        },
        OFFICIAL[4],
    ]
    src.write_text(js_lines(rows), encoding="utf-8")
    res = cli("import-graph", str(src))
    assert res["entities"] == 2 and res["relations"] == 1 and res["pending"] == 1
    assert res["observations"] == 5  # the duplicate Anthropic row merged its new observation
    assert not any("Nowhere" in s for s in res["skipped"])
    assert any(s.startswith("entity #3") for s in res["skipped"])
    out = tmp_path / "out.jsonl"
    exported = cli("export-graph", str(out))
    assert (exported["relations"], exported["pending"]) == (1, 1)
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert lines[1]["observations"] == ["AI safety company", "Makes Claude"]
    # the pending relation is written back, after the others (the official server keeps it)
    assert [r for r in lines if r["type"] == "relation"] == [OFFICIAL[4], nowhere]
    # a second run keeps it once; the entity, when it comes, makes it a relation
    assert cli("import-graph", str(src))["pending"] == 1
    later = tmp_path / "later.jsonl"
    later.write_text(js_lines([{"type": "entity", "name": "Nowhere", "entityType": "city",
                                "observations": []}]), encoding="utf-8")  # fmt: skip
    assert cli("import-graph", str(later))["entities"] == 1
    cli("export-graph", str(out), "--force")
    relations = [json.loads(x) for x in out.read_text().splitlines() if '"relation"' in x]
    assert relations == [OFFICIAL[4], nowhere]
    assert cli("export-graph", str(tmp_path / "again.jsonl"))["pending"] == 0


def test_a_relation_between_two_missing_entities_waits_for_both(cli, tmp_path):
    src = tmp_path / "memory.jsonl"
    ghost = {"type": "relation", "from": "Ghost_A", "to": "Ghost_B", "relationType": "knows"}
    src.write_text(js_lines([ghost]), encoding="utf-8")
    assert cli("import-graph", str(src))["pending"] == 1
    half = tmp_path / "half.jsonl"
    half.write_text(js_lines([{"type": "entity", "name": "Ghost_A", "entityType": "person",
                               "observations": []}]), encoding="utf-8")  # fmt: skip
    cli("import-graph", str(half))
    assert cli("export-graph", str(tmp_path / "one.jsonl"))["pending"] == 1
    (tmp_path / "other.jsonl").write_text(js_lines([{"type": "entity", "name": "Ghost_B",
                                                      "entityType": "person", "observations": []}]))  # fmt: skip
    cli("import-graph", str(tmp_path / "other.jsonl"))
    res = cli("export-graph", str(tmp_path / "two.jsonl"))
    assert (res["relations"], res["pending"]) == (1, 0)


def test_unreadable_files_are_clear_errors(cli, tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"type":"entity","name":"a","entityType":"x","observations":[]}\nnot json\n')
    capsys.readouterr()
    assert main(["import-graph", str(bad)]) == 2
    assert "line 2 is not valid JSON" in capsys.readouterr().err


def test_a_relation_the_policy_refuses_is_reported_and_the_rest_imported(
    cli, tmp_path, monkeypatch
):
    monkeypatch.setenv("PATTERN_SECRET_POLICY", "block")
    token = "ghp_" + "Xq7Lm2Vt9RkP4sWz8NbC3dF6gH1jK5yTnQ0a"
    src = tmp_path / "memory.jsonl"
    leak = {
        "type": "relation",
        "from": "John_Smith",
        "to": f"token {token}",
        "relationType": "uses",
    }
    src.write_text(js_lines([*OFFICIAL[:2], leak, OFFICIAL[4]]), encoding="utf-8")
    res = cli("import-graph", str(src))
    assert (res["entities"], res["relations"], res["pending"]) == (2, 1, 0)
    [skip] = res["skipped"]
    assert skip.startswith("relation #2: ") and "credentials" in skip and token not in skip
