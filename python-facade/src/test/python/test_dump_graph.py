"""dtorch.dump_graph(path): the logical graph as Graphviz DOT. A matmul of a Shard(0) by a Replicate tensor, a
redistribute to Replicate and a sum on a 2-device mesh: the text compared exactly, and its structure checked without
Graphviz (balanced braces, every edge's endpoints declared before it, quotes escaped)."""

import os
import re
import tempfile

import dtorch
from dtorch import Shard, Replicate
from _testing import raises, run

# Comments, quoted strings (whose only escapes are \" \\ and \n, no raw quote or newline), arrows, punctuation, ids.
_TOKEN = re.compile(r'\s+|//[^\n]*\n|"(?:[^"\\\n]|\\["\\n])*"|->|[{}\[\]=;,]|\w+')


def check_dot(text):
    """The node ids of a DOT digraph in the dump's subset, in order; AssertionError naming the first problem."""
    pieces = _TOKEN.findall(text)
    assert sum(map(len, pieces)) == len(text), "unreadable DOT text (a raw quote or a bad escape?)"
    tokens = [p for p in pieces if not p.isspace() and not p.startswith("//")]
    assert tokens[:3] == ["digraph", "dtorch", "{"], "not a digraph: %r" % tokens[:3]
    nodes, i = [], 3
    try:
        while tokens[i] != "}":
            first, i = tokens[i], i + 1
            if tokens[i] == "->":
                second, i = tokens[i + 1], i + 2
                assert first in nodes and second in nodes, "edge %s -> %s uses an undeclared node" % (first, second)
            elif first not in ("node", "edge"):
                assert first not in nodes, "node %s declared twice" % first
                nodes.append(first)
            if tokens[i] == "[":
                end = tokens.index("]", i)
                attributes = tokens[i + 1:end]  # name = value, name = value
                assert attributes[1::4] == ["="] * len(attributes[1::4]) and set(attributes[3::4]) <= {","}, attributes
                i = end + 1
            assert tokens[i] == ";", "expected ; after a statement, got %r" % tokens[i]
            i += 1
    except IndexError:
        raise AssertionError("the text ends before the graph's closing brace") from None
    assert i == len(tokens) - 1, "text after the closing brace: %r" % tokens[i + 1:]
    return nodes


HEADER = ("// The logical graph of a DTorch program: the %d operators added since the runtime started or the last dump.\n"
          "// Edges carry the placements of the tensor they pass.\n"
          "digraph dtorch {\n"
          "  node [shape=box, fontname=\"monospace\"];\n"
          "  edge [fontname=\"monospace\"];\n")


def test_dump_graph_shows_placements_on_edges_and_the_plan_of_a_redistribute():
    pair = dtorch.DeviceMesh("cpu", [0, 1])
    a = dtorch.ones(4, 3, device_mesh=pair, placements=[Shard(0)])
    b = dtorch.ones(3, 4, device_mesh=pair, placements=[Replicate()])
    total = (a @ b).redistribute(pair, [Replicate()]).sum()
    path = os.path.join(tempfile.mkdtemp(), "program.dot")
    dtorch.dump_graph(path)  # the operators since the runtime started: this script's runtime ran nothing before
    with open(path) as f:
        text = f.read()
    assert text == (HEADER % 5
                    + '  op1 [label="ones#1\\nfloat32[4, 3]\\nDeviceMesh(cpu, [0, 1])"];\n'
                    + '  op2 [label="ones#2\\nfloat32[3, 4]\\nDeviceMesh(cpu, [0, 1])"];\n'
                    + '  op3 [label="matmul#3\\nfloat32[4, 4]\\nDeviceMesh(cpu, [0, 1])"];\n'
                    + '  op1 -> op3 [label="S(0)"];\n'
                    + '  op2 -> op3 [label="R"];\n'
                    + '  op4 [label="redistribute#4\\nfloat32[4, 4]\\nDeviceMesh(cpu, [0, 1])'
                    + '\\nS(0)->R: all-gather on mesh dim 0", style=filled, fillcolor="#fde0c5"];\n'
                    + '  op3 -> op4 [label="S(0)"];\n'
                    + '  op5 [label="sum#5\\nfloat32[]\\nDeviceMesh(cpu, [0, 1])"];\n'
                    + '  op4 -> op5 [label="R"];\n'
                    + '}\n'), text
    assert check_dot(text) == ["op1", "op2", "op3", "op4", "op5"]
    assert total.to_torch().item() == 48.0
    dtorch.dump_graph(path)  # a new window: what to_torch() added
    with open(path) as f:
        later = f.read()
    assert later.startswith(HEADER % 2) and '  op6 -> op7 [label="R"];\n' in later, later
    raises(AssertionError, check_dot, text.replace("\\nS(0)->R", '"S(0)->R'), contains="raw quote")
    raises(AssertionError, check_dot, text.replace("op4 -> op5", "op4 -> op9"), contains="undeclared")


run(globals())
