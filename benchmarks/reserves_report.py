"""Markdown for the `reserves` section of `make bench` (data from `benchmarks.reserves.run`)."""

from __future__ import annotations

from typing import Any

from benchmarks.cost import WRU_PRICE_PER_MILLION

#: The issue's targets, shown next to the figures (printed, never asserted).
REQUESTS_TARGET = 0.05
CPU_TARGET = 1 / 20


def _table(head: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    return lines + ["| " + " | ".join(row) + " |" for row in rows]


def _note(part: Any) -> str | None:
    return str(part["note"]) if isinstance(part, dict) and "note" in part else None


def one_client_md(runs: Any) -> list[str]:
    title = "### One client, one entity, back-to-back acquires (moto server)"
    if _note(runs) or not runs:
        return [title, "", _note(runs) or "not run"]
    off = {r["face"]: r for r in runs if not r["reserve"]}
    rows = []
    verdicts = []
    for r in runs:
        base = off.get(r["face"])
        ratio = r["cpu_seconds"] / base["cpu_seconds"] if base and base["cpu_seconds"] else 0.0
        rows.append([
            r["face"], "on" if r["reserve"] else "off", str(r["acquires"]), str(r["requests"]),
            f"{r['requests_per_acquire']:.4f}", f"{r['cpu_us_per_acquire']:.1f}",
            f"{ratio:.3f}" if r["reserve"] else "1", str(r["hits"]), str(r["takes"]),
            str(r["returns"]),
        ])  # fmt: skip
        if r["reserve"]:
            per = r["requests_per_acquire"]
            verdicts.append(
                f"- {r['face']}: {per:.4f} requests per acquire (target <= {REQUESTS_TARGET}: "
                f"{_yes(per <= REQUESTS_TARGET)}), CPU {ratio:.3f} of reserve=False "
                f"(target <= {CPU_TARGET:.2f}: {_yes(ratio <= CPU_TARGET)})"
            )
    head = ["face", "reserves", "acquires", "requests (incl. close)", "requests/acquire",
            "client CPU us/acquire", "CPU vs off", "hits", "takes", "returns"]  # fmt: skip
    return [title, "", *_table(head, rows), "", *verdicts]


def _yes(ok: bool) -> str:
    return "met" if ok else "NOT met"


def exactness_md(cases: Any) -> list[str]:
    title = "### Exactness at the limit (DynamoDB Local, capacity 1,000, no refill)"
    if _note(cases) or not cases:
        return [title, "", _note(cases) or "not run"]
    rows = []
    for c in cases:
        reserve = c["reserve"]
        rows.append([
            "cascade (parent binds)" if c["cascade"] else "flat",
            f"{c['processes']} x {c['attempts'] // c['processes']}", str(c["admitted"]),
            str(c["left"]), str(c["admitted"] + c["left"]), str(c["held_after_close"]),
            "yes" if c["conserved"] and c.get("child_conserved", True) else "NO",
            str(reserve.get("takes", 0)), str(reserve.get("hits", 0)),
            str(reserve.get("returns", 0)),
        ])  # fmt: skip
    head = ["case", "processes x acquires", "admitted", "left after close", "admitted + left",
            "held after close", "conserved", "reserve takes", "hits", "returns"]  # fmt: skip
    return [title, "", *_table(head, rows)]


HOW = {
    False: "processes (Poisson arrivals at {rates}, real time, open loop)",
    True: "clients in one process (the same Poisson arrivals at {rates}, one at a time in "
    "time order on a simulated clock: the reserves' own share, whatever the machine's load)",
}


def under_admission_md(data: Any, simulated: bool = False) -> list[str]:
    title = "### Under-admission against an ideal token bucket (DynamoDB Local" + (
        ", simulated clock)" if simulated else ", real time)"
    )
    if _note(data) or not data or not data.get("arrivals"):
        return [title, "", _note(data) or "not run"]
    limit = data["limit"]
    rates = ", ".join(f"{r:g}/s" for r in data["rates"])
    lines = [
        title,
        "",
        f"{len(data['rates'])} {HOW[simulated].format(rates=rates)} share a limit of "
        f"capacity {limit['capacity']}, refill {limit['refill_per_s']:g}/s, for "
        f"{data['seconds']:g} s. Every arrival goes, in time order, into one ideal bucket "
        "with the same capacity and refill.",
        "",
        f"- arrivals {data['arrivals']}, admitted {data['admitted']}, ideal {data['ideal']}: "
        f"**{100 * (data['share_of_ideal'] or 0):.2f}% of ideal**; "
        f"failed (no decision) {data['failed']}; arrivals dropped as over 1 s late "
        f"(a busy machine) {data.get('missed', 0)}",
        f"- most admitted above the ideal at any moment (cumulative): "
        f"{data['worst_cumulative_excess']}",
        f"- reserves: {data['reserve']}",
        "",
    ]
    rows = []
    real = best = 0
    for row in data["per_second"]:
        real, best = real + row["admitted"], best + row["ideal"]
        rows.append([
            str(row["second"]), str(row["offered"]), str(row["ideal"]), str(row["admitted"]),
            f"{100 * real / best:.1f}%" if best else "-",
        ])  # fmt: skip
    return lines + _table(["second", "offered", "ideal", "admitted", "cumulative"], rows)


def hot_md(data: Any) -> list[str]:
    title = "### Hot entity behind the partition emulator, reserves on"
    if _note(data) or not data:
        return [title, "", _note(data) or "not run"]
    probe = data["probe"]
    return [
        title,
        "",
        f"{data['engine']}, {data['partition_limit']} writes/s per partition; one entity offered "
        f"{data['offered_rate']:g}/s from {data['processes']} processes for {data['seconds']:g} s, "
        f"plus a probe in the parent timing its own acquires.",
        "",
        *_table(
            [
                "attempted",
                "admitted",
                "admitted share",
                "final shards",
                "rejected",
                "unavailable",
                "throttles",
                "probe p50 ms (all)",
                "probe p50 ms (from reserve)",
                "p99 ms (from reserve)",
                "p50 ms (written)",
            ],
            [
                [
                    str(data["attempted"]),
                    str(data["admitted"]),
                    f"{data['admitted_share']:.3f}",
                    str(data["final_shard_count"]),
                    str(data.get("rejections", "-")),
                    str(data["unavailable"]),
                    str(data["throttles"]),
                    str(probe["p50_ms"]),
                    str(probe["p50_from_reserve_ms"]),
                    str(probe["p99_from_reserve_ms"]),
                    str(probe["p50_written_ms"]),
                ]
            ],
        ),
        "",
        f"Probe: {probe['acquires']} acquires, {probe['from_reserve']} served from a reserve, "
        f"{probe['failed']} failed{_first_error(probe)}. The clients attempted "
        f"{100 * data.get('attempted_share_of_offered', 0):.0f}% of the offered load (below "
        "100%: the machine, not the limiter, capped it). Admitted counts the acquires that "
        "completed inside the window; the limit is 100x the offered rate, so any rejection "
        "would be a false one.",
    ]


def _first_error(probe: dict[str, Any]) -> str:
    return f" (first: {probe['first_error']})" if probe.get("first_error") else ""


def cost_md(rows: Any) -> list[str]:
    title = "### Cost per million acquires on the hot path (DynamoDB Local, capacity meter)"
    if _note(rows) or not rows:
        return [title, "", _note(rows) or "not run"]
    table = [
        [f"{r['rate']}/s", str(r["acquires"]), f"{r['requests_per_acquire']:.4f}",
         f"{r['rcu_per_acquire']:.4f}", f"{r['wcu_per_acquire']:.4f}",
         f"${r['dollars_per_million']:.4f}"]
        for r in rows
    ]  # fmt: skip
    return [
        title,
        "",
        "One client at a steady rate (its clock simulated), reserves on, including the "
        f"returns at close. Without reserves every admitted acquire is 1 WRU "
        f"(${WRU_PRICE_PER_MILLION:.3f} per million).",
        "",
        *_table(
            [
                "client rate",
                "acquires",
                "requests/acquire",
                "RRU/acquire",
                "WRU/acquire",
                "$ per million",
            ],
            table,
        ),
    ]


def markdown(data: dict[str, Any]) -> str:
    parts = [
        "## Token reserves" + (" (quick)" if data.get("quick") else ""),
        "",
        *one_client_md(data.get("one_client")),
        "",
        *exactness_md(data.get("exactness", data.get("dynamodb_local"))),
        "",
        *under_admission_md(data.get("under_admission", data.get("dynamodb_local"))),
        "",
        *under_admission_md(
            data.get("under_admission_simulated", data.get("dynamodb_local")), simulated=True
        ),
        "",
        *hot_md(data.get("hot_entity")),
        "",
        *cost_md(data.get("cost", data.get("dynamodb_local"))),
    ]
    return "\n".join(parts)
