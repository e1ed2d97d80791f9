"""The constant operands of a Relax module's bindings, by binding name: how re-emitters (the ONNX writer, the PyTorch
transformers) take a zoo network's weights, so that what they build computes the same network."""

from __future__ import annotations

import numpy as np
import tvm
from tvm import relax

from search.bindings import Bindings
from search.errors import SearchError


class BindingConstants:
    """``constants(name, index)``: the ``index``-th constant operand of the binding called ``name``, as float32
    (a concat's tuple fields count after its other arguments)."""

    def __init__(self, mod: tvm.IRModule) -> None:
        bindings = Bindings(mod["main"])
        self.by_name: dict[str, list[np.ndarray]] = {}
        for index in range(len(bindings)):
            value = bindings.value(index)
            if isinstance(value, relax.Call):
                found = [bindings.const(arg) for arg in value.args if not isinstance(arg, relax.Tuple)]
                if isinstance(value.args[0], relax.Tuple):
                    found += [bindings.const(item) for item in value.args[0].fields]
                self.by_name[bindings.var(index).name] = [c for c in found if c is not None]

    def __call__(self, name: str, index: int = 0) -> np.ndarray:
        if name not in self.by_name or len(self.by_name[name]) <= index:
            raise SearchError(f"{name}: not a binding with a constant of the zoo transformer")
        return np.asarray(self.by_name[name][index], dtype=np.float32)
