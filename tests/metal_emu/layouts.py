"""Arrays stored the way a kernel may be handed them: axes in any order,
spare slots after any axis, the padding filled with a poison value. A kernel
that offsets one input by another's stride, or by the wrong axis's, reads
poison or the wrong element, which an element-by-element check sees."""

import numpy as np


class Layout:
    """Storage of an array whose axes are stored outermost first in `order`
    (a permutation of the axes) with `pad[a]` spare entries after the
    entries of axis a."""

    def __init__(self, order, pad):
        assert sorted(order) == list(range(len(order))) and len(pad) == len(order)
        self.order, self.pad = tuple(order), tuple(pad)

    def view(self, storage):
        """The array inside `storage`, axes in their logical order."""
        inner = storage[tuple(slice(0, n - self.pad[a]) for a, n in zip(self.order, storage.shape))]
        return inner.transpose(np.argsort(self.order))

    def place(self, values, fill):
        """(storage holding `values`, padding set to `fill`; the view's
        strides in elements, in the logical axis order)."""
        shape = [values.shape[a] + self.pad[a] for a in self.order]
        storage = np.full(shape, fill, values.dtype)
        view = self.view(storage)
        view[...] = values
        return storage, tuple(s // values.itemsize for s in view.strides)

    def padding(self, storage):
        """The elements of `storage` outside the view (to check that a kernel
        left them alone)."""
        outside = np.ones(storage.shape, bool)
        self.view(outside)[...] = False
        return storage[outside]


def contiguous_last(order, pad, ndim):
    """A layout whose last axis stays innermost and unpadded (a head-dim row,
    which the kernels read with unit stride)."""
    return Layout(tuple(order) + (ndim - 1,), tuple(pad) + (0,))
