"""A text classifier fed token batches with an attention mask, as a model file for MPS Studio (no Hugging Face
needed): `mpsstudio bench --model examples/text_classifier.py --dataset synthetic`. `make_batch` makes the inputs
(a dict, passed to forward as keyword arguments) and the targets; INPUT_SHAPE, VOCAB_SIZE and NUM_CLASSES say what
one sample is (MPS Studio reads them without running the file)."""

import torch
from torch import nn

INPUT_SHAPE = (64,)  # tokens per sequence
VOCAB_SIZE = 1000
NUM_CLASSES = 4


class TextClassifier(nn.Module):
    def __init__(self, num_classes: int, seq_len: int, vocab: int = VOCAB_SIZE, width: int = 128):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.position = nn.Parameter(torch.zeros(1, seq_len, width))
        layer = nn.TransformerEncoderLayer(width, nhead=4, dim_feedforward=4 * width, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=2)
        self.head = nn.Linear(width, num_classes)

    def forward(self, tokens, mask):
        h = self.encoder(self.embed(tokens) + self.position, src_key_padding_mask=~mask)
        kept = mask.unsqueeze(-1).float()
        return self.head((h * kept).sum(1) / kept.sum(1).clamp(min=1))  # the mean of the real tokens


def build_model(num_classes, input_shape):
    return TextClassifier(num_classes, input_shape[0])


def make_batch(batch_size, generator):
    """Random sentences of 16 to 64 tokens, padded; the label is a simple function of the first token."""
    seq = INPUT_SHAPE[0]
    lengths = torch.randint(16, seq + 1, (batch_size,), generator=generator)
    tokens = torch.randint(1, VOCAB_SIZE, (batch_size, seq), generator=generator)
    mask = torch.arange(seq).unsqueeze(0) < lengths.unsqueeze(1)
    tokens = tokens.masked_fill(~mask, 0)
    return {"tokens": tokens, "mask": mask}, tokens[:, 0] % NUM_CLASSES
