"""Point labels that neither overlap each other nor the markers, and stay inside the axes.

Each label tries offsets around its point, nearest first (8 directions at growing distance), and takes the
first spot whose box lies inside the axes and clear of every label placed before it and every point marker;
a label that finds no free spot takes the candidate with the least overlap, joined to its point by a thin
line. Deterministic: the same figure gives the same placement.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from matplotlib.axes import Axes
from matplotlib.text import Annotation
from matplotlib.transforms import Bbox

#: Distances (points) from the point tried for a label, nearest first, each in 8 directions.
RADII = (5.0, 10.0, 16.0, 24.0, 34.0, 46.0)
#: Half the side (points) of the square kept clear around each marker.
MARKER_HALF = 3.5


@dataclass(frozen=True)
class Label:
    text: str
    x: float
    y: float
    color: str | tuple = "black"


def _candidates() -> list[tuple[float, float]]:
    out = []
    for radius in RADII:
        for k in (1, 3, 7, 5, 0, 2, 6, 4):  # up-right, up-left, down-right, down-left, then right, up, down, left
            angle = math.pi / 4 * k
            out.append((radius * math.cos(angle), radius * math.sin(angle)))
    return out


def _overlap(a: Bbox, b: Bbox) -> float:
    w = min(a.x1, b.x1) - max(a.x0, b.x0)
    h = min(a.y1, b.y1) - max(a.y0, b.y0)
    return w * h if w > 0 and h > 0 else 0.0


def place_labels(ax: Axes, labels: list[Label], *, fontsize: float = 7) -> list[Annotation]:
    """Annotate ``labels`` on ``ax`` without overlaps with each other, the markers or the legend (the figure must
    have its final size and layout; a legend placed by ``loc="best"`` is pinned where it is now)."""
    fig = ax.figure
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    points_px = fig.dpi / 72.0
    frame = ax.get_window_extent(renderer)
    half = MARKER_HALF * points_px
    taken = []
    legend = ax.get_legend()
    if legend is not None:
        box = legend.get_window_extent(renderer)
        legend.set_loc(tuple(ax.transAxes.inverted().transform((box.x0, box.y0))))  # stays where the labels avoid it
        taken.append(box)
    for label in labels:
        px, py = ax.transData.transform((label.x, label.y))
        taken.append(Bbox.from_extents(px - half, py - half, px + half, py + half))
    placed = []
    for label in labels:
        best, best_cost = (0.0, 0.0), math.inf
        for dx, dy in _candidates():
            note = _annotate(ax, label, dx, dy, fontsize)
            box = note.get_window_extent(renderer)
            note.remove()
            outside = (max(frame.x0 - box.x0, 0) + max(box.x1 - frame.x1, 0)) * box.height + \
                (max(frame.y0 - box.y0, 0) + max(box.y1 - frame.y1, 0)) * box.width
            cost = outside * 10 + sum(_overlap(box, other) for other in taken)
            if cost < best_cost:
                best, best_cost = (dx, dy), cost
                if cost == 0:
                    break
        # nowhere free: the least crowded spot, joined to its point by a thin line
        note = _annotate(ax, label, *best, fontsize, leader=best_cost > 0)
        taken.append(note.get_window_extent(renderer))
        placed.append(note)
    return placed


def _annotate(ax: Axes, label: Label, dx: float, dy: float, fontsize: float, *, leader: bool = False) -> Annotation:
    return ax.annotate(label.text, (label.x, label.y), textcoords="offset points", xytext=(dx, dy), fontsize=fontsize,
                       color=label.color, ha="left" if dx >= 0 else "right", va="bottom" if dy >= 0 else "top",
                       annotation_clip=False,
                       arrowprops={"arrowstyle": "-", "color": label.color, "lw": 0.5} if leader else None)
