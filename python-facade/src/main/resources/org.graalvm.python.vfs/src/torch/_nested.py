"""Nested lists and flat row-major sequences, shared by torch and dtorch."""


def flatten(data):
    """The numbers of a rectangular nested list (or tuple) in row-major order, and its shape."""
    shape = []
    level = data
    while isinstance(level, (list, tuple)):
        shape.append(len(level))
        if not level:
            break
        level = level[0]
    flat = []

    def walk(node, depth):
        if depth == len(shape):
            if isinstance(node, (list, tuple)):
                raise ValueError("tensor(): the data is not a rectangular nested list")
            flat.append(node)
            return
        if not isinstance(node, (list, tuple)) or len(node) != shape[depth]:
            raise ValueError("tensor(): the data is not a rectangular nested list (expected a sequence of length %d "
                             "at dimension %d)" % (shape[depth], depth))
        for child in node:
            walk(child, depth + 1)

    walk(data, 0)
    return flat, shape


def nest(flat, shape):
    """The row-major `flat` sequence as nested lists of `shape` (a scalar for an empty shape)."""
    if not shape:
        return flat[0]

    def build(offset, depth):
        if depth == len(shape) - 1:
            return list(flat[offset:offset + shape[depth]])
        step = 1
        for s in shape[depth + 1:]:
            step *= s
        return [build(offset + i * step, depth + 1) for i in range(shape[depth])]

    return build(0, 0)
