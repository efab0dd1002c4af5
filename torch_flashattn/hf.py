"""Hugging Face transformers attention backend.

    import torch_flashattn.hf
    name = torch_flashattn.hf.register()                   # "torch_fa"; once, after importing transformers
    model = AutoModelForCausalLM.from_pretrained(path, attn_implementation=name)
    # or, on a model already built: model.set_attn_implementation(name)

Every keyword that transformers' attention call sites pass is either computed here or sent to an exact
path; none is dropped (``KEYWORDS`` lists them, and tests/test_hf_keywords.py checks the list against
the installed transformers; generate's own arguments, which a model may pass on, are no attention
input). Six paths, each counted by ``torch_flashattn.stats()``:

- our kernels, through ``torch_flashattn.attention``: padding, sliding windows and offsets given as a
  ``StructuredMask`` (below), on the CPU and in fp16/bf16 on sm_80+ GPUs; through
  ``torch_flashattn.scaled_dot_product_attention``: no mask (causal prefill, encoders without padding),
  decoding steps (a few queries against the KV cache), and a dense mask for fp16/bf16 on sm_80+ GPUs
  (the Hopper or sm_80 kernel reads the mask tile by tile);
- a relative position bias (``position_bias``, T5) for inference on the CPU or in fp16/bf16 on sm_80+:
  ``torch_flashattn.attention`` with the bias as its float ``attn_mask`` (read tile by tile), beside a
  ``StructuredMask``'s ``key_mask`` and window, or with a dense mask folded into it;
- PyTorch's SDPA: a dense mask elsewhere (bf16 prefill on a CPU with AMX-BF16 too, as the drop-in's
  ``_cpu_amx_sdpa`` says), and a position bias (training, other devices) or a sparse key selection
  (``indices``) folded into that mask;
- on the CPU, a ``StructuredMask`` call that needs gradients where the drop-in's rule sends them to our
  backward (fp16/bf16, fp32 from ``CPU_GRAD_MIN_KEY_ELEMENTS`` key elements per head), key_mask and the
  window in the C backend's backward;
- ``torch_flashattn.attention`` with its own variants: ``softcap`` (Gemma 2) and attention sinks
  (``s_aux`` / ``sinks``, GPT-OSS), with the mask, in inference and in training (the gradients through
  the op's backward: in the kernel beside a ``StructuredMask``'s key_mask and window, a dense mask's
  through PyTorch, counted as exact);
- the model's own eager attention function (read from its modeling file): those keywords with dropout,
  ``output_attentions=True`` (it returns the weights), and any keyword this module does not know,
  which ``stats()`` names as the reason.

Masks: the backend's own mask function (``structured_mask``) recognises transformers' causal, sliding-window
and bidirectional patterns with a padding mask, and hands the attention function a ``StructuredMask``
(the 2-D padding mask as ``key_mask``, the window as ``window``, the query/key offsets as the causal
alignment) instead of a dense 4-D mask; those calls run on ``torch_flashattn.attention`` (CPU, and CUDA
fp16/bf16 on sm_80+). Any other pattern (chunked, packed sequences, image-token overlays), offsets given
as tensors, and calls that fall back (dropout, gradients where SDPA's backward is faster, eager attention)
get the dense mask built as
for ``attn_implementation="sdpa"`` (boolean, left out where the plain causal flag is exact), as does a
caller that asks for the causal mask itself (Falcon, to add its ALiBi; a compileable cache's decoding
step: tagged, it runs structured where it reaches the attention function unchanged) and a mask sized
for keys other than the call's (MiniMax); an unpadded bidirectional mask
is None, as sdpa's; a model that knows only eager attention (neither SDPA nor the attention interface:
GIT, NLLB-MoE, PEGASUS-X) gets eager's additive mask. A padding
mask goes to the kernels as ``key_mask`` as it is, with padding or without: the mask function reads
nothing on the host (transformers' own sdpa mask reads the padding once per forward to drop an
all-ones mask; the kernels run an all-ones key_mask at the plain call's speed, bench/LOG.md
2026-12-02-generation). The name holds neither "sdpa" nor "flash", which transformers treats specially: it accepts this
backend for every model that calls attention through its interface, Gemma 2 and GPT-OSS included. The
alias "fa_sdpa" (the earlier name) runs the same function; transformers refuses it for models without
SDPA support. Models that bypass the interface (Falcon before transformers 5.25) ignore both names: run them with
``attn_implementation="sdpa"`` inside ``torch_flashattn.patch_sdpa()``. transformers is an optional
dependency (``pip install transformers``).
"""
import ast
import inspect
import sys
import textwrap
from dataclasses import dataclass

import torch

from . import sdpa as _sdpa
from . import attention as _attention

NAME = "torch_fa"
ALIAS = "fa_sdpa"

# Every keyword transformers' attention call sites pass, explicitly or through **kwargs, and what this
# backend does with it. tests/test_hf_keywords.py fails when the installed transformers passes one that
# is not listed here; at run time an unlisted keyword with a value goes to the eager path.
KEYWORDS = {
    # computed here
    "attention_mask": ("mask: our kernels when None or structured (structured_mask), or dense on compute "
                       "capability 8.0+ (fp16/bf16); SDPA otherwise"),
    "dropout": "SDPA's dropout_p (training)",
    "scaling": "scale",
    "is_causal": "SDPA's top-left causal flag, applied when no mask is given",
    "position_bias": ("added to the scores: torch_flashattn.attention's attn_mask (inference), beside a "
                      "structured mask's key_mask and window or with a dense mask folded in; else folded into "
                      "an explicit float mask, SDPA"),
    "indices": "sparse key selection (B, Nq, topk): unselected keys masked, SDPA",
    "block_indices": "sparse key-block selection: the module's indexer builds the mask, SDPA",
    # the model's own eager attention
    "softcap": "torch_flashattn.attention's softcap (eager attention with dropout)",
    "s_aux": "torch_flashattn.attention's sinks (eager attention with dropout)",
    "sinks": "torch_flashattn.attention's sinks (eager attention with dropout)",
    "output_attentions": "eager attention when true (returns the weights)",
    # carried by the mask, which is built as for "sdpa" (sliding-window bands, packed sequences)
    "sliding_window": "in the mask",
    "position_ids": "in the mask (packed sequences are detected when the mask is built)",
    "cu_seq_lens_q": "in the mask (varlen metadata for flash kernels)",
    "cu_seq_lens_k": "in the mask (varlen metadata for flash kernels)",
    "max_length_q": "in the mask (varlen metadata for flash kernels)",
    "max_length_k": "in the mask (varlen metadata for flash kernels)",
    "seq_idx": "in the mask (packed-sequence index for flash kernels)",
    # not read by attention
    "output_hidden_states": "not an attention input",
    "output_router_logits": "not an attention input",
    "num_items_in_batch": "not an attention input (loss normalisation)",
    "use_cache": "not an attention input",
    "return_dict": "not an attention input (HuBERT's encoder passes it on)",
    "image_patches_indices": "not an attention input (Fuyu passes its model inputs on)",
    "deterministic": "flash kernels' backward determinism; no effect on the forward",
}

# generate's own arguments (GenerationConfig's fields, read at register(); not those KEYWORDS lists): a
# model that passes its forward's keywords on whole hands them to attention too (Kosmos-2's first step:
# do_sample, max_new_tokens). None is an attention input.
_GENERATION_KEYS = frozenset()

# Keywords the op takes as its own variants (torch_flashattn.attention's softcap and sinks, gradients
# included); with dropout or another keyword only eager attention reads, they reach the model's eager
# function instead.
_EAGER = ("softcap", "s_aux", "sinks")


def _op_shapes(query, key, value):
    """Whether the op takes these (B, H, L, d) tensors: one batch size, k and v of one shape, one head dim
    of at most 256, the query heads a multiple of the key heads (DeepSeek's MLA has a value head dim of
    its own; a batch of one query set against several key sets broadcasts in SDPA): else eager attention
    or SDPA computes the call."""
    return (query.dim() == key.dim() == value.dim() == 4 and key.shape == value.shape
            and query.shape[0] == key.shape[0] and query.shape[3] == key.shape[3] and 1 <= key.shape[3] <= 256
            and key.shape[1] > 0 and query.shape[1] % key.shape[1] == 0)


def _variants_take(query, key, value, dropout, given, mask):
    """Whether torch_flashattn.attention computes this softcap / sinks call: no dropout, no sparse
    selection or position bias to fold, at most one sinks tensor (``s_aux`` or ``sinks``, never both),
    (B, H, L, d) inputs of one float dtype. Inputs and sinks that need a gradient get it through the
    op's backward; a mask that needs one (the op gives its attn_mask none) goes to eager."""
    return (not dropout and not ("s_aux" in given and "sinks" in given)
            and not (mask is not None and _needs_grad(mask))
            and not any(k in given for k in ("indices", "block_indices", "position_bias"))
            and _op_shapes(query, key, value) and query.dtype == key.dtype == value.dtype
            and query.dtype in (torch.float32, torch.float16, torch.bfloat16))

_eager_cache = {}


def _eager_function(module):
    """The eager attention function the module's own forward falls back to: the second argument of its
    ``ALL_ATTENTION_FUNCTIONS.get_interface(...)`` call, else its file's ``eager_attention_forward``."""
    cls = type(module)
    if cls not in _eager_cache:
        forward = inspect.unwrap(cls.forward)
        found = None
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(forward)))
            for node in ast.walk(tree):
                if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                        and node.func.attr == "get_interface" and len(node.args) > 1
                        and isinstance(node.args[1], ast.Name)):
                    found = forward.__globals__.get(node.args[1].id)
                    break
        except (OSError, TypeError, SyntaxError):
            pass
        _eager_cache[cls] = found or forward.__globals__.get("eager_attention_forward")
    fn = _eager_cache[cls]
    if fn is None:
        raise NotImplementedError(f"{cls.__name__}: this call needs the model's eager attention function "
                                  "(see torch_flashattn.hf.KEYWORDS), and none was found in its modeling file; "
                                  'use attn_implementation="eager"')
    return fn


def _bool_mask(query, key, attention_mask, causal):
    """The mask as a boolean (True = attend) tensor broadcastable to (B, H, Nq, Nk); None when nothing
    is masked. A float mask is returned unchanged (additive)."""
    if attention_mask is not None:
        return attention_mask
    if causal:
        nq, nk = query.shape[2], key.shape[2]
        return torch.ones(nq, nk, dtype=torch.bool, device=query.device).tril()[None, None]
    return None


def _additive(mask, dtype):
    """A boolean mask as the additive float mask eager attention adds to its scores."""
    if mask is None or mask.dtype != torch.bool:
        return mask if mask is None else mask.to(dtype)
    return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(~mask, torch.finfo(dtype).min)


def _fold_bias(query, mask, position_bias):
    """position_bias + mask, as one float mask (transformers' sdpa semantics)."""
    bias = position_bias.to(query.dtype)
    if mask is None:
        return bias
    if mask.dtype == torch.bool:
        return torch.where(mask, bias, torch.finfo(query.dtype).min)
    return bias + mask.to(query.dtype)


def _fold_indices(query, key, mask, indices):
    """Keeps only the keys each query selected: indices (B, Nq, topk) of key positions."""
    b, nq, nk = indices.shape[0], query.shape[2], key.shape[2]
    keep = torch.zeros(b, nq, nk, dtype=torch.bool, device=query.device).scatter(-1, indices.long(), True)[:, None]
    if mask is None:
        return keep
    if mask.dtype == torch.bool:
        return mask & keep
    return mask.to(query.dtype).masked_fill(~keep, torch.finfo(query.dtype).min)


def _selection(module, query, key, mask, given, kwargs):
    """The mask with a sparse key selection (``indices``, ``block_indices``) applied, if one is given."""
    if given.get("block_indices") is not None:
        position_ids = kwargs.get("position_ids")
        if position_ids is None:
            position_ids = torch.arange(key.shape[2] - query.shape[2], key.shape[2], device=query.device)
        position_ids = (position_ids if position_ids.ndim > 1 else position_ids[None]).expand(query.shape[0], -1)
        mask = module.indexer.build_block_mask(given["block_indices"], mask, key.shape[2], query.dtype,
                                               query.device, position_ids)
    if given.get("indices") is not None:
        mask = _fold_indices(query, key, mask, given["indices"])
    return mask


# ---- the structured mask ---------------------------------------------------------------------

@dataclass
class StructuredMask:
    """What ``structured_mask`` hands the attention function instead of a dense mask: query i (absolute
    position q_offset + i) sees key j (kv_offset + j) when key_mask[b, j] (None: every key) and
    i + delta − left <= j <= i + delta + right (None: that side unbounded), delta = q_offset − kv_offset;
    causal means right = 0. ``dense()`` builds the 4-D boolean mask transformers' sdpa mask builds."""
    key_mask: torch.Tensor | None
    causal: bool
    left: int | None
    right: int | None
    delta: int
    q_length: int
    kv_length: int
    build: object

    # generate() with a compileable (static) cache builds the mask before the model runs and hands it
    # to the model as its attention_mask, whose mask creation then passes it back to structured_mask.
    # transformers reads `ndim` there first (2: a padding mask to convert); anything else goes on to
    # the mask function, which returns it as it is (structured_mask).
    ndim = 4

    def dense(self):
        return self.build()

    def op_arguments(self, key, value):
        """(key, value, keyword arguments of torch_flashattn.attention) for this mask, or None where the
        op cannot express it (a diagonal other than its two alignments). Causal calls drop the keys past
        the last query's diagonal (views), which no query sees, so that the alignment is bottom-right."""
        nq, nk, delta, key_mask = self.q_length, self.kv_length, self.delta, self.key_mask
        if key.shape[2] != nk or value.shape[2] != nk:
            return None     # sized for other keys (MiniMax's decoding step, from a linear layer): dense, broadcast
        if self.causal:
            if delta < 0 or delta + nq > nk:
                return None
            if delta + nq != nk:                         # views only where they drop keys (not in a decoding step)
                nk = delta + nq
                key, value = key[:, :, :nk], value[:, :, :nk]
            if key_mask is not None and key_mask.shape[1] != nk:
                key_mask = key_mask[:, :nk]
            align = "bottom_right"
        elif self.left is None and self.right is None or delta == 0:
            align = "top_left"
        elif delta == nk - nq:
            align = "bottom_right"
        else:
            return None
        window = (-1 if self.left is None else self.left, -1 if self.right is None else self.right)
        kw = dict(causal=self.causal, causal_align=align, key_mask=key_mask)
        if window != (-1, -1) and not (self.causal and window == (-1, 0)):
            kw["window"] = window
        return key, value, kw


def _closure(fn):
    return dict(zip(fn.__code__.co_freevars, (c.cell_contents for c in fn.__closure__ or ())))


_mu = None


def _masking_utils():
    """transformers.masking_utils, imported once (register() does): torch.compile in torch 2.11 cannot
    trace ``from transformers import ...`` inside the mask function (a lazy module), only a global."""
    global _mu
    if _mu is None:
        from transformers import masking_utils
        _mu = masking_utils
    return _mu


def _structure(fn):
    """(causal, left, right) of a transformers mask function made of the patterns this backend knows
    (causal, bidirectional, sliding-window overlays, intersections of them), in key offsets from the
    diagonal; None for any other."""
    mu = _masking_utils()

    if fn is mu.causal_mask_function:
        return True, None, 0
    if fn is mu.bidirectional_mask_function:
        return False, None, None
    name = getattr(fn, "__qualname__", "")
    try:
        cells = _closure(fn)
    except (AttributeError, ValueError):
        return None
    # A window that hides every key (w < 1, or w < 0 both ways) is no window side: left dense.
    if name == "sliding_window_overlay.<locals>.inner_mask":          # kv > q − w
        w = cells["sliding_window"]
        return (False, w - 1, None) if w >= 1 else None
    if name == "sliding_window_bidirectional_overlay.<locals>.inner_mask":   # |q − kv| <= w
        w = cells["sliding_window"]
        return (False, w, w) if w >= 0 else None
    if name == "and_masks.<locals>.and_mask":
        parts = [_structure(f) for f in cells["mask_functions"]]
        if not parts or any(p is None for p in parts):
            return None
        side = lambda vals: min((v for v in vals if v is not None), default=None)  # noqa: E731
        return any(p[0] for p in parts), side(p[1] for p in parts), side(p[2] for p in parts)
    return None


# Models whose own code reads the mask their mask function returns, in transformers releases that do
# not say so with allow_is_causal_skip=False (Doge builds its dynamic mask on it; 5.17 does not ask).
_READS_MASK = frozenset({"doge"})

_eager_only_cache = {}


@torch.compiler.assume_constant_result
def _eager_only(module, qualname):
    """Whether the model of the config class module.qualname knows only eager attention: neither SDPA
    nor transformers' attention interface (GIT's text attention adds the mask to its scores itself;
    NLLB-MoE's decoder self-attention leaves is_causal False and relies on the mask). Such a model
    gets eager's own mask. Cached; torch.compile takes the answer as a constant of the traced graph
    (MODEL_MAPPING's lazy imports would break it). The class goes by its names: strings, which
    torch.compile takes as constants whatever its release (a class argument need not be one)."""
    key = (module, qualname)
    if key not in _eager_only_cache:
        from transformers.models.auto.modeling_auto import MODEL_MAPPING
        config_cls = sys.modules.get(module)
        for part in qualname.split("."):
            config_cls = getattr(config_cls, part, None)
        try:
            cls = MODEL_MAPPING[config_cls] if config_cls is not None else None
        except (KeyError, ValueError):
            cls = None
        _eager_only_cache[key] = cls is not None and not (getattr(cls, "_supports_sdpa", True)
                                                          or getattr(cls, "_supports_attention_backend", True))
    return _eager_only_cache[key]


def structured_mask(batch_size, q_length, kv_length, q_offset=0, kv_offset=0, mask_function=None,
                    attention_mask=None, allow_is_causal_skip=True, **kwargs):
    """transformers' mask-interface protocol (as ``sdpa_mask``): a ``StructuredMask`` for the patterns
    ``_structure`` knows, None where the plain causal flag (or no mask) is exact, else sdpa_mask's dense
    mask, which is also what a caller that asks for the mask itself gets; eager's mask for a model that
    knows only eager attention."""
    mu = _masking_utils()

    if mask_function is None:                              # not `or`: torch 2.11's dynamo cannot branch on a
        mask_function = mu.causal_mask_function            # nested function's truth value
    if isinstance(attention_mask, StructuredMask):        # built before the model ran (generate, above)
        m = attention_mask
        built = (m.q_length, m.kv_length, m.delta, (m.causal, m.left, m.right))
        asked = (q_length, kv_length, q_offset - kv_offset, _structure(mask_function))
        if built != asked:
            raise RuntimeError(f"torch_flashattn.hf: a mask built for (queries, keys, offset, (causal, left, right)) "
                               f"= {built} was passed back for {asked}")
        return m
    args = dict(batch_size=batch_size, q_length=q_length, kv_length=kv_length, q_offset=q_offset,
                kv_offset=kv_offset, mask_function=mask_function, attention_mask=attention_mask,
                allow_is_causal_skip=allow_is_causal_skip, **kwargs)
    config = kwargs.get("config")
    if config is not None and _eager_only(type(config).__module__, type(config).__qualname__):
        return mu.eager_mask(**args)                       # what "eager" gets: additive, never skipped
    build = lambda: mu.sdpa_mask(**args)  # noqa: E731
    if getattr(config, "model_type", None) in _READS_MASK:
        allow_is_causal_skip = False
    shape = _structure(mask_function)
    if shape is None or not all(isinstance(x, int) for x in (q_offset, kv_offset, q_length, kv_length)):
        return build()
    padding = mu.prepare_padding_mask(attention_mask, kv_length, kv_offset)
    # The padding mask goes to the kernels as it is, all ones or not: nothing is read on the host.
    key_mask = None if padding is None else padding[:, kv_offset:kv_offset + kv_length]
    if shape[0] and not allow_is_causal_skip:
        # Asked for the mask itself (Falcon adds ALiBi to it, Doge its dynamic mask; a compileable
        # cache's decoding step): sdpa_mask's tensor, as "sdpa" gets, tagged with its structure and
        # version: a call handed it untouched runs it as structured (_untouched).
        dense = build()
        if not torch.compiler.is_compiling() and isinstance(dense, torch.Tensor) and not dense.is_inference():
            # Its dense() builds anew: a closure over the tensor would be a cycle holding the mask until
            # the garbage collector runs.
            dense._fa_structure = (StructuredMask(key_mask, *shape, q_offset - kv_offset, q_length, kv_length,
                                                  build), dense._version)
        return dense
    local_size = kwargs.get("local_size")
    if (shape == (False, None, None) and key_mask is None and kwargs.get("allow_is_bidirectional_skip")
            and (local_size is None or kv_length < local_size)):
        return None                 # no mask, as sdpa_mask returns (BEiT adds its bias to a given one)
    # Without a padding mask, sdpa_mask's own test of whether the plain causal flag (top-left) is
    # exact (given no padding mask, it reads nothing on the host).
    if shape == (True, None, 0) and key_mask is None and allow_is_causal_skip and mu._ignore_causal_mask_sdpa(
            None, q_length, kv_length, q_offset, kv_offset, kwargs.get("local_size")):
        return None
    return StructuredMask(key_mask, *shape, q_offset - kv_offset, q_length, kv_length, build)


def _broadcasts(t, shape):
    """Whether tensor t broadcasts to shape as SDPA's attn_mask does (trailing dimensions equal or 1)."""
    return (isinstance(t, torch.Tensor) and t.dim() <= len(shape)
            and all(a in (b, 1) for a, b in zip(reversed(t.shape), reversed(shape))))


def _needs_grad(t):
    """Whether a gradient must flow to t (a trainable position bias or mask: the op takes no gradient
    for an attn_mask, SDPA and eager attention do)."""
    return torch.is_grad_enabled() and t.requires_grad


def _structured_takes(query, key, value, dropout, grad_ok=lambda: False, sdpa_ok=True):
    """Whether torch_flashattn.attention runs a StructuredMask call at its speed: no dropout, no gradient
    unless grad_ok (softcap or sinks, which SDPA cannot compute: the op's backward takes key_mask and
    the window in its kernel; or a CPU call where our backward beats SDPA's with the dense mask, as the
    drop-in's rule says: 1.4-3.2x fp32 from the threshold, 2.0-5.1x bf16 on 2 cores with a quarter of
    the keys padded, tools/cpu_grad_time.py padded, bench/LOG.md 2026-12-02, backward variants), (B, H, L, d) inputs of one dtype, on the CPU or in fp16/bf16 on a
    CUDA GPU of compute capability 8.0 or later (elsewhere the op would compute it exactly through
    PyTorch). grad_ok is asked only for a call that needs gradients. sdpa_ok: SDPA could compute the
    call (no softcap or sinks); then a bf16 CPU call without gradients on an AMX CPU, not a decoding step,
    is left to SDPA's AMX kernel with the dense mask (the drop-in's _cpu_amx_sdpa)."""
    grad = _sdpa._needs_grad(query, key, value)
    if (dropout or (grad and not grad_ok())
            or not (_op_shapes(query, key, value) and query.dtype == key.dtype == value.dtype)):
        return False
    if query.device.type == "cpu":
        return (query.dtype in (torch.float32, torch.float16, torch.bfloat16)
                and (grad or not sdpa_ok or not _sdpa._cpu_amx_sdpa(query, key, value, False)))
    return (query.device.type == "cuda" and query.dtype in (torch.float16, torch.bfloat16)
            and _sdpa._capability(query.device.index) >= (8, 0))


def _untouched(mask):
    """The StructuredMask a dense mask was built from (structured_mask, asked for the mask itself), when
    the call received that very tensor, unchanged since (its version counter); else the mask."""
    tag = getattr(mask, "_fa_structure", None) if isinstance(mask, torch.Tensor) else None
    return tag[0] if tag is not None and not torch.compiler.is_compiling() and mask._version == tag[1] else mask


def attention_forward(module, query, key, value, attention_mask, dropout=0.0, scaling=None, is_causal=None,
                      **kwargs):
    """transformers' attention-function protocol: query (B, Hq, L, d), key and value (B, Hkv, S, d);
    returns (attn_output (B, L, Hq, d), attention weights or None)."""
    is_causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
    # transformers passes None for a feature that is off (and False for output_attentions).
    given = {k: v for k, v in kwargs.items() if v is not None and k not in _GENERATION_KEYS}
    attention_mask = _untouched(attention_mask)
    if isinstance(attention_mask, StructuredMask):
        # The op computes it (softcap and sinks too) unless a keyword needs another path: a selection or
        # position bias to fold, the weights asked for, both sinks tensors, or one this module does not know.
        op = None
        bias = given.get("position_bias")
        if (all(k in KEYWORDS for k in given) and not given.get("output_attentions")
                and not any(k in given for k in ("indices", "block_indices"))
                and not ("s_aux" in given and "sinks" in given)
                and _structured_takes(query, key, value, dropout, grad_ok=lambda: bias is None and (
                    any(k in given for k in _EAGER) or _sdpa._cpu_grad_ours(query, key)),
                    sdpa_ok=not any(k in given for k in _EAGER))
                and (bias is None or (_broadcasts(bias, query.shape[:3] + key.shape[2:3])
                                      and not _needs_grad(bias)))):
            op = attention_mask.op_arguments(key, value)
        if op is not None:
            k, v, kw = op
            sinks = given.get("s_aux", given.get("sinks"))
            if bias is not None:                         # the keys the op kept, in q's dtype (as _fold_bias)
                kw["attn_mask"] = bias[..., : k.shape[2]].to(query.dtype)
            out = _attention(query, k, v, scale=scaling, softcap=given.get("softcap"),
                             sinks=None if sinks is None else sinks.float(), **kw)
            _sdpa._count("fa", decode=query.shape[2] <= _sdpa.DECODE_MAX_QUERIES and k.shape[2] > query.shape[2])
            return out.transpose(1, 2).contiguous(), None
        attention_mask = attention_mask.dense()          # every other path reads the dense mask
    # The causal flag applies only without a mask (transformers leaves the mask out where it is exact).
    causal = attention_mask is None and query.shape[2] > 1 and is_causal
    if attention_mask is not None and attention_mask.dtype != torch.bool:
        attention_mask = attention_mask.to(query.dtype)
    selection = [k for k in ("indices", "block_indices") if k in given]

    eager = sorted(k if k in KEYWORDS else f"{k} (unknown)" for k, v in given.items()
                   if k in _EAGER or (k == "output_attentions" and v) or k not in KEYWORDS)
    if eager and set(eager) <= set(_EAGER) and _variants_take(query, key, value, dropout, given, attention_mask):
        # softcap and attention sinks are the op's own variants: torch_flashattn.attention with the mask.
        sinks = given.get("s_aux", given.get("sinks"))
        out = _attention(query, key, value, causal=causal, scale=scaling, softcap=given.get("softcap"),
                         sinks=None if sinks is None else sinks.float(), attn_mask=attention_mask)
        _sdpa._count("fa")
        return out.transpose(1, 2).contiguous(), None
    if eager:
        # Eager attention reads only its additive mask: the causal flag and the selection go into it.
        mask = _selection(module, query, key, _bool_mask(query, key, attention_mask, causal), given, kwargs)
        fn = _eager_function(module)
        _sdpa._count("eager", "keyword " + ", ".join(eager))
        rest = {k: v for k, v in kwargs.items() if k not in selection}
        return fn(module, query, key, value, _additive(mask, query.dtype), dropout=dropout, scaling=scaling, **rest)

    bias = given.get("position_bias")
    if (bias is not None and not selection and not eager and _structured_takes(query, key, value, dropout)
            and _broadcasts(bias, query.shape[:3] + key.shape[2:3]) and not _needs_grad(bias)):
        # The bias as the op's float attn_mask (a dense mask folded into it as for SDPA), causal its flag.
        mask = bias.to(query.dtype) if attention_mask is None else _fold_bias(query, attention_mask, bias)
        out = _attention(query, key, value, causal=causal, scale=scaling, attn_mask=mask)
        _sdpa._count("fa")
        return out.transpose(1, 2).contiguous(), None
    folded = selection + (["position_bias"] if "position_bias" in given else [])
    if not folded:
        out = _sdpa.scaled_dot_product_attention(query, key, value, attn_mask=attention_mask, dropout_p=dropout,
                                                 is_causal=causal, scale=scaling,
                                                 enable_gqa=query.shape[1] != key.shape[1])
    else:
        mask = _selection(module, query, key, _bool_mask(query, key, attention_mask, causal), given, kwargs)
        if "position_bias" in given:
            mask = _fold_bias(query, mask, given["position_bias"])
        _sdpa._count("sdpa", "keyword " + ", ".join(folded))
        out = _sdpa._torch_sdpa(query, key, value, attn_mask=mask, dropout_p=dropout, scale=scaling,
                                enable_gqa=query.shape[1] != key.shape[1])
    return out.transpose(1, 2).contiguous(), None


def register(name=NAME):
    """Registers the backend (and SDPA-style mask construction) under ``name`` and under the alias
    "fa_sdpa"; returns ``name``."""
    from transformers import AttentionInterface, GenerationConfig
    from transformers.masking_utils import AttentionMaskInterface

    global _GENERATION_KEYS
    _masking_utils()
    _GENERATION_KEYS = frozenset(GenerationConfig().to_dict()) - frozenset(KEYWORDS)
    for n in {name, ALIAS}:
        AttentionInterface.register(n, attention_forward)
        AttentionMaskInterface.register(n, structured_mask)
    return name
