"""The middleware example of docs/web.md runs as written, against a moto server."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "web.md"


async def test_middleware_example_runs(moto_http: str, monkeypatch: pytest.MonkeyPatch) -> None:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)
    assert len(blocks) == 1
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_http)
    scope: dict[str, Any] = {"__name__": "web_docs_example"}
    exec(compile(blocks[0], str(DOC), "exec"), scope)
    app = scope["app"]
    transport = httpx.ASGITransport(app=app)
    async with app.router.lifespan_context(app):
        async with httpx.AsyncClient(transport=transport, base_url="http://docs") as http:
            key = {"X-Api-Key": "docs-key"}
            answers = [await http.get("/search", params={"q": "abc"}, headers=key)
                       for _ in range(3)]  # fmt: skip
        limiter = app.state.limiter
        left = await limiter.available("docs-key", "search")
    assert [a.status_code for a in answers] == [200, 200, 429]
    assert answers[0].json() == {"q": "abc", "hits": 3}
    assert 'units";r=990' in answers[0].headers["RateLimit"]  # 10 taken up front
    assert 0 <= left["units"] - (1000 - 2 * 3) <= 1  # then adjusted to the real cost
