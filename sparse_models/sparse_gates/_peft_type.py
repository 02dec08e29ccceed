"""Adds ``PeftType.SPARSE_GATES``: PEFT's ``register_peft_method`` only accepts names in its enum."""

from __future__ import annotations

from peft.utils import PeftType

NAME = "sparse_gates"


def _ensure_member(enum_cls: type, name: str) -> object:
    """Add ``name`` to a ``str`` enum once; a no-op when PEFT (or an earlier import) already has it."""
    if name in enum_cls.__members__:
        return enum_cls[name]
    member = str.__new__(enum_cls, name)
    member._name_ = name
    member._value_ = name
    enum_cls._member_map_[name] = member
    enum_cls._value2member_map_[name] = member
    enum_cls._member_names_.append(name)
    type.__setattr__(enum_cls, name, member)
    return member


SPARSE_GATES = _ensure_member(PeftType, NAME.upper())
