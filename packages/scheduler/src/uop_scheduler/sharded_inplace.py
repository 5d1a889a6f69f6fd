"""`Tensor.shard_`: a Tensor object that becomes a sharded value in place.

tinygrad programs shard parameters where they stand (`for p in get_parameters(model): p.shard_(devices)`), and the
model's layers, optimizers and state dicts keep holding the same objects. Here a sharded value is a `ShardedTensor`,
a different kind of object, so `shard_` turns the Tensor into an `InPlaceSharded`: a Tensor subclass with no state of
its own that forwards every attribute, operator and assignment to the `ShardedTensor` it now stands for (kept in the
object's `uop` slot). It is still `isinstance(t, Tensor)`, so code that collects tensors keeps finding it; what it can
do is what a `ShardedTensor` can (gather it with `.to(device)` for the rest).

Before it changes, the tensor leaves the registries of live tensors (its value is the shards' now), a write still
pending on it is run (the shards read its value), and tensors viewing it keep the value they had.
"""

from __future__ import annotations

from typing import Any

from .gradient import graph_holders, requires_grad_tensors
from .multi import ShardedTensor, shard
from .tensor import Tensor
from .writes import all_tensors, pending

_SLOT = Tensor.__dict__["uop"]  # the slot the ShardedTensor is kept in
_IN_PLACE = {"__class__", "to_", "shard_"}  # what an in-place-sharded tensor does itself: change what it is
# names the forwarding object answers itself: Python's object machinery, and identity (hash, weak references)
_OWN = {"__class__", "__getattribute__", "__setattr__", "__delattr__", "__init__", "__new__", "__init_subclass__", "__subclasshook__",
        "__slots__", "__weakref__", "__dict__", "__doc__", "__module__", "__hash__", "__reduce__", "__reduce_ex__", "__getstate__",
        "__setstate__", "__sizeof__", "__dir__", "__format__", "__class_getitem__", "__annotations__", "__qualname__", "__copy__",
        "__deepcopy__", "__firstlineno__", "__static_attributes__", "__abstractmethods__", "__orig_bases__", "__parameters__",
        "__getattr__"}


def backing(t: InPlaceSharded) -> ShardedTensor:
    """The ShardedTensor an in-place-sharded tensor stands for."""
    return _SLOT.__get__(t, Tensor)


class InPlaceSharded(Tensor):
    """A Tensor sharded in place by `shard_`: every attribute and operator is its ShardedTensor's."""

    __slots__ = ()

    def __getattribute__(self, name: str) -> Any:
        if name in _IN_PLACE:
            return object.__getattribute__(self, name)
        return getattr(backing(self), name)

    def to_(self, device: str | tuple[str, ...] | None) -> Tensor:
        """Move this object in place: onto one device it becomes a plain Tensor again (the value gathered there); onto
        several, a copy on each. Returns self."""
        if isinstance(device, (tuple, list)):
            return shard_in_place(self, device, None)
        return unshard_in_place(self, device)

    def shard_(self, devices: tuple[str, ...] | list[str], axis: int | None = None) -> Tensor:
        """Shard the (gathered) value again, along `axis` over `devices`."""
        return shard_in_place(self, devices, axis)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(backing(self), name, value)

    def __delattr__(self, name: str) -> None:
        delattr(backing(self), name)

    __hash__ = Tensor.__hash__


def _forwarder(name: str) -> Any:
    def method(self: InPlaceSharded, *args: Any, **kwargs: Any) -> Any:
        return getattr(backing(self), name)(*args, **kwargs)

    method.__name__ = name
    return method


# Python looks special methods up on the type, past __getattribute__: each of Tensor's gets a forwarder
for _name in sorted({n for klass in Tensor.__mro__[:-1] for n in vars(klass) if n.startswith("__") and n.endswith("__")} - _OWN):
    setattr(InPlaceSharded, _name, _forwarder(_name))


def shard_in_place(t: Tensor, devices: tuple[str, ...] | list[str], axis: int | None) -> Tensor:
    """Make `t` stand for its value split along `axis` over `devices` (see the module doc). Returns `t`."""
    if isinstance(t, InPlaceSharded):
        current = backing(t)
        sharded = shard(current.to(current.device[0]), devices, axis)
    else:
        if t in pending:
            t.realize()  # the write runs before the tensor stops being a tracked root
        sharded = shard(t, devices, axis)
        if t.requires_grad:
            sharded.requires_grad = True
        if t.grad is not None:
            sharded.grad = shard(t.grad, devices, axis)
        t._forget_identity()
        for registry in (all_tensors, graph_holders, requires_grad_tensors):
            registry.discard(t)
        t.__class__ = InPlaceSharded
    _SLOT.__set__(t, sharded)
    return t


def unshard_in_place(t: InPlaceSharded, device: str | None) -> Tensor:
    """Make an in-place-sharded tensor a plain Tensor again, holding its value gathered on `device`. Returns `t`."""
    current = backing(t)
    whole, grad = current.to(device or current.device[0]), current.grad
    requires_grad = current.requires_grad
    object.__setattr__(t, "__class__", Tensor)
    t._init(whole.uop, whole.device, None, requires_grad)
    all_tensors.add(t)
    if grad is not None:
        t.grad = grad.to(t.device)
    return t
