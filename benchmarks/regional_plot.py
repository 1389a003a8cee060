"""The plot of a regional-shares run, as a standalone SVG (no plotting dependency).

Per second: each region's admitted acquires (solid) and its share of the limit, in
acquires a second (dashed), the total admitted (black) and the limit (grey), with the
seconds excluded from the 95% check (after a shift) shaded.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e")
WIDTH, HEIGHT, PAD = 900, 420, 50


def _polyline(points: Sequence[tuple[float, float]], colour: str, dashed: bool = False) -> str:
    path = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
    dash = ' stroke-dasharray="6,4"' if dashed else ""
    return f'<polyline fill="none" stroke="{colour}" stroke-width="1.6"{dash} points="{path}"/>'


def svg(
    title: str,
    rows: Sequence[dict[str, Any]],
    regions: Sequence[str],
    limit: int,
    excluded: Sequence[int] = (),
) -> str:
    """The chart of `rows` (Analysis.per_second) as SVG text."""
    seconds = max(1, len(rows))
    top = max([limit * 1.6, *(r["offered"] for r in rows)]) or 1

    def x(second: float) -> float:
        return PAD + (WIDTH - 2 * PAD) * second / seconds

    def y(value: float) -> float:
        return HEIGHT - PAD - (HEIGHT - 2 * PAD) * value / top

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        'font-family="sans-serif" font-size="12">',
        f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
        f'<text x="{PAD}" y="20" font-size="14">{title}</text>',
    ]
    for second in excluded:
        parts.append(
            f'<rect x="{x(second):.1f}" y="{PAD}" width="{x(1) - x(0):.1f}" '
            f'height="{HEIGHT - 2 * PAD}" fill="#eeeeee"/>'
        )
    parts.append(_polyline([(x(0), y(limit)), (x(seconds), y(limit))], "#999999", dashed=True))
    total = [(x(r["second"] + 0.5), y(sum(r["admitted"].values()))) for r in rows]
    parts.append(_polyline(total, "#000000"))
    for i, region in enumerate(regions):
        colour = COLOURS[i % len(COLOURS)]
        admitted = [(x(r["second"] + 0.5), y(r["admitted"][region])) for r in rows]
        share = [(x(r["second"] + 0.5), y(r["shares"][region] * limit)) for r in rows]
        parts += [_polyline(admitted, colour), _polyline(share, colour, dashed=True)]
        parts.append(
            f'<text x="{WIDTH - PAD - 260}" y="{PAD + 16 * i}" fill="{colour}">'
            f"{region}: admitted/s (solid), share x limit (dashed)</text>"
        )
    parts.append(
        f'<text x="{WIDTH - PAD - 260}" y="{PAD + 16 * len(regions)}">total admitted/s; '
        f"grey: the limit ({limit}/s)</text>"
    )
    for tick in range(0, seconds + 1, max(1, seconds // 9)):
        parts.append(f'<text x="{x(tick):.1f}" y="{HEIGHT - PAD + 16}">{tick}s</text>')
    for value in (0, limit // 2, limit, int(top)):
        parts.append(f'<text x="4" y="{y(value):.1f}">{value}</text>')
    parts.append(
        f'<line x1="{PAD}" y1="{HEIGHT - PAD}" x2="{WIDTH - PAD}" y2="{HEIGHT - PAD}" '
        'stroke="black"/>'
    )
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def write(path: Path, *args: Any) -> Path:
    path.write_text(svg(*args))
    return path
