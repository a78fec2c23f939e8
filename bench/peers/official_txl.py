"""The official Transformer-XL code (kimiyoung/transformer-xl, pytorch/mem_transformer.py) at the
shapes of `poslab bench` with memory 64: 4 layers, d_model 128, 4 heads of 32, d_inner 512,
segment 64, batch 16, no dropout, attn_type 0 (the relative encoding), full softmax over 256
symbols, Adam, memory carried from step to step. Random bytes, as poslab bench.

The official code is not part of poslab and is never copied into it. Get a copy outside the
project and give the path of its pytorch/ folder:

    git clone https://github.com/kimiyoung/transformer-xl /tmp/transformer-xl
    /usr/bin/python3 bench/peers/official_txl.py --txl /tmp/transformer-xl/pytorch
"""
import os
import sys
import warnings

import torch

from common import (BATCH, D_INNER, D_MODEL, N_HEADS, N_LAYERS, SEGMENT, VOCAB, arguments,
                    report, time_training)


def import_official(path):
    # utils/proj_adaptive_softmax.py reads the CUDA version at import; a CPU-only torch has none.
    warnings.filterwarnings("ignore", message="masked_fill_ received a mask with dtype torch.uint8")
    if torch.version.cuda is None:
        torch.version.cuda = "10.0"
    sys.path.insert(0, path)
    sys.path.insert(0, os.path.join(path, "utils"))
    import mem_transformer  # noqa: E402
    return mem_transformer


def main():
    parser = arguments(__doc__)
    parser.add_argument("--txl", required=True, help="the pytorch/ folder of the official code")
    parser.add_argument("--mem", type=int, default=64, help="memory length (64)")
    args = parser.parse_args()
    if not os.path.exists(os.path.join(args.txl, "mem_transformer.py")):
        parser.error(f"--txl {args.txl}: no mem_transformer.py there (the official code's "
                     f"pytorch/ folder)")
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    mem_transformer = import_official(args.txl)
    model = mem_transformer.MemTransformerLM(
        VOCAB, N_LAYERS, N_HEADS, D_MODEL, D_MODEL // N_HEADS, D_INNER, dropout=0.0, dropatt=0.0,
        tie_weight=False, d_embed=D_MODEL, div_val=1, tgt_len=SEGMENT, ext_len=0,
        mem_len=args.mem, cutoffs=[], attn_type=0)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    data = torch.randint(0, VOCAB, (SEGMENT + 1, BATCH))  # time-major, as the official code
    state = {"mems": tuple()}

    def step():
        out = model(data[:-1], data[1:], *state["mems"])
        loss = out[0].mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        state["mems"] = tuple(m.detach() for m in out[1:])

    rates = time_training(step, args.steps, args.repetitions, BATCH * SEGMENT)
    report(f"official Transformer-XL (memory {args.mem})", rates, args.threads)


if __name__ == "__main__":
    main()
