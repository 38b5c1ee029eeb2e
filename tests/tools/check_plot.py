#!/usr/bin/env python3
"""tests/tools/check_plot.py — the PNG side of tests/cli/metrics.sh: the picture `sheaf plot`
drew of y = x for x = 0..10 (one curve) has the curve where the data says.

    check_plot.py IMAGE.png

Reads the PNG with pypng; checks it is 900 pixels wide and taller than wide/3; finds the plot
area as the largest rectangle framed by dark-grey lines; then, inside that frame, every coloured
pixel (the curve: saturated, unlike the grey frame, grid and text) lies within 4 px of the
frame's diagonal from bottom-left (0, 0) to top-right (10, 10) — the axes span exactly the data
when it starts and ends on ticks — and the curve reaches every tenth of the diagonal.
Exits 1 naming the first mismatch.
"""
import sys

try:
    import png
except ImportError:
    sys.exit("check_plot.py: the Python package 'pypng' is missing: run scripts/bootstrap.sh "
             "(or pip install -r scripts/requirements-test.txt)")


def read(path):
    w, h, rows, info = png.Reader(filename=path).asRGB8()
    return w, h, [list(r) for r in rows]


def pixel(rows, x, y):
    r = rows[y]
    return r[3 * x], r[3 * x + 1], r[3 * x + 2]


def frame_grey(p):
    return max(p) < 120 and max(p) - min(p) < 12


def coloured(p):
    return max(p) - min(p) > 80


def find_frame(w, h, rows):
    """The frame's left, top, right, bottom: the longest dark-grey horizontal runs are its top and
    bottom edges, the longest vertical runs its sides."""
    best_rows = sorted(range(h), key=lambda y: -sum(frame_grey(pixel(rows, x, y)) for x in range(w)))[:2]
    best_cols = sorted(range(w), key=lambda x: -sum(frame_grey(pixel(rows, x, y)) for y in range(h)))[:2]
    return min(best_cols), min(best_rows), max(best_cols), max(best_rows)


def main():
    w, h, rows = read(sys.argv[1])
    assert w == 900 and h > 300, f"image is {w}x{h}, expected 900 wide and more than 300 high"
    left, top, right, bottom = find_frame(w, h, rows)
    assert right - left > 600 and bottom - top > 150, f"plot area {left},{top}..{right},{bottom} is too small"
    reached = set()
    count = 0
    for y in range(top + 2, bottom - 1):
        for x in range(left + 2, right - 1):
            if not coloured(pixel(rows, x, y)):
                continue
            count += 1
            fx = (x - left) / (right - left)      # data x / 10
            fy = (bottom - y) / (bottom - top)    # data y / 10
            dist = abs(fx - fy) / 2 ** 0.5 * min(right - left, bottom - top)
            assert dist < 4, f"coloured pixel at ({x}, {y}) lies {dist:.1f} px from the line y = x"
            reached.add(min(9, int(fx * 10)))
    assert count > 200, f"only {count} curve pixels inside the plot area"
    assert reached == set(range(10)), f"the curve misses parts of the diagonal: reached tenths {sorted(reached)}"
    print(f"plot: {w}x{h}, plot area {left},{top}..{right},{bottom}, {count} curve pixels on the diagonal")


if __name__ == "__main__":
    try:
        main()
    except AssertionError as e:
        sys.exit(f"check_plot.py: {e}")
