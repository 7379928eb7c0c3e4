#!/usr/bin/env bash
# The Python linter: pyflakes over the Python sources (the dtorch and torch packages under
# python-facade/src/main/resources, the test scripts, the examples, the benchmarks' scripts and tools/).
# pyflakes finds unused imports and variables, undefined names and syntax errors, and says nothing about style.
# It is Debian's pyflakes3 (apt-get install pyflakes3), or python3 -m pyflakes where that imports.
# Exit status: 0 clean, 1 findings, 3 no pyflakes here.
set -euo pipefail
cd "$(dirname "$0")/.."

if command -v pyflakes3 >/dev/null 2>&1; then
  pyflakes=(pyflakes3)
elif command -v python3 >/dev/null 2>&1 && python3 -c 'import pyflakes' >/dev/null 2>&1; then
  pyflakes=(python3 -m pyflakes)
else
  echo "lint-python: pyflakes is not installed (apt-get install pyflakes3)" >&2
  exit 3
fi

mapfile -t files < <(find python-facade/src/main/resources python-facade/src/test/python examples/python benchmarks/python \
  tools -name '*.py' -not -path '*/target/*' | sort)

output=$("${pyflakes[@]}" "${files[@]}" 2>&1) || true
# A package's __init__.py imports what it re-exports (torch/__init__.py: torch.zeros, torch.cuda, ...): those
# names are its API, not unused imports.
findings=$(printf '%s\n' "$output" | grep -v '^$' | grep -Ev '/__init__\.py:[0-9]+:[0-9]+:? .* imported but unused$' || true)
if [ -n "$findings" ]; then
  printf '%s\n' "$findings"
  echo "lint-python: $(printf '%s\n' "$findings" | wc -l) finding(s) in ${#files[@]} files ($("${pyflakes[@]}" --version 2>&1 | head -n 1))"
  exit 1
fi
echo "lint-python: pyflakes found nothing in ${#files[@]} files ($("${pyflakes[@]}" --version 2>&1 | head -n 1))"
