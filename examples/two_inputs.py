"""A model of two inputs, an image and a few numbers about it, with a loss of its own (label smoothing), as a model
file for MPS Studio: `mpsstudio bench --model examples/two_inputs.py --dataset synthetic`. `make_batch` returns the
inputs as a tuple (passed to forward in order) and the targets; `loss(outputs, targets)` replaces cross-entropy."""

import torch
from torch import nn

INPUT_SHAPE = (3, 64, 64)
NUM_CLASSES = 5


class ImageAndNumbers(nn.Module):
    def __init__(self, num_classes: int, channels: int):
        super().__init__()
        self.image = nn.Sequential(nn.Conv2d(channels, 16, 3, stride=2, padding=1), nn.ReLU(),
                                   nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU(),
                                   nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.numbers = nn.Sequential(nn.Linear(6, 32), nn.ReLU())
        self.head = nn.Linear(64, num_classes)

    def forward(self, image, numbers):
        return self.head(torch.cat([self.image(image), self.numbers(numbers)], dim=1))


def build_model(num_classes, input_shape):
    return ImageAndNumbers(num_classes, input_shape[0])


def make_batch(batch_size, generator):
    image = torch.randn(batch_size, *INPUT_SHAPE, generator=generator)
    numbers = torch.randn(batch_size, 6, generator=generator)
    return (image, numbers), torch.randint(0, NUM_CLASSES, (batch_size,), generator=generator)


def loss(outputs, targets):
    return nn.functional.cross_entropy(outputs, targets, label_smoothing=0.1)
