"""A plain PyTorch decoder at the shapes of `poslab bench` (encoding 'none'): token embedding,
4 causal self-attention layers (nn.TransformerEncoderLayer with a causal mask, the default
attention path, no dropout), an output layer, cross-entropy, AdamW. Random bytes, as poslab bench.

    /usr/bin/python3 bench/peers/pytorch_decoder.py          (Debian's python3-torch)
"""
import torch
import torch.nn as nn

from common import (BATCH, D_INNER, D_MODEL, N_HEADS, N_LAYERS, SEGMENT, VOCAB, arguments,
                    report, time_training)


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, D_MODEL)
        layer = nn.TransformerEncoderLayer(D_MODEL, N_HEADS, D_INNER, dropout=0.0,
                                           batch_first=True)
        self.layers = nn.TransformerEncoder(layer, N_LAYERS)
        self.out = nn.Linear(D_MODEL, VOCAB)
        self.register_buffer("causal", nn.Transformer.generate_square_subsequent_mask(SEGMENT))

    def forward(self, tokens):  # [B, L] -> logits [B, L, V]
        return self.out(self.layers(self.embed(tokens), mask=self.causal))


def main():
    args = arguments(__doc__).parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = Decoder()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    data = torch.randint(0, VOCAB, (BATCH, SEGMENT + 1))
    loss_of = nn.CrossEntropyLoss()

    def step():
        logits = model(data[:, :-1])
        loss = loss_of(logits.reshape(-1, VOCAB), data[:, 1:].reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    rates = time_training(step, args.steps, args.repetitions, BATCH * SEGMENT)
    report("pytorch decoder (none)", rates, args.threads)


if __name__ == "__main__":
    main()
