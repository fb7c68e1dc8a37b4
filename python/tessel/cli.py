"""The `tessel` command of the Python package: the C++ command line, plus `--plugin FILE.py`
(repeatable, anywhere on the line), which runs a Python file first -- e.g. one that registers a
policy -- so the command can use it: `tessel --plugin my_policy.py schedule MODEL --policy mine`."""
import os
import runpy
import sys

from . import _tessel


def main(argv=None):
    args = list(sys.argv[1:] if argv is None else argv)
    plugins, rest = [], []
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--plugin":
            if i + 1 == len(args):
                print("tessel: error: command line: --plugin: needs a Python file", file=sys.stderr)
                return 2
            plugins.append(args[i + 1])
            i += 2
            continue
        if a.startswith("--plugin="):
            plugins.append(a.split("=", 1)[1])
        else:
            rest.append(a)
        i += 1
    for p in plugins:
        if not os.path.isfile(p):
            print(f"tessel: error: {p}: --plugin: no such file", file=sys.stderr)
            return 2
        try:
            runpy.run_path(p, run_name="tessel_plugin")
        except Exception as e:  # the plugin's own error: one line, exit 2 like any bad input
            print(f"tessel: error: {p}: --plugin: {type(e).__name__}: {e}", file=sys.stderr)
            return 2
    sys.stdout.flush()
    sys.stderr.flush()
    return _tessel.cli_main(rest)


def entry():
    sys.exit(main())
