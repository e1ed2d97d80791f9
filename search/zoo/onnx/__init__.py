"""ONNX files as Relax modules: the zoo's op vocabulary where it has a form, every other operator as TVM has it.

``load_onnx(path, input_shape=...)`` reads the file with ``onnx``, binds every input to a static shape (``inputs``:
the user's ``input_shape``, else the file's, with ``batch`` / ``image_size`` as shorthand for one (N, C, H, W)
input), folds the shape arithmetic exporters leave in the graph on those shapes (``fold``), converts it with
``tvm.relax.frontend.onnx.from_onnx(model, keep_params_in_input=False)`` (``load``) and rewrites the result
(``rewrite``, with one rule per Relax operator in ``operators``):

- conv2d + bias add + BatchNormalization (+ Mul/Add/Sub/Div by per-channel constants) fold into one conv2d and one
  (1, C, 1, 1) bias add; a conv without bias gets a zero bias;
- a ConvTranspose whose kernel equals its stride (each input pixel writes its own block: no padding, output
  padding, dilation or groups) becomes a 1x1 conv2d to C_out * kH * kW channels, with what follows folded in as into
  a conv, and its channels put in place by reshape + permute_dims + reshape (depth to space); any other ConvTranspose
  is kept;
- a BatchNormalization that follows no foldable conv becomes ``R.multiply`` + ``R.add`` of (1, C, 1, 1) constants;
- Clip, which the frontend lowers to TIR maximum/minimum kernels, becomes ``R.clip(x, 0, 6)`` for Clip(0, 6),
  ``R.nn.relu`` for Clip(0, inf), ``R.clip(x, lo, hi)`` otherwise;
- GlobalAveragePool (``R.mean`` over H, W) becomes ``R.nn.adaptive_avg_pool2d(x, 1)``;
- Gemm / MatMul of a 2-D activation and a constant weight becomes ``R.matmul(x, W (in, out))`` + a (1, out) bias add;
- GELU written out in elementwise arithmetic around ``Erf`` or ``Tanh`` (any operand order, ``Pow(x, 3)`` or
  ``x * x * x``, constants within a relative 1e-6) becomes ``R.nn.gelu`` or ``R.nn.gelu_tanh`` (``gelu``);
- Dropout and Identity disappear; shape arithmetic on constants is evaluated in numpy.

Every other call (Sigmoid, Softmax, Resize, the other ConvTransposes, a mean over other axes, a multiply of two
activations, the PrimFuncs the frontend lowers some operators to, ...) is re-emitted as the frontend made it, so the
result computes exactly what TVM's own build of the file does. Only a file that cannot be read, bound to static
shapes or converted at all raises ``SearchError``, with one message naming the input, dimension or binding.
"""

from __future__ import annotations

from search.zoo.onnx.load import bound_model, import_onnx_model, load_onnx, read_onnx

__all__ = ["bound_model", "import_onnx_model", "load_onnx", "read_onnx"]
