"""The desk's chart: runs and tool outcomes per day, as a server-rendered SVG (no JavaScript, scales to any width)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from runs.selectors import DayActivity

WIDTH = 600
HEIGHT = 120
BOTTOM = 1  # the baseline


@dataclass(frozen=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    kind: str  # css class: runs, runs-failed, ok, failed, refused
    title: str


@dataclass(frozen=True)
class Chart:
    bars: list[Bar]
    labels: list[str]  # dates under the chart, evenly spaced
    peak: int
    empty: bool
    width: int = WIDTH
    height: int = HEIGHT
    baseline: int = HEIGHT - BOTTOM


def activity_chart(days: Sequence[DayActivity]) -> Chart:
    """Per day, two bars side by side: runs (failed ones darker), and tool calls stacked by outcome."""
    peak = max([1] + [max(d.runs, d.tools_succeeded + d.tools_failed + d.tools_refused) for d in days])
    slot = WIDTH / max(len(days), 1)
    bar = max(slot * 0.38, 1.0)
    usable = HEIGHT - BOTTOM - 4
    bars: list[Bar] = []

    def stack(x: float, parts: list[tuple[int, str, str]]) -> None:
        top = float(HEIGHT - BOTTOM)
        for count, kind, title in parts:
            if count:
                height = usable * count / peak
                top -= height
                bars.append(Bar(round(x, 1), round(top, 1), round(bar, 1), round(height, 1), kind, title))

    for index, day in enumerate(days):
        x = index * slot + slot * 0.08
        date = day.day.isoformat()
        stack(
            x,
            [
                (day.runs - day.runs_failed, "runs", f"{date}: {day.runs} runs, {day.runs_failed} failed"),
                (day.runs_failed, "runs-failed", f"{date}: {day.runs_failed} runs failed"),
            ],
        )
        stack(
            x + bar,
            [
                (day.tools_succeeded, "ok", f"{date}: {day.tools_succeeded} tool calls succeeded"),
                (day.tools_failed, "failed", f"{date}: {day.tools_failed} tool calls failed"),
                (day.tools_refused, "refused", f"{date}: {day.tools_refused} tool calls refused by the policy check"),
            ],
        )
    # Three dates under the chart (first, middle, last), as text that stays readable at any width.
    labels = [days[i].day.strftime("%b %d") for i in sorted({0, len(days) // 2, len(days) - 1})] if days else []
    empty = not any(d.runs or d.tools_succeeded or d.tools_failed or d.tools_refused for d in days)
    return Chart(bars=bars, labels=labels, peak=peak, empty=empty)
