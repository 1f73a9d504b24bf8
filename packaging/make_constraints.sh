#!/usr/bin/env bash
# Refresh constraints.txt: the exact versions `make`, CI and the macOS workflow install.
#   bash packaging/make_constraints.sh        (about 2 minutes; needs the package registry)
# It installs the app with its test extras into a fresh virtualenv (pyproject.toml keeps the version
# ranges) and freezes what pip chose. Platform-only packages (NVIDIA libraries on Linux) stay in the file:
# pip only applies a constraint to a package something asks for, so macOS simply skips them.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$PYTHON" -m venv "$tmp/venv"
"$tmp/venv/bin/python" -m pip install --quiet --upgrade pip
"$tmp/venv/bin/python" -m pip install --quiet '.[test]' -r packaging/requirements.txt
apple_only=$(grep -i -E '^(zeus-apple-silicon|mlx-metal)==' constraints.txt || echo "zeus-apple-silicon==1.1.0")  # macOS arm64 only
{
    echo "# Exact versions for make, CI and the macOS workflow (pip install -c constraints.txt ...)."
    echo "# Made by packaging/make_constraints.sh with $("$tmp/venv/bin/python" --version) on $(uname -sm); ranges live in pyproject.toml."
    "$tmp/venv/bin/python" -m pip freeze --exclude-editable | grep -v -i -E '^(mpsstudio|pip|setuptools|wheel)( @|==)'
    echo "$apple_only"
} > constraints.txt
echo "constraints.txt: $(grep -c '==' constraints.txt) pins"
