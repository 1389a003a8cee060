"""A deterministic stand-in for a language model: no network, the same answer every time.

A "token" is a whitespace-separated word. The answer to a prompt of P words has
`8 + P % 23` words, cut at `max_tokens`. A prompt containing `[[raise]]` makes the model
raise, as a crashing upstream client would.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

WORDS = ("lorem", "ipsum", "dolor", "sit", "amet", "consectetur", "adipiscing", "elit")
CRASH = "[[raise]]"


class ModelCrashed(RuntimeError):
    """The fake upstream failed (asked for with `[[raise]]`)."""


@dataclass(frozen=True, slots=True)
class Answer:
    prompt_tokens: int
    words: tuple[str, ...]
    finish_reason: str

    @property
    def completion_tokens(self) -> int:
        return len(self.words)

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


def prompt_text(messages: Any) -> str:
    if not isinstance(messages, list):
        return ""
    return " ".join(str(m.get("content", "")) for m in messages if isinstance(m, dict))


def answer(messages: Any, max_tokens: int) -> Answer:
    text = prompt_text(messages)
    if CRASH in text:
        raise ModelCrashed("the fake model was asked to crash")
    prompt_tokens = len(text.split())
    wanted = 8 + prompt_tokens % 23
    count = min(wanted, max_tokens)
    words = tuple(WORDS[i % len(WORDS)] for i in range(count))
    return Answer(prompt_tokens, words, "stop" if count == wanted else "length")


async def stream(result: Answer, delay_seconds: float) -> AsyncIterator[str]:
    """The answer word by word, `delay_seconds` apart (a model produces tokens over time)."""
    for word in result.words:
        if delay_seconds:
            await asyncio.sleep(delay_seconds)
        yield word
