"""mlx-lm models under patch_mx_fast give what they give without it: logits,
greedy tokens (KVCache, RotatingKVCache, BatchKVCache with left padding,
QuantizedKVCache), a compiled forward, and LoRA / full gradients. Tiny random-weight models from
mlx_lm.models; they run on the default device (the GPU where there is one)."""

import subprocess
import sys

import mlx.core as mx
import mlx.nn as nn
import numpy as np
import pytest
from mlx.utils import tree_flatten

import mlx_fused_attn as fa

pytest.importorskip("mlx_lm")
from mlx_lm.generate import generate_step  # noqa: E402
from mlx_lm.models import gemma3_text, llama, qwen3  # noqa: E402
from mlx_lm.models.cache import BatchKVCache, RotatingKVCache  # noqa: E402
from mlx_lm.tuner.lora import LoRALinear  # noqa: E402
from mlx_lm.tuner.utils import linear_to_lora_layers  # noqa: E402

VOCAB = 256
PROMPT = 24  # past the sliding window, so the sliding layers get array masks
GEN = 32
WINDOW = 8
ON_CPU = mx.default_device() == mx.cpu
# On a GPU, "fused" also runs the package's kernels where mx.fast is the faster
# choice, so that the kernels are tested inside the models there too.
POLICIES = ["auto"] if ON_CPU else ["auto", "fused"]

MODELS = {
    # Llama with grouped-query attention (4 query heads on 2 key/value heads), D = 32.
    "llama-gqa": (
        llama,
        dict(
            model_type="llama",
            hidden_size=128,
            num_hidden_layers=2,
            intermediate_size=256,
            num_attention_heads=4,
            num_key_value_heads=2,
            rms_norm_eps=1e-5,
            vocab_size=VOCAB,
            tie_word_embeddings=False,
        ),
    ),
    # Mistral-style: a sliding-window layer (RotatingKVCache, array masks) and a
    # full one, D = 64.
    "llama-sliding": (
        llama,
        dict(
            model_type="llama",
            hidden_size=128,
            num_hidden_layers=2,
            intermediate_size=256,
            num_attention_heads=2,
            num_key_value_heads=1,
            rms_norm_eps=1e-5,
            vocab_size=VOCAB,
            tie_word_embeddings=False,
            layer_types=["sliding_attention", "full_attention"],
            sliding_window=WINDOW,
        ),
    ),
    # Gemma 3 with head dim 256 (no fused GPU kernel yet: falls back there),
    # sliding and global layers.
    "gemma3-d256": (
        gemma3_text,
        dict(
            model_type="gemma3_text",
            hidden_size=64,
            num_hidden_layers=2,
            intermediate_size=128,
            num_attention_heads=2,
            num_key_value_heads=1,
            head_dim=256,
            vocab_size=VOCAB,
            sliding_window=WINDOW,
            sliding_window_pattern=2,
        ),
    ),
}
TOL = {mx.float32: 5e-5, mx.float16: 2e-2}


def build(name, dtype=mx.float32):
    module, args = MODELS[name]
    mx.random.seed(sorted(MODELS).index(name))
    model = module.Model(module.ModelArgs(**args))
    model.set_dtype(dtype)
    mx.eval(model.parameters())
    return model


def tokens(n, seed=0, batch=None):
    rng = np.random.default_rng(seed)
    return mx.array(rng.integers(0, VOCAB, (n,) if batch is None else (batch, n)))


def assert_close(got, want, tol):
    got, want = np.array(got.astype(mx.float32)), np.array(want.astype(mx.float32))
    np.testing.assert_allclose(got, want, rtol=0, atol=tol * max(1.0, np.abs(want).max()))


def check_routed(stats, calls=None):
    """Every attention call went through the patch; on the CPU, fused."""
    assert sum(stats) > 0 if calls is None else sum(stats) == calls
    if ON_CPU:
        assert stats.fallback == stats.passed_through == 0


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("dtype", [mx.float32, mx.float16], ids=["float32", "float16"])
@pytest.mark.parametrize("name", list(MODELS))
def test_logits(name, dtype, policy):
    model = build(name, dtype)
    x = tokens(PROMPT, batch=2)
    want = model(x)
    with fa.patch_mx_fast(policy=policy) as patch:
        got = model(x)
        mx.eval(got)
    assert_close(got, want, TOL[dtype])
    check_routed(patch.stats, calls=len(model.layers))


def test_head_dim_256_is_routed_by_coverage():
    """Gemma 3's head dim 256: fused on every device; on CUDA, where mx.fast
    has no fused kernel past 128, route sends it here and says why."""
    q = mx.zeros((2, 2, PROMPT, 256))
    kv = mx.zeros((2, 1, PROMPT, 256))
    choice, reason = fa.route(q, kv, kv, scale=256**-0.5, mask="causal")
    if ON_CPU:
        assert choice == "fused", reason
    elif fa.build_info()["gpu_backend"] == "cuda":
        assert choice == "fused" and "past head dim 128" in reason, reason


def greedy(model, prompt, cache=None):
    steps = generate_step(prompt, model, max_tokens=GEN, prompt_cache=cache)
    return [int(t) for t, _ in steps]


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize(
    "name, cache",
    [
        ("llama-gqa", "default"),  # KVCache
        ("llama-gqa", "rotating"),  # RotatingKVCache of 16 < prompt + generation
        ("llama-sliding", "default"),  # RotatingKVCache(window) + KVCache
        ("gemma3-d256", "default"),
    ],
)
def test_greedy_generation(name, cache, policy):
    model = build(name)
    prompt = tokens(PROMPT, seed=1)

    def make_cache():
        if cache == "rotating":
            return [RotatingKVCache(max_size=16) for _ in model.layers]
        return None  # the model's own (generate_step calls make_prompt_cache)

    want = greedy(model, prompt, make_cache())
    with fa.patch_mx_fast(policy=policy) as patch:
        got = greedy(model, prompt, make_cache())
    assert len(want) == GEN and got == want
    check_routed(patch.stats)


@pytest.mark.parametrize("policy", POLICIES)
def test_batched_generation_with_left_padding(policy):
    """BatchKVCache: three prompts of different lengths, left-padded; the pad
    queries' rows are masked everywhere, which mx.fast and the package treat
    alike (finfo.min scores: the row averages v)."""
    model = build("llama-gqa")
    lengths = [PROMPT, 17, 9]
    padding = [PROMPT - n for n in lengths]
    prompts = tokens(PROMPT, seed=2, batch=len(lengths))
    prompts = mx.where(mx.arange(PROMPT)[None] < mx.array(padding)[:, None], 0, prompts)

    def generate():
        cache = [BatchKVCache(padding) for _ in model.layers]
        y = prompts
        out = []
        for _ in range(GEN):
            y = mx.argmax(model(y, cache=cache)[:, -1, :], axis=-1)[:, None]
            out.append(y)
        return np.array(mx.concatenate(out, axis=1))

    want = generate()
    with fa.patch_mx_fast(policy=policy) as patch:
        got = generate()
    np.testing.assert_array_equal(got, want)
    check_routed(patch.stats, calls=GEN * len(model.layers))


# QuantizedKVCache in three families: (model, its config, group size, bits).
QUANTIZED_MODELS = {
    "llama-gqa": (llama, MODELS["llama-gqa"][1], 32, 4),  # D = 32
    # Every layer global (pattern 1): mlx-lm cannot quantize a sliding
    # layer's RotatingKVCache. D = 256.
    "gemma3-d256": (gemma3_text, {**MODELS["gemma3-d256"][1], "sliding_window_pattern": 1}, 64, 8),
    # Qwen 3: normed q and k, 8 query heads on 2 key/value heads, D = 64.
    "qwen3": (
        qwen3,
        dict(
            model_type="qwen3",
            hidden_size=128,
            num_hidden_layers=2,
            intermediate_size=256,
            num_attention_heads=8,
            num_key_value_heads=2,
            head_dim=64,
            rms_norm_eps=1e-6,
            vocab_size=VOCAB,
            max_position_embeddings=512,
            rope_theta=10000.0,
            tie_word_embeddings=False,
        ),
        64,
        4,
    ),
}


@pytest.mark.parametrize("name", list(QUANTIZED_MODELS))
def test_quantized_kv_cache_greedy_generation(name):
    """QuantizedKVCache: mlx-lm attends through its own quantized matmuls;
    the patch routes that function to the fused op. The prompt's first chunk
    fills a float cache (mx.fast), the next ones attend to the quantized
    cache (prefill with the causal mask), then 32 decode steps: the greedy
    tokens of mlx-lm's own quantized path (on the CPU: MLX 0.32.4's CUDA
    quantized matmul takes none of these small per-head products)."""
    module, args, group_size, bits = QUANTIZED_MODELS[name]
    mx.random.seed(11)
    model = module.Model(module.ModelArgs(**args))
    mx.eval(model.parameters())
    prompt = tokens(PROMPT, seed=3)

    def greedy_quantized(device):
        steps = generate_step(
            prompt, model, max_tokens=GEN, prefill_step_size=8, kv_bits=bits,
            kv_group_size=group_size, quantized_kv_start=0, stream=mx.new_stream(device),
        )  # fmt: skip
        return [int(t) for t, _ in steps]

    want = greedy_quantized(mx.cpu)
    with fa.patch_mx_fast() as patch:
        got = greedy_quantized(mx.default_device())
    assert len(want) == GEN and got == want
    # Prompt chunks of 8, 8 and 7 tokens (the first through mx.fast, before
    # the cache is quantized), the prompt's last token, and GEN steps
    # (generate_step computes one token ahead), every layer each.
    assert patch.stats.fallback == patch.stats.passed_through == 0
    assert patch.stats.fused == len(model.layers) * (3 + 1 + GEN)


def test_a_patch_reaches_mlx_lm_imported_after_it():
    """mlx_lm.models.base imported while a patch is active gets the fused
    function (an import hook), and its own back at unpatching."""
    program = (
        "import mlx_fused_attn as fa, sys\n"
        "fa.patch_mx_fast()\n"
        "assert 'mlx_lm.models.base' not in sys.modules\n"
        "import mlx_lm.models.base as base\n"
        "assert base.quantized_scaled_dot_product_attention.__module__ == 'mlx_fused_attn.patching'\n"
        "fa.unpatch_mx_fast()\n"
        "assert base.quantized_scaled_dot_product_attention.__module__ == 'mlx_lm.models.base'\n"
    )
    subprocess.run([sys.executable, "-c", program], check=True)


def test_unpatch_restores_mlx_lm_quantized_attention():
    base = pytest.importorskip("mlx_lm.models.base")
    original = base.quantized_scaled_dot_product_attention
    with fa.patch_mx_fast():
        with fa.patch_mx_fast():
            assert base.quantized_scaled_dot_product_attention is not original
        assert base.quantized_scaled_dot_product_attention is not original
    assert base.quantized_scaled_dot_product_attention is original


def test_quantized_attention_scales_the_callers_queries_as_mlx_lm_does():
    """mlx-lm's quantized attention runs ``queries *= scale``, an in-place
    update of the caller's array object; the patched function's fused path
    scales the caller's queries the same way (its fallback is mlx-lm's own).
    mlx-lm's function runs on the CPU (MLX 0.32.4's CUDA quantized matmul
    takes none of these small per-head products), the patched one on the
    default device."""
    from mlx_lm.models import base

    mx.random.seed(5)
    q = mx.random.normal((1, 4, 3, 64))
    k, v = (mx.quantize(mx.random.normal((1, 2, 9, 64)), group_size=64, bits=8) for _ in range(2))

    def caller_queries(attention, device):
        queries = mx.array(q)
        before = id(queries)
        with mx.stream(device):
            mx.eval(attention(queries, k, v, scale=0.25, mask="causal", group_size=64, bits=8))
        assert id(queries) == before
        return np.array(queries)

    want = caller_queries(base.quantized_scaled_dot_product_attention, mx.cpu)
    np.testing.assert_array_equal(want, 0.25 * np.array(q))
    with fa.patch_mx_fast() as patch:
        got = caller_queries(base.quantized_scaled_dot_product_attention, mx.default_device())
    assert patch.stats.fused == 1 and patch.stats.fallback == 0
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("policy", POLICIES)
def test_compiled_forward(policy):
    """Patched before compiling, the compiled model runs the package's op and
    gives the eager, unpatched logits (the sliding model has an array mask
    and a causal one; compiling costs seconds on the CPU, so one model)."""
    model = build("llama-sliding")
    x = tokens(PROMPT, seed=4, batch=2)
    want = model(x)
    with fa.patch_mx_fast(policy=policy) as patch:
        forward = mx.compile(lambda inputs: model(inputs))
        got = forward(x)
        again = forward(x)
        mx.eval(got, again)
    assert_close(got, want, TOL[mx.float32])
    np.testing.assert_array_equal(np.array(got), np.array(again))
    check_routed(patch.stats, calls=len(model.layers))  # traced once


def lora_model(name):
    """The model with mlx-lm's LoRA adapters on its linear layers, the rest
    frozen."""
    model = build(name)
    model.freeze()
    linear_to_lora_layers(model, len(model.layers), {"rank": 4, "scale": 10.0, "dropout": 0.0})
    # LoRA starts with B = 0, where A gets no gradient; give B values.
    mx.random.seed(5)
    for _, layer in model.named_modules():
        if isinstance(layer, LoRALinear):
            layer.lora_b = 0.05 * mx.random.normal(layer.lora_b.shape)
    return model


def loss_fn(model, x, y):
    return nn.losses.cross_entropy(model(x), y, reduction="mean")


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("params", ["lora", "all"])
@pytest.mark.parametrize("name", list(MODELS))
def test_training_step_gradients(name, params, policy):
    """A training step's loss and gradients (LoRA adapters from mlx-lm's
    tuner, or every weight) match the unpatched model's."""
    model = lora_model(name) if params == "lora" else build(name)
    data = tokens(PROMPT + 1, seed=6, batch=2)
    x, y = data[:, :-1], data[:, 1:]
    step = nn.value_and_grad(model, loss_fn)
    want_loss, want_grads = step(model, x, y)
    with fa.patch_mx_fast(policy=policy) as patch:
        got_loss, got_grads = step(model, x, y)
        mx.eval(got_loss, got_grads)
    check_routed(patch.stats, calls=len(model.layers))
    assert_close(got_loss, want_loss, 1e-5)
    want_grads, got_grads = dict(tree_flatten(want_grads)), dict(tree_flatten(got_grads))
    assert want_grads.keys() == got_grads.keys() and want_grads
    for path, want in want_grads.items():
        assert float(mx.abs(want).max()) > 0, f"{path}: no gradient"
        assert_close(got_grads[path], want, 1e-4)
