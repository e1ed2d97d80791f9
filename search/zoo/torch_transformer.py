"""A zoo transformer as the PyTorch module its users run, with the zoo module's own weights: Hugging Face's
``BertModel`` (``bert_*``) and timm's ``VisionTransformer`` (``vit_*``) as they run eagerly today, linear layers as
``F.linear``, layer norms as ``F.layer_norm``, the erf GELU, and attention through
``F.scaled_dot_product_attention`` (both libraries' default). The weights are read from ``mod``'s constants by binding
name (``search.zoo.binding_constants``), so the module computes the same network up to float32 rounding. Imports the
optional ``torch`` package (``pip install -e ".[peers]"``): import this module only where it is installed.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
import tvm

from search.errors import SearchError
from search.zoo import MODELS, is_transformer
from search.zoo.binding_constants import BindingConstants
from search.zoo.transformer import Bert, TransformerConfig


class _Transformer(torch.nn.Module):
    """Weights as buffers, and the blocks both networks share."""

    def __init__(self, config: TransformerConfig, constants: BindingConstants) -> None:
        super().__init__()
        self.heads, self.size, self.width, self.eps = config.heads, config.head_size, config.hidden, config.eps
        self.constants, self.count = constants, 0

    def tensor(self, array: np.ndarray) -> torch.Tensor:
        self.count += 1
        self.register_buffer(f"w{self.count}", torch.from_numpy(np.ascontiguousarray(array, np.float32)))
        return getattr(self, f"w{self.count}")

    def linear(self, name: str, weight: np.ndarray | None = None, bias: np.ndarray | None = None) -> tuple:
        """(out, in) weight and bias of the zoo's (in, out) linear layer ``name``, as ``nn.Linear`` holds them."""
        weight = self.constants(name) if weight is None else weight
        bias = self.constants(f"{name}_bias").reshape(-1) if bias is None else bias
        return self.tensor(weight.T), self.tensor(bias)

    def norm(self, name: str) -> tuple:
        return self.tensor(self.constants(name, 0)), self.tensor(self.constants(name, 1))

    def layer_norm(self, x: torch.Tensor, params: tuple) -> torch.Tensor:
        return F.layer_norm(x, (self.width,), *params, eps=self.eps)

    def attention(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """(batch, heads, tokens, size) queries, keys and values -> (batch, tokens, width) context."""
        context = F.scaled_dot_product_attention(q, k, v)
        return context.transpose(1, 2).reshape(q.shape[0], q.shape[2], self.width)

    def finish(self) -> _Transformer:
        del self.constants  # the weights are buffers now; the module pickles without the Relax module
        return self.eval()


class BertModel(_Transformer):
    """Hugging Face's ``BertModel`` without the pooler: ``forward(input_ids, token_type_ids)``."""

    def __init__(self, config: TransformerConfig, constants: BindingConstants) -> None:
        super().__init__(config, constants)
        self.word = self.tensor(constants("word_embeddings"))
        self.position = self.tensor(constants("position_embeddings"))
        self.segment = self.tensor(constants("token_type_embeddings"))
        self.embeddings_norm = self.norm("embeddings_norm")
        self.layers = [{role: self.linear(f"layer{i}_attention_{role}") for role in ("query", "key", "value")}
                       | {"output": self.linear(f"layer{i}_attention_output_dense"),
                          "norm": self.norm(f"layer{i}_attention_norm"),
                          "intermediate": self.linear(f"layer{i}_intermediate"),
                          "ffn": self.linear(f"layer{i}_output"),
                          "ffn_norm": self.norm(f"layer{i}_output_norm")} for i in range(config.layers)]

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor) -> torch.Tensor:
        batch, tokens = input_ids.shape
        x = F.embedding(input_ids, self.word) + F.embedding(token_type_ids, self.segment)
        x = self.layer_norm(x + self.position[:tokens], self.embeddings_norm)
        for layer in self.layers:
            q, k, v = (F.linear(x, *layer[role]).view(batch, tokens, self.heads, self.size).transpose(1, 2)
                       for role in ("query", "key", "value"))
            x = self.layer_norm(F.linear(self.attention(q, k, v), *layer["output"]) + x, layer["norm"])
            hidden = F.gelu(F.linear(x, *layer["intermediate"]))
            x = self.layer_norm(F.linear(hidden, *layer["ffn"]) + x, layer["ffn_norm"])
        return x


class VisionTransformer(_Transformer):
    """timm's ``VisionTransformer`` (one fused qkv projection, class token, pre-norm layers, a linear head):
    ``forward(images)``."""

    def __init__(self, config: TransformerConfig, constants: BindingConstants, patch: int) -> None:
        super().__init__(config, constants)
        self.patch_size = patch
        self.patch = (self.tensor(constants("patch_embeddings")),
                      self.tensor(constants("patch_embeddings_bias").reshape(-1)))
        self.class_token = self.tensor(constants("with_class_token")[:1])
        self.position = self.tensor(constants("position_embeddings"))
        self.layers = []
        for i in range(config.layers):
            name, roles = f"layer{i}_attention", ("query", "key", "value")
            weight = np.concatenate([constants(f"{name}_{role}") for role in roles], axis=1)
            bias = np.concatenate([constants(f"{name}_{role}_bias").reshape(-1) for role in roles])
            self.layers.append({"norm1": self.norm(f"layer{i}_norm1"), "qkv": self.linear("", weight, bias),
                                "output": self.linear(f"{name}_output_dense"), "norm2": self.norm(f"layer{i}_norm2"),
                                "intermediate": self.linear(f"layer{i}_intermediate"),
                                "ffn": self.linear(f"layer{i}_output")})
        self.final_norm = self.norm("norm")
        self.head = self.linear("head", bias=constants("gv").reshape(-1))  # the zoo binds the head's bias to gv

    def forward(self, data: torch.Tensor) -> torch.Tensor:
        batch = data.shape[0]
        x = F.conv2d(data, *self.patch, stride=self.patch_size).flatten(2).transpose(1, 2)
        x = torch.cat([self.class_token.expand(batch, -1, -1), x], dim=1) + self.position
        tokens = x.shape[1]
        for layer in self.layers:
            qkv = F.linear(self.layer_norm(x, layer["norm1"]), *layer["qkv"])
            q, k, v = qkv.view(batch, tokens, 3, self.heads, self.size).permute(2, 0, 3, 1, 4).unbind(0)
            x = x + F.linear(self.attention(q, k, v), *layer["output"])
            hidden = F.gelu(F.linear(self.layer_norm(x, layer["norm2"]), *layer["intermediate"]))
            x = x + F.linear(hidden, *layer["ffn"])
        return F.linear(self.layer_norm(x, self.final_norm)[:, 0], *self.head)


def transformer_module(name: str, mod: tvm.IRModule) -> _Transformer:
    """The module of the zoo transformer ``name`` built as ``mod`` (any batch and size), in eval mode; it takes
    ``main``'s inputs (BERT: int64 ids and segments; ViT: float32 images) and returns its output."""
    if not is_transformer(name):
        raise SearchError(f"{name}: not a zoo transformer")
    spec, constants = MODELS[name].builder, BindingConstants(mod)
    if isinstance(spec, Bert):
        return BertModel(spec.config, constants).finish()
    return VisionTransformer(spec.config, constants, spec.patch).finish()
