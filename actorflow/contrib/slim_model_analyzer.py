"""slim.model_analyzer (tf.contrib.slim.model_analyzer): a listing of a model's variables or of a
graph's ops with their sizes, as slim programs print it after building a model.

`analyze_vars(variables, print_info=False)` returns (total elements, total bytes) of the variables
and, with `print_info`, prints one line each, ``name (dtype AxB) [size, bytes: n]``, and the totals;
`analyze_ops(graph, print_info=False)` returns the elements all ops' outputs hold and prints one
line per op, ``name -> (dtype AxB), ... [size]``. A dimension that is not known counts as size 0
for its tensor, as in TF.
"""
from __future__ import annotations

__all__ = ["tensor_description", "analyze_vars", "analyze_ops"]


def tensor_description(var) -> str:
    """``(dtype AxBxC)`` of a tensor or variable: its dtype's name (a variable's with ``_ref``, as TF
    1.x's reference variables print) and static shape, ``?`` for an unknown dimension."""
    from actorflow.graph.variables import Variable
    shape = var.get_shape()
    dims = [] if shape.ndims is None else ["?" if d is None else str(d) for d in shape.as_list()]
    ref = "_ref" if isinstance(var, Variable) else ""
    return f"({var.dtype.base_dtype.name}{ref} {'x'.join(dims)})"


def _elements(tensor) -> int:
    shape = tensor.get_shape()
    return (shape.num_elements() or 0) if shape.ndims is not None else 0


def analyze_vars(variables, print_info=False):
    """(total elements, total bytes) of `variables`; `print_info` prints each and the totals."""
    if print_info:
        print("---------")
        print("Variables: name (type shape) [size]")
        print("---------")
    total_size = total_bytes = 0
    for var in variables:
        size = _elements(var)
        nbytes = size * var.dtype.base_dtype.size
        total_size += size
        total_bytes += nbytes
        if print_info:
            print(var.name, tensor_description(var), f"[{size}, bytes: {nbytes}]")
    if print_info:
        print(f"Total size of variables: {total_size}")
        print(f"Total bytes of variables: {total_bytes}")
    return total_size, total_bytes


def analyze_ops(graph, print_info=False) -> int:
    """The elements the outputs of `graph`'s ops hold; `print_info` prints each op's outputs."""
    if print_info:
        print("---------")
        print("Operations: name -> (type shapes) [size]")
        print("---------")
    total = 0
    for op in graph.get_operations():
        size = sum(_elements(t) for t in op.outputs)
        if print_info:
            described = [tensor_description(t) for t in op.outputs if t.get_shape().ndims]
            print(op.name, "\t->", ", ".join(described), f"[{size}]")
        total += size
    return total
