"""Which syntax module handles each format: `split` turns an Inst into (mnemonic, operands, modifiers); builder.py goes back."""

from collections.abc import Callable

from .syntax_common import Draft
from .syntax_memory import (
    BUFFER_FORMATS,
    FLAT_FORMATS,
    IMAGE_FORMATS,
    join_buffer,
    join_ds,
    join_export,
    join_flat,
    join_image,
    join_ldsdir,
    join_vinterp,
    split_buffer,
    split_ds,
    split_export,
    split_flat,
    split_image,
    split_ldsdir,
    split_vinterp,
)
from .syntax_scalar import join_salu, join_smem, join_sopp, split_salu, split_smem, split_sopp
from .syntax_vector import join_valu, split_valu

Mods = dict[str, object]
SplitFn = Callable[..., tuple[str, list, Mods]]
JoinFn = Callable[[Draft, list, Mods], None]

SYNTAX: dict[str, tuple[SplitFn, JoinFn]] = {
    "SOP1": (split_salu, join_salu), "SOP2": (split_salu, join_salu), "SOPC": (split_salu, join_salu), "SOPK": (split_salu, join_salu),
    "SOPP": (split_sopp, join_sopp), "SMEM": (split_smem, join_smem), "DS": (split_ds, join_ds),
    "EXP": (split_export, join_export), "VEXPORT": (split_export, join_export),
    "LDSDIR": (split_ldsdir, join_ldsdir), "VDSDIR": (split_ldsdir, join_ldsdir), "VINTERP": (split_vinterp, join_vinterp),
    **{fmt: (split_valu, join_valu) for fmt in ("VOP1", "VOP2", "VOPC", "VOP3", "VOP3SD", "VOP3P", "VOP3PX2", "VOPD")},
    **{fmt: (split_flat, join_flat) for fmt in FLAT_FORMATS},
    **{fmt: (split_buffer, join_buffer) for fmt in BUFFER_FORMATS},
    **{fmt: (split_image, join_image) for fmt in IMAGE_FORMATS},
}


def split(inst) -> tuple[str, list, Mods]:
    """(printed mnemonic, operands in LLVM order, modifiers) of an instruction."""
    return SYNTAX[inst.fmt][0](inst)
