"""ONNX files into the zoo's op vocabulary.

``load_onnx(path)`` reads the file with ``onnx``, checks its operators and input shape (``checks``), converts it with
``tvm.relax.frontend.onnx.from_onnx(model, keep_params_in_input=False)`` (``load``) and rewrites the result into the
op vocabulary documented in ``search.zoo`` (``rewrite``, with one rule per Relax operator in ``operators``):

- conv2d + bias add + BatchNormalization (+ Mul/Add/Sub/Div by per-channel constants) fold into one conv2d and one
  (1, C, 1, 1) bias add; a conv without bias gets a zero bias;
- a BatchNormalization that follows no foldable conv becomes ``R.multiply`` + ``R.add`` of (1, C, 1, 1) constants;
- Clip(0, 6), which the frontend lowers to TIR maximum/minimum kernels, becomes ``R.clip(x, 0, 6)``, Clip(0, inf)
  ``R.nn.relu``; other bounds are rejected;
- GlobalAveragePool (``R.mean`` over H, W) becomes ``R.nn.adaptive_avg_pool2d(x, 1)``;
- Gemm / MatMul with a constant weight becomes ``R.matmul(x, W (in, out))`` + a (1, out) bias add;
- Dropout and Identity disappear; shape arithmetic on constants is evaluated in numpy.

Only ``SUPPORTED_OPERATORS`` are accepted; other operators, a dynamic input shape, more than one input or anything
the rewriting cannot express in the vocabulary raise ``SearchError`` naming the operator or input.
"""

from __future__ import annotations

from search.zoo.onnx.checks import SUPPORTED_OPERATORS
from search.zoo.onnx.load import import_onnx_model, load_onnx

__all__ = ["SUPPORTED_OPERATORS", "import_onnx_model", "load_onnx"]
