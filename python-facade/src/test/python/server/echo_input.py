"""Echoes its standard input, writes to both streams, then exits with code 3 (argument 'exit3') or raises."""
import os
import sys

for line in sys.stdin:
    print("line:", line.rstrip("\n"))
print("to stderr", file=sys.stderr)
print("cwd:", os.getcwd())
print("argv:", sys.argv[1:])


def fail():
    raise ValueError("the script fails on purpose")


if sys.argv[1:] == ["exit3"]:
    sys.exit(3)
fail()
