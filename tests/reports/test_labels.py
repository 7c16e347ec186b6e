"""Point labels of the trade-off figures: no two overlap, none covers the legend, all lie inside the axes."""

import itertools

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from vflpriv.reports.labels import Label, place_labels  # noqa: E402


def _boxes(fig, notes):
    renderer = fig.canvas.get_renderer()
    return [n.get_window_extent(renderer) for n in notes]


def test_labels_of_coinciding_and_edge_points_neither_overlap_nor_leave_the_axes():
    fig, ax = plt.subplots(figsize=(5.2, 4.4))
    points = [(0.9, 0.8), (0.9, 0.8), (0.9005, 0.801), (0.89, 0.78), (0.89, 0.78), (0.6, 0.5), (0.6, 0.5), (0.6, 0.5)]
    ax.plot(*zip(*points), "o", label="methods")
    ax.legend(loc="best")
    fig.tight_layout()
    notes = place_labels(ax, [Label(f"λ={i}", x, y) for i, (x, y) in enumerate(points)])
    boxes = _boxes(fig, notes)
    frame = ax.get_window_extent(fig.canvas.get_renderer())
    legend = ax.get_legend().get_window_extent(fig.canvas.get_renderer())
    for a, b in itertools.combinations(boxes, 2):
        assert not a.overlaps(b)
    for box in boxes:
        assert frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0 and box.y1 <= frame.y1
        assert not box.overlaps(legend)
    plt.close(fig)


def test_placement_is_deterministic():
    def placed():
        fig, ax = plt.subplots()
        ax.plot([0, 1], [0, 1], "o")
        fig.tight_layout()
        out = [n.get_position() + (n.xyann,) for n in place_labels(ax, [Label("a", 0.5, 0.5), Label("b", 0.5, 0.5)])]
        plt.close(fig)
        return out

    assert placed() == placed()
