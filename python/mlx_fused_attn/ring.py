"""Ring attention over ``mx.distributed``: a sequence split over the
processes of a group, each holding its slice of the queries, keys and
values. Key/value blocks travel around the ring with ``send``/``recv`` on
streams of their own while each process attends its queries to the block it
holds, merging it into its output by their log-sum-exps (in place on the
CPU; the forward's blocks travel in sub-blocks). The backward sends
the blocks around again with their dK/dV accumulators, which arrive home
after a full lap. How it is built: docs/ring_attention.md."""

from __future__ import annotations

import contextlib
import os
import sys
import threading

import mlx.core as mx

_LAYOUTS = ("contiguous", "zigzag")
# The forward sends each key/value block as this many sub-blocks along the
# sequence, one lap of the ring each: a process then holds the sub-block it
# computes with and the one arriving, 4 / _PARTS of its q's size, instead
# of two whole K/V blocks (4 q's). Measured in benchmarks/RESULTS.md.
_PARTS = 4


# ---------------------------------------------------------------- sharding


def _chunk_bounds(total: int, size: int, layout: str) -> list[list[tuple[int, int]]]:
    """Per rank, the (start, stop) ranges of the sequence it holds, in its
    local order: ``contiguous``: the rank-th of `size` near-equal slices;
    ``zigzag``: of 2 * size near-equal chunks, chunks ``rank`` and ``2 *
    size - 1 - rank`` (so causal work is the same on every rank)."""
    parts = size if layout == "contiguous" else 2 * size
    chunks = _split(total, parts)
    if layout == "contiguous":
        return [[c] for c in chunks]
    return [[chunks[r], chunks[parts - 1 - r]] for r in range(size)]


def _split(total: int, parts: int) -> list[tuple[int, int]]:
    """(start, stop) of `parts` near-equal pieces of range(total): sizes
    differ by at most one, larger ones first, as in numpy.array_split."""
    base, extra = divmod(total, parts)
    cuts = [0]
    for i in range(parts):
        cuts.append(cuts[-1] + base + (i < extra))
    return list(zip(cuts, cuts[1:]))


def _check_layout(layout) -> None:
    if layout not in _LAYOUTS:
        raise ValueError(f"[ring_attention] layout must be one of {_LAYOUTS}; got {layout!r}")


def ring_shard(x: mx.array, rank: int, size: int, *, layout: str = "contiguous", axis: int = 2):
    """The part of the whole sequence ``x`` (along ``axis``, default the
    sequence axis of ``[B, H, L, D]``) that process ``rank`` of ``size``
    holds in ``ring_attention``'s ``layout``."""
    _check_layout(layout)
    if not 0 <= rank < size:
        raise ValueError(f"[ring_shard] rank must be in [0, {size}); got {rank}")
    ranges = _chunk_bounds(x.shape[axis], size, layout)[rank]
    idx = [slice(None)] * x.ndim
    parts = []
    for a, b in ranges:
        idx[axis] = slice(a, b)
        parts.append(x[tuple(idx)])
    return parts[0] if len(parts) == 1 else mx.concatenate(parts, axis=axis)


def ring_unshard(parts, *, layout: str = "contiguous", axis: int = 2) -> mx.array:
    """The whole sequence from every rank's part (``parts[r]`` from rank
    ``r``, as ``ring_shard`` cut them): the inverse of ``ring_shard``."""
    _check_layout(layout)
    parts = list(parts)
    if layout == "contiguous":
        return mx.concatenate(parts, axis=axis)
    n = len(parts)
    chunks = [None] * (2 * n)
    for r, p in enumerate(parts):
        first = (p.shape[axis] + 1) // 2
        idx = [slice(None)] * p.ndim
        idx[axis] = slice(0, first)
        chunks[r] = p[tuple(idx)]
        idx[axis] = slice(first, None)
        chunks[2 * n - 1 - r] = p[tuple(idx)]
    return mx.concatenate(chunks, axis=axis)


# ------------------------------------------------------------- block plan


class _Ring:
    """What one call needs to know about the ring: its rank and size, every
    rank's pieces of the sequence (chunk id, local start, length) and which
    (query piece, key range, mask) pairs each key block contributes."""

    def __init__(self, group, lengths, causal, layout):
        self.group = group
        self.n, self.rank = group.size(), group.rank()
        self.right, self.left = (self.rank + 1) % self.n, (self.rank - 1) % self.n
        self.lengths = lengths
        self.causal = causal
        # Without a mask every key is seen by every query: no pieces needed.
        self.pieces = [self._pieces(r, L, layout if causal else "contiguous") for r, L in enumerate(lengths)]

    def _pieces(self, rank, length, layout):
        if layout == "contiguous":
            return [(rank, 0, length)]
        first = (length + 1) // 2
        return [p for p in ((rank, 0, first), (2 * self.n - 1 - rank, first, length - first)) if p[2]]

    def tasks(self, src):
        """[(query piece index, key start, key stop, mask)] for the block
        of rank `src`: chunks after the query's are skipped, earlier ones
        seen whole (neighbours merged into one call), the same chunk
        causal."""
        out = []
        for qi, (qc, _, _) in enumerate(self.pieces[self.rank]):
            run = None
            for kc, k0, kl in self.pieces[src]:
                if self.causal and kc > qc:
                    continue
                if self.causal and kc == qc:
                    out.append((qi, k0, k0 + kl, "causal"))
                elif run is not None and run[2] == k0:
                    run[2] = k0 + kl
                else:
                    run = [qi, k0, k0 + kl, None]
                    out.append(run)
        return [tuple(t) for t in out]

    def sub_tasks(self, src, start, stop):
        """The tasks of `src`'s block on its keys [start, stop) only, with
        key ranges relative to `start`: unmasked ones, as every task of
        another rank's block is (the causal ones pair a chunk with
        itself)."""
        out = []
        for qi, k0, k1, mask in self.tasks(src):
            lo, hi = max(k0, start), min(k1, stop)
            if lo < hi:
                out.append((qi, lo - start, hi - start, mask))
        return out


def _streams():
    """The send and the recv stream: separate, so that a blocking send and
    the recv its neighbour waits on never queue behind each other, and apart
    from the compute stream, so that transfers overlap the kernels. On
    MLX's CUDA build the collectives are NCCL's, on GPU streams; the ring
    and MPI backends run theirs on CPU streams."""
    global _STREAMS
    if _STREAMS is None:
        on_gpu = mx.default_device() == mx.gpu and mx.cuda.is_available()
        device = mx.gpu if on_gpu else mx.cpu
        _STREAMS = (mx.new_stream(device), mx.new_stream(device))
    return _STREAMS


_STREAMS = None


def _gather_lengths(local: int, group) -> list[int]:
    """Every rank's sequence length (one small all_gather, read on the
    host: the shapes of the blocks each rank receives)."""
    lengths = mx.distributed.all_gather(mx.array([local], dtype=mx.int32), group=group)
    _eval_or_explain(group, lengths)
    return lengths.tolist()


def _seq(x, a, b):
    return x[:, :, a:b]


class _Step:
    """The transfers of one step of a pass around the ring.

    A pass is evaluated a step at a time: one ``mx.eval`` holds the step's
    kernels (on the compute stream) and its sends and recvs (on their own
    streams), which therefore overlap, and nothing in it waits for a
    transfer of another step. One graph for the whole pass deadlocks: MLX's
    evaluator stops queueing work while more than ten tasks are in flight,
    and tasks blocked on a recv stay in flight while the send their
    neighbour waits for is not queued yet. A step's memory is also that of
    the (sub-)block it holds and the one arriving, not of every block.

    Within a step, a rank reads its left neighbour's messages as one byte
    stream, so its recvs must run in the order the neighbour's sends do;
    MLX orders a stream's ops only by the graph, so each send's input
    depends on the previous send and each recv on the previous recv
    (Depends nodes, which run on the stream of their first input: the
    send's and the recv's own stream)."""

    def __init__(self, ring):
        self.ring = ring
        self.send_stream, self.recv_stream = _streams()
        self.sends, self.recvs = [], []

    def send(self, x):
        if self.sends:
            _, x = mx.depends([self.sends[-1], x], [self.sends[-1]])
        self.sends.append(
            mx.distributed.send(x, self.ring.right, group=self.ring.group, stream=self.send_stream)
        )

    def recv(self, shape, dtype):
        got = mx.distributed.recv(
            shape, dtype, self.ring.left, group=self.ring.group, stream=self.recv_stream
        )
        if self.recvs:
            got, _ = mx.depends([got, self.recvs[-1]], [self.recvs[-1]])
        self.recvs.append(got)
        return got

    def run(self, *computed):
        """Evaluate the step: its transfers and the `computed` arrays."""
        _eval_or_explain(self.ring.group, *computed, *self.sends, *self.recvs)


def _eval_or_explain(group, *arrays):
    """mx.eval, with a transfer that failed explained: MLX's ring backend
    says only that a connection was lost."""
    try:
        mx.eval(*arrays)
    except RuntimeError as error:
        raise RuntimeError(
            f"[ring_attention] rank {group.rank()} of {group.size()}: a transfer failed "
            f"({error}); a process of the group has likely died"
        ) from error


def _block_shape(x, length):
    return (x.shape[0], x.shape[1], length, x.shape[3])


# ---------------------------------------------------------- forward / vjp


def _forward(ring, q, k, v, scale):
    """Out and LSE of this rank's queries over every block. The own block
    is attended whole, a task a lap; the others arrive in _PARTS
    sub-blocks, lap by lap (lap p carries part p of every block). Each
    merges into the output and LSE held so far (attention_merge: in place
    on the CPU, rounded to the output's dtype once a merge)."""
    from . import _ext

    qp = ring.pieces[ring.rank]
    # Each piece's output and LSE start as those of no key: zero and -inf
    # (every merge's inputs then have one output each, so the CPU merges
    # in place from the first block on).
    B, H = q.shape[:2]
    acc = [(mx.zeros((B, H, ql, v.shape[3]), dtype=q.dtype), mx.full((B, H, ql), -mx.inf)) for _, _, ql in qp]

    def attend(qi, ks, vs, k0, k1, mask):
        _, q0, ql = qp[qi]
        args = (_seq(q, q0, q0 + ql), _seq(ks, k0, k1), _seq(vs, k0, k1))
        acc[qi] = _ext.attention_merge(*args, *acc[qi], scale=scale, mask=mask)

    own = ring.tasks(ring.rank)
    for part in range(_PARTS):
        for t in range(ring.n):
            src = (ring.rank - t) % ring.n
            start, stop = _split(ring.lengths[src], _PARTS)[part]
            if t == 0:
                held = (_seq(k, start, stop), _seq(v, start, stop))
                # The own block's tasks (at most three), one a lap: in a
                # step that merged twice into one piece, the first merge's
                # output would still be referenced (by its LSE's pending
                # eval) when the second runs, which then copies it.
                for task in own[part::_PARTS]:
                    attend(task[0], k, v, *task[1:])
            else:
                for task in ring.sub_tasks(src, start, stop):
                    attend(task[0], *held, *task[1:])
            step = _Step(ring)
            if t < ring.n - 1:
                # The held sub-block travels on while this step computes
                # with it; an empty one (a block shorter than _PARTS) is
                # neither sent nor received, on both sides.
                if stop > start:
                    step.send(held[0])
                    step.send(held[1])
                start, stop = _split(ring.lengths[(src - 1) % ring.n], _PARTS)[part]
                held = None
                if stop > start:
                    held = (
                        step.recv(_block_shape(k, stop - start), k.dtype),
                        step.recv(_block_shape(v, stop - start), v.dtype),
                    )
            step.run(*[x for a in acc for x in a])
    if len(acc) == 1:
        return acc[0]
    return mx.concatenate([a[0] for a in acc], axis=2), mx.concatenate([a[1] for a in acc], axis=2)


def _backward(ring, q, k, v, out, lse, dout, scale):
    from . import _ext

    qp = ring.pieces[ring.rank]
    dq = [None] * len(qp)
    cur_k, cur_v, in_dk, in_dv = k, v, None, None
    mx.eval(out, lse, dout)
    for t in range(ring.n):
        src = (ring.rank - t) % ring.n
        last = t == ring.n - 1
        step = _Step(ring)
        if not last:
            step.send(cur_k)
            step.send(cur_v)
        L = ring.lengths[src]
        dk_acc = mx.zeros(_block_shape(k, L), dtype=mx.float32) if in_dk is None else in_dk
        dv_acc = mx.zeros(_block_shape(v, L), dtype=mx.float32) if in_dv is None else in_dv
        for qi, k0, k1, mask in ring.tasks(src):
            _, q0, ql = qp[qi]
            gq, gk, gv = _ext.attention_backward(
                _seq(q, q0, q0 + ql), _seq(cur_k, k0, k1), _seq(cur_v, k0, k1),
                _seq(out, q0, q0 + ql), lse[:, :, q0 : q0 + ql], _seq(dout, q0, q0 + ql),
                scale=scale, mask=mask,
            )  # fmt: skip
            gq = gq.astype(mx.float32)
            dq[qi] = gq if dq[qi] is None else dq[qi] + gq
            pad = [(0, 0), (0, 0), (k0, L - k1), (0, 0)]
            dk_acc = dk_acc + mx.pad(gk.astype(mx.float32), pad)
            dv_acc = dv_acc + mx.pad(gv.astype(mx.float32), pad)
        # The accumulators go on to the next rank; after the last step that
        # is the block's home, and this rank receives its own block's.
        step.send(dk_acc)
        step.send(dv_acc)
        Ln = ring.lengths[(src - 1) % ring.n]
        if not last:
            nxt_k = step.recv(_block_shape(k, Ln), k.dtype)
            nxt_v = step.recv(_block_shape(v, Ln), v.dtype)
        in_dk = step.recv(_block_shape(k, Ln), mx.float32)
        in_dv = step.recv(_block_shape(v, Ln), mx.float32)
        step.run(*[x for x in dq if x is not None])
        if not last:
            cur_k, cur_v = nxt_k, nxt_v
    return (
        mx.concatenate(dq, axis=2).astype(q.dtype),
        in_dk.astype(k.dtype),
        in_dv.astype(v.dtype),
    )


def ring_attention(
    q: mx.array,
    k: mx.array,
    v: mx.array,
    scale: float | None = None,
    causal: bool = False,
    group: mx.distributed.Group | None = None,
    layout: str = "contiguous",
) -> mx.array:
    """Attention over a sequence split across the processes of a
    ``mx.distributed`` group; each process gets the output for its queries.

    Args:
        q: this process's queries ``[B, H_q, L_r, D]``.
        k, v: its keys and values ``[B, H_kv, L_r, D]``, ``[B, H_kv, L_r,
            D_v]`` (GQA when ``H_q % H_kv == 0``). ``L_r`` may differ
            between processes; B, heads, head dims and dtype may not.
        scale: multiplies ``q k^T``; default ``D ** -0.5``.
        causal: causal attention over the whole sequence (query at global
            position i sees keys at positions <= i); q and k then have the
            same length on each process.
        group: the group (default ``mx.distributed.init()``): the ring
            backend of ``mlx.launch``, MPI, or NCCL on CUDA GPUs.
        layout: which part of the sequence process r holds:
            ``"contiguous"``: the r-th slice; ``"zigzag"``: chunks r and
            2n-1-r of 2n (balances causal work), the first ``(L_r + 1) //
            2`` tokens long. ``ring_shard`` cuts a whole sequence so,
            ``ring_unshard`` puts it back.

    Returns:
        ``[B, H_q, L_r, D_v]``. ``mx.grad`` of a process's own loss gives
        that process's slice of the gradient of the sum of every process's
        loss (dK/dV computed elsewhere travel home around the ring), as
        data-parallel training expects. Every process must make the same
        calls in the same order. The call evaluates as it goes (one
        ``mx.eval`` a ring step, forward and backward: see ``_Step``), so
        it is not for ``mx.compile`` or ``mx.vmap``. A process that dies leaves
        the others waiting inside ``mx.eval``; ``ring_deadline`` turns that
        into an error exit.
    """
    for name, x in (("q", q), ("k", k), ("v", v)):
        if not isinstance(x, mx.array) or x.ndim != 4:
            raise ValueError(
                f"[ring_attention] {name} must be an mlx.core.array [B, H, L, D]; "
                f"got {getattr(x, 'shape', type(x).__name__)}"
            )
    _check_layout(layout)
    if not isinstance(causal, bool):
        raise TypeError(f"[ring_attention] causal must be a bool; got {causal!r}")
    if causal and q.shape[2] != k.shape[2]:
        raise ValueError(
            "[ring_attention] causal ring attention needs q and k of one length on each "
            f"process (the same slice of the sequence); got {q.shape[2]} and {k.shape[2]}"
        )
    if k.shape[2] != v.shape[2]:
        raise ValueError(f"[ring_attention] k and v must have one length; got {k.shape} and {v.shape}")
    scale = q.shape[-1] ** -0.5 if scale is None else float(scale)
    group = mx.distributed.init() if group is None else group
    if group.size() == 1:
        from . import scaled_dot_product_attention

        # One process holds the whole sequence, in its layout's order: zigzag
        # with one rank is chunk 0 then chunk 1, the sequence itself.
        return scaled_dot_product_attention(q, k, v, scale=scale, mask="causal" if causal else None)
    ring = _Ring(group, _gather_lengths(k.shape[2], group), causal, layout)

    @mx.custom_function
    def attend(q, k, v):
        return _forward(ring, q, k, v, scale)

    @attend.vjp
    def attend_vjp(primals, cotangents, outputs):
        # The LSE is internal: only the output's cotangent matters.
        return _backward(ring, *primals, *outputs, cotangents[0], scale)

    return attend(q, k, v)[0]


@contextlib.contextmanager
def ring_deadline(seconds: float):
    """Exit the process with an error if the block does not finish within
    ``seconds``. A peer that dies closes its connections, and
    ``ring_attention`` raises ``RuntimeError``; a peer that stops without
    dying (stuck, or gone on to other work) leaves the others waiting inside
    ``mx.eval``, where Python cannot interrupt them. A training step that
    runs ``ring_attention`` can be wrapped in this to fail then, with a
    message on stderr and exit status 70, instead of hanging::

        with fa.ring_deadline(300):
            mx.eval(step(batch))
    """
    group = mx.distributed.init()
    rank, size = group.rank(), group.size()
    done = threading.Event()

    def watch():
        if not done.wait(seconds):
            sys.stderr.write(
                f"[ring_attention] rank {rank} of {size}: the step did not "
                f"finish within {seconds} s; a process of the group has likely died or "
                "stopped (the ring backend waits for it forever). Exiting.\n"
            )
            sys.stderr.flush()
            os._exit(70)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
        watcher.join()
