"""Stand-ins for the modules an engine imports on its way to its parser but never parses with.

Importing sglang's or vLLM's argument parser imports part of the server with it: torch, CUDA
kernels, ZeroMQ, metrics, Harmony. None of these is installed here (nor could torch be, at
gigabytes), and the parser needs none of them: it is built from the engines' own dataclasses and
choice lists. A stubbed module is answered by `Anything`, which takes whatever the import-time
code does with it (a base class, a decorator, a call, an attribute, a dtype's itemsize) and
means nothing.

A stub must never decide what a flag means. The child (tests/engines/child.py) proves it for
every parse: no option's type, default, choices or const, and no parsed value, is or contains a
stand-in (`is_stub`); one that is fails the parse, naming the option.
"""

from __future__ import annotations

import abc
import importlib.abc
import importlib.machinery
import sys
import types

# torch's version, as the engines read it at import (sglang: pkg_version.parse(torch.__version__)).
# The torch the lock's sglang 0.5.23 and vLLM 0.34.0 require: 2.14.x.
TORCH_VERSION = "2.14.1"
# vLLM asserts at import that these torch dtypes have array.array's item sizes
# (vllm/utils/torch_utils.py, TORCH_DTYPE_TO_ARRAY_TYPECODE).
TORCH_DTYPES = {"int32": 4, "int64": 8, "float32": 4}
# What torch itself lacks: sglang asks hasattr(torch, "npu") (and hpu, musa) to find an
# out-of-tree device plugin, and raises when the plugin's device is missing
# (sglang/srt/utils/common.py, is_npu). The CUDA torch of the images has none of them.
TORCH_ABSENT = frozenset({"npu", "hpu", "musa", "mlu", "sail"})


class _Meta(abc.ABCMeta):
    """The class of every stand-in: an ABCMeta, so an engine class may mix one with ABC."""

    def __getattr__(cls, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _new(f"{cls.__qualname__}.{name}")

    def __call__(cls, *args, **kwargs):
        # Used as a decorator (torch.compile(fn), torch.no_grad()(fn)): the function itself.
        if len(args) == 1 and not kwargs and _is_function(args[0]):
            return args[0]
        return super().__call__(*args, **kwargs)

    def __getitem__(cls, item):
        return cls

    def __or__(cls, other):
        return cls

    def __ror__(cls, other):
        return cls

    def __iter__(cls):
        return iter(())

    def __len__(cls):
        return 0

    def __bool__(cls):
        return False

    def __int__(cls):
        return 0

    def __index__(cls):
        return 0

    def __float__(cls):
        return 0.0

    def __radd__(cls, other):
        # "op_name" + infer_schema(fn): the name alone (vllm/utils/torch_utils.py).
        return other

    def __repr__(cls):
        return f"<stub {cls.__qualname__}>"


class Anything(metaclass=_Meta):
    """Any attribute, call, item, iteration or context of a stubbed module: itself, or nothing."""

    @classmethod
    def __get_pydantic_core_schema__(cls, source, handler):
        # vLLM's pydantic request models have fields of openai_harmony's types.
        from pydantic_core import core_schema
        return core_schema.any_schema()

    def __init__(self, *args, **kwargs):
        pass

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _new(f"{type(self).__qualname__}.{name}")

    def __call__(self, *args, **kwargs):
        if len(args) == 1 and not kwargs and _is_function(args[0]):
            return args[0]
        return _new(f"{type(self).__qualname__}()")()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def __getitem__(self, item):
        return self

    def __iter__(self):
        return iter(())

    def __len__(self):
        return 0

    def __bool__(self):
        return False

    def __int__(self):
        return 0

    def __index__(self):
        return 0

    def __float__(self):
        return 0.0

    def __radd__(self, other):
        return other

    def __hash__(self):
        return id(self)


def _is_function(value) -> bool:
    return callable(value) and not isinstance(value, (_Meta, Anything))


def _new(qualname: str) -> _Meta:
    return _Meta(qualname.rsplit(".", 1)[-1], (Anything,), {"__qualname__": qualname})


def is_stub(value) -> bool:
    """Whether `value` is a stand-in (a stubbed module's attribute, or what one returned)."""
    return isinstance(value, (_Meta, Anything, StubModule))


class StubModule(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        if self.__name__ == "torch" and name in TORCH_ABSENT:
            raise AttributeError(name)
        value = _new(f"{self.__name__}.{name}")
        setattr(self, name, value)
        return value


class Stubs(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Answers the import of each named module, and of everything under it, with a StubModule.

    First on sys.meta_path, so a stubbed module is stubbed whatever .venv happens to have
    installed: what the parser sees does not change when a package comes or goes there.
    """

    def __init__(self, names):
        self.names = tuple(names)
        self.imported: set[str] = set()

    def covers(self, name: str) -> bool:
        return any(name == stub or name.startswith(stub + ".") for stub in self.names)

    def find_spec(self, name, path, target=None):
        if not self.covers(name):
            return None
        self.imported.add(name)
        return importlib.machinery.ModuleSpec(name, self, is_package=True)

    def create_module(self, spec):
        module = StubModule(spec.name)
        if spec.name == "torch":
            module.__version__ = TORCH_VERSION
            for dtype, size in TORCH_DTYPES.items():
                setattr(module, dtype, _Meta(dtype, (Anything,), {"__qualname__": f"torch.{dtype}", "itemsize": size}))
        return module

    def exec_module(self, module):
        module.__path__ = []


def install(names) -> Stubs:
    finder = Stubs(names)
    sys.meta_path.insert(0, finder)
    return finder
