"""An answer lost for real, on DynamoDB Local: a botocore `before-send` handler sends the
request to the engine itself (DynamoDB applies it), then raises the read timeout botocore
raises when no answer comes, so a client that retries sends the same request again.
Shared by test_writes_sent_once.py and test_top_up_sent_once.py."""

from __future__ import annotations

from typing import Any

import urllib3
from botocore.exceptions import ReadTimeoutError


class LoseAnswer:
    """Subclasses say which request loses its answer (`loses`); it is applied, then lost."""

    def __init__(self) -> None:
        self.http = urllib3.PoolManager()
        self.sent = 0
        self.lost = 0

    def loses(self, request: Any) -> bool:
        raise NotImplementedError

    def __call__(self, request: Any, **_: Any) -> None:
        self.sent += 1
        if not self.loses(request):
            return
        self.lost += 1
        answer = self.http.request(
            request.method, request.url, body=request.body, headers=dict(request.headers)
        )
        assert answer.status == 200, answer.data
        raise ReadTimeoutError(endpoint_url=request.url)
