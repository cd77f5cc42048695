"""How big this session's submission is so far, against the limits a submission must stay under.

    python benchmarks/campaign300k/submission_size.py                # since the commit the session began at
    python benchmarks/campaign300k/submission_size.py --base COMMIT --adding 137000000

A stop submits the commits made since the session began, and is refused whole when they pack to more
than 512 MiB, or when their diffs, added up as text, pass 256 MiB (a file added in one commit and
removed or replaced in a later one counts twice). The campaign's resume checkpoints are the only large
files it commits: a FactorVAE checkpoint is about 68 MB (its discriminator with Adam's moments), so two
saves of two FactorVAE runs in one session pass the second limit, and in November 2026 a whole session's
work was refused for it. ``save.sh`` runs this before it copies anything.

The base is the commit ``main`` stood at when the session began: its newest reflog entry before the
time of ``/work/.library`` (laid afresh for every session), else its oldest entry, where a fresh
checkout's reflog begins (a machine kept from an earlier session has the earlier sessions' entries
too: counting from the oldest adds every landed session's commits). ``--base`` overrides it.

The diff size is each commit's diff as git prints it with ``--binary``: a binary file is written out
deflated and in base85, and a *replaced* binary file is written twice, its new version and the old one
(git's binary patches are reversible). So replacing a 68 MB checkpoint costs about 2.3 times its size
(measured on the campaign's commits: two 8.3 MB checkpoints replaced, 38.7 MB of diff), and a FactorVAE
pair about 318 MB: over the limit by itself. The session before 2026-12-07 counted new versions only,
saved one pair, and was refused whole, with all its other work. ``--adding BYTES`` adds bytes about to be committed;
``--replacing SAVED NEW`` (repeatable; SAVED may be a path that does not exist yet) adds the diff of
replacing SAVED's committed version with NEW, computed by git the same way; the changes to tracked
files not committed yet (a save or a publish awaiting its commit) are added too. Exit status 1 when the total would pass
``--budget`` (default 200 MiB of diffs, room left for the rest of the session), 0 otherwise.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterable

MiB = 1 << 20
DIFF_LIMIT = 256 * MiB
PACK_LIMIT = 512 * MiB
#: a folder the workplace lays at the start of every session (CAMPAIGN_SESSION_MARKER overrides it)
SESSION_MARKER = "/work/.library"


def git(*args: str, input: bytes | None = None) -> bytes:
    return subprocess.run(["git", *args], check=True, capture_output=True, input=input).stdout


def session_start() -> float | None:
    """When this session began: the time of :data:`SESSION_MARKER`, laid afresh for every session
    (also on a machine kept from an earlier one, whose reflog goes back sessions); None without it."""
    try:
        return os.stat(os.environ.get("CAMPAIGN_SESSION_MARKER", SESSION_MARKER)).st_mtime
    except OSError:
        return None


def session_base(start: float | None = None) -> str:
    """The commit ``main`` stood at when the session began (``start``, default :func:`session_start`):
    its newest reflog entry at or before ``start``; else (a checkout made after it, or no start
    known) its oldest entry, where a fresh checkout's reflog begins."""
    entries = []
    for line in git("reflog", "show", "--date=unix", "--format=%H %gd", "main").decode().splitlines():
        commit, _, selector = line.partition(" ")
        entries.append((commit, int(selector.rsplit("{", 1)[1].rstrip("}"))))
    if not entries:
        raise SystemExit("main has no reflog here: pass --base COMMIT (the commit the session began at)")
    start = session_start() if start is None else start
    before = [commit for commit, when in entries if start is not None and when <= start]
    return before[0] if before else entries[-1][0]


def diff_bytes(base: str, head: str = "HEAD") -> int:
    """The diffs of every commit in ``base..head`` as git prints them, binary files included
    (``git show --binary``): what a submission's diff limit adds up."""
    return sum(len(git("show", "--binary", "--format=", "--no-renames", commit))
               for commit in git("rev-list", f"{base}..{head}").decode().split())


def _committed(path: str) -> bytes | None:
    """``path``'s content in ``HEAD`` (a path in the work tree), or None where HEAD lacks it."""
    relative = os.path.relpath(os.path.abspath(path), git("rev-parse", "--show-toplevel").decode().strip())
    result = subprocess.run(["git", "show", f"HEAD:{relative}"], capture_output=True)
    return result.stdout if result.returncode == 0 else None


def replacing_bytes(saved: str, new: str) -> int:
    """The diff of replacing the committed file ``saved`` (its version in ``HEAD``, or adding it where
    HEAD lacks it) with ``new``, as git would print it in a commit (``git diff --no-index --binary``).
    The committed version, not the work tree's: a save run twice before a commit has already
    overwritten the file, and the commit will still hold both versions."""
    committed = _committed(saved)
    with tempfile.TemporaryDirectory() as folder:
        old = os.devnull
        if committed is not None:
            old = os.path.join(folder, "committed")
            with open(old, "wb") as f:
                f.write(committed)
        result = subprocess.run(["git", "diff", "--no-index", "--binary", old, new], capture_output=True)
    if result.returncode not in (0, 1):  # 1: they differ
        raise SystemExit(f"git diff --no-index {saved} {new} failed: {result.stderr.decode().strip()}")
    return len(result.stdout)


def pending_bytes(excluding: Iterable[str] = ()) -> int:
    """The diff of the changes not committed yet (``git diff --binary HEAD`` and the untracked files
    ``git add -A`` would add: a save or a publish made but not committed), the paths in
    ``excluding`` left out (``--replacing``'s files: it counts them)."""
    top = git("rev-parse", "--show-toplevel").decode().strip()
    left_out = {os.path.relpath(os.path.abspath(p), top) for p in excluding}
    changed = [p for p in git("diff", "--name-only", "--no-renames", "HEAD").decode().splitlines() if p not in left_out]
    total = 0
    if changed:
        total += len(subprocess.run(["git", "diff", "--binary", "--no-renames", "HEAD", "--", *changed], check=True,
                                    capture_output=True, cwd=top).stdout)
    untracked = git("ls-files", "--others", "--exclude-standard", "--full-name", top).decode().splitlines()
    for path in (p for p in untracked if p not in left_out):  # files git add -A would add
        total += replacing_bytes(os.path.join(top, "no such file"), os.path.join(top, path))
    return total


def pack_bytes(base: str, head: str = "HEAD") -> int:
    """``base..head`` packed as one (non-thin) pack."""
    return len(git("pack-objects", "--revs", "--stdout", "-q", input=f"{head}\n^{base}\n".encode()))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--base", default=None, help="the commit the session began at (default: main's at the session's start)")
    p.add_argument("--adding", type=int, default=0, help="bytes about to be committed (a save's checkpoints)")
    p.add_argument("--replacing", nargs=2, action="append", default=[], metavar=("SAVED", "NEW"),
                   help="a committed file (or the path it will have) about to be replaced by NEW")
    p.add_argument("--budget", type=float, default=200.0, help="MiB of diffs this session may reach (default 200)")
    args = p.parse_args(argv)
    base = args.base or session_base()
    diffs, pack = diff_bytes(base), pack_bytes(base)
    adding = (args.adding + sum(replacing_bytes(saved, new) for saved, new in args.replacing)
              + pending_bytes(path for pair in args.replacing for path in pair))
    total = diffs + adding
    print(f"since {base[:10]}: diffs {diffs / MiB:.1f} MiB (limit {DIFF_LIMIT // MiB}), "
          f"packed {pack / MiB:.1f} MiB (limit {PACK_LIMIT // MiB})"
          + (f"; with {adding / MiB:.1f} MiB more: diffs {total / MiB:.1f} MiB" if adding else ""))
    if total > args.budget * MiB or pack + adding > PACK_LIMIT:
        print(f"over this session's budget of {args.budget:.0f} MiB of diffs: committing it risks the whole "
              f"submission being refused. Commit less (save fewer runs, or once, at the session's end).",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
