"""The values derived from the code's patterns, kept on disk between processes
(retrieval/regexes/derived.py): read back equal to what the code derives, and a bad file or value never
makes a wrong table (it is derived again)."""

from __future__ import annotations

import gc
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from retrieval.regexes import derived, linear_regex
from retrieval.regexes.regex_translate import _Translator
from server.service.trust.injection_scan import injection, pattern_facts, rule_search

ROOT = Path(__file__).resolve().parents[2]


def _finders():
    """Every rule search the scans built at import (the injection tables, their prefilters)."""
    assert injection.RULES
    return [o for o in gc.get_objects() if isinstance(o, rule_search.Finder)]


def test_every_rules_facts_and_translation_read_back_equal_what_the_code_derives(
    tmp_path, monkeypatch
):
    """Written by one table, read by a fresh one (as the next process reads it): equal to the
    values derived in this process with no file at all."""
    monkeypatch.setenv("PATTERN_CACHE_DIR", str(tmp_path))
    finders = _finders()
    assert len(finders) > 60
    keys = []
    for f in finders:
        alts = linear_regex.alternative_forms(f.rx.pattern, f.rx.flags, False)
        keys.append((f.rx.pattern, f.rx.flags, None))
        keys += [(f.rx.pattern, f.rx.flags, i) for i in range(len(alts or []))]
    writer = derived.Table("facts-test", (pattern_facts.__file__,))
    for p, fl, i in keys:
        writer.get([p, fl, i], lambda p=p, fl=fl, i=i: pattern_facts._derive(p, fl, i),
                   pattern_facts._encode, pattern_facts._decode)  # fmt: skip
    writer.save()
    reader = derived.Table("facts-test", (pattern_facts.__file__,))

    def never():
        raise AssertionError("derived again: the file was not read")

    for p, fl, i in keys:
        got = reader.get([p, fl, i], never, pattern_facts._encode, pattern_facts._decode)
        assert got == pattern_facts._derive(p, fl, i)
    for f in finders:
        for relaxed, capture in ((False, True), (True, False)):
            try:
                want = _Translator(f.rx.flags, relaxed, capture).translate(f.rx.pattern, f.rx.flags)
            except linear_regex.NotLinear as exc:
                with pytest.raises(linear_regex.NotLinear, match=re.escape(str(exc))):
                    linear_regex._translated(f.rx.pattern, f.rx.flags, relaxed, capture)
                continue
            assert linear_regex._translated(f.rx.pattern, f.rx.flags, relaxed, capture) == want


@pytest.fixture(autouse=True)
def _writing(monkeypatch):
    """These tests write tables (as the product's processes do); a test run otherwise only
    reads them."""
    monkeypatch.setattr(derived, "_WRITE", True)


def _write(table: derived.Table, data, mode: int = 0o600) -> Path:
    path = table.path
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)
    os.chmod(path, mode)
    return path


def _planted(tmp_path, monkeypatch, data, mode=0o600):
    monkeypatch.setenv("PATTERN_CACHE_DIR", str(tmp_path))
    table = derived.Table("planted", (derived.__file__,))
    _write(table, data, mode)
    return derived.Table("planted", (derived.__file__,))


@pytest.mark.parametrize(
    "data, mode",
    [
        ({'["k"]': 999}, 0o622),  # writable by others: not read
        ({'["k"]': 999}, 0o660),  # writable by the group: not read
        ("{not json", 0o600),
        ("[1, 2]", 0o600),
        ('{"[\\"k\\"]": "a string"}', 0o600),  # a value of the wrong shape
        ("[" * 100_000 + "]" * 100_000, 0o600),  # nested past the parser's recursion
    ],
)
def test_a_bad_or_foreign_file_is_never_believed(tmp_path, monkeypatch, data, mode):
    table = _planted(tmp_path, monkeypatch, data, mode)
    assert table.get(["k"], lambda: 7, int, _strict_int) == 7


def _strict_int(v):
    if type(v) is not int:
        raise ValueError(v)
    return v


def test_a_file_past_the_size_bound_or_behind_a_link_is_not_read(tmp_path, monkeypatch):
    monkeypatch.setenv("PATTERN_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(derived, "MAX_BYTES", 100)
    table = derived.Table("planted", (derived.__file__,))
    _write(table, {'["k"]': 999, "pad": "x" * 200})
    assert (
        derived.Table("planted", (derived.__file__,)).get(["k"], lambda: 7, int, _strict_int) == 7
    )
    monkeypatch.setattr(derived, "MAX_BYTES", 8 * 2**20)
    real = tmp_path / "elsewhere.json"
    real.write_text(json.dumps({'["k"]': 999}))
    os.chmod(real, 0o600)
    table.path.unlink()
    table.path.symlink_to(real)
    assert (
        derived.Table("planted", (derived.__file__,)).get(["k"], lambda: 7, int, _strict_int) == 7
    )


def test_a_good_file_is_read_and_a_changed_deriving_code_starts_a_new_one(tmp_path, monkeypatch):
    table = _planted(tmp_path, monkeypatch, {'["k"]': 999})
    assert table.get(["k"], lambda: 7, int, _strict_int) == 999
    source = tmp_path / "deriver.py"
    source.write_text("x = 1\n")
    a = derived.Table("t", (str(source),))
    source.write_text("x = 2\n")
    assert derived.Table("t", (str(source),)).path != a.path


def test_the_file_is_private_merged_and_turned_off_by_the_setting(tmp_path, monkeypatch):
    monkeypatch.setenv("PATTERN_CACHE_DIR", str(tmp_path))
    one, two = (derived.Table("m", (derived.__file__,)) for _ in range(2))
    one.get(["a"], lambda: 1, int, _strict_int)
    two.get(["b"], lambda: 2, int, _strict_int)
    one.save()
    two.save()  # merged with what the first wrote
    data = json.loads(one.path.read_text())
    assert data == {'["a"]': 1, '["b"]': 2}
    assert one.path.stat().st_mode & 0o777 == 0o600
    assert one.path.parent.stat().st_mode & 0o777 == 0o700
    monkeypatch.setenv("PATTERN_DERIVED_CACHE", "0")
    off = derived.Table("off", (derived.__file__,))
    assert off.get(["c"], lambda: 3, int, _strict_int) == 3
    off.save()
    assert not off.path.exists()


def test_an_unwritable_cache_folder_costs_time_never_an_error(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("PATTERN_CACHE_DIR", str(blocker))
    table = derived.Table("w", (derived.__file__,))
    assert table.get(["a"], lambda: 1, int, _strict_int) == 1
    table.save()  # no exception


def test_a_second_process_reads_the_rules_tables_instead_of_deriving_them(tmp_path):
    """The point of the file: the injection rules' import derives nothing the second time."""
    env = {**os.environ, "PATTERN_CACHE_DIR": str(tmp_path)}
    probe = (
        "from retrieval.regexes import derived\n"
        "derived.write_new()\n"  # as the command line and the daemon do
        "import retrieval.regexes.regex_translate as t, server.service.trust.injection_scan.pattern_facts as f\n"
        "calls = []\n"
        "real, realt = f._derive, t._Translator.translate\n"
        "f._derive = lambda *a: calls.append(1) or real(*a)\n"
        "t._Translator.translate = lambda *a: calls.append(1) or realt(*a)\n"
        "import server.service.trust.injection_scan.injection, server.service.trust.secret_scan.secrets\n"
        "print(len(calls))\n"
    )
    first = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True,
                           text=True, timeout=120, check=True)  # fmt: skip
    second = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=120, check=True)  # fmt: skip
    assert int(first.stdout) > 100
    assert int(second.stdout) == 0, second.stdout


def test_the_command_line_writes_tables_and_a_program_importing_the_package_does_not(
    tmp_path, monkeypatch
):
    """A test run (or any program importing the package) reads the tables but never adds its
    own patterns to them; the product's processes (every command, the daemon) do."""
    from server.cli import main

    monkeypatch.setattr(derived, "_WRITE", False)
    monkeypatch.setenv("PATTERN_CACHE_DIR", str(tmp_path))
    table = derived.Table("quiet", (derived.__file__,))
    table.get(["a"], lambda: 1, int, _strict_int)
    table.save()
    assert not table.path.exists()
    with pytest.raises(SystemExit):
        main(["--help"])
    assert derived._WRITE is True


def test_a_fifo_or_a_shared_folder_is_never_read_and_never_blocks(tmp_path, monkeypatch):
    monkeypatch.setenv("PATTERN_CACHE_DIR", str(tmp_path))
    table = derived.Table("fifo", (derived.__file__,))
    table.path.parent.mkdir(parents=True, mode=0o700)
    os.mkfifo(table.path, 0o600)
    assert table.get(["k"], lambda: 7, int, _strict_int) == 7  # (the open would block)
    table.path.unlink()
    shared = derived.Table("shared", (derived.__file__,))
    _write(shared, {'["k"]': 999})
    os.chmod(shared.path.parent, 0o777)
    try:
        fresh = derived.Table("shared", (derived.__file__,))
        assert fresh.get(["k"], lambda: 7, int, _strict_int) == 7
        fresh.save()  # nor written there
        assert json.loads(shared.path.read_text()) == {'["k"]': 999}
    finally:
        os.chmod(shared.path.parent, 0o700)


def test_the_files_name_follows_every_module_that_derives_and_the_re2_library(tmp_path):
    lib, src = tmp_path / "lib.so", tmp_path / "deriver.py"
    lib.write_bytes(b"one")
    src.write_text("x = 1\n")
    a = derived.Table("t", (str(src),), (str(lib),)).name
    lib.write_bytes(b"two!")
    assert derived.Table("t", (str(src),), (str(lib),)).name != a
    assert set(linear_regex._SYNTAX.name.split("-")[:2]) == {"re2", "syntax"}
    sources = (linear_regex.regex_translate.__file__, linear_regex.__file__)
    built = (linear_regex.re2._re2.__file__,)
    assert derived.Table("re2-syntax", sources, built).name == linear_regex._SYNTAX.name
