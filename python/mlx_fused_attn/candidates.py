"""What ``tune`` times for a call: mx.fast, and each plan of this package's
fused kernel the call may run (``PlanHint``): the planner's own, the
general kernel instead of the short one, fewer key splits, and on Metal the
kernel's variants (Q in threadgroup memory, 32-key blocks at D = 128,
32-bit K/V offsets: ``metal/README.md``). Plans that come out the same
(the same family, tiles and splits) are timed once.
"""

from __future__ import annotations

from typing import NamedTuple

from . import plans as ps

MX_FAST = "mx.fast"
FUSED = "fused"

# The Metal kernel's variants (MLX_FUSED_ATTN_METAL_VARIANT's grammar),
# the default kernel left out: the tile words take effect at D = 128 in
# float16 and bfloat16, stride32 at every head dim.
METAL_VARIANTS = (
    "stride32",
    "bk32",
    "bk32,stride32",
    "q_threadgroup",
    "q_threadgroup,stride32",
    "q_threadgroup,bk32",
    "q_threadgroup,bk32,stride32",
)


class Candidate(NamedTuple):
    """mx.fast, or this package's kernel with a plan hint."""

    kind: str  # MX_FAST or FUSED
    hint: ps.PlanHint = ps.PlanHint()

    @property
    def name(self) -> str:
        """``mx.fast``, ``fused`` or ``fused[short=off;splits<=1;metal=bk32]``:
        how the tuned table names it."""
        if self.kind == MX_FAST:
            return MX_FAST
        h = self.hint
        parts = []
        if not h.short_kernel:
            parts.append("short=off")
        if h.max_key_splits:
            parts.append(f"splits<={h.max_key_splits}")
        if h.metal_variant:
            parts.append(f"metal={h.metal_variant}")
        return FUSED + (f"[{';'.join(parts)}]" if parts else "")

    @classmethod
    def parse(cls, name: str) -> Candidate:
        """The candidate ``name`` names; ValueError for another string."""
        if name == MX_FAST:
            return cls(MX_FAST)
        if name == FUSED:
            return cls(FUSED)
        if not (name.startswith(FUSED + "[") and name.endswith("]")):
            raise ValueError(
                f"candidate {name!r}: expected 'mx.fast', 'fused' or 'fused[...]' "
                "with short=off, splits<=N, metal=VARIANT separated by ';'"
            )
        hint = {}
        for part in name[len(FUSED) + 1 : -1].split(";"):
            if part == "short=off":
                hint["short_kernel"] = False
            elif part.startswith("splits<=") and part[8:].isdigit() and int(part[8:]) > 0:
                hint["max_key_splits"] = int(part[8:])
            elif part.startswith("metal=") and part[6:]:
                hint["metal_variant"] = part[6:]
            else:
                raise ValueError(
                    f"candidate {name!r}: unknown part {part!r} (accepted: short=off, "
                    "splits<=N with N >= 1, metal=VARIANT)"
                )
        return cls(FUSED, ps.PlanHint(**hint))


def hints_to_try(base: ps.PlanSummary, backend: str) -> list[ps.PlanHint]:
    """The hints worth timing for a call whose default plan is ``base`` on a
    GPU backend (``"metal"``, ``"cuda"``) or the CPU (``"cpu"``), the
    default first."""
    hints = [ps.PlanHint()]
    if base.code == ps.SHORT_KERNEL:
        hints.append(ps.PlanHint(short_kernel=False))
    if base.code == ps.KEYS_SPLIT:
        hints.append(ps.PlanHint(max_key_splits=1))
        if base.key_splits >= 4:
            hints.append(ps.PlanHint(max_key_splits=base.key_splits // 2))
    if backend == "metal" and base.code in (ps.GENERAL_KERNEL, ps.KEYS_SPLIT):
        hints += [ps.PlanHint(metal_variant=v) for v in METAL_VARIANTS]
    return hints


def candidates_for(q, k, v, *, scale, mask, sinks, stream, backend: str) -> list[Candidate]:
    """The candidates of one call: each distinct fused plan, then mx.fast."""
    base = ps.plan_summary(q, k, v, scale=scale, mask=mask, sinks=sinks, stream=stream)
    out = []
    if base.fused:
        seen = set()
        for hint in hints_to_try(base, backend):
            plan = ps.plan_summary(
                q, k, v, scale=scale, mask=mask, sinks=sinks, stream=stream, hint=hint
            )
            # stride32 is a function constant of the same tiles: a plan of
            # its own to time.
            same = (plan.family, plan.key_splits, tuple(sorted(plan.tiles.items())),
                    "stride32" in (hint.metal_variant or ""))  # fmt: skip
            if plan.fused and same not in seen:
                seen.add(same)
                out.append(Candidate(FUSED, hint))
    out.append(Candidate(MX_FAST))
    return out
