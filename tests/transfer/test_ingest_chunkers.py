"""Chunkers: per file type, with exact 1-based line ranges."""

from __future__ import annotations

import textwrap

import pytest

from ingest.workspace.chunkers import Chunk, bound_words, chunk_text, file_type


def check_ranges(text: str, chunks: list[Chunk]) -> None:
    """Every chunk is exactly the lines it claims (single huge lines may be cut)."""
    lines = text.splitlines()
    for c in chunks:
        assert 1 <= c.start_line <= c.end_line <= len(lines), c
        span = "\n".join(lines[c.start_line - 1 : c.end_line])
        assert c.text == span or (c.start_line == c.end_line and c.text in span), c


def test_file_types():
    assert file_type("README.md") == "markdown"
    assert file_type("docs/index.rst") == "rst"
    assert file_type("a/b.py") == "python"
    assert file_type("main.go") == "code"
    assert file_type("Makefile") == "code"
    assert file_type("notes.txt") == "text"
    assert file_type("LICENSE") == "text"


MARKDOWN = textwrap.dedent(
    """\
    # Project

    Intro paragraph about the project and what it does for its users every day.

    ## Install

    Run the installer with the right flags and wait for it to finish properly.

    ```bash
    # not a heading: inside a fence
    make install
    ```

    ## Usage

    Call the tool with a path and read the report it prints at the end of a run.

    Setext title
    ------------

    Text under a setext heading, long enough to stand on its own as a small section.
    """
)


def test_markdown_sections_by_heading():
    chunks = chunk_text("README.md", MARKDOWN, min_chars=0)
    check_ranges(MARKDOWN, chunks)
    titles = [c.title for c in chunks]
    assert titles == ["Project", "Project > Install", "Project > Usage", "Project > Setext title"]
    install = chunks[1]
    assert "# not a heading" in install.text and "make install" in install.text
    assert (install.start_line, install.end_line) == (5, 12)
    assert chunks[3].start_line == 18


def test_markdown_small_sections_merge_and_big_ones_split():
    small = "# A\n\none\n\n# B\n\ntwo\n"
    merged = chunk_text("x.md", small)
    assert len(merged) == 1 and merged[0].title == "A, B"
    big = "# Big\n\n" + "\n\n".join(f"Paragraph {i} " + "word " * 40 for i in range(20))
    parts = chunk_text("x.md", big, max_chars=600)
    assert len(parts) > 3
    assert all(len(c.text) <= 600 + 200 for c in parts)
    assert all(c.title == "Big" for c in parts)
    check_ranges(big, parts)


RST = textwrap.dedent(
    """\
    =====
    Title
    =====

    Opening words of the document, which explain the purpose of it in a sentence.

    Section one
    -----------

    Body of the first section with enough words to be a chunk of its own here.

    Section two
    -----------

    Body of the second section, again with enough words to stand on its own.
    """
)


def test_rst_sections_by_underlined_titles():
    chunks = chunk_text("doc.rst", RST, min_chars=0)
    check_ranges(RST, chunks)
    assert [c.title for c in chunks] == ["Title", "Title > Section one", "Title > Section two"]
    assert [(c.start_line, c.end_line) for c in chunks] == [(1, 5), (7, 10), (12, 15)]


PYTHON = textwrap.dedent(
    '''\
    """Module docstring: what this module is for."""

    from __future__ import annotations

    import os

    LIMIT = 10


    # a comment that belongs to the function below
    @decorator
    def first(a, b):
        """Add two numbers."""
        return a + b


    async def second():
        return await thing()


    class Widget:
        """A widget."""

        size = 3

        def grow(self):
            self.size += 1


    if __name__ == "__main__":
        first(1, 2)
    '''
)


def test_python_by_top_level_definitions():
    chunks = chunk_text("mod.py", PYTHON, min_chars=0)
    check_ranges(PYTHON, chunks)
    by_title = {c.title: c for c in chunks}
    assert list(by_title) == ["module", "def first", "def second", "class Widget", ""]
    assert (by_title["module"].start_line, by_title["module"].end_line) == (1, 7)
    first = by_title["def first"]
    assert first.start_line == 10  # the comment and the decorator come with it
    assert first.text.startswith("# a comment") and "@decorator" in first.text
    assert (by_title["class Widget"].start_line, by_title["class Widget"].end_line) == (21, 27)
    assert by_title[""].text.startswith('if __name__ == "__main__":')


def test_python_module_header_is_its_own_chunk_and_small_defs_merge():
    chunks = chunk_text("mod.py", PYTHON)  # default min_chars: small defs merge
    assert chunks[0].title == "module"
    assert any("def first" in c.title and "def second" in c.title for c in chunks)
    check_ranges(PYTHON, chunks)


def test_python_big_class_is_split_into_methods():
    methods = "\n\n".join(
        f"    def method_{i}(self):\n        '''Method {i}.'''\n" + "        x = 1\n" * 12
        for i in range(8)
    )
    src = f'class Big:\n    """Docstring."""\n\n{methods}\n'
    chunks = chunk_text("big.py", src, max_chars=500, min_chars=0)
    check_ranges(src, chunks)
    assert chunks[0].title == "class Big" and chunks[0].start_line == 1
    assert [c.title for c in chunks[1:]] == [f"def Big.method_{i}" for i in range(8)]


def test_python_that_does_not_parse_falls_back_to_blocks():
    src = "print 'python 2'\n\nx = (\n"
    chunks = chunk_text("old.py", src)
    check_ranges(src, chunks)
    assert chunks and chunks[0].title == ""


def test_code_by_blank_line_blocks_with_a_size_bound():
    blocks = [f"function f{i}() {{\n" + f"  return {i};\n" * 10 + "}" for i in range(12)]
    src = "\n\n".join(blocks) + "\n"
    chunks = chunk_text("app.js", src, max_chars=400)
    check_ranges(src, chunks)
    assert len(chunks) > 3
    assert all(len(c.text) <= 400 + 200 for c in chunks)
    # blocks are never cut in the middle when they fit
    for c in chunks:
        assert c.text.startswith("function") and c.text.endswith("}")


def test_plain_text_by_paragraphs():
    paras = [f"Paragraph {i}. " + "Some words here. " * 15 for i in range(6)]
    src = "\n\n".join(paras)
    chunks = chunk_text("notes.txt", src, max_chars=600)
    check_ranges(src, chunks)
    assert len(chunks) >= 3
    for c in chunks:
        assert c.text.startswith("Paragraph")


def test_a_single_huge_line_is_cut():
    src = "x" * 5000
    chunks = chunk_text("data.json", src, max_chars=1000)
    assert len(chunks) == 5 and all(c.start_line == c.end_line == 1 for c in chunks)
    assert "".join(c.text for c in chunks) == src


def test_overlap_repeats_lines_only_inside_a_split_unit():
    src = "\n".join(f"line {i} " + "w " * 30 for i in range(40))
    plain = chunk_text("n.txt", src, max_chars=400)
    over = chunk_text("n.txt", src, max_chars=400, overlap=2)
    check_ranges(src, over)
    assert len(over) == len(plain)
    for a, b in zip(over[1:], plain[1:], strict=True):
        assert a.start_line == b.start_line - 2 and a.end_line == b.end_line


def test_word_bound_splits_at_lines():
    c = Chunk("\n".join("a b c d e f g h" for _ in range(10)), 5, 14, "t")
    parts = bound_words([c], 30)
    assert all(len(p.text.split()) <= 30 for p in parts)
    assert parts[0].start_line == 5 and parts[-1].end_line == 14
    assert sum(p.end_line - p.start_line + 1 for p in parts) == 10


@pytest.mark.parametrize("name", ["empty.py", "empty.md", "empty.txt"])
def test_empty_files_have_no_chunks(name):
    assert chunk_text(name, "") == []
    assert chunk_text(name, "\n\n") == [] or all(c.text.strip() for c in chunk_text(name, "\n\n"))
