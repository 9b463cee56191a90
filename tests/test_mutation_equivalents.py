"""Every reviewed equivalent mutant (tools/mutation/equivalents.json) is one
the tool still makes: an entry whose line moved or went away would never
match again, and the survivor it stood for, once its code returns, would be
counted as equivalent unreviewed or not at all."""

import pathlib
import sys

TOOL = pathlib.Path(__file__).resolve().parents[1] / "tools" / "mutation"


def test_every_equivalent_names_a_mutant_of_today():
    sys.path.insert(0, str(TOOL))
    try:
        import run
    finally:
        sys.path.remove(str(TOOL))
    made = {m.key() for m in run.all_mutants()}
    stale = [key for key in run.load_equivalents() if key not in made]
    assert not stale, f"equivalents.json entries that match no mutant: {stale}"
