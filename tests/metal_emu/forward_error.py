"""A kernel's output against its float64 reference within an elementwise
bound of its forward error (the tests of MLX's GEMM, softmax and
reductions, whose bounds depend on each element's inputs)."""

import numpy as np

# Every failure's message starts so (as numpy's assert_allclose does), so
# that the planted-fault tests can tell a mismatch from a crash.
MISMATCH = "Not equal to tolerance"


def check(got, ref, bound, what):
    """Raises AssertionError naming `what` where |got - ref| > bound or got
    is NaN; ref and bound are float64 arrays of got's shape."""
    got = np.asarray(got, np.float64)
    bad = ~(np.abs(got - ref) <= bound)
    if bad.any():
        first = tuple(int(i) for i in np.argwhere(bad)[0])
        raise AssertionError(
            f"{MISMATCH}: {what}: {int(bad.sum())} of {bad.size} elements out of bounds; "
            f"first at {first}: {got[first]!r} against {ref[first]!r}, bound {bound[first]!r}"
        )
