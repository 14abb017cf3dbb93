"""How many of twinloop's files a reader walks through from ``twinloop plan train`` to its printed table (issue 18).

Runs the command in a fresh interpreter and counts twinloop's source files two ways: those imported (a module's
body runs when it is imported, so a reader has to know it is there), and those in which at least one function (not
a module body) was called during the command (``sys.setprofile``): the files a reader following the call path
enters.

    PYTHONPATH=src python benchmarks/plan_train_walk.py [--list]
    # before: git archive 6891689 src | tar -x -C /tmp/walk_before   (the tree when issue 18 was filed)
    #         PYTHONPATH=/tmp/walk_before/src python benchmarks/plan_train_walk.py
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

ARGS = ["plan", "train", "--model", "llama-3-8b", "--gpu", "h100-sxm", "--gpus", "8"]

CHILD = r"""
import io, json, os, sys, contextlib
import twinloop
root = os.path.dirname(twinloop.__file__)
called = set()
def prof(frame, event, arg):
    if event == "call" and frame.f_code.co_name != "<module>":
        f = frame.f_code.co_filename
        if f.startswith(root):
            called.add(os.path.relpath(f, root))
sys.setprofile(prof)
from twinloop.cli.main import main
sys.argv = ["twinloop", *json.loads(sys.argv[1])]
out = io.StringIO()
with contextlib.redirect_stdout(out):
    try:
        main()
    except SystemExit as e:
        code = e.code
sys.setprofile(None)
imported = sorted(os.path.relpath(m.__file__, root) for m in list(sys.modules.values())
                  if getattr(m, "__file__", None) and m.__file__.startswith(root))
print(json.dumps({"imported": imported, "called": sorted(called), "printed_lines": len(out.getvalue().splitlines())}))
"""


def walk() -> dict[str, list[str] | int]:
    """The files imported and entered by ``twinloop plan train`` in a fresh interpreter."""
    res = subprocess.run([sys.executable, "-c", CHILD, json.dumps(ARGS)], capture_output=True, text=True, check=True)
    return dict(json.loads(res.stdout.strip().splitlines()[-1]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--list", action="store_true", help="print the files, not only their counts")
    args = ap.parse_args()
    found = walk()
    print(f"twinloop {' '.join(ARGS)}")
    print(f"  files imported: {len(found['imported'])}")  # type: ignore[arg-type]
    print(f"  files entered (a function called): {len(found['called'])}")  # type: ignore[arg-type]
    print(f"  table lines printed: {found['printed_lines']}")
    if args.list:
        for name in found["called"]:  # type: ignore[union-attr]
            print(f"    {name}")


if __name__ == "__main__":
    main()
