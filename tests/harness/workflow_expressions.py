"""The ``${{ }}`` expressions and ``if:`` conditions of GitHub Actions, as the workflows use them.

The subset covered: literals, contexts, ``!``, ``==``, ``!=``, ``&&``, ``||``, parentheses
and a few functions; anything else raises, so a workflow change this emulation does not
understand fails the test loudly instead of running something else.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any


class ExpressionError(Exception):
    """An expression outside the subset this emulation understands."""


_TOKEN = re.compile(
    r"\s*(?:(?P<str>'(?:[^']|'')*')|(?P<num>\d+(?:\.\d+)?)|(?P<op>==|!=|&&|\|\||<=|>=|[!()<>,])"
    r"|(?P<name>[A-Za-z_][A-Za-z0-9_-]*(?:\.[A-Za-z_*][A-Za-z0-9_-]*)*))"
)


LITERALS: dict[str, Any] = {"true": True, "false": False, "null": None}


def _tokens(text: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    text = text.strip()
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if not match or match.end() == pos:
            raise ExpressionError(f"cannot read {text[pos:]!r} in {text!r}")
        kind = match.lastgroup or ""
        out.append((kind, match.group(kind)))
        pos = match.end()
    return out


def truthy(value: Any) -> bool:
    """GitHub's truthiness: false, 0, '', null are false; everything else is true."""
    return value not in (None, False, 0, "")


def _equal(a: Any, b: Any) -> bool:
    """GitHub compares strings case-insensitively; null and '' are both empty."""
    a, b = ("" if a is None else a), ("" if b is None else b)
    if isinstance(a, str) and isinstance(b, str):
        return a.lower() == b.lower()
    return a == b


def as_text(value: Any) -> str:
    """A value as ``${{ }}`` writes it into a string: null empty, booleans lowercase."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict | list):
        return json.dumps(value)
    return str(value)


class _Parser:
    def __init__(self, text: str, context: Mapping[str, Any], functions: Mapping[str, Callable]):
        self.text, self.tokens, self.pos = text, _tokens(text), 0
        self.context, self.functions = context, functions

    def parse(self) -> Any:
        value = self._or()
        if self.pos != len(self.tokens):
            raise ExpressionError(f"unexpected {self.tokens[self.pos][1]!r} in {self.text!r}")
        return value

    def _peek(self) -> str | None:
        return self.tokens[self.pos][1] if self.pos < len(self.tokens) else None

    def _take(self, expected: str | None = None) -> tuple[str, str]:
        if self.pos >= len(self.tokens):
            raise ExpressionError(f"unexpected end of {self.text!r}")
        token = self.tokens[self.pos]
        if expected is not None and token[1] != expected:
            raise ExpressionError(f"expected {expected!r}, got {token[1]!r} in {self.text!r}")
        self.pos += 1
        return token

    def _or(self) -> Any:
        value = self._and()
        while self._peek() == "||":
            self._take()
            right = self._and()
            value = value if truthy(value) else right
        return value

    def _and(self) -> Any:
        value = self._compare()
        while self._peek() == "&&":
            self._take()
            right = self._compare()
            value = right if truthy(value) else value
        return value

    def _compare(self) -> Any:
        value = self._unary()
        while self._peek() in ("==", "!="):
            op = self._take()[1]
            right = self._unary()
            value = _equal(value, right) if op == "==" else not _equal(value, right)
        return value

    def _unary(self) -> Any:
        if self._peek() == "!":
            self._take()
            return not truthy(self._unary())
        return self._primary()

    def _primary(self) -> Any:
        kind, text = self._take()
        if text == "(":
            value = self._or()
            self._take(")")
            return value
        if kind == "str":
            return text[1:-1].replace("''", "'")
        if kind == "num":
            return float(text) if "." in text else int(text)
        if kind != "name":
            raise ExpressionError(f"unexpected {text!r} in {self.text!r}")
        if text in LITERALS:
            return LITERALS[text]
        if self._peek() == "(":
            return self._call(text)
        return self._lookup(text)

    def _call(self, name: str) -> Any:
        self._take("(")
        args = []
        while self._peek() != ")":
            args.append(self._or())
            if self._peek() == ",":
                self._take(",")
        self._take(")")
        if name not in self.functions:
            raise ExpressionError(f"unknown function {name}() in {self.text!r}")
        return self.functions[name](*args)

    def _lookup(self, dotted: str) -> Any:
        root, *path = dotted.split(".")
        if root not in self.context:
            raise ExpressionError(f"unknown context {root!r} in {self.text!r}")
        value: Any = self.context[root]
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        return value


def _format(template: str, *args: Any) -> str:
    return re.sub(r"\{(\d+)\}", lambda m: as_text(args[int(m.group(1))]), template)


def evaluate(
    text: str, context: Mapping[str, Any], status: Mapping[str, bool] | None = None
) -> Any:
    """One expression (``${{ }}`` optional around the whole of it)."""
    text = text.strip()
    if text.startswith("${{") and text.endswith("}}") and text.count("${{") == 1:
        text = text[3:-2]
    status = status or {}
    functions: dict[str, Callable] = {
        "always": lambda: True,
        "success": lambda: status.get("success", True),
        "failure": lambda: status.get("failure", False),
        "cancelled": lambda: False,
        "format": _format,
        "contains": lambda hay, needle: (
            any(_equal(x, needle) for x in hay)
            if isinstance(hay, list)
            else as_text(needle).lower() in as_text(hay).lower()
        ),
        "startsWith": lambda s, p: as_text(s).lower().startswith(as_text(p).lower()),
        "fromJSON": lambda text: json.loads(as_text(text)),
        "toJSON": lambda value: json.dumps(value, indent=2),
    }
    return _Parser(text, context, functions).parse()


def interpolate(text: Any, context: Mapping[str, Any]) -> str:
    """Replace every ``${{ expr }}`` in a string with the expression's value as text."""
    if not isinstance(text, str):
        return as_text(text)
    return re.sub(
        r"\$\{\{(.*?)\}\}", lambda m: as_text(evaluate(m.group(1), context)), text, flags=re.S
    )


def condition(text: Any, context: Mapping[str, Any], status: Mapping[str, bool]) -> bool:
    """An ``if:``: no status function in it means ``success() && (...)``, as on GitHub."""
    if text is None:
        return status.get("success", True)
    if isinstance(text, bool):
        return text
    source = str(text)
    value = truthy(evaluate(source, context, status))
    if not re.search(r"\b(always|success|failure|cancelled)\(", source):
        value = value and status.get("success", True)
    return value
