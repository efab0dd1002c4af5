"""Overrides of the CUDA backend's automatic choices, for tests and tuning tools.

    from torch_flashattn._testing import overrides
    with overrides(family="sm80"):              # every call inside runs the sm_80 kernel
        out = torch_flashattn.attention(q, k, v)
    with overrides(decode_splits=4, decode_cluster="off"):
        ...

The fields are those of ``fa_overrides`` in csrc/fa.h (docs/tuning.md says what each automatic rule
picks); an omitted field is the automatic choice. The overrides are process-wide, and the block
restores the previous ones on exit. ``FA_KERNEL``, read once when ``torch_flashattn`` is imported, sets
``family`` for the whole process.
"""
import contextlib

import torch

# fa_overrides' fields in their order in fa.h, each with the names of its non-zero values.
FIELDS = {
    "family": ("auto", "sm90", "sm80", "fp32tc", "fp32", "simt", "turing"),
    "sm90_grid": ("auto", "tile", "persistent", "pairs", "counter"),
    "sm90_tail": None,        # 0 automatic, 1 no split, 2..4 key parts
    "decode_splits": None,    # 0 automatic, n > 0
    "decode_warps": None,     # 0, 4 or 8
    "decode_stages": None,    # 0, 2 or 3
    "decode_cluster": ("auto", "off", "on"),
    "decode_evict": ("auto", "off", "on"),
    "decode_combine": ("auto", "elem", "wide"),
    "device_cc": None,        # 0 the GPU's own; 70, 72, 75, 80, 86-89: plan as that older GPU would (tests)
    "split_kv": ("auto", "off", "on"),   # attention calls on the split-KV kernel
    "sm90_heads": None,       # causal Hopper walk: 0 automatic, n sections of n heads (1: head by head)
    "sm90_long_tile": ("auto", "off", "on"),   # non-causal d <= 128 on the 3-consumer 80-key tile
    "sm90_short_tile": ("auto", "off", "on"),  # causal d <= 64 on the 2-consumer 128-row tile
    "cpu_lanes": ("auto", "8", "16"),          # the C backend's 8- or 16-float forms, whatever the CPU
}
FAMILIES = FIELDS["family"]


def _encode(name, value):
    names = FIELDS[name]
    if names is None:
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(f"overrides: {name} must be an int, got {value!r}")
        if not -2**31 <= value < 2**31:                 # fa_overrides' fields are C ints
            raise ValueError(f"overrides: {name} must fit a 32-bit int, got {value!r}")
        return value
    if value not in names:
        raise ValueError(f"overrides: {name} must be one of {', '.join(names)}, got {value!r}")
    return names.index(value)


def get():
    """The current overrides as a dict of field -> value (names for the named fields)."""
    raw = torch.ops.fa._get_overrides()
    return {n: (FIELDS[n][v] if FIELDS[n] else v) for n, v in zip(FIELDS, raw)}


def set_overrides(**fields):
    """Sets the given fields (others automatic) for the whole process; ValueError on a bad value."""
    unknown = set(fields) - set(FIELDS)
    if unknown:
        raise TypeError(f"overrides: unknown field(s) {', '.join(sorted(unknown))}; known: {', '.join(FIELDS)}")
    raw = [_encode(n, fields[n]) if n in fields else 0 for n in FIELDS]
    try:
        torch.ops.fa._set_overrides(raw)
    except RuntimeError as e:
        raise ValueError(f"overrides {fields}: {e}") from None


@contextlib.contextmanager
def overrides(**fields):
    """Inside the block, the given fields are forced and the others keep their current values (so
    blocks nest, and the family set by FA_KERNEL stays unless ``family`` is given); the previous
    overrides come back on exit, also on an exception."""
    previous = get()
    set_overrides(**{**previous, **fields})
    try:
        yield
    finally:
        set_overrides(**previous)


@contextlib.contextmanager
def exact_path():
    """Within the block, calls with variants run the exact path (fa_torch.cpp, exact_attention):
    on the CPU, the one CUDA calls take where no kernel runs them, so tests check that code where
    no GPU is; on CUDA, instead of the kernels."""
    before = torch.ops.fa._set_exact(True)
    try:
        yield
    finally:
        torch.ops.fa._set_exact(before)
