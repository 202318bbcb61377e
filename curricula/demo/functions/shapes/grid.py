"""Walking a grid of cells."""


def neighbours(row, col, rows, cols):
    """Cells next to (row, col) inside a rows x cols grid.

    >>> neighbours(0, 0, 3, 3)
    [(1, 0), (0, 1)]
    >>> neighbours(1, 1, 3, 3)
    [(0, 1), (2, 1), (1, 0), (1, 2)]
    """
    found = []
    for dr, dc in ((-1, 0), (1, 0), (0, -1), (0, 1)):
        r, c = row + dr, col + dc
        if 0 <= r < rows and 0 <= c < cols:
            found.append((r, c))
    return found


def count_islands(grid):
    """Groups of touching '#' cells.

    >>> count_islands(["#..", "..#", "..#"])
    2
    >>> count_islands([])
    0
    """
    seen = set()
    islands = 0
    for r, line in enumerate(grid):
        for c, cell in enumerate(line):
            if cell != "#" or (r, c) in seen:
                continue
            islands += 1
            stack = [(r, c)]
            while stack:
                cur = stack.pop()
                if cur in seen:
                    continue
                seen.add(cur)
                for nr, nc in neighbours(cur[0], cur[1], len(grid), len(line)):
                    if grid[nr][nc] == "#":
                        stack.append((nr, nc))
    return islands
