"""The logical graph of the program as Graphviz DOT (docs/observability.md, "The graph as DOT")."""

from __future__ import annotations

import os

from . import _bridge


def dump_graph(path: str | os.PathLike[str]) -> None:
    """Writes the operators issued since the runtime started or the last dump_graph (the latest 4096) to `path` as
    Graphviz DOT: one box per operator (outputs' dtype and shape, mesh, the steps of its redistributions), edges
    labelled with the placements of the tensors they pass. Render it with `dot -Tsvg path -o graph.svg`."""
    _bridge.call(_bridge.bridge().dumpGraph, os.path.abspath(os.fspath(path)))
