"""Delivering a thread's requests to the engine, with the fault drawn for each; requests
held in flight; and what the table does that the checker must be told of.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from botocore.exceptions import ClientError

from zae_limiter import keys
from zae_limiter.drivers import error_outcome, resend_safe
from zae_limiter.errors import CALL_TIMEOUT, RateLimiterUnavailable
from zae_limiter.flows import Call, Result
from zae_limiter.flows.write.shares import current, tokens_now
from zae_limiter.sim import reserve_judge
from zae_limiter.sim import spec as kinds
from zae_limiter.sim.client import (
    Pending,
    SimClient,
    Thread,
)
from zae_limiter.sim.foci import redouble
from zae_limiter.sim.foci import shards as shards_focus
from zae_limiter.sim.threads import (
    BOTOCORE_ATTEMPTS,
    WRITES,
    Machine,
    Orphan,
    _pk,
    _unavailable,
)

#: The faults drawn per delivered request, in the order their weights are drawn.
_DELIVERY_FAULTS = (kinds.LOST, kinds.UNSENT, kinds.THROTTLED, kinds.THROTTLED_BARE, kinds.LATE)


class Delivery(Machine):
    """Requests reach the engine here, and only here."""

    _fault_weights: list[int] | None = None

    # ------------------------------------------------------------------ delivery
    def _deliver(self, thread: Thread, p: Pending) -> None:
        fault = self._fault() if self.faults_on else None
        if self.spec.focus == redouble.NAME:
            fault = redouble.on_reads(fault, p.call, self.spec)
        client = thread.client
        key = _pk(p.call)
        if key is not None and keys.is_bucket_pk(key) and keys.parse_bucket_pk(key)[3] == 0:
            # The thread's last request to shard 0: faulted or answered (`_unmoved`).
            mark = (thread.tid, _entity_of(key))
            self.shard0_faults.discard(mark)
            if fault is not None:
                self.shard0_faults.add(mark)
        if fault is not None:
            self._may_lose(p)
            thread.faulted.add(p.serial)
        if fault in (kinds.THROTTLED, kinds.THROTTLED_BARE):
            outcome: Any = _throttle(self.table, fault == kinds.THROTTLED)
            self._record(thread, p.call, "throttled", fault)
            if self._retries(client, p.call, applied=False, attempt=p.attempt):
                p.attempt += 1
                return
            self._answer(thread, p.index, outcome)
            return
        if fault == kinds.UNSENT:
            self._record(thread, p.call, "never sent", fault)
            if self._retries(client, p.call, applied=False, attempt=p.attempt):
                p.attempt += 1
                return
            self._answer(
                thread, p.index, _unavailable("connection reset", "EndpointConnectionError")
            )
            return
        if fault == kinds.LATE:
            # The client gives up on it at its timeout; DynamoDB may still apply it later.
            self._record(thread, p.call, "held in flight", fault)
            self.orphans.append(
                Orphan(client.name, p.call, thread.tid, p.serial, p.what, thread.run_clock)
            )
            self._answer(thread, p.index, _unavailable("timed out", CALL_TIMEOUT))
            return
        region = client.spec.region
        outcome, applied = self._execute(p.call, thread, p.serial, what=p.what, region=region)
        if fault == kinds.LOST:
            self._record(
                thread, p.call, "applied, answer lost" if applied else "answer lost", fault
            )
            if self._retries(client, p.call, applied=applied, attempt=p.attempt):
                p.attempt += 1
                return
            self._answer(thread, p.index, _unavailable("read timeout", "ReadTimeoutError"))
            return
        if self.spec.focus in shards_focus.STALLING:
            shards_focus.stall_after_read(self, thread, p.call)
        elif self.spec.focus == redouble.NAME:
            redouble.stall_after_read(self, thread, p.call)
        self._answer(thread, p.index, outcome)

    def _may_lose(self, p: Pending) -> None:
        """A fault on a write that gives tokens back (a compensation, a rollback, a
        reserve's return) loses them by design: the checker does not judge the entity's
        loss (`Checker.kept_all`). A take that fails only fails to take."""
        key = _pk(p.call)
        if key is None or not keys.is_bucket_pk(key) or p.call.op not in WRITES:
            return
        if not p.what.startswith("acquire") or any(v < 0 for v in _consumed(p.call).values()):
            self.checker.lossy.add(_entity_of(key))

    def _retries(self, client: SimClient, call: Call, applied: bool, attempt: int) -> bool:
        """Whether the client's SDK sends the request again by itself (botocore's retries on
        a user's client; the library's own clients make one attempt)."""
        del applied  # the SDK cannot know: it retries either way
        return client.spec.retries and attempt < BOTOCORE_ATTEMPTS and resend_safe(call.op)

    def _fault(self) -> str | None:
        weights = self._fault_weights
        if weights is None:  # the rates never change: weighed once per world
            rates = [self.spec.faults.of(k) for k in _DELIVERY_FAULTS]
            weights = self._fault_weights = [max(0, 1000 - sum(rates)), *rates]
        index = self.c.weighted(weights)
        return None if index == 0 else _DELIVERY_FAULTS[index - 1]

    def _execute(
        self,
        call: Call,
        thread: Thread | None,
        serial: int = 0,
        tid: int = 0,
        what: str = "",
        region: str = "",
        clock: int | None = None,
    ) -> tuple[Any, bool]:
        """Apply one request to the engine (of `region`, when the world has several):
        (the flow's outcome, whether it changed state). `clock`: the sending run's clock
        when it started (a thread's `run_clock` unless given)."""
        self.counts.operations += 1
        self.tick += 1
        engine, peek = self.engines.get(region, self.engine), self.peeks.get(region, self.peek)
        key = _pk(call)
        buckets = _written_buckets(call, key)
        befores = [peek(bucket) for bucket in buckets]
        deleted = self._deleting(call)
        try:
            response = engine(call.op, dict(call.params))
        except ClientError as error:
            outcome = error_outcome(error, self.table)
            self._record(thread, call, _short(outcome), None, self.trace.image(key), key)
            return outcome, False
        self._deleted(deleted)
        applied = call.op in WRITES
        for bucket, before in zip(buckets, befores, strict=True):
            after = peek(bucket)
            self._sharding(bucket, before, after)
            if not before and after and thread is not None:
                self._unmoved(bucket, after, thread.tid)
            self._configs(bucket, before, after)
            if thread is not None or clock is not None:
                planned = thread.run_clock if thread else clock
                self._sessions(bucket, before, after, planned)
                if bucket == key:
                    reserve_judge.behind(self, bucket, call, before, after, planned)
            if what.startswith("acquire") and bucket == key:
                self._compensated(bucket, call)
        if applied and key is not None:
            if thread is not None:
                tid = thread.tid
                if serial == thread.serial:
                    thread.applied[key] = (self.true_ms, self.tick)
            self._intended(tid, serial, key)
        before = befores[0] if befores and buckets[0] == key else None
        self._record(thread, call, "ok", None, before if self.trace.on else None, key)
        return Result(response), applied

    def _deleting(self, call: Call) -> dict[str, dict[str, int]]:
        """Bucket items a batch write or a DeleteItem (told only once applied) deletes:
        entity -> limit -> held counts live now."""
        if call.op == "delete_item":
            requests = [{"DeleteRequest": {"Key": call.params.get("Key", {})}}]
        elif call.op == "batch_write_item":
            requests = [r for chunk in call.params.get("RequestItems", {}).values() for r in chunk]
        else:
            return {}
        out: dict[str, dict[str, int]] = {}
        for request in requests:
            pk = str(request.get("DeleteRequest", {}).get("Key", {}).get(keys.PK, {}).get("S"))
            item = self.peek(pk) if keys.is_bucket_pk(pk) else None
            if item is None or (call.op == "delete_item" and _drained(pk, item)):
                # The aggregator's raise deletes a shard a merge drained (one DeleteItem):
                # the entity stays. A deletion's batch of its shards is the entity's.
                continue
            held = out.setdefault(_entity_of(pk), {})
            for name, counts in keys.decode_reserved(item).items():
                held[name] = held.get(name, 0) + sum(v for v in counts.values() if v > 0)
        return out

    def _deleted(self, deleted: dict[str, dict[str, int]]) -> None:
        for entity, held in deleted.items():
            self.trace.note(self.true_ms, f"{entity}'s buckets deleted")
            for level in [level for level in self.stored if level[0] == entity]:
                del self.stored[level]
            # The ideal bucket starts again under the world's numbers (`Checker.reset`).
            for level in [level for level in self.following if level[0] == entity]:
                del self.following[level]
            self.checker.reset(entity, (self.true_ms, self.tick), held)

    def _time_out(self, thread: Thread, index: int, p: Pending) -> None:
        # Only held requests time out (time passes under requests in flight only then):
        # each counts as the fault it is, applied later or never.
        self.counts.fault(kinds.LATE)
        thread.faulted.add(p.serial)
        if self.faults_on and self.spec.faults.of(kinds.LATE) and self.c.chance(300):
            self.orphans.append(Orphan(thread.client.name, p.call, thread.tid, p.serial, p.what,
                                       thread.run_clock))  # fmt: skip
        self._answer(thread, index, _unavailable("timed out", CALL_TIMEOUT))

    def _deliver_orphan(self) -> None:
        orphan = self.orphans.pop(self.c.below(len(self.orphans)))
        self.trace.note(self.true_ms, f"{orphan.client} late request arrives")
        region = next((c.spec.region for c in self.clients if c.name == orphan.client), "")
        self._execute(orphan.call, None, orphan.serial, orphan.tid, orphan.what, region,
                      orphan.clock)  # fmt: skip

    def _sharding(self, key: str, before: Any, after: Any) -> None:
        """Tell the checker of what sharding cannot see: held counts on a shard that
        splits (its snapshot taken). Charges to a sharded entity: see `_intended`."""
        if not after:
            return
        entity = _entity_of(key)
        held = keys.decode_reserved(before) if before else {}
        # Any client's write may charge held counts it sees expired (its clock ahead).
        horizon = self.true_ms + self.spec.skew_ms
        if any(keys.lost_milli(counts, horizon) for counts in held.values()):
            self.checker.lossy.add(entity)
        # A split changes the count (or makes the item); a rebase rewrites `sf` alone, in
        # the new numbers' units (flows/write/shares.py `rebased_split`): no split.
        split = not before or _count(before) != _count(after)
        for limit in self.spec.limits:
            sf = keys.limit_attr(limit.name, "sf")
            snapshot = after.get(sf)
            if split and snapshot is not None and snapshot != (before or {}).get(sf):
                live = sum(v for v in held.get(limit.name, {}).values() if v > 0)
                self.checker.allow(entity, limit.name, live)
                # A split rounds each shard's share in the limiter's favour: it may lose
                # a fraction of a token (seed 438 lost half of one), never create one.
                self.checker.lossy.add(entity)

    def _configs(self, key: str, before: Any, after: Any) -> None:
        """Tell the checker of the numbers a level's bucket items store, when a write
        changes them (a rebase: a client with other limits than the item's) or creates
        shard 0 under other numbers than the ideal bucket follows. A sharded entity's
        shards may store different numbers for a while: the ideal bucket follows the
        largest capacity and the largest rate among them."""
        if not after:
            return
        _ns, entity, _resource, shard = keys.parse_bucket_pk(key)
        for limit in self.spec.limits:
            if limit.window is not None:
                continue
            names = _config_attrs(limit.name)
            if before and all(before.get(n) == after.get(n) for n in names):
                continue  # the same stored numbers (most writes): nothing to compare
            now = _stored_config(after, limit.name)
            if now is None or (before and _stored_config(before, limit.name) == now):
                continue
            shards = self.stored.setdefault((entity, limit.name), {})
            fresh = not before and shard == 0 and not shards
            shards[shard] = now
            ideal = (max(c for c, _ in shards.values()), max(r for _, r in shards.values()))
            following = self.following.get((entity, limit.name), _config_of(limit))
            if ideal == following and not (fresh and now != _config_of(limit)):
                continue
            self.following[(entity, limit.name)] = ideal
            held = keys.decode_reserved(after).get(limit.name, {})
            live = sum(v for v in held.values() if v > 0)
            self.checker.configured(entity, limit.name, ideal, fresh, (self.true_ms, self.tick),
                                    live)  # fmt: skip

    def _sessions(self, key: str, before: Any, after: Any, clock: Any) -> None:
        """Tell the checker of each write that took tokens from a session quota (its
        full-at value rose, and the shard is short of full by the writer's clock): the
        first one after a session ended opens the next (`Checker.opened`). Whatever the
        write was (an admitted take, a reserve, a take a cascade parent refused, an
        adjustment up), as the table's session is opened by any of them."""
        if not after or clock is None or not self._session_limits:
            return
        bucket = keys.decode_bucket(after)
        old = keys.decode_bucket(before) if before else None
        for limit in self._session_limits:
            state = current(bucket, limit, clock)[0]
            was = None if old is None else old.limits.get(limit.name)
            was_at = None if was is None else was.full_at
            rose = state.full_at is not None and (was_at is None or state.full_at > was_at)
            if rose and not state.is_full(clock):
                at = (self.true_ms, self.tick)
                self.checker.opened(_entity_of(key), limit.name, clock, at)

    def _compensated(self, key: str, call: Call) -> None:
        """A give-back an acquire sent for a level it took from, the acquire being refused
        at another level. The checker never saw the take (nothing was admitted): should
        the give-back land after time refilled the take (held in flight), it hands back
        tokens the bucket already had again. The checker allows for what it gave back."""
        for name, milli in _consumed(call).items():
            if milli < 0:
                self.checker.allow(_entity_of(key), name, -milli)

    def _intended(self, tid: int, serial: int, key: str) -> None:
        """A write of a lease's end applied (maybe long after its run gave up on it)."""
        intents = self.intents.get((tid, serial))
        intent = None if intents is None else intents.pop(self._drained_from(key, intents), None)
        if intent is not None:
            self.checker.change(
                intent.taken, intent.change, (self.true_ms, self.tick), intent.planned_ms
            )
            self.charged(key, intent.change)
            reserve_judge.at_top(self, key, intent)

    def _drained_from(self, key: str, intents: Mapping[str, Any]) -> str:
        """The intent a write to `key` carries: its own, or that of a shard a merge drained
        into `key` since the lease's take (the charge follows the share to the receiver,
        `flows/write/charge.py` `_again`)."""
        if key in intents:
            return key
        ns, entity, resource, shard = keys.parse_bucket_pk(key)
        for pk in intents:
            other_ns, other, other_resource, drained = keys.parse_bucket_pk(pk)
            if (other_ns, other, other_resource) != (ns, entity, resource) or drained <= shard:
                continue
            item = self.peek(pk)
            count = keys.decode_bucket(item).shard_count if item else 0
            if 1 <= count <= drained and drained % count == shard:
                return pk
        return key

    def _unmoved(self, key: str, made: Any, tid: int) -> None:
        """A shard k >= 1 made: its split sent a quota's fraction of a token to shard 0
        by a take there, which moves nothing when refused (shard 0 holds less than the
        fraction, its reserves' held counts out) or unanswered (a fault on this thread's
        last request to shard 0): the fraction stays, under one token (docs/quotas.md;
        seed 3208 met both). `Checker.unmoved` entities are not judged for fractions. A
        split that never tried (`split-fractions-left`) leaves shard 0 able to pay."""
        ns, entity, resource, shard = keys.parse_bucket_pk(key)
        if shard == 0:
            return
        if (tid, entity) in self.shard0_faults:
            self.checker.unmoved.add(entity)
            return
        shard0 = self.peek(keys.bucket_pk(ns, entity, resource, 0))
        if not shard0:
            return
        zero, new = keys.decode_bucket(shard0), keys.decode_bucket(made)
        for limit in self.spec.limits:
            if limit.window is None:
                continue
            part = tokens_now(new, limit, self.true_ms) % 1000
            if part and tokens_now(zero, limit, self.true_ms) < part:
                self.checker.unmoved.add(entity)

    def _sharded(self, key: str) -> bool:
        ns, entity, resource, _shard = keys.parse_bucket_pk(key)
        shard0 = self.peek(keys.bucket_pk(ns, entity, resource, 0))
        return bool(shard0) and keys.get_n(shard0, keys.A_SHARD_COUNT, 1) > 1

    def charged(self, key: str, change: dict[str, int]) -> None:
        """A charge written to a bucket: what the table cannot see of it (`Checker.allow`).
        On a sharded entity, the whole charge (its debt stays on one shard). With reserves,
        the whole charge too: tokens already out in reserves (held counts, and rollbacks
        settled into a reserve) are spent whatever debt the charge leaves, and they can
        overrun it by at most the charge itself."""
        entity = _entity_of(key)
        reserves = any(client.spec.reserve for client in self.clients)
        if not (reserves or self._sharded(key)):
            return
        for name, milli in change.items():
            self.checker.allow(entity, name, milli)


def _config_of(limit: Any) -> tuple[Fraction, Fraction]:
    """(capacity, tokens per ms) of a limit, as the ideal bucket takes them."""
    return Fraction(limit.capacity), Fraction(
        limit.refill_amount, limit.refill_period_seconds * 1000
    )


@functools.cache
def _config_attrs(name: str) -> tuple[str, str, str]:
    """The attributes holding a limit's capacity, refill amount and refill period."""
    return (keys.limit_attr(name, "cp"), keys.limit_attr(name, "ra"), keys.limit_attr(name, "rp"))


def _stored_config(item: Any, name: str) -> tuple[Fraction, Fraction] | None:
    """(capacity, tokens per ms) a bucket item stores for a limit (None: not stored)."""
    cp, ra, rp = (item.get(attr) for attr in _config_attrs(name))
    if cp is None or ra is None or rp is None:
        return None
    return Fraction(int(cp["N"]), 1000), Fraction(int(ra["N"]), 1000 * int(rp["N"]))


def _entity_of(pk: str) -> str:
    return keys.parse_bucket_pk(pk)[1]


def _count(item: Any) -> int:
    return keys.get_n(item, keys.A_SHARD_COUNT, 1)


def _drained(pk: str, item: Any) -> bool:
    """A shard a merge retired: it records a count at or below its id."""
    return _count(item) <= keys.parse_bucket_pk(pk)[3]


def _throttle(table: str, reasons: bool) -> RateLimiterUnavailable:
    error = {"Code": "ProvisionedThroughputExceededException", "Message": "throttled"}
    response: dict[str, Any] = {"Error": error}
    if reasons:
        response["ThrottlingReasons"] = [
            {"reason": "TableWriteKeyRangeThroughputExceeded", "resource": table}
        ]
    outcome = error_outcome(ClientError(response, "UpdateItem"), table)  # type: ignore[arg-type]
    assert isinstance(outcome, RateLimiterUnavailable)
    return outcome


def _short(outcome: Any) -> str:
    if isinstance(outcome, BaseException):
        return f"{type(outcome).__name__}: {str(outcome)[:80]}"
    if getattr(outcome, "ok", True) is False:
        return "condition failed"
    return "ok"


def _consumed(call: Call) -> dict[str, int]:
    """What a bucket write adds to each limit's usage counter (`tc`), per limit name."""
    names = call.params.get("ExpressionAttributeNames", {})
    values = call.params.get("ExpressionAttributeValues", {})
    update = str(call.params.get("UpdateExpression", ""))
    out: dict[str, int] = {}
    for name, placeholder in _counter_operands(update, tuple(names.items())):
        if placeholder in values:
            out[name] = int(values[placeholder]["N"])
    return out


@functools.lru_cache(maxsize=4096)
def _counter_operands(
    update: str, names: tuple[tuple[str, Any], ...]
) -> tuple[tuple[str, str], ...]:
    """(limit name, value placeholder) of each usage counter an update expression adds
    to: the library sends few distinct texts, so each is read once."""
    out = []
    for alias, attr in names:
        attr = str(attr)
        if attr.startswith(keys.BUCKET_PREFIX) and attr.endswith("_tc"):
            found = re.search(re.escape(alias) + r" (:\w+)", update)
            if found:
                out.append((attr[len(keys.BUCKET_PREFIX) : -len("_tc")], found.group(1)))
    return tuple(out)


def _written_buckets(call: Call, key: str | None) -> list[str]:
    """The bucket items a write names: its own key, or each Put of a transaction (a
    shard made beside a check of shard 0, flows/scaling/split.py; seed 707 created
    tokens past a checker that missed it). A merge's Updates are left out, as they were
    before shards were made in transactions."""
    if call.op not in WRITES:
        return []
    if key is not None:
        return [key] if keys.is_bucket_pk(key) else []
    out = []
    for entry in call.params.get("TransactItems", ()):
        put = entry.get("Put")
        pk = None if put is None else _pk(Call("put_item", put))
        if pk is not None and keys.is_bucket_pk(pk):
            out.append(pk)
    return out
