"""Shape helpers the package shares."""


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
