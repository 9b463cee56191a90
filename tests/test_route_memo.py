"""route() answers a call it has seen by a lookup: the same signature gets
the same answer object; the mask's values do not count, its kind and shape
do; a changed switch of the planner, a failed kernel build or a tuned table
read again make it answer afresh."""

import mlx.core as mx
import pytest

import mlx_fused_attn as fa
from mlx_fused_attn import _ext, routing, tuned_table

pytestmark = pytest.mark.ops


def qkv(L=16):
    q = mx.random.normal((1, 4, L, 32), key=mx.random.key(0))
    k = mx.random.normal((1, 2, L, 32), key=mx.random.key(1))
    return q, k, k


def test_a_seen_signature_is_a_lookup():
    q, k, v = qkv()
    first = fa.route(q, k, v, scale=0.5, mask="causal")
    assert fa.route(*qkv(), scale=0.5, mask="causal") is first
    assert fa.route(q, k, v, scale=0.5) is not first
    assert fa.route(q, k, v, scale=0.25, mask="causal") is not first
    assert fa.route(*qkv(L=24), scale=0.5, mask="causal") is not first


def test_a_mask_counts_by_kind_and_shape_not_values():
    q, k, v = qkv()
    ones = mx.ones((16, 16), mx.bool_)
    first = fa.route(q, k, v, scale=0.5, mask=ones)
    assert fa.route(q, k, v, scale=0.5, mask=mx.zeros((16, 16), mx.bool_)) is first
    assert fa.route(q, k, v, scale=0.5, mask=mx.zeros((16, 16), mx.float32)) is not first
    assert fa.route(q, k, v, scale=0.5, mask=mx.ones((1, 16, 16), mx.bool_)) is not first


def test_a_switch_of_the_planner_is_read_again(monkeypatch):
    q, k, v = qkv()
    before = _ext.plan_inputs_state()
    first = fa.route(q, k, v, scale=0.5)
    monkeypatch.setenv("MLX_FUSED_ATTN_SPLIT_KEYS", "0")
    assert _ext.plan_inputs_state() != before
    assert fa.route(q, k, v, scale=0.5) is not first
    monkeypatch.delenv("MLX_FUSED_ATTN_SPLIT_KEYS")
    assert _ext.plan_inputs_state() == before
    # Variables of other programs do not count.
    monkeypatch.setenv("SOMETHING_ELSE", "1")
    assert _ext.plan_inputs_state() == before


def test_a_tuned_table_read_again_is_read_again():
    q, k, v = qkv()
    first = fa.route(q, k, v, scale=0.5)
    tuned_table.forget()
    assert fa.route(q, k, v, scale=0.5) is not first


def test_arguments_it_cannot_key_are_answered_afresh():
    q, k, v = qkv()
    assert routing._signature(q, k, v, mx.array(0.5), None, None, mx.Device(mx.cpu), "auto",
                              False) is None  # fmt: skip
    assert routing._signature(q.tolist(), k, v, 0.5, None, None, mx.Device(mx.cpu), "auto",
                              False) is None  # fmt: skip
    choice, _ = fa.route(q, k, v, scale=0.5, mask=[[True]])
    assert choice == routing.FALLBACK
