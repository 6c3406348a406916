"""Stored text made safe to show: control characters written as escapes.

What an agent or a teammate stored (a lesson's note, a failed command's colored output, a
memory) can hold control characters: line breaks that would start a forged line of a context
block, and terminal escape sequences (``ESC ] 52`` writes the clipboard, ``ESC [ 2J`` clears
the screen, ``ESC ] 8`` hides a link). Both faces of the output use one escaping:

- :func:`one_line`: on one line, every control, format, line or paragraph separator character
  escaped (``\\n``, ``\\r``, ``\\t``, ``\\u2028``, …): a field of a provenance line
  (:mod:`.framing`);
- :func:`for_terminal`: what a command prints, its lines and tabs kept, every other control
  character (C0, DEL, C1) escaped the same way, so nothing stored reaches the user's terminal
  as a control sequence. Applied to JSON text it keeps the JSON valid and equal (such a
  character can only stand inside a string there, and ``\\u009b`` is its JSON escape).

Standard library only: the shell commands import it without the write policy's models.
"""

from __future__ import annotations

import re
import unicodedata

_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_HIDDEN = frozenset({"Cc", "Cf", "Zl", "Zp"})  # control, format, line and paragraph separators
# the control characters (Unicode category Cc: C0, DEL, C1) but the line break and the tab
_TERMINAL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def escaped(c: str) -> str:
    """One character as shown: ``\\n``, ``\\r``, ``\\t``, ``\\uXXXX`` for another hidden one
    (control, format, separator), else itself."""
    if c in _ESCAPES:
        return _ESCAPES[c]
    return f"\\u{ord(c):04x}" if unicodedata.category(c) in _HIDDEN else c


def one_line(text: object) -> str:
    """``text`` on one line: line breaks and every other control or format character
    escaped (``\\n``, ``\\r``, ``\\t``, ``\\u2028``, …)."""
    s = str(text)
    return s if s.isprintable() else "".join(map(escaped, s))  # printable: the usual case


def for_terminal(text: object) -> str:
    """``text`` to print: every control character but ``\\n`` and ``\\t`` escaped (``\\r``,
    ``\\u001b``, ``\\u009b``, …)."""
    s = str(text)
    return _TERMINAL.sub(lambda m: escaped(m.group()), s)


__all__ = ["escaped", "for_terminal", "one_line"]
