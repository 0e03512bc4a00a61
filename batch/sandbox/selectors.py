"""Label and field selectors, parsed once per request and matched per object.

Grammar as in `k8s.io/apimachinery/pkg/labels` (`a=b`, `a==b`, `a!=b`, `a in (x,y)`,
`a notin (x)`, `a`, `!a`, `a>1`, `a<1`), with its key and value validation, and `fields` (`a=b`,
`a==b`, `a!=b`, comma = and, `\\`-escaped `,` and `=` in values). What `labels.Parse` or
`fields.ParseSelector` refuses is a 400, and field selectors only accept the fields a real API
server accepts for the kind (400 otherwise), so code written against the sandbox also works on a
cluster.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

from batch.api.selectors import label_selector_matches
from batch.sandbox.errors import ApiError
from batch.sandbox.validation import label_value_errors, qualified_name_errors

Matcher = Callable[[Mapping[str, Any]], bool]


def _split_top(text: str) -> list[str]:
    """Split a field selector on the commas not escaped with a backslash."""
    parts: list[str] = []
    cur: list[str] = []
    escaped = False
    for ch in text:
        if escaped:
            cur.append(ch)
            escaped = False
        elif ch == "\\":
            cur.append(ch)
            escaped = True
        elif ch == ",":
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return [p for p in (s.strip() for s in parts) if p]


def _req_eq(key: str, value: str, equal: bool) -> Matcher:
    def req(labels: Mapping[str, Any]) -> bool:
        return (labels.get(key) == value) == equal

    return req


def _req_in(key: str, values: frozenset[str], inside: bool) -> Matcher:
    def req(labels: Mapping[str, Any]) -> bool:
        return (labels.get(key) in values) == inside

    return req


def _req_exists(key: str, exists: bool) -> Matcher:
    def req(labels: Mapping[str, Any]) -> bool:
        return (key in labels) == exists

    return req


def _req_compare(key: str, bound: int, greater: bool) -> Matcher:
    def req(labels: Mapping[str, Any]) -> bool:
        try:
            value = int(str(labels.get(key)))
        except ValueError:
            return False
        return value > bound if greater else value < bound

    return req


# The lexer of k8s.io/apimachinery/pkg/labels: special symbols, the rest are identifiers.
_SYMBOLS = ("!=", "==", "!", "(", ")", ",", "=", ">", "<")
_SPECIAL = frozenset("=!(),><")
_BLANK = frozenset(" \t\r\n")
_OPS = {"=": "=", "==": "==", "!=": "!=", ">": "gt", "<": "lt"}


def _tokens(text: str) -> list[tuple[str, str]]:
    """(kind, literal) pairs: kind is "id" (words, including in/notin), a symbol, or "end"."""
    out: list[tuple[str, str]] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch in _BLANK:
            i += 1
        elif ch in _SPECIAL:
            sym = next(s for s in _SYMBOLS if text.startswith(s, i))
            out.append((sym, sym))
            i += len(sym)
        else:
            j = i
            while j < n and text[j] not in _SPECIAL and text[j] not in _BLANK:
                j += 1
            out.append(("id", text[i:j]))
            i = j
    out.append(("end", ""))
    return out


class _Parser:
    """labels.Parse: a recursive descent over the tokens; every error is a 400."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.toks = _tokens(text)
        self.pos = 0

    def peek(self) -> tuple[str, str]:
        return self.toks[self.pos]

    def take(self) -> tuple[str, str]:
        tok = self.toks[self.pos]
        self.pos = min(self.pos + 1, len(self.toks) - 1)
        return tok

    def error(self, why: str) -> ApiError:
        return ApiError(400, f"unable to parse requirement: {why}")

    def parse(self) -> list[Matcher]:
        reqs: list[Matcher] = []
        while True:
            kind, lit = self.peek()
            if kind == "end":
                return reqs
            if kind not in ("id", "!"):
                raise ApiError(400, f"found '{lit}', expected: !, identifier, or 'end of string'")
            reqs.append(self.requirement())
            kind, lit = self.take()
            if kind == "end":
                return reqs
            if kind != ",":
                raise self.error(f"found '{lit}', expected: ',' or 'end of string'")
            if self.peek()[0] not in ("id", "!"):
                raise self.error(f"found '{self.peek()[1]}', expected: identifier after ','")

    def requirement(self) -> Matcher:
        kind, key = self.take()
        negate = kind == "!"
        if negate:
            kind, key = self.take()
        if kind != "id":
            raise self.error(f"found '{key}', expected: identifier")
        if negate or self.peek()[0] in ("end", ","):
            _check_requirement(key, "exists", [])
            return _req_exists(key, not negate)
        kind, lit = self.take()
        op = lit if kind == "id" and lit in ("in", "notin") else _OPS.get(kind, "")
        if not op:
            raise self.error(f"found '{lit}', expected: '=', '!=', '==', 'in', notin', '>', '<'")
        if op in ("in", "notin"):
            values = self.set_values()
            _check_requirement(key, op, values)
            return _req_in(key, frozenset(values), op == "in")
        kind, lit = self.peek()
        if kind in ("end", ","):
            value = ""
        elif kind == "id":
            self.take()
            value = lit
        else:
            raise self.error(f"found '{lit}', expected: identifier")
        _check_requirement(key, op, [value])
        if op in ("gt", "lt"):
            return _req_compare(key, int(value), op == "gt")
        return _req_eq(key, value, op != "!=")

    def set_values(self) -> list[str]:
        """`(a,b)` after in/notin; `()` is the set of the empty value, as labels.Parse has it."""
        kind, lit = self.take()
        if kind != "(":
            raise self.error(f"found '{lit}' expected: '('")
        kind, lit = self.peek()
        if kind == ")":
            self.take()
            return [""]
        if kind not in ("id", ","):
            raise self.error(f"found '{lit}', expected: ',', ')' or identifier")
        values: set[str] = set()
        while True:
            kind, lit = self.take()
            if kind == "id":
                values.add(lit)
                nxt, nlit = self.peek()
                if nxt == ",":
                    continue
                if nxt == ")":
                    break
                raise self.error(f"found '{nlit}', expected: ',' or ')'")
            if kind != ",":
                raise self.error(f"found '{lit}', expected: ',', or identifier")
            if not values:
                values.add("")  # "(,"
            nxt = self.peek()[0]
            if nxt == ")":
                values.add("")  # ",)"
                break
            if nxt == ",":
                self.take()
                values.add("")  # ",,"
        self.take()  # ")"
        return sorted(values)


def _check_requirement(key: str, op: str, values: list[str]) -> None:
    """labels.NewRequirement's validation of keys and values."""
    errs = [f'key: Invalid value: "{key}": {m}' for m in qualified_name_errors(key)]
    for i, v in enumerate(values):
        if op in ("gt", "lt"):
            try:
                int(v)
            except ValueError:
                errs.append(
                    f"values[{i}]: Invalid value: \"{v}\": for 'Gt', 'Lt' operators, the value "
                    "must be an integer"
                )
                continue
        errs += [f'values[{i}][{key}]: Invalid value: "{v}": {m}' for m in label_value_errors(v)]
    if errs:
        raise ApiError(400, "unable to parse requirement: " + ", ".join(errs))


def parse_label_selector(text: str | None) -> Matcher | None:
    """A predicate over a labels mapping, or None for "everything".

    Parsed as `labels.Parse` does: an invalid key or value, `a=b=c`, a trailing comma, ... are
    a 400 BadRequest."""
    if not text or not text.strip():
        return None
    reqs = _Parser(text).parse()

    def match(labels: Mapping[str, Any]) -> bool:
        return all(r(labels) for r in reqs)

    return match


def selector_from_label_selector(sel: Mapping[str, Any] | None) -> Matcher | None:
    """A predicate from a `LabelSelector` object (:func:`batch.api.selectors.
    label_selector_matches`), or None for an empty or absent one ("everything")."""
    if not sel:
        return None
    return functools.partial(label_selector_matches, sel)


def get_path(obj: Mapping[str, Any], path: str) -> Any:
    cur: Any = obj
    for part in path.split("."):
        if not isinstance(cur, Mapping):
            return None
        cur = cur.get(part)
    return cur


def _field_str(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Mapping):  # events' source is "component" in selectors
        return str(value.get("component", ""))
    return str(value)


def _split_term(term: str) -> tuple[str, str, str] | None:
    """fields.splitTerm: the first operator (`!=`, `==`, `=`) from the left splits the term."""
    for i in range(len(term)):
        for op in ("!=", "==", "="):
            if term.startswith(op, i):
                return term[:i], op, term[i + len(op) :]
    return None


def _unescape(value: str) -> str:
    """fields.UnescapeValue: a backslash escapes a backslash, `,` or `=`; a bare `,` or `=`
    is an error."""
    if not any(c in value for c in "\\,="):
        return value
    out: list[str] = []
    escaped = False
    for ch in value:
        if escaped:
            if ch not in "\\,=":
                raise ApiError(400, f"invalid field selector: invalid escape sequence: \\{ch}")
            out.append(ch)
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch in ",=":
            raise ApiError(400, f"invalid field selector: unescaped character in value: {ch}")
        else:
            out.append(ch)
    if escaped:
        raise ApiError(400, "invalid field selector: invalid escape sequence: \\")
    return "".join(out)


def parse_field_selector(
    text: str | None, *, allowed: tuple[str, ...], kind: str
) -> Matcher | None:
    """A predicate over a whole object, or None for "everything"."""
    if not text or not text.strip():
        return None
    reqs: list[tuple[str, bool, str]] = []
    for part in _split_top(text):
        term = _split_term(part)
        if term is None:
            raise ApiError(400, f"invalid selector: '{text}'; can't understand '{part}'")
        key, op, value = term
        eq = op != "!="
        value = _unescape(value.strip())
        key = key.strip()
        if key not in allowed:
            raise ApiError(
                400,
                f'field label not supported: "{key}" (for {kind}: {", ".join(allowed)})',
            )
        reqs.append((key, eq, value))

    def match(obj: Mapping[str, Any]) -> bool:
        for key, eq, value in reqs:
            actual = _field_str(get_path(obj, key))
            if (actual == value) != eq:
                return False
        return True

    return match
