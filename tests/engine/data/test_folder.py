"""Image folders: validation messages, unreadable files, mode and size handling, the lazy dataset and the split."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from mpsstudio.engine.data.datasets import load_dataset
from mpsstudio.engine.basics.errors import UserError
from mpsstudio.engine.data.folder import ImageFiles, inspect_folder, split_indices


def _image(path: Path, mode: str = "RGB", size: tuple[int, int] = (16, 16), seed: int = 0) -> Path:
    """A small noisy image in the given PIL mode, saved with the format its suffix implies."""
    rng = np.random.default_rng(seed)
    w, h = size
    rgb = Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8))
    img = rgb.convert("P", palette=Image.Palette.ADAPTIVE) if mode == "P" else rgb.convert(mode)
    path.parent.mkdir(parents=True, exist_ok=True)
    img.save(path)
    return path


def _corrupt(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(os.urandom(200))
    return path


@pytest.fixture
def mixed(tmp_path) -> Path:
    """Two classes of mixed modes and sizes, one corrupt file and some files to ignore."""
    root = tmp_path / "pets"
    for i in range(3):
        _image(root / "cats" / f"rgb{i}.png", "RGB", (16, 16), seed=i)
    for i in range(2):
        _image(root / "cats" / f"gray{i}.jpg", "L", (20, 12), seed=10 + i)
    for i in range(3):
        _image(root / "dogs" / f"rgba{i}.png", "RGBA", (16, 16), seed=20 + i)
    for i in range(2):
        _image(root / "dogs" / "more" / f"pal{i}.png", "P", (16, 16), seed=30 + i)
    _corrupt(root / "dogs" / "broken.png")
    (root / "dogs" / "notes.txt").write_text("not an image")
    _corrupt(root / "dogs" / "._rgba0.png")  # macOS metadata file: hidden, ignored
    return root


def test_report_of_a_mixed_folder(mixed):
    report = inspect_folder(mixed)
    assert report.root == mixed and report.classes == ["cats", "dogs"]
    assert report.counts == {"cats": 5, "dogs": 5} and report.total == 10
    assert [p.name for p in report.skipped] == ["broken.png"]
    assert report.modes == ["L", "P", "RGB", "RGBA"] and report.channels == 3
    assert report.sizes == [(16, 16), (20, 12)] and report.mixed_sizes
    assert report.target_size == (16, 16)
    assert report.summary() == ("2 classes, 10 images (1 unreadable file skipped), mixed sizes will be resized to "
                                "16x16, RGB (converted from L, P, RGBA)")
    assert report.skipped_note == "skipped 1 unreadable file (broken.png)"


def test_loading_a_mixed_folder(mixed):
    ds = load_dataset(str(mixed), seed=3, val_fraction=0.2)
    assert ds.name == "pets" and ds.classes == ["cats", "dogs"]
    assert ds.spec.kind == "image" and (ds.spec.channels, ds.spec.height, ds.spec.width) == (3, 16, 16)
    assert ds.spec.num_classes == 2
    assert len(ds.train) == 8 and len(ds.val) == 2
    assert sorted(ds.val.targets) == [0, 1]  # stratified: one of each class
    for split in (ds.train, ds.val):
        for i in range(len(split)):
            x, y = split[i]
            assert x.dtype == torch.uint8 and x.shape == (3, 16, 16) and y in (0, 1)
    assert "skipped 1 unreadable file (broken.png)" in ds.notes
    assert len(ds.mean) == 3 and all(0.0 < m < 1.0 for m in ds.mean) and all(s > 0 for s in ds.std)
    assert ds.summary() == "pets: 8 training + 2 validation 3x16x16 images, 2 classes"
    again = load_dataset(str(mixed), seed=3, val_fraction=0.2)
    assert again.val.files == ds.val.files


def test_image_size_resizes_everything(mixed):
    ds = load_dataset(str(mixed), image_size=8)
    assert (ds.spec.height, ds.spec.width) == (8, 8)
    assert all(ds.train[i][0].shape == (3, 8, 8) for i in range(len(ds.train)))
    assert inspect_folder(mixed, image_size=8).summary().startswith(
        "2 classes, 10 images (1 unreadable file skipped), mixed sizes will be resized to 8x8")


def test_grayscale_folder_stays_one_channel(tmp_path):
    for cls in ("a", "b"):
        for i in range(2):
            _image(tmp_path / cls / f"{i}.png", "L", (8, 8), seed=i)
    report = inspect_folder(tmp_path)
    assert report.channels == 1 and not report.mixed_sizes
    assert report.summary() == "2 classes, 4 images, all 8x8, grayscale"
    ds = load_dataset(str(tmp_path))
    assert ds.spec.channels == 1 and ds.train[0][0].shape == (1, 8, 8) and len(ds.mean) == 1


def test_pixels_are_decoded_in_channel_order(tmp_path):
    Image.new("RGB", (4, 3), (255, 10, 0)).save(tmp_path / "red.png")
    Image.new("L", (2, 2), 128).save(tmp_path / "gray.png")
    red = ImageFiles([tmp_path / "red.png"], [0], (4, 3), 3)[0][0]
    assert red.shape == (3, 3, 4) and red[:, 0, 0].tolist() == [255, 10, 0]
    gray_as_rgb = ImageFiles([tmp_path / "gray.png"], [1], (2, 2), 3)[0][0]
    assert gray_as_rgb.shape == (3, 2, 2) and gray_as_rgb[:, 1, 1].tolist() == [128, 128, 128]


def test_large_images_are_capped_at_224(tmp_path):
    for cls in ("a", "b"):
        _image(tmp_path / cls / "big.png", "RGB", (448, 300))
    report = inspect_folder(tmp_path)
    assert report.target_size == (224, 150)
    assert report.summary() == "2 classes, 2 images, 448x300 will be resized to 224x150, RGB"
    ds = load_dataset(str(tmp_path), val_fraction=0.0)
    assert (ds.spec.height, ds.spec.width) == (150, 224) and ds.val is None


def test_lazy_dataset_pickles_for_workers_and_batches(mixed):
    ds = load_dataset(str(mixed))
    clone = pickle.loads(pickle.dumps(ds.train))
    assert torch.equal(clone[0][0], ds.train[0][0])
    xb, yb = next(iter(torch.utils.data.DataLoader(ds.train, batch_size=4)))
    assert xb.shape == (4, 3, 16, 16) and xb.dtype == torch.uint8 and yb.dtype == torch.int64


def test_images_in_root_next_to_class_folders_are_ignored_with_a_note(mixed):
    _image(mixed / "stray.png")
    ds = load_dataset(str(mixed))
    assert any("ignored 1 image directly in" in n for n in ds.notes)
    assert len(ds.train) + len(ds.val) == 10


def test_image_that_passes_inspection_but_fails_to_decode(tmp_path):
    path = _image(tmp_path / "x.png")
    ds = ImageFiles([path], [0], (16, 16), 3)
    path.write_bytes(b"gone")
    with pytest.raises(UserError, match="Could not decode the image"):
        ds[0]


@pytest.mark.parametrize("name, size", [("cut.jpg", (256, 256)), ("cut.bmp", (64, 64)), ("cut.png", (64, 64))])
def test_a_truncated_image_is_skipped_by_the_check_not_found_in_the_middle_of_a_run(tmp_path, name, size):
    for i in range(3):
        _image(tmp_path / "a" / f"{i}.png", seed=i)
        _image(tmp_path / "b" / f"{i}.png", seed=10 + i)
    cut = _image(tmp_path / "b" / name, size=size, seed=99)
    cut.write_bytes(cut.read_bytes()[: len(cut.read_bytes()) * 2 // 3])
    report = inspect_folder(tmp_path)
    assert [p.name for p in report.skipped] == [name] and report.counts == {"a": 3, "b": 3}


def test_links_are_followed_once_never_in_a_loop_or_into_another_class(tmp_path):
    """A link back up the tree used to count the same 8 images 3,608 times, class b's under class a too."""
    root = tmp_path / "loop"
    for i in range(4):
        _image(root / "a" / f"{i}.png", seed=i)
        _image(root / "b" / f"{i}.png", seed=10 + i)
    elsewhere = tmp_path / "elsewhere"
    for i in range(2):
        _image(elsewhere / f"{i}.png", seed=20 + i)
    os.symlink("..", root / "a" / "up")  # the dataset root, from inside a class
    os.symlink(".", root / "b" / "self")  # a loop
    os.symlink(root / "b", root / "a" / "to-b")  # another class's folder
    os.symlink(root / "a" / "0.png", root / "b" / "same-file.png")  # a's image again, under b
    os.symlink(elsewhere, root / "a" / "more")  # images kept outside the dataset: followed, as ImageFolder does
    report = inspect_folder(root)
    assert report.counts == {"a": 6, "b": 4} and report.total == 10 and not report.skipped
    assert len({os.path.realpath(p) for p, _ in report.files}) == 10


def test_a_pipe_or_a_device_named_like_an_image_is_not_opened(tmp_path):
    for i in range(2):
        _image(tmp_path / "a" / f"{i}.png", seed=i)
        _image(tmp_path / "b" / f"{i}.png", seed=10 + i)
    os.mkfifo(tmp_path / "b" / "img.png")  # opening it would block until a writer comes: forever
    os.symlink("/dev/zero", tmp_path / "a" / "zero.png")
    report = inspect_folder(tmp_path)
    assert report.counts == {"a": 2, "b": 2} and not report.skipped


# --------------------------------------------------------------------------------------------- bad folders


def _message(path) -> str:
    with pytest.raises(UserError) as err:
        inspect_folder(path)
    return str(err.value)


def test_missing_folder(tmp_path):
    missing = tmp_path / "nope"
    assert _message(missing) == f"The folder {missing} does not exist; check the path and try again."


def test_a_file_instead_of_a_folder(tmp_path):
    path = _image(tmp_path / "one.png")
    assert _message(path) == f"{path} is a file, not a folder; give a folder with one subfolder of images per class."
    archive = tmp_path / "set.zip"
    archive.write_bytes(b"PK")
    assert "is an archive, not a folder; unpack it" in _message(archive)


def test_images_directly_in_the_folder(tmp_path):
    for i in range(3):
        _image(tmp_path / f"{i}.jpg")
    message = _message(tmp_path)
    assert message.startswith(f"{tmp_path} has 3 images directly in it but no class subfolders; ")
    assert "subfolder named after it" in message


def test_empty_folder(tmp_path):
    assert _message(tmp_path) == (f"{tmp_path} has no class subfolders; "
                                  "give a folder with one subfolder of images per class.")


def test_only_one_class(tmp_path):
    _image(tmp_path / "cats" / "a.png")
    assert _message(tmp_path) == (f"{tmp_path} has only one class folder ('cats'); a classifier needs at least two, "
                                  "so add another subfolder of images.")


def test_a_class_without_images_is_named(tmp_path):
    _image(tmp_path / "cats" / "a.png")
    _image(tmp_path / "dogs" / "a.png")
    (tmp_path / "birds").mkdir()
    (tmp_path / "birds" / "readme.txt").write_text("todo")
    message = _message(tmp_path)
    assert message.startswith(f"The class folder 'birds' in {tmp_path} has no images; add some (")
    assert message.endswith("or remove it.")


def test_no_class_has_images(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    assert _message(tmp_path).startswith(f"None of the class folders in {tmp_path} has images")


def test_no_readable_images_at_all(tmp_path):
    for cls in ("a", "b"):
        _corrupt(tmp_path / cls / "x.png")
        _corrupt(tmp_path / cls / "y.jpg")
    assert _message(tmp_path) == (f"None of the 4 image files in {tmp_path} could be read; "
                                  "check that they are valid images.")


def test_a_class_whose_images_are_all_unreadable(tmp_path):
    _image(tmp_path / "good" / "a.png")
    _corrupt(tmp_path / "bad" / "a.png")
    assert _message(tmp_path).startswith(f"None of the image files in class folder 'bad' of {tmp_path} could be read")


def test_load_dataset_reports_folder_errors(tmp_path):
    _image(tmp_path / "only" / "a.png")
    with pytest.raises(UserError, match="only one class folder"):
        load_dataset(str(tmp_path))


def test_bad_image_size(tmp_path):
    with pytest.raises(UserError, match="positive"):
        inspect_folder(tmp_path, image_size=0)


# --------------------------------------------------------------------------------------------- split


def test_split_is_stratified_seeded_and_keeps_training_images():
    labels = [0] * 50 + [1] * 30 + [2] * 3
    train, val = split_indices(labels, 0.2, seed=1)
    assert sorted(train + val) == list(range(len(labels))) and not set(train) & set(val)
    assert [sum(labels[i] == c for i in val) for c in range(3)] == [10, 6, 1]
    assert split_indices(labels, 0.2, seed=1) == (train, val)
    assert split_indices(labels, 0.2, seed=2) != (train, val)


def test_split_keeps_one_validation_image_when_possible():
    train, val = split_indices([0, 0, 1], 0.1, seed=0)
    assert len(val) == 1 and sorted(train + val) == [0, 1, 2]
    assert split_indices([0, 1], 0.5, seed=0)[1] == []  # each class's only image stays for training
    assert split_indices([0, 0, 1, 1], 0.0, seed=0) == ([0, 1, 2, 3], [])


def test_folder_check_reports_progress(mixed):
    seen = []
    load_dataset(str(mixed), progress=lambda message, fraction: seen.append((message, fraction)))
    assert seen and seen[-1][1] == 1.0 and "Checking images in pets (11 of 11)" == seen[-1][0]
