"""The reference gateway, driven over HTTP as a client would: limits set with the CLI
are enforced, the RateLimit headers parse and count down, tokens follow real usage."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import http_sf
import httpx

from tests.web.conftest import Gateway

ROUTE = "/v1/chat/completions"


def fresh(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def chat(words: int, max_tokens: int, model: str, **extra: Any) -> dict[str, Any]:
    content = " ".join(["hello"] * words)
    return {"model": model, "max_tokens": max_tokens,
            "messages": [{"role": "user", "content": content}], **extra}  # fmt: skip


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def quotas(response: httpx.Response) -> dict[str, dict[str, int]]:
    """The RateLimit field parsed back as an RFC 9651 list: {name: {"r": .., "t": ..}}."""
    return {name: params for name, params in http_sf.parse(
        response.headers["RateLimit"].encode(), tltype="list"
    )}  # fmt: skip


def policies(response: httpx.Response) -> dict[str, dict[str, int]]:
    return {name: params for name, params in http_sf.parse(
        response.headers["RateLimit-Policy"].encode(), tltype="list"
    )}  # fmt: skip


def test_sixth_request_on_five_per_minute_is_refused_with_retry_after(gateway: Gateway) -> None:
    model = fresh("model")
    key = gateway.api_key(model, "rpm:5/min", "tpm:100000/day")
    with gateway.client() as http:
        answers = [http.post(ROUTE, json=chat(4, 50, model), headers=auth(key)) for _ in range(6)]
    assert [a.status_code for a in answers] == [200] * 5 + [429]
    assert [quotas(a)["rpm"]["r"] for a in answers[:5]] == [4, 3, 2, 1, 0]
    assert policies(answers[0]) == {"rpm": {"q": 5, "w": 60}, "tpm": {"q": 100000, "w": 86400}}
    refused = answers[5]
    assert 1 <= int(refused.headers["Retry-After"]) <= 12
    body = refused.json()
    assert body["error"] == "rate_limit_exceeded"
    assert [(v["limit"], v["capacity"], v["available"]) for v in body["limits"]] == [("rpm", 5, 0)]
    assert quotas(refused)["rpm"]["r"] == 0
    assert set(policies(refused)) == {"rpm", "tpm"}


def test_tpm_follows_real_usage_not_max_tokens(gateway: Gateway) -> None:
    model = fresh("model")
    key = gateway.api_key(model, "rpm:100/min", "tpm:1000/day")
    used = 0
    seen_r = []
    with gateway.client() as http:
        for words in (3, 10, 25):
            answer = http.post(ROUTE, json=chat(words, 200, model), headers=auth(key))
            assert answer.status_code == 200, answer.text
            usage = answer.json()["usage"]
            assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
            assert usage["prompt_tokens"] == words
            seen_r.append(quotas(answer)["tpm"]["r"])
            # the header shows the bucket right after the acquire: usage so far + this max_tokens
            assert 0 <= seen_r[-1] - (1000 - used - 200) <= 1
            used += usage["total_tokens"]
            # The lease is closed (its adjustment written) once the application returned,
            # after the answer was sent: a client as fast as this one, on a loaded machine,
            # could otherwise send the next request first and see this one's max_tokens.
            available = _settled(gateway, key, model, 1000 - used)
            assert 0 <= available - (1000 - used) <= 1  # a day's refill: under 1 token/min
    assert seen_r == sorted(seen_r, reverse=True)


def _settled(gateway: Gateway, key: str, model: str, expected: int) -> int:
    """The tpm available once the last request's adjustment landed (at most 10 s); what
    it is then, for the caller to judge."""
    deadline = time.monotonic() + 10
    while True:
        available = gateway.limiter.available(key, model)["tpm"]
        if 0 <= available - expected <= 1 or time.monotonic() > deadline:
            return available
        time.sleep(0.05)


def test_streamed_answer_is_charged_for_its_usage(gateway: Gateway) -> None:
    model = fresh("model")
    key = gateway.api_key(model, "rpm:100/min", "tpm:1000/day")
    with gateway.client() as http:
        with http.stream("POST", ROUTE, json=chat(5, 300, model, stream=True),
                         headers=auth(key)) as answer:  # fmt: skip
            assert answer.status_code == 200
            assert answer.headers["content-type"].startswith("text/event-stream")
            events = [line[6:] for line in answer.iter_lines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    usage = json.loads(events[-2])["usage"]
    words = [json.loads(e)["choices"][0]["delta"].get("content") for e in events[:-2]]
    assert len([w for w in words if w]) == usage["completion_tokens"] == 8 + 5
    available = gateway.limiter.available(key, model)["tpm"]
    assert 0 <= available - (1000 - usage["total_tokens"]) <= 1


def test_stream_cut_by_the_client_is_charged_for_what_was_sent(gateway: Gateway) -> None:
    model = fresh("model")
    key = gateway.api_key(model, "rpm:100/min", "tpm:1000/day")
    prompt = 22  # the fake model answers 8 + 22 = 30 tokens, one every 50 ms
    read = 0
    with gateway.client() as http:
        with http.stream("POST", ROUTE, json=chat(prompt, 300, model, stream=True),
                         headers=auth(key)) as answer:  # fmt: skip
            for line in answer.iter_lines():
                if line.startswith("data: "):
                    read += 1
                if read == 3:
                    break  # leaving the block closes the connection mid-stream
    charged = _settled_usage(gateway, key, model, 1000)
    assert prompt + 3 <= charged < prompt + 30, charged


def _settled_usage(gateway: Gateway, key: str, model: str, limit: int) -> int:
    """Tokens taken, once the gateway has written the lease (after it saw the cut)."""
    import time

    deadline = time.monotonic() + 10
    while True:
        taken = limit - gateway.limiter.available(key, model)["tpm"]
        # 300 is the up-front max_tokens: still held until the lease is closed
        if taken != 300 or time.monotonic() > deadline:
            return taken
        time.sleep(0.05)  # polling for the server's write, not for tokens to appear


def test_exception_in_the_handler_gives_the_tokens_back(gateway: Gateway) -> None:
    model = fresh("model")
    key = gateway.api_key(model, "rpm:100/day", "tpm:1000/day")
    with gateway.client() as http:
        ok = http.post(ROUTE, json=chat(2, 50, model), headers=auth(key))
        before = gateway.limiter.available(key, model)
        crashed = http.post(ROUTE, json=chat(2, 50, model, messages=[
            {"role": "user", "content": "please [[raise]]"}]), headers=auth(key))  # fmt: skip
        after = gateway.limiter.available(key, model)
    assert ok.status_code == 200 and crashed.status_code == 500
    assert before == after
    assert before["rpm"] == 99


def test_missing_or_empty_bearer_gives_401(gateway: Gateway) -> None:
    model = fresh("model")
    with gateway.client() as http:
        missing = http.post(ROUTE, json=chat(2, 50, model))
        empty = http.post(ROUTE, json=chat(2, 50, model), headers={"Authorization": "Bearer"})
        basic = http.post(ROUTE, json=chat(2, 50, model), headers={"Authorization": "Basic x"})
    for answer in (missing, empty, basic):
        assert answer.status_code == 401
        assert answer.json()["error"] == "unauthorized"
        assert answer.headers["WWW-Authenticate"] == "Bearer"


def test_bad_body_gives_400_without_taking_tokens(gateway: Gateway) -> None:
    key = fresh("key")
    with gateway.client() as http:
        no_model = http.post(ROUTE, json={"max_tokens": 5}, headers=auth(key))
        bad_max = http.post(ROUTE, json=chat(1, 0, "m"), headers=auth(key))
        not_json = http.post(ROUTE, content=b"{", headers=auth(key))
    assert [a.status_code for a in (no_model, bad_max, not_json)] == [400, 400, 400]
    assert "model" in no_model.json()["message"]
    assert "max_tokens" in bad_max.json()["message"]
