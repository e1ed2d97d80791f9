"""A zoo transformer as the ONNX file the usual exporters write, with the zoo module's own weights.

``transformer_to_onnx(name, mod)`` writes what ``torch.onnx`` makes of Hugging Face's ``BertModel`` (``bert_*``) or
of timm's ``VisionTransformer`` (``vit_*``), for the zoo network ``name`` built as ``mod``: activations stay 3-D
(batch, tokens, hidden); linear layers are ``MatMul`` by an (in, out) initializer and ``Add`` of the bias; heads are
split with ``Reshape`` + ``Transpose`` (BERT: separate query, key and value projections, ``Div`` of the scores by
sqrt(head size); ViT: one fused qkv projection split by ``Split`` + ``Squeeze``, the query scaled by ``Mul`` before
the product); ``Softmax`` on the last axis; GELU in its erf form (``Div``, ``Erf``, ``Add``, ``Mul``, ``Mul``) or,
with ``gelu="tanh"``, in the tanh form of Hugging Face's ``gelu_new`` (``Mul``, ``Pow``, ``Mul``, ``Add``, ``Mul``,
``Tanh``, ``Add``, ``Mul``); layer norms as ``LayerNormalization`` or, with ``layer_norm="decomposed"``, as the
``ReduceMean`` / ``Sub`` / ``Pow`` / ``Sqrt`` / ``Div`` chain older exporters write. The weights are read from
``mod``'s constants by binding name (see ``search.zoo.transformer``), so the file computes the same network up to
float32 rounding (with the tanh GELU: up to its approximation).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx
import tvm
from onnx import TensorProto, helper, numpy_helper

from search.errors import SearchError
from search.zoo import MODELS, is_transformer
from search.zoo.binding_constants import BindingConstants
from search.zoo.onnx.save import IR_VERSION, OPSET, erf_gelu
from search.zoo.transformer import Bert, ViT

LAYER_NORMS = ("fused", "decomposed")
GELUS = ("erf", "tanh")


class _Graph:
    """ONNX nodes and initializers under construction."""

    def __init__(self) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []

    def const(self, value, name: str, dtype=np.float32) -> str:
        self.initializers.append(numpy_helper.from_array(np.ascontiguousarray(value, dtype=dtype), name))
        return name

    def node(self, op: str, inputs: list[str], output: str, **attrs) -> str:
        self.nodes.append(helper.make_node(op, inputs, [output], name=output, **attrs))
        return output

    def linear(self, x: str, weights: BindingConstants, name: str, weight: np.ndarray | None = None,
               bias: np.ndarray | None = None) -> str:
        """``MatMul`` by the (in, out) weight of binding ``name`` and ``Add`` of its ``_bias``."""
        w = weights(name, 0) if weight is None else weight
        b = weights(f"{name}_bias", 0).reshape(-1) if bias is None else bias
        out = self.node("MatMul", [x, self.const(w, f"{name}.weight")], f"{name}.matmul")
        return self.node("Add", [out, self.const(b, f"{name}.bias")], name)

    def layer_norm(self, x: str, weights: BindingConstants, name: str, eps: float, form: str) -> str:
        gamma = self.const(weights(name, 0), f"{name}.weight")
        beta = self.const(weights(name, 1), f"{name}.bias")
        if form == "fused":
            return self.node("LayerNormalization", [x, gamma, beta], name, axis=-1, epsilon=eps)
        mean = self.node("ReduceMean", [x], f"{name}.mean", axes=[-1])
        centred = self.node("Sub", [x, mean], f"{name}.centred")
        square = self.node("Pow", [centred, self.const(np.float32(2), f"{name}.two")], f"{name}.square")
        var = self.node("ReduceMean", [square], f"{name}.var", axes=[-1])
        std = self.node("Sqrt", [self.node("Add", [var, self.const(np.float32(eps), f"{name}.eps")],
                                           f"{name}.var_eps")], f"{name}.std")
        scaled = self.node("Mul", [self.node("Div", [centred, std], f"{name}.normed"), gamma], f"{name}.scaled")
        return self.node("Add", [scaled, beta], name)

    def gelu(self, x: str, name: str, form: str) -> str:
        """``x * 0.5 * (1 + erf(x / sqrt(2)))``, as Hugging Face's and timm's GELU export, or (``form`` tanh)
        ``0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))``, as ``gelu_new`` exports."""
        if form == "tanh":
            return self.gelu_tanh(x, name)
        return erf_gelu(self.node, self.const, x, name)

    def gelu_tanh(self, x: str, name: str) -> str:
        half = self.node("Mul", [x, self.const(np.float32(0.5), f"{name}.half")], f"{name}.half_x")
        cube = self.node("Pow", [x, self.const(np.float32(3.0), f"{name}.three")], f"{name}.cube")
        cubic = self.node("Mul", [cube, self.const(np.float32(0.044715), f"{name}.kappa")], f"{name}.cubic")
        inner = self.node("Mul", [self.node("Add", [x, cubic], f"{name}.sum"),
                                  self.const(np.float32(np.sqrt(2 / np.pi)), f"{name}.beta")], f"{name}.inner")
        tanh = self.node("Tanh", [inner], f"{name}.tanh")
        one = self.node("Add", [tanh, self.const(np.float32(1.0), f"{name}.one")], f"{name}.one_plus")
        return self.node("Mul", [half, one], name)

    def reshape(self, x: str, shape: list[int], name: str) -> str:
        return self.node("Reshape", [x, self.const(np.asarray(shape), f"{name}.shape", np.int64)], name)


def _bert(g: _Graph, w: BindingConstants, spec: Bert, batch: int, seq: int, form: str, gelu: str
          ) -> tuple[list, str, list[int]]:
    cfg = spec.config
    heads, size, width = cfg.heads, cfg.head_size, cfg.hidden
    word = g.node("Gather", [g.const(w("word_embeddings"), "embeddings.word_embeddings.weight"), "input_ids"],
                  "embeddings.word")
    positions = w("position_embeddings")[:seq]
    g.const(np.arange(seq, dtype=np.int64).reshape(1, seq), "position_ids", np.int64)
    position = g.node("Gather", [g.const(positions, "embeddings.position_embeddings.weight"), "position_ids"],
                      "embeddings.position")
    segment = g.node("Gather", [g.const(w("token_type_embeddings"), "embeddings.token_type_embeddings.weight"),
                                "token_type_ids"], "embeddings.token_type")
    x = g.node("Add", [g.node("Add", [word, segment], "embeddings.sum"), position], "embeddings.all")
    x = g.layer_norm(x, w, "embeddings_norm", cfg.eps, form)
    for i in range(cfg.layers):
        name = f"layer{i}_attention"
        q, k, v = (g.node("Transpose", [g.reshape(g.linear(x, w, f"{name}_{role}"), [batch, seq, heads, size],
                                                  f"{name}_{role}.split")], f"{name}_{role}.heads", perm=perm)
                   for role, perm in (("query", [0, 2, 1, 3]), ("key", [0, 2, 3, 1]), ("value", [0, 2, 1, 3])))
        scores = g.node("MatMul", [q, k], f"{name}.scores")
        scores = g.node("Div", [scores, g.const(np.float32(np.sqrt(size)), f"{name}.sqrt_d")], f"{name}.scaled")
        probs = g.node("Softmax", [scores], f"{name}.probs", axis=-1)
        context = g.node("Transpose", [g.node("MatMul", [probs, v], f"{name}.context")], f"{name}.context_t",
                         perm=[0, 2, 1, 3])
        context = g.reshape(context, [batch, seq, width], f"{name}.merge")
        out = g.linear(context, w, f"{name}_output_dense")
        x = g.layer_norm(g.node("Add", [out, x], f"{name}.residual"), w, f"{name}_norm", cfg.eps, form)
        hidden = g.gelu(g.linear(x, w, f"layer{i}_intermediate"), f"layer{i}_gelu", gelu)
        out = g.linear(hidden, w, f"layer{i}_output")
        x = g.layer_norm(g.node("Add", [out, x], f"layer{i}.residual"), w, f"layer{i}_output_norm", cfg.eps, form)
    g.node("Identity", [x], "last_hidden_state")
    inputs = [helper.make_tensor_value_info(n, TensorProto.INT64, [batch, seq])
              for n in ("input_ids", "token_type_ids")]
    return inputs, "last_hidden_state", [batch, seq, width]


def _vit(g: _Graph, w: BindingConstants, spec: ViT, batch: int, image: int, form: str, gelu: str
         ) -> tuple[list, str, list[int]]:
    cfg, p = spec.config, spec.patch
    heads, size, width = cfg.heads, cfg.head_size, cfg.hidden
    seq = (image // p) ** 2 + 1
    conv = g.node("Conv", ["data", g.const(w("patch_embeddings"), "patch_embed.proj.weight"),
                           g.const(w("patch_embeddings_bias").reshape(-1), "patch_embed.proj.bias")],
                  "patch_embed.proj", kernel_shape=[p, p], strides=[p, p])
    x = g.node("Transpose", [g.reshape(conv, [batch, width, seq - 1], "patch_embed.flatten")], "patch_embed.tokens",
               perm=[0, 2, 1])
    cls = g.const(w("with_class_token")[:1], "cls_token")
    cls = g.node("Expand", [cls, g.const(np.asarray([batch, 1, width]), "cls_token.shape", np.int64)],
                 "cls_token.expanded")
    x = g.node("Concat", [cls, x], "tokens", axis=1)
    x = g.node("Add", [x, g.const(w("position_embeddings"), "pos_embed")], "tokens.positioned")
    for i in range(cfg.layers):
        name = f"layer{i}_attention"
        h = g.layer_norm(x, w, f"layer{i}_norm1", cfg.eps, form)
        qkv_w = np.concatenate([w(f"{name}_{role}") for role in ("query", "key", "value")], axis=1)
        qkv_b = np.concatenate([w(f"{name}_{role}_bias").reshape(-1) for role in ("query", "key", "value")])
        qkv = g.linear(h, w, f"{name}_qkv", weight=qkv_w, bias=qkv_b)
        qkv = g.node("Transpose", [g.reshape(qkv, [batch, seq, 3, heads, size], f"{name}_qkv.split")],
                     f"{name}_qkv.heads", perm=[2, 0, 3, 1, 4])
        parts = [f"{name}.{role}_part" for role in ("q", "k", "v")]  # unbind(0): Split, then Squeeze
        g.nodes.append(helper.make_node("Split", [qkv, g.const(np.ones(3), f"{name}.split", np.int64)], parts,
                                        name=f"{name}.unbind", axis=0))
        axis = g.const(np.zeros(1), f"{name}.axis0", np.int64)
        q, k, v = (g.node("Squeeze", [part, axis], part.removesuffix("_part")) for part in parts)
        q = g.node("Mul", [q, g.const(np.float32(size ** -0.5), f"{name}.scale")], f"{name}.q_scaled")
        k = g.node("Transpose", [k], f"{name}.k_t", perm=[0, 1, 3, 2])
        probs = g.node("Softmax", [g.node("MatMul", [q, k], f"{name}.scores")], f"{name}.probs", axis=-1)
        context = g.node("Transpose", [g.node("MatMul", [probs, v], f"{name}.context")], f"{name}.context_t",
                         perm=[0, 2, 1, 3])
        context = g.reshape(context, [batch, seq, width], f"{name}.merge")
        x = g.node("Add", [x, g.linear(context, w, f"{name}_output_dense")], f"{name}.residual")
        h = g.layer_norm(x, w, f"layer{i}_norm2", cfg.eps, form)
        h = g.linear(g.gelu(g.linear(h, w, f"layer{i}_intermediate"), f"layer{i}_gelu", gelu), w,
                     f"layer{i}_output")
        x = g.node("Add", [x, h], f"layer{i}.residual")
    x = g.layer_norm(x, w, "norm", cfg.eps, form)
    # x[:, 0]: exporters write a Gather of index 0, whose rank TVM 0.27's frontend gets wrong (it keeps the axis)
    first = g.node("Slice", [x, g.const([0], "class_token.start", np.int64), g.const([1], "class_token.end", np.int64),
                             g.const([1], "class_token.axis", np.int64)], "class_token.slice")
    pooled = g.node("Squeeze", [first, g.const([1], "class_token.squeeze", np.int64)], "class_token")
    g.linear(pooled, w, "head", bias=w("gv").reshape(-1))  # the zoo binds its last op, the head's bias, to gv
    inputs = [helper.make_tensor_value_info("data", TensorProto.FLOAT, [batch, 3, image, image])]
    return inputs, "head", [batch, spec.classes]


def transformer_to_onnx(name: str, mod: tvm.IRModule, *, layer_norm: str = "fused", gelu: str = "erf"
                        ) -> onnx.ModelProto:
    """The ONNX file of the zoo transformer ``name`` built as ``mod`` (any batch and size), checked with
    ``onnx.checker``; ``layer_norm`` is ``fused`` (``LayerNormalization``) or ``decomposed``, ``gelu`` is ``erf`` or
    ``tanh`` (the tanh approximation: the file then computes another function than ``mod``, off by up to ~1e-3
    per GELU)."""
    if not is_transformer(name):
        raise SearchError(f"{name}: not a zoo transformer")
    spec = MODELS[name].builder
    if layer_norm not in LAYER_NORMS:
        raise SearchError(f"layer_norm must be one of {', '.join(LAYER_NORMS)}, got {layer_norm!r}")
    if gelu not in GELUS:
        raise SearchError(f"gelu must be one of {', '.join(GELUS)}, got {gelu!r}")
    shape = [int(d) for d in mod["main"].params[0].ty.shape]
    g, weights = _Graph(), BindingConstants(mod)
    write: Callable = _bert if isinstance(spec, Bert) else _vit
    inputs, output, out_shape = write(g, weights, spec, shape[0], shape[-1], layer_norm, gelu)
    outputs = [helper.make_tensor_value_info(output, TensorProto.FLOAT, out_shape)]
    graph = helper.make_graph(g.nodes, name, inputs, outputs, g.initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="tessera",
                              ir_version=IR_VERSION)
    onnx.checker.check_model(model)
    return model
