"""Fine-tune a Hugging Face model folder you have (config.json + model.safetensors, as save_pretrained writes it)
with transformers' Trainer, on batches of random token ids: nothing is downloaded.

    python examples/hf_trainer_finetune.py --model FOLDER [--steps 30] [--batch-size 8] [--seq-len 128] [--bf16]

Measured by MPS Studio, one run on each device (the Trainer picks the GPU by itself; the CPU's run keeps it on the
CPU, bf16 there as the CPU's autocast):

    mpsstudio run examples/hf_trainer_finetune.py --devices cpu,mps -- --model FOLDER [--bf16]
"""

import argparse
import tempfile

import torch
from torch.utils.data import Dataset
from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForSequenceClassification, Trainer, TrainingArguments


class RandomTokens(Dataset):
    """`size` sequences of `seq_len` random token ids with their labels (the next tokens, or a class)."""

    def __init__(self, size: int, seq_len: int, vocab: int, classes: int | None):
        generator = torch.Generator().manual_seed(0)
        self.ids = torch.randint(0, vocab, (size, seq_len), generator=generator)
        self.classes = None if classes is None else torch.randint(0, classes, (size,), generator=generator)

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        ids = self.ids[i]
        labels = ids.clone() if self.classes is None else self.classes[i]
        return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": labels}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", required=True, help="a local model folder (config.json + model.safetensors)")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--bf16", action="store_true")
    args = p.parse_args()
    config = AutoConfig.from_pretrained(args.model, local_files_only=True)
    classify = any(a.endswith("ForSequenceClassification") for a in config.architectures or [])
    auto = AutoModelForSequenceClassification if classify else AutoModelForCausalLM
    model = auto.from_pretrained(args.model, local_files_only=True)
    if classify and model.config.pad_token_id is None:
        model.config.pad_token_id = 0
    data = RandomTokens(args.batch_size * args.steps, args.seq_len, config.vocab_size,
                        model.config.num_labels if classify else None)
    # Where no GPU is visible (a CPU run: MPS Studio hides the GPU from it) the Trainer must be told it runs on the
    # CPU, or transformers refuses bf16 ("Your setup doesn't support bf16/gpu"); bf16 on the CPU is autocast there.
    on_cpu = not (torch.cuda.is_available() or torch.backends.mps.is_available())
    with tempfile.TemporaryDirectory() as out:
        training = TrainingArguments(output_dir=out, max_steps=args.steps, per_device_train_batch_size=args.batch_size,
                                     learning_rate=5e-5, logging_steps=10, save_strategy="no", report_to=[],
                                     bf16=args.bf16, use_cpu=on_cpu, dataloader_num_workers=0)
        Trainer(model=model, args=training, train_dataset=data).train()
    print(f"trained on {next(model.parameters()).device}")


if __name__ == "__main__":
    main()
