"""Transformers for the zoo: BERT and ViT built directly in Relax with seeded random weights, each its own float64
numpy reference.

- ``Bert``: token, position and segment embeddings summed and layer-normalised, then post-LayerNorm encoder layers
  (``x = LN(x + attention(x))``, ``x = LN(x + W2 gelu(W1 x))``). ``main(input_ids, token_type_ids)`` takes two int64
  (batch, sequence) tensors and returns the last hidden states (batch, sequence, hidden); ids outside a table are
  clipped to its range (``R.take(mode="clip")``), never read out of bounds.
- ``ViT``: a patch-embedding convolution (kernel = stride = patch), the class token prepended, position embeddings
  added, pre-LayerNorm encoder layers (``x = x + attention(LN(x))``, ``x = x + mlp(LN(x))``), a final LayerNorm and
  a linear classifier on the class token. ``main(data)`` takes (batch, 3, S, S) like the CNNs.

Tokens flow as 2-D (tokens, hidden) tensors, tokens = batch x sequence, so every linear layer is a 2-D
``R.matmul(x, W)`` by a constant (in, out) weight and an ``R.add`` of a (1, out) bias: the ``dense`` kind of
``search.kinds``. Attention splits the heads with ``R.reshape`` and ``R.permute_dims`` (queries and values to
(batch, heads, sequence, head size), keys pre-transposed to (batch, heads, head size, sequence)), multiplies the
activations with two 4-D ``R.matmul`` calls (the ``batch_matmul`` kind), scaled by a constant and with
``R.nn.softmax`` between them, and merges the heads back to (tokens, hidden). Layer norms are ``R.nn.layer_norm`` on
the last axis, GELU is ``R.nn.gelu`` (the erf form). Names follow Hugging Face's modules:
``layer{i}_attention_query``, ``layer{i}_output_dense``, ...

Linear weights are N(0, 1 / fan_in), so that queries and keys are O(1) and the softmax is far from uniform; biases
N(0, 0.02); layer norms' gamma in [0.8, 1.2], beta N(0, 0.05); embeddings N(0, 1). ``numpy.random.default_rng([seed,
i])`` draws layer ``i``; a seed gives the same weights at every batch and size except ViT's position embeddings, one
per patch of the image size.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import tvm
from tvm import relax

from search.zoo.activations import gelu_np
from search.zoo.layers import (
    Tensor,
    aligned_const,
    conv2d_np,
    he_normal,
    layer_norm_np,
    single_threaded_blas,
    softmax_np,
)


@dataclass(frozen=True)
class TransformerConfig:
    """The encoder's size: ``layers`` of ``hidden`` features, ``heads`` attention heads, ``ffn`` features inside the
    feed-forward block, and the layer norms' ``eps``."""

    layers: int
    hidden: int
    heads: int
    ffn: int
    eps: float

    @property
    def head_size(self) -> int:
        return self.hidden // self.heads


class Encoder:
    """Emits transformer layers into a ``relax.BlockBuilder`` (inside its dataflow block) and runs their references.

    A ``Tensor``'s shadows here are the reference inputs' values (float64), one per reference.
    """

    def __init__(self, bb: relax.BlockBuilder, seed: int, config: TransformerConfig, batch: int, tokens: int) -> None:
        self.bb, self.seed, self.config = bb, seed, config
        self.batch, self.tokens = batch, tokens  # tokens per sequence
        self._layers = 0

    def rng(self) -> np.random.Generator:
        self._layers += 1
        return np.random.default_rng([self.seed, self._layers])

    def emit(self, expr: relax.Expr, name: str, reference: Callable[..., np.ndarray], *args: Tensor) -> Tensor:
        """Bind ``expr`` as ``name``; its shadows are ``reference`` applied to ``args``' shadows."""
        shadows = tuple(reference(*values) for values in zip(*(a.shadows for a in args), strict=True))
        return Tensor(self.bb.emit(expr, name_hint=name), shadows)

    # -- layers
    def linear(self, x: Tensor, units: int, *, name: str) -> Tensor:
        """``x @ W + b`` on (tokens, in): a 2-D matmul by a constant (in, units) weight, then a (1, units) bias."""
        rng = self.rng()
        n_in = x.shape[-1]
        w = he_normal(rng, (n_in, units), n_in, gain=1.0)
        b = rng.normal(0.0, 0.02, (1, units)).astype(np.float32)
        out = self.emit(relax.op.matmul(x.var, aligned_const(w)), name, lambda s: s @ w.astype(s.dtype), x)
        return self.emit(relax.op.add(out.var, relax.const(b)), f"{name}_bias", lambda s: s + b, out)

    def layer_norm(self, x: Tensor, *, name: str) -> Tensor:
        rng = self.rng()
        width = x.shape[-1]
        gamma = rng.uniform(0.8, 1.2, width).astype(np.float32)
        beta = rng.normal(0.0, 0.05, width).astype(np.float32)
        eps = self.config.eps
        call = relax.op.nn.layer_norm(x.var, relax.const(gamma), relax.const(beta), axes=[-1], epsilon=eps)
        return self.emit(call, name, lambda s: layer_norm_np(s, gamma, beta, eps), x)

    def gelu(self, x: Tensor, *, name: str) -> Tensor:
        return self.emit(relax.op.nn.gelu(x.var), name, gelu_np, x)

    def add(self, a: Tensor, b: Tensor, *, name: str) -> Tensor:
        return self.emit(relax.op.add(a.var, b.var), name, np.add, a, b)

    def reshape(self, x: Tensor, shape: Sequence[int], *, name: str) -> Tensor:
        shape = tuple(int(d) for d in shape)
        return self.emit(relax.op.reshape(x.var, shape), name, lambda s: s.reshape(shape), x)

    def permute(self, x: Tensor, axes: Sequence[int], *, name: str) -> Tensor:
        axes = tuple(axes)
        return self.emit(relax.op.permute_dims(x.var, list(axes)), name, lambda s: s.transpose(axes), x)

    def attention(self, x: Tensor, *, name: str) -> Tensor:
        """Multi-head self-attention on (tokens, hidden), without the output projection's residual."""
        cfg, batch, seq = self.config, self.batch, self.tokens
        heads, size = cfg.heads, cfg.head_size

        def split(t: Tensor, axes: tuple[int, ...], role: str) -> Tensor:
            t = self.reshape(t, (batch, seq, heads, size), name=f"{name}_{role}_split")
            return self.permute(t, axes, name=f"{name}_{role}_heads")

        q = split(self.linear(x, cfg.hidden, name=f"{name}_query"), (0, 2, 1, 3), "query")
        k = split(self.linear(x, cfg.hidden, name=f"{name}_key"), (0, 2, 3, 1), "key")
        v = split(self.linear(x, cfg.hidden, name=f"{name}_value"), (0, 2, 1, 3), "value")
        scores = self.emit(relax.op.matmul(q.var, k.var), f"{name}_scores", np.matmul, q, k)
        scale = np.float32(1.0 / np.sqrt(size))
        scores = self.emit(relax.op.multiply(scores.var, relax.const(scale)), f"{name}_scaled",
                           lambda s: s * float(scale), scores)
        probs = self.emit(relax.op.nn.softmax(scores.var, axis=-1), f"{name}_probs", softmax_np, scores)
        context = self.emit(relax.op.matmul(probs.var, v.var), f"{name}_context", np.matmul, probs, v)
        context = self.permute(context, (0, 2, 1, 3), name=f"{name}_context_t")
        context = self.reshape(context, (batch * seq, cfg.hidden), name=f"{name}_merge")
        return self.linear(context, cfg.hidden, name=f"{name}_output_dense")

    def mlp(self, x: Tensor, *, name: str) -> Tensor:
        """``W2 gelu(W1 x)``, without the residual."""
        hidden = self.gelu(self.linear(x, self.config.ffn, name=f"{name}_intermediate"), name=f"{name}_gelu")
        return self.linear(hidden, self.config.hidden, name=f"{name}_output")

    def embedding(self, table: np.ndarray, ids: Tensor, *, name: str) -> Tensor:
        """Rows ``ids`` of a constant ``table``, ids outside it clipped to its range."""
        call = relax.op.take(self.constant(table), ids.var, axis=0, mode="clip")
        return self.emit(call, name, lambda i: table[np.clip(i, 0, len(table) - 1)].astype(np.float64), ids)

    def constant(self, array: np.ndarray) -> relax.Expr:
        return aligned_const(np.array(array, dtype=np.float32, order="C"))  # a copy: views may be read-only


# ---------------------------------------------------------------------------------------------------- networks
Inputs = tuple[np.ndarray, ...]


def _module(params: list[relax.Var], body: Callable[[relax.BlockBuilder], Tensor]) -> tuple[tvm.IRModule, Tensor]:
    bb = relax.BlockBuilder()
    with single_threaded_blas(), bb.function("main", params):
        with bb.dataflow():
            out = body(bb)
            gv = bb.emit_output(out.var)
        bb.emit_func_output(gv)
    return relax.transform.CanonicalizeBindings()(bb.get()), out


def _check_references(references: Sequence[Inputs], shapes: Sequence[tuple[int, ...]]) -> None:
    for ref in references:
        given = [tuple(np.shape(a)) for a in ref]
        if given != [tuple(s) for s in shapes]:
            raise ValueError(f"reference inputs have shapes {given}, the module takes {list(shapes)}")


@dataclass(frozen=True)
class Bert:
    """A BERT encoder builder: ``bert(batch=1, seq_len=128, seed=0) -> tvm.IRModule``."""

    config: TransformerConfig
    vocab: int = 30522
    max_positions: int = 512
    type_vocab: int = 2

    def __call__(self, *, batch: int = 1, seq_len: int = 128, seed: int = 0) -> tvm.IRModule:
        return self.build(batch=batch, seq_len=seq_len, seed=seed)[0]

    def build(self, *, batch: int, seq_len: int, seed: int, references: Sequence[Inputs] = ()
              ) -> tuple[tvm.IRModule, list[np.ndarray]]:
        """The module and, per reference ``(input_ids, token_type_ids)``, the numpy output."""
        shape = (batch, seq_len)
        _check_references(references, [shape, shape])
        ids = relax.Var("input_ids", relax.TensorType(shape, "int64"))
        types = relax.Var("token_type_ids", relax.TensorType(shape, "int64"))
        tokens = batch * seq_len
        flat = [tuple(np.asarray(a).reshape(-1) for a in ref) for ref in references]

        def body(bb: relax.BlockBuilder) -> Tensor:
            enc = Encoder(bb, seed, self.config, batch, seq_len)
            rng = enc.rng()
            width = self.config.hidden
            word = rng.standard_normal((self.vocab, width), dtype=np.float32)
            position = rng.standard_normal((self.max_positions, width), dtype=np.float32)
            segment = rng.standard_normal((self.type_vocab, width), dtype=np.float32)
            flat_ids = enc.emit(relax.op.reshape(ids, (tokens,)), "input_ids_flat", lambda r: r[0],
                                Tensor(ids, tuple(flat)))
            flat_types = enc.emit(relax.op.reshape(types, (tokens,)), "token_type_ids_flat", lambda r: r[1],
                                  Tensor(types, tuple(flat)))
            x = enc.embedding(word, flat_ids, name="word_embeddings")
            seg = enc.embedding(segment, flat_types, name="token_type_embeddings")
            x = enc.add(x, seg, name="embeddings_sum")
            positions = np.tile(position[:seq_len], (batch, 1))
            x = enc.emit(relax.op.add(x.var, enc.constant(positions)), "position_embeddings",
                         lambda s: s + positions, x)
            x = enc.layer_norm(x, name="embeddings_norm")
            for i in range(self.config.layers):
                x = enc.layer_norm(enc.add(enc.attention(x, name=f"layer{i}_attention"), x,
                                           name=f"layer{i}_attention_residual"), name=f"layer{i}_attention_norm")
                x = enc.layer_norm(enc.add(enc.mlp(x, name=f"layer{i}"), x, name=f"layer{i}_output_residual"),
                                   name=f"layer{i}_output_norm")
            return enc.reshape(x, (batch, seq_len, width), name="last_hidden_state")

        mod, out = _module([ids, types], body)
        return mod, list(out.shadows)


@dataclass(frozen=True)
class ViT:
    """A Vision Transformer builder: ``vit(batch=1, image_size=224, seed=0) -> tvm.IRModule``."""

    config: TransformerConfig
    patch: int = 16
    classes: int = 1000

    def __call__(self, *, batch: int = 1, image_size: int = 224, seed: int = 0) -> tvm.IRModule:
        return self.build(batch=batch, image_size=image_size, seed=seed)[0]

    def build(self, *, batch: int, image_size: int, seed: int, references: Sequence[np.ndarray] = ()
              ) -> tuple[tvm.IRModule, list[np.ndarray]]:
        """The module and, per reference input of shape (batch, 3, image_size, image_size), the numpy output."""
        shape = (batch, 3, image_size, image_size)
        _check_references([(r,) for r in references], [shape])
        data = relax.Var("data", relax.TensorType(shape, "float32"))
        grid = image_size // self.patch
        seq = grid * grid + 1
        width = self.config.hidden

        def body(bb: relax.BlockBuilder) -> Tensor:
            enc = Encoder(bb, seed, self.config, batch, seq)
            rng = enc.rng()
            p = self.patch
            w = he_normal(rng, (width, 3, p, p), 3 * p * p, gain=1.0)
            b = rng.normal(0.0, 0.02, (1, width, 1, 1)).astype(np.float32)
            cls = rng.standard_normal((1, 1, width), dtype=np.float32)
            position = rng.standard_normal((1, seq, width), dtype=np.float32)
            x = Tensor(data, tuple(np.asarray(r, dtype=np.float64) for r in references))
            conv = relax.op.nn.conv2d(x.var, aligned_const(w), strides=(p, p), padding=(0, 0, 0, 0))
            x = enc.emit(conv, "patch_embeddings", lambda s: conv2d_np(s, w.astype(s.dtype), (p, p), (0,) * 4, 1), x)
            x = enc.emit(relax.op.add(x.var, relax.const(b)), "patch_embeddings_bias", lambda s: s + b, x)
            x = enc.reshape(x, (batch, width, seq - 1), name="patches")
            x = enc.permute(x, (0, 2, 1), name="patches_t")
            tokens = np.broadcast_to(cls, (batch, 1, width))
            x = enc.emit(relax.op.concat([enc.constant(tokens), x.var], axis=1), "with_class_token",
                         lambda s: np.concatenate([np.broadcast_to(tokens, (s.shape[0], 1, width)), s], axis=1), x)
            x = enc.emit(relax.op.add(x.var, enc.constant(position)), "position_embeddings",
                         lambda s: s + position, x)
            x = enc.reshape(x, (batch * seq, width), name="tokens")
            for i in range(self.config.layers):
                x = enc.add(x, enc.attention(enc.layer_norm(x, name=f"layer{i}_norm1"), name=f"layer{i}_attention"),
                            name=f"layer{i}_attention_residual")
                x = enc.add(x, enc.mlp(enc.layer_norm(x, name=f"layer{i}_norm2"), name=f"layer{i}"),
                            name=f"layer{i}_output_residual")
            x = enc.layer_norm(x, name="norm")
            x = enc.reshape(x, (batch, seq, width), name="sequence")
            first = relax.op.strided_slice(x.var, axes=[1], begin=[0], end=[1])
            x = enc.emit(first, "class_token", lambda s: s[:, :1], x)
            x = enc.reshape(x, (batch, width), name="pooled")
            return enc.linear(x, self.classes, name="head")

        mod, out = _module([data], body)
        return mod, list(out.shadows)


BERT_BASE = TransformerConfig(layers=12, hidden=768, heads=12, ffn=3072, eps=1e-12)
BERT_LARGE = TransformerConfig(layers=24, hidden=1024, heads=16, ffn=4096, eps=1e-12)
VIT_B16 = TransformerConfig(layers=12, hidden=768, heads=12, ffn=3072, eps=1e-6)
SMALL = TransformerConfig(layers=2, hidden=64, heads=4, ffn=128, eps=1e-12)

bert_base = Bert(BERT_BASE)
bert_large = Bert(BERT_LARGE)
bert_small = Bert(SMALL, vocab=1000, max_positions=128)
vit_b16 = ViT(VIT_B16)
vit_small = ViT(SMALL, classes=10)
