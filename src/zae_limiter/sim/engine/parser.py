"""Tokenizer and parser of DynamoDB expressions into a small tree of tuples.

The tree is compiled once into closures (expressions.py, updates.py) and cached by the
expression's text, so the parser's speed does not matter; its job is to accept what
DynamoDB accepts and to say "syntax error" for the rest.

Nodes:
  ("path", parts)          parts: top-level name ("#n" placeholder or literal), then map
                           keys (str) and list indexes (int)
  ("value", ":v")
  ("call", name, args)     functions, boolean and size/if_not_exists/list_append
  ("cmp", op, a, b)  ("between", a, lo, hi)  ("in", a, [b...])
  ("and", a, b)  ("or", a, b)  ("not", a)
  ("plus", a, b)  ("minus", a, b)
"""

from __future__ import annotations

import re
from typing import Any

from zae_limiter.sim.engine.errors import Validation

Node = tuple[Any, ...]

_TOKEN = re.compile(
    r"\s*(?:(?P<name>#[A-Za-z0-9_]+)|(?P<value>:[A-Za-z0-9_]+)|(?P<index>\[\s*\d+\s*\])"
    r"|(?P<word>[A-Za-z_][A-Za-z0-9_]*)|(?P<op><>|<=|>=|[=<>(),.+\-]))"
)
_COMPARATORS = frozenset({"=", "<>", "<", "<=", ">", ">="})
_UPDATE_CLAUSES = ("SET", "REMOVE", "ADD", "DELETE")


def tokenize(text: str, kind: str) -> tuple[list[tuple[str, str]], list[tuple[int, int]]]:
    """Tokens (kind, text) and their spans in `text` (for the "near" of an error)."""
    tokens: list[tuple[str, str]] = []
    spans: list[tuple[int, int]] = []
    pos = 0
    end = len(text.rstrip())
    while pos < end:
        match = _TOKEN.match(text, pos)
        if match is None or match.end() == pos:
            bad = text[pos:].strip()[:1]
            raise Validation(f'Invalid {kind}: Invalid token: "{bad}" at position {pos}')
        group = match.lastgroup or ""
        tokens.append((group, match.group(group)))
        spans.append((match.start(group), match.end()))
        pos = match.end()
    return tokens, spans


def syntax_error(kind: str, token: str, near: str) -> Validation:
    return Validation(f'Invalid {kind}: Syntax error; token: "{token}", near: "{near}"')


class Parser:
    def __init__(self, text: str, kind: str) -> None:
        self.text = text
        self.kind = kind
        self.tokens, self.spans = tokenize(text, kind)
        self.pos = 0
        if not self.tokens:
            raise Validation(f"Invalid {kind}: The expression can not be empty;")

    # ------------------------------------------------------------ token helpers
    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def peek_word(self) -> str | None:
        token = self.peek()
        return token[1].upper() if token is not None and token[0] == "word" else None

    def at_op(self, op: str) -> bool:
        token = self.peek()
        return token is not None and token[0] == "op" and token[1] == op

    def take(self) -> tuple[str, str]:
        token = self.peek()
        if token is None:
            raise self.error("<EOF>")
        self.pos += 1
        return token

    def expect_op(self, op: str) -> None:
        token = self.take()
        if token != ("op", op):
            raise self.error(token[1])

    def expect_word(self, word: str) -> None:
        token = self.take()
        if token[0] != "word" or token[1].upper() != word:
            raise self.error(token[1])

    def error(self, token: str) -> Validation:
        """DynamoDB's syntax error: the bad token, and the text from the token before it
        to the token after it."""
        here = next(
            (
                i
                for i in (self.pos, self.pos - 1)
                if 0 <= i < len(self.tokens) and self.tokens[i][1] == token
            ),
            None,
        )
        if here is None:  # the end came too soon
            start, end = self.spans[-1]
            return syntax_error(self.kind, "<EOF>", self.text[start:end])
        start = self.spans[max(0, here - 1)][0]
        end = self.spans[min(here + 1, len(self.spans) - 1)][1]
        return syntax_error(self.kind, token, self.text[start:end])

    def done(self) -> None:
        token = self.peek()
        if token is not None:
            raise self.error(token[1])

    # ------------------------------------------------------------ conditions
    def condition(self) -> Node:
        node = self.conjunction()
        while self.peek_word() == "OR":
            self.pos += 1
            node = ("or", node, self.conjunction())
        return node

    def conjunction(self) -> Node:
        node = self.negation()
        while self.peek_word() == "AND":
            self.pos += 1
            node = ("and", node, self.negation())
        return node

    def negation(self) -> Node:
        if self.peek_word() == "NOT":
            self.pos += 1
            return ("not", self.negation())
        return self.predicate()

    def predicate(self) -> Node:
        if self.at_op("("):
            self.pos += 1
            node = self.condition()
            self.expect_op(")")
            return node
        left = self.operand()
        token = self.peek()
        if token is None or token[0] not in ("op", "word"):
            if left[0] == "call":
                return left
            raise self.error(token[1] if token else "<EOF>")
        if token[0] == "op" and token[1] in _COMPARATORS:
            self.pos += 1
            return ("cmp", token[1], left, self.operand())
        word = token[1].upper()
        if word == "BETWEEN":
            self.pos += 1
            low = self.operand()
            self.expect_word("AND")
            return ("between", left, low, self.operand())
        if word == "IN":
            self.pos += 1
            return ("in", left, self.operand_list())
        if left[0] == "call":
            return left
        raise self.error(token[1])

    def operand_list(self) -> list[Node]:
        self.expect_op("(")
        items = [self.operand()]
        while self.at_op(","):
            self.pos += 1
            items.append(self.operand())
        self.expect_op(")")
        return items

    def operand(self) -> Node:
        token = self.take()
        kind, text = token
        if kind == "value":
            return ("value", text)
        if kind == "word" and self.at_op("("):
            self.pos += 1
            args: list[Node] = []
            if not self.at_op(")"):
                args = [self.argument()]
                while self.at_op(","):
                    self.pos += 1
                    args.append(self.argument())
            self.expect_op(")")
            return ("call", text, args)
        if kind in ("name", "word"):
            return self.path_rest(text)
        raise self.error(text)

    def argument(self) -> Node:
        # Update functions nest (if_not_exists inside list_append); conditions do not
        # allow a condition as an argument, so an operand is enough.
        return self.operand()

    def path_rest(self, first: str) -> Node:
        parts: list[str | int] = [first]
        while True:
            token = self.peek()
            if token is None:
                break
            if token[0] == "index":
                self.pos += 1
                parts.append(int(token[1].strip("[] ")))
            elif token == ("op", "."):
                self.pos += 1
                part = self.take()
                if part[0] not in ("name", "word"):
                    raise self.error(part[1])
                parts.append(part[1])
            else:
                break
        return ("path", tuple(parts))

    # ------------------------------------------------------------ update expressions
    def update(self) -> dict[str, list[Node]]:
        clauses: dict[str, list[Node]] = {}
        while self.peek() is not None:
            word = self.peek_word()
            if word not in _UPDATE_CLAUSES:
                raise self.error(self.take()[1])
            self.pos += 1
            if word in clauses:
                raise Validation(
                    f'Invalid UpdateExpression: The "{word}" section can only be used once '
                    "in an update expression;"
                )
            clauses[word] = self.actions(word)
        return clauses

    def actions(self, clause: str) -> list[Node]:
        actions = [self.action(clause)]
        while self.at_op(","):
            self.pos += 1
            actions.append(self.action(clause))
        return actions

    def action(self, clause: str) -> Node:
        token = self.take()
        if token[0] not in ("name", "word"):
            raise self.error(token[1])
        target = self.path_rest(token[1])
        if clause == "REMOVE":
            return ("remove", target)
        if clause in ("ADD", "DELETE"):
            value = self.take()
            if value[0] != "value":
                raise self.error(value[1])
            return (clause.lower(), target, ("value", value[1]))
        self.expect_op("=")
        left = self.operand()
        if self.at_op("+") or self.at_op("-"):
            op = "plus" if self.take()[1] == "+" else "minus"
            return ("set", target, (op, left, self.operand()))
        return ("set", target, left)

    def projection(self) -> list[Node]:
        paths = []
        while True:
            token = self.take()
            if token[0] not in ("name", "word"):
                raise self.error(token[1])
            paths.append(self.path_rest(token[1]))
            if not self.at_op(","):
                return paths
            self.pos += 1


def placeholders(node: Any, names: set[str], values: set[str]) -> None:
    """Collect the `#name` and `:value` placeholders a tree uses."""
    if isinstance(node, list):
        for child in node:
            placeholders(child, names, values)
        return
    if not isinstance(node, tuple) or not node:
        return
    if node[0] == "path":
        names.update(p for p in node[1] if isinstance(p, str) and p.startswith("#"))
        return
    if node[0] == "value":
        values.add(node[1])
        return
    for child in node[1:]:
        placeholders(child, names, values)
