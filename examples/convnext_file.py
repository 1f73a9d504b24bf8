"""torchvision's ConvNeXt-Tiny at the size it is trained at, declared in the file (random weights, nothing
downloaded): `mpsstudio bench --model examples/convnext_file.py --dataset synthetic` trains it at 3x224x224."""

import torchvision

INPUT_SHAPE = (3, 224, 224)
NUM_CLASSES = 1000


def build_model(num_classes, input_shape):
    return torchvision.models.convnext_tiny(weights=None, num_classes=num_classes)
