# Padded batches through the transformers backend: Llama-, Qwen-, Mistral- and Gemma-3-shaped decoders
# (random weights, bf16, CUDA) run a left-padded batch of prompts with attn_implementation "torch_fa"
# and "sdpa" in the same run: prefill tokens/s (the valid tokens of one forward), greedy generation
# new tokens/s (prefill included), the greedy tokens compared, and the share of attention calls our
# kernels served. Medians of 6 runs of each, the two implementations' runs interleaved.
# Writes <out>.json and <out>.md; default bench/out/hf_padded.
#
#   python3 -m bench.hf_padded                 # B = 8 prompts of 512..2048 tokens, 32 new tokens
#   python3 -m bench.hf_padded --quick         # smaller models and prompts (a smoke run)
#   python3 -m bench.hf_padded --quick --device cpu   # the same in fp32 on the CPU
#   python3 -m bench.hf_padded --unpadded      # every prompt the longest, the mask all ones (what a
#                                              # tokenizer returns for prompts of one length)
import argparse
import json
import statistics
import time
from pathlib import Path

import torch

import torch_flashattn
import torch_flashattn.hf
from bench.attention import require_cuda, environment, git_commit

REPO = Path(__file__).resolve().parent.parent


def models(quick):
    import transformers as T
    size = dict(hidden_size=1024 if quick else 2048, intermediate_size=2816 if quick else 5632,
                num_hidden_layers=2 if quick else 8, num_attention_heads=8 if quick else 16,
                vocab_size=32000, max_position_embeddings=8192)
    return {
        "llama": (T.LlamaForCausalLM, T.LlamaConfig(**size, num_key_value_heads=4)),
        "qwen2": (T.Qwen2ForCausalLM, T.Qwen2Config(**size, num_key_value_heads=2)),
        "mistral": (T.MistralForCausalLM, T.MistralConfig(**size, num_key_value_heads=4, sliding_window=1024)),
        "gemma3": (T.Gemma3ForCausalLM, T.Gemma3TextConfig(**size, num_key_value_heads=4, head_dim=128,
                                                           sliding_window=512)),
    }


def timed_pair(runs, reps, sync):
    """Median seconds of each run (name -> (setup, fn)): one warm-up each, then reps rounds of every
    run, the order reversed every other round, so that a slow stretch of the host (these figures are
    launch-bound) falls on each alike. setup (switching the attention implementation) is not timed."""
    for setup, fn in runs.values():
        setup()
        fn()
        sync()
    times = {name: [] for name in runs}
    for r in range(reps):
        for name in list(runs)[::1 if r % 2 == 0 else -1]:
            setup, fn = runs[name]
            setup()
            sync()
            t = time.perf_counter()
            fn()
            sync()
            times[name].append(time.perf_counter() - t)
    return {name: statistics.median(t) for name, t in times.items()}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default=str(REPO / "bench/out/hf_padded"))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--longest", type=int, help="the longest prompt (default 2048; --quick: 512, CPU 64)")
    ap.add_argument("--unpadded", action="store_true", help="every prompt the longest; the mask all ones")
    args = ap.parse_args(argv)
    dev = args.device
    if dev == "cuda":
        require_cuda("bench.hf_padded", "(or pass --device cpu)")
    dtype = torch.bfloat16 if dev == "cuda" else torch.float32
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    name = torch_flashattn.hf.register()
    B = 8
    longest = args.longest or ((64 if dev == "cpu" else 512) if args.quick else 2048)
    lengths = [longest if args.unpadded else int(longest * (0.25 + 0.75 * b / (B - 1))) for b in range(B)]
    g = torch.Generator(device=dev).manual_seed(0)
    ids = torch.randint(3, 32000, (B, longest), device=dev, generator=g)
    mask = torch.zeros(B, longest, dtype=torch.long, device=dev)
    for b, n in enumerate(lengths):
        mask[b, longest - n:] = 1
        ids[b, :longest - n] = 0
    rows = []
    for arch, (cls, config) in models(args.quick).items():
        torch.manual_seed(0)
        with torch.device(dev):
            model = cls(config).to(dtype).eval()
        row = dict(model=arch, lengths=lengths)
        tokens = {}
        impls = {"sdpa": "sdpa", "fa": name}
        gen = dict(attention_mask=mask, max_new_tokens=args.new_tokens, min_new_tokens=args.new_tokens,
                   do_sample=False, pad_token_id=0)
        torch_flashattn.reset_stats()                   # only the "fa" runs call the op
        with torch.no_grad():
            t_pre = timed_pair({k: (lambda i=i: model.set_attn_implementation(i),
                                    lambda: model(ids, attention_mask=mask, logits_to_keep=1))
                                for k, i in impls.items()}, 6, sync)
            t_gen = timed_pair({k: (lambda i=i: model.set_attn_implementation(i),
                                    lambda k=k: tokens.__setitem__(k, model.generate(ids, **gen)))
                                for k, i in impls.items()}, 6, sync)
        stats = torch_flashattn.stats()
        for key in impls:
            row[key] = dict(prefill_tokens_per_s=sum(lengths) / t_pre[key], prefill_ms=1e3 * t_pre[key],
                            generate_new_tokens_per_s=B * args.new_tokens / t_gen[key], generate_s=t_gen[key])
        counts = {k: v for k, v in stats.items() if isinstance(v, int)}
        # calls that entered the backend: ours, SDPA's, eager; "exact" counts op calls (already in "fa")
        total = counts.get("fa", 0) + counts.get("sdpa", 0) + counts.get("eager", 0)
        row["served"] = counts.get("fa", 0) / max(total, 1)
        row["exact_op_calls"] = counts.get("exact", 0)
        row["fallbacks"] = stats.get("fallback_reasons")
        same = (tokens["sdpa"] == tokens["fa"]).all(-1).tolist()
        row["tokens_equal_rows"] = sum(same)
        row["prefill_ratio"] = row["fa"]["prefill_tokens_per_s"] / row["sdpa"]["prefill_tokens_per_s"]
        row["generate_ratio"] = row["fa"]["generate_new_tokens_per_s"] / row["sdpa"]["generate_new_tokens_per_s"]
        rows.append(row)
        print(json.dumps(row), flush=True)
        del model
        if dev == "cuda":
            torch.cuda.empty_cache()
    where = f"bf16, {torch.cuda.get_device_name().removeprefix('NVIDIA ')}" if dev == "cuda" else "fp32, CPU"
    md = [f"{'Unpadded' if args.unpadded else 'Padded'} batches, transformers backend `torch_fa` against `sdpa` ({where}, random weights, "
          f"{'quick sizes' if args.quick else 'hidden 2048, 8 layers, 16 heads'}; B = {B} {'' if args.unpadded else 'left-padded '}prompts of "
          f"{lengths[0]}..{lengths[-1]} tokens, {args.new_tokens} new tokens; {git_commit()}).", "",
          "| model | prefill tok/s fa | sdpa | fa / sdpa | generate new tok/s fa | sdpa | fa / sdpa | calls served | "
          "greedy rows equal |", "|" + " --- |" * 9]
    for r in rows:
        md.append(f"| {r['model']} | {r['fa']['prefill_tokens_per_s']:.0f} | {r['sdpa']['prefill_tokens_per_s']:.0f} | "
                  f"{r['prefill_ratio']:.2f}× | {r['fa']['generate_new_tokens_per_s']:.0f} | "
                  f"{r['sdpa']['generate_new_tokens_per_s']:.0f} | {r['generate_ratio']:.2f}× | {r['served']:.0%} | "
                  f"{r['tokens_equal_rows']}/{B} |")
    text = "\n".join(md) + "\n"
    print(text)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(dict(environment=environment(dev), commit=git_commit(),
                                                        rows=rows), indent=1))
    out.with_suffix(".md").write_text(text)


if __name__ == "__main__":
    main()
