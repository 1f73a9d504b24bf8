"""Datasets: generated sets, the real MNIST/CIFAR-10 file formats (tiny files), and the downloader."""

from __future__ import annotations

import gzip
import hashlib
import io
import pickle
import struct
import tarfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest
import torch
import torchvision.datasets as tvd
from torch import nn

from mpsstudio.engine.data import downloads
from mpsstudio.engine.data.datasets import DEFAULT_DATASET, LoadedDataset, TensorSamples, default_cache_dir, list_datasets, load_dataset
from mpsstudio.engine.basics.errors import UserError
from mpsstudio.engine.basics.spec import DataSpec

# --------------------------------------------------------------------------------------------- catalogue


def test_list_datasets_names_and_sources():
    infos = {d.name: d.source for d in list_datasets()}
    assert infos == {"synthetic": "generated", "shapes": "generated", "mnist": "download",
                     "fashion_mnist": "download", "cifar10": "download"}
    assert DEFAULT_DATASET == "shapes"
    assert all(d.description for d in list_datasets())


def test_default_cache_dir_is_under_the_user_cache(monkeypatch):
    monkeypatch.delenv("MPSSTUDIO_CACHE_DIR")
    path = default_cache_dir()
    assert path.name == "datasets" and "MPS Studio" in str(path)


def test_unknown_name_lists_the_choices():
    with pytest.raises(UserError) as err:
        load_dataset("imagenet")
    assert str(err.value) == ("Unknown dataset 'imagenet'; choose one of: synthetic, shapes, mnist, fashion_mnist, "
                              "cifar10 or give the path to a folder with one subfolder of images per class.")


def test_missing_path_like_name_says_the_folder_does_not_exist(tmp_path):
    with pytest.raises(UserError, match="does not exist"):
        load_dataset(str(tmp_path / "nowhere"))


def test_tensor_samples_items_and_checks():
    ds = TensorSamples(torch.zeros(3, 1, 2, 2, dtype=torch.uint8), torch.tensor([0, 2, 1]))
    x, y = ds[1]
    assert len(ds) == 3 and x.shape == (1, 2, 2) and y == 2 and isinstance(y, int)
    with pytest.raises(ValueError):
        TensorSamples(torch.zeros(3, 4), torch.tensor([0, 1, 2]))


# --------------------------------------------------------------------------------------------- synthetic


def test_synthetic_images_follow_the_model_spec_and_seed():
    spec = DataSpec("image", 7, channels=3, height=12, width=10)
    a = load_dataset("synthetic", model_spec=spec, synthetic_size=20, seed=1)
    b = load_dataset("synthetic", model_spec=spec, synthetic_size=20, seed=1)
    c = load_dataset("synthetic", model_spec=spec, synthetic_size=20, seed=2)
    assert isinstance(a.train, TensorSamples) and a.val is None and a.spec == spec
    assert a.train.x.shape == (20, 3, 12, 10) and a.train.x.dtype == torch.uint8
    assert a.train.y.dtype == torch.int64 and int(a.train.y.max()) < 7
    assert torch.equal(a.train.x, b.train.x) and not torch.equal(a.train.x, c.train.x)
    assert len(a.mean) == 3 and a.summary() == "synthetic: 20 training 3x12x10 images, 7 classes"


def test_synthetic_tokens():
    spec = DataSpec("tokens", 2, seq_len=16, vocab_size=50)
    ds = load_dataset("synthetic", model_spec=spec, synthetic_size=8)
    assert ds.train.x.shape == (8, 16) and ds.train.x.dtype == torch.int64
    assert int(ds.train.x.max()) < 50 and ds.mean == () and ds.std == ()
    assert ds.summary() == "synthetic: 8 training sequences of 16 tokens (vocabulary 50), 2 classes"


def test_synthetic_needs_a_model_spec():
    with pytest.raises(UserError, match="choose a model"):
        load_dataset("synthetic")


# --------------------------------------------------------------------------------------------- shapes


@pytest.fixture(scope="module")
def shapes() -> LoadedDataset:
    return load_dataset("shapes")


def test_shapes_is_fixed_balanced_and_in_memory(shapes):
    assert isinstance(shapes.train, TensorSamples) and isinstance(shapes.val, TensorSamples)
    assert shapes.train.x.shape == (6000, 1, 28, 28) and shapes.val.x.shape == (1000, 1, 28, 28)
    assert shapes.train.x.dtype == torch.uint8
    assert torch.equal(torch.bincount(shapes.train.y), torch.full((10,), 600))
    assert len(shapes.classes) == 10 and len(set(shapes.classes)) == 10
    assert shapes.spec == DataSpec("image", 10, channels=1, height=28, width=28)
    assert shapes.summary() == "shapes: 6,000 training + 1,000 validation 1x28x28 images, 10 classes"
    again = load_dataset("shapes", seed=123)  # the run seed does not change the data
    assert torch.equal(again.train.x, shapes.train.x) and torch.equal(again.val.y, shapes.val.y)
    assert 0.05 < shapes.mean[0] < 0.5 and 0.05 < shapes.std[0] < 0.5


def test_shapes_generation_is_quick():
    start = time.perf_counter()
    load_dataset("shapes")
    assert time.perf_counter() - start < 2.0  # ~0.15 s on an idle core; slack for a busy shared machine


def test_shapes_images_vary():
    x = load_dataset("shapes").train.x[:200].float()
    assert x.std(dim=0).mean() > 20  # positions, sizes and brightness differ from image to image
    assert len({tuple(img.flatten()[:50].tolist()) for img in x}) == 200


def _fit(model: nn.Module, data: LoadedDataset, epochs: int) -> float:
    """Plain SGD loop (lr 0.01, momentum 0.9, batch 64) on normalised inputs; returns validation accuracy."""
    mean, std = data.mean[0], data.std[0]

    def prep(x: torch.Tensor) -> torch.Tensor:
        return (x.float() / 255 - mean) / std

    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    g = torch.Generator().manual_seed(0)
    for _ in range(epochs):
        order = torch.randperm(len(data.train), generator=g)
        for i in range(0, len(order), 64):
            batch = order[i:i + 64]
            loss = nn.functional.cross_entropy(model(prep(data.train.x[batch])), data.train.y[batch])
            opt.zero_grad()
            loss.backward()
            opt.step()
    with torch.no_grad():
        return (model(prep(data.val.x)).argmax(1) == data.val.y).float().mean().item()


def test_shapes_is_not_trivial_for_a_linear_model(shapes):
    torch.manual_seed(0)
    linear = nn.Sequential(nn.Flatten(), nn.Linear(784, 10))
    assert _fit(linear, shapes, epochs=1) < 0.97  # measured ~0.90


# --------------------------------------------------------------------------------------------- MNIST format


def _idx_images(images: np.ndarray) -> bytes:
    n, h, w = images.shape
    return struct.pack(">IIII", 0x00000803, n, h, w) + images.astype(np.uint8).tobytes()


def _idx_labels(labels: np.ndarray) -> bytes:
    return struct.pack(">II", 0x00000801, len(labels)) + labels.astype(np.uint8).tobytes()


def _mnist_files(n_train: int = 20, n_test: int = 10, seed: int = 0) -> dict[str, bytes]:
    rng = np.random.default_rng(seed)
    return {
        "train-images-idx3-ubyte": _idx_images(rng.integers(0, 256, (n_train, 28, 28))),
        "train-labels-idx1-ubyte": _idx_labels(np.arange(n_train) % 10),
        "t10k-images-idx3-ubyte": _idx_images(rng.integers(0, 256, (n_test, 28, 28))),
        "t10k-labels-idx1-ubyte": _idx_labels((np.arange(n_test) + 3) % 10),
    }


def _write_files(folder: Path, files: dict[str, bytes], gz: bool = False) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        if gz:
            (folder / f"{name}.gz").write_bytes(gzip.compress(data))
        else:
            (folder / name).write_bytes(data)


@pytest.mark.parametrize("name,folder,mean", [("mnist", "MNIST", 0.1307), ("fashion_mnist", "FashionMNIST", 0.2860)])
def test_mnist_family_loads_tiny_idx_files(tmp_path, name, folder, mean):
    files = _mnist_files()
    _write_files(tmp_path / folder / "raw", files)
    ds = load_dataset(name, cache_dir=tmp_path, download=False)
    assert isinstance(ds.train, TensorSamples) and isinstance(ds.val, TensorSamples)
    assert ds.train.x.shape == (20, 1, 28, 28) and ds.val.x.shape == (10, 1, 28, 28)
    assert ds.train.x.dtype == torch.uint8 and ds.train.y.dtype == torch.int64
    expected = np.frombuffer(files["train-images-idx3-ubyte"][16:], np.uint8).reshape(20, 28, 28)
    assert np.array_equal(ds.train.x[:, 0].numpy(), expected)
    assert ds.train.y.tolist() == [i % 10 for i in range(20)] and ds.val.y[0] == 3
    assert ds.spec == DataSpec("image", 10, channels=1, height=28, width=28)
    assert ds.mean == (mean,) and len(ds.classes) == 10
    assert ds.summary() == f"{name}: 20 training + 10 validation 1x28x28 images, 10 classes"


def test_mnist_gz_files_put_by_hand_are_extracted(tmp_path):
    raw = tmp_path / "MNIST" / "raw"
    _write_files(raw, _mnist_files(), gz=True)
    ds = load_dataset("Mnist", cache_dir=tmp_path, download=False)
    assert len(ds.train) == 20
    assert sorted(p.name for p in raw.iterdir()) == sorted(_mnist_files())  # extracted, archives removed


def test_mnist_missing_without_download_says_where(tmp_path):
    with pytest.raises(UserError) as err:
        load_dataset("mnist", cache_dir=tmp_path, download=False)
    assert "MNIST is not downloaded" in str(err.value) and str(tmp_path / "MNIST" / "raw") in str(err.value)


def test_damaged_mnist_file_is_a_user_error(tmp_path):
    files = _mnist_files()
    files["train-images-idx3-ubyte"] = b"\x00\x00\x08\x09garbage"
    _write_files(tmp_path / "MNIST" / "raw", files)
    with pytest.raises(UserError, match="damaged"):
        load_dataset("mnist", cache_dir=tmp_path, download=False)


# --------------------------------------------------------------------------------------------- CIFAR format


class _Py2Pickler(pickle._Pickler):
    """Writes str and bytes as Python 2 strings (BINSTRING), as in the original CIFAR-10 files."""

    dispatch = pickle._Pickler.dispatch.copy()

    def _save_py2_str(self, obj):
        data = obj.encode("latin1") if isinstance(obj, str) else obj
        if len(data) < 256:
            self.write(pickle.SHORT_BINSTRING + bytes([len(data)]) + data)
        else:
            self.write(pickle.BINSTRING + struct.pack("<i", len(data)) + data)
        self.memoize(obj)

    dispatch[str] = _save_py2_str
    dispatch[bytes] = _save_py2_str


def _py2_pickle(obj) -> bytes:
    buffer = io.BytesIO()
    _Py2Pickler(buffer, protocol=2).dump(obj)
    # Python 2's numpy lived at numpy.core; numpy 2 writes numpy._core
    return buffer.getvalue().replace(b"cnumpy._core.multiarray\n", b"cnumpy.core.multiarray\n")


CIFAR_NAMES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]


def _write_cifar(folder: Path, per_batch: int = 10) -> np.ndarray:
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(1)
    first = None
    for i, name in enumerate([f"data_batch_{k}" for k in range(1, 6)] + ["test_batch"]):
        data = rng.integers(0, 256, (per_batch, 3072), dtype=np.uint8)
        first = data if first is None else first
        batch = {"batch_label": f"batch {i}", "labels": [(j + i) % 10 for j in range(per_batch)],
                 "data": data, "filenames": [f"img_{i}_{j}.png" for j in range(per_batch)]}
        (folder / name).write_bytes(_py2_pickle(batch))
    meta = {"num_cases_per_batch": per_batch, "label_names": CIFAR_NAMES, "num_vis": 3072}
    (folder / "batches.meta").write_bytes(_py2_pickle(meta))
    return first


def test_cifar10_reads_python2_pickle_batches(tmp_path):
    first = _write_cifar(tmp_path / "cifar-10-batches-py")
    assert b"numpy.core.multiarray" in (tmp_path / "cifar-10-batches-py" / "data_batch_1").read_bytes()
    ds = load_dataset("CIFAR-10", cache_dir=tmp_path, download=False)
    assert isinstance(ds.train, TensorSamples)
    assert ds.train.x.shape == (50, 3, 32, 32) and ds.val.x.shape == (10, 3, 32, 32)
    assert ds.train.x.dtype == torch.uint8 and ds.train.y.dtype == torch.int64
    assert np.array_equal(ds.train.x[0, 0].flatten().numpy(), first[0, :1024])  # red plane comes first
    assert np.array_equal(ds.train.x[0, 2].flatten().numpy(), first[0, 2048:])
    assert ds.train.y[:3].tolist() == [0, 1, 2] and ds.val.y[0] == 5
    assert ds.classes == CIFAR_NAMES and len(ds.mean) == 3
    assert ds.summary() == "cifar10: 50 training + 10 validation 3x32x32 images, 10 classes"


def test_cifar10_unpickler_refuses_code(tmp_path):
    folder = tmp_path / "cifar-10-batches-py"
    _write_cifar(folder)
    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):
            return (Path.touch, (marker,))

    (folder / "data_batch_3").write_bytes(pickle.dumps({"data": Evil(), "labels": []}, protocol=2))
    with pytest.raises(UserError, match="data_batch_3"):
        load_dataset("cifar10", cache_dir=tmp_path, download=False)
    assert not marker.exists()


def test_cifar10_archive_put_by_hand_is_extracted(tmp_path):
    staging = tmp_path / "staging"
    _write_cifar(staging / "cifar-10-batches-py")
    cache = tmp_path / "cache"
    cache.mkdir()
    with tarfile.open(cache / "cifar-10-python.tar.gz", "w:gz") as tar:
        tar.add(staging / "cifar-10-batches-py", arcname="cifar-10-batches-py")
    ds = load_dataset("cifar10", cache_dir=cache, download=False)
    assert len(ds.train) == 50 and (cache / "cifar-10-batches-py" / "test_batch").is_file()
    assert sorted(p.name for p in cache.iterdir()) == ["cifar-10-batches-py"]  # archive and temp folder gone


def test_cifar10_missing_without_download_says_where(tmp_path):
    with pytest.raises(UserError, match="CIFAR-10 is not downloaded") as err:
        load_dataset("cifar10", cache_dir=tmp_path, download=False)
    assert str(tmp_path / "cifar-10-batches-py") in str(err.value)


# --------------------------------------------------------------------------------------------- downloader


class _FakeResponse(io.BytesIO):
    """Stands in for urlopen's response: chunked reads, optional Content-Length, optional failure midway."""

    def __init__(self, data: bytes, length: bool = True, fail_after: int | None = None):
        super().__init__(data)
        self.headers = {"Content-Length": str(len(data))} if length else {}
        self.fail_after = fail_after

    def read(self, n: int = -1) -> bytes:
        if self.fail_after is not None and self.tell() >= self.fail_after:
            raise ConnectionResetError("connection reset")
        return super().read(n)


def _serve(monkeypatch, table: dict[str, object]) -> list[str]:
    """Patch urlopen: each URL maps to bytes, a _FakeResponse or an exception; returns the URLs asked for."""
    asked = []

    def fake_urlopen(request, timeout=None):
        url = request.full_url if isinstance(request, urllib.request.Request) else request
        asked.append(url)
        answer = table[url]
        if isinstance(answer, Exception):
            raise answer
        return answer if isinstance(answer, _FakeResponse) else _FakeResponse(answer)

    monkeypatch.setattr(urllib.request, "urlopen", fake_urlopen)
    return asked


def test_download_checks_md5_reports_progress_and_renames(tmp_path, monkeypatch):
    payload = bytes(range(256)) * 1000  # 256 kB: several chunks
    _serve(monkeypatch, {"http://x/f.bin": payload})
    seen = []
    dest = tmp_path / "d" / "f.bin"
    downloads.download(["http://x/f.bin"], dest, md5=hashlib.md5(payload).hexdigest(), label="Test",
                       where=tmp_path, progress=lambda m, f: seen.append((m, f)))
    assert dest.read_bytes() == payload
    assert list(dest.parent.iterdir()) == [dest]  # no temporary file left
    fractions = [f for _, f in seen]
    assert fractions == sorted(fractions) and fractions[0] == 0.0 and fractions[-1] == 1.0 and len(fractions) > 4
    assert all(0.0 <= f <= 1.0 for f in fractions) and "f.bin" in seen[1][0]


def test_download_progress_span_maps_fractions(tmp_path, monkeypatch):
    _serve(monkeypatch, {"http://x/a": _FakeResponse(b"abc" * 50000, length=False)})
    seen = []
    downloads.download(["http://x/a"], tmp_path / "a", md5=None, label="T", where=tmp_path,
                       progress=lambda m, f: seen.append(f), span=(0.5, 0.75))
    assert min(seen) == 0.5 and max(seen) == 0.75


def test_download_md5_mismatch_leaves_nothing(tmp_path, monkeypatch):
    _serve(monkeypatch, {"http://x/f.bin": b"tampered"})
    with pytest.raises(UserError, match="checksum mismatch"):
        downloads.download(["http://x/f.bin"], tmp_path / "f.bin", md5="0" * 32, label="MNIST", where=tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_interrupted_download_leaves_no_half_file(tmp_path, monkeypatch):
    _serve(monkeypatch, {"http://x/f.bin": _FakeResponse(b"z" * 300000, fail_after=100000)})
    with pytest.raises(UserError, match="no network connection"):
        downloads.download(["http://x/f.bin"], tmp_path / "f.bin", md5=None, label="MNIST", where=tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_download_cancel_from_progress_leaves_no_half_file(tmp_path, monkeypatch):
    _serve(monkeypatch, {"http://x/f.bin": b"z" * 300000})

    def cancel(message: str, fraction: float) -> None:
        if fraction > 0.3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        downloads.download(["http://x/f.bin"], tmp_path / "f.bin", md5=None, label="T", where=tmp_path,
                           progress=cancel)
    assert list(tmp_path.iterdir()) == []


def test_download_falls_back_to_the_next_mirror(tmp_path, monkeypatch):
    asked = _serve(monkeypatch, {
        "http://a/f": urllib.error.HTTPError("http://a/f", 404, "Not Found", {}, None),
        "http://b/f": b"hello",
    })
    downloads.download(["http://a/f", "http://b/f"], tmp_path / "f", md5=hashlib.md5(b"hello").hexdigest(),
                       label="T", where=tmp_path)
    assert asked == ["http://a/f", "http://b/f"] and (tmp_path / "f").read_bytes() == b"hello"


def test_download_http_error_is_named(tmp_path, monkeypatch):
    _serve(monkeypatch, {"http://a/f": urllib.error.HTTPError("http://a/f", 503, "Unavailable", {}, None)})
    with pytest.raises(UserError, match="503 Unavailable"):
        downloads.download(["http://a/f"], tmp_path / "f", md5=None, label="T", where=tmp_path)


def test_download_from_a_file_url(tmp_path):
    source = tmp_path / "source.bin"
    source.write_bytes(b"local bytes")
    dest = tmp_path / "out" / "copy.bin"
    downloads.download([source.as_uri()], dest, md5=hashlib.md5(b"local bytes").hexdigest(), label="T",
                       where=tmp_path)
    assert dest.read_bytes() == b"local bytes"


def test_mnist_downloads_on_demand(tmp_path, monkeypatch):
    files = _mnist_files()
    table, resources = {}, []
    for name, data in files.items():
        gz = gzip.compress(data)
        table[f"http://mirror/{name}.gz"] = gz
        resources.append((f"{name}.gz", hashlib.md5(gz).hexdigest()))
    monkeypatch.setattr(tvd.MNIST, "mirrors", ["http://mirror/"])
    monkeypatch.setattr(tvd.MNIST, "resources", resources)
    asked = _serve(monkeypatch, table)
    seen = []
    ds = load_dataset("mnist", cache_dir=tmp_path, progress=lambda m, f: seen.append(f))
    assert len(asked) == 4 and len(ds.train) == 20 and len(ds.val) == 10
    assert seen[-1] == 1.0 and seen == sorted(seen)
    assert any("downloaded MNIST" in n for n in ds.notes)
    assert sorted(p.name for p in (tmp_path / "MNIST" / "raw").iterdir()) == sorted(files)
    load_dataset("mnist", cache_dir=tmp_path)  # second time: no network
    assert len(asked) == 4


def test_offline_download_message(tmp_path, monkeypatch):
    def offline(*args, **kwargs):
        raise urllib.error.URLError(OSError("Temporary failure in name resolution"))

    monkeypatch.setattr(urllib.request, "urlopen", offline)
    with pytest.raises(UserError) as err:
        load_dataset("mnist", cache_dir=tmp_path)
    raw = tmp_path / "MNIST" / "raw"
    assert str(err.value) == ("Could not download MNIST (no network connection?); connect to the internet and "
                              f"try again, or put the files in {raw}.")
    assert list(raw.iterdir()) == []
    with pytest.raises(UserError, match=r"^Could not download CIFAR-10 \(no network connection\?\)"):
        load_dataset("cifar10", cache_dir=tmp_path)


def test_certificate_failure_says_how_to_fix_it(tmp_path, monkeypatch):
    import ssl

    _serve(monkeypatch, {"http://a/f": urllib.error.URLError(ssl.SSLCertVerificationError("unable to get issuer"))})
    with pytest.raises(UserError, match="Install Certificates.command"):
        downloads.download(["http://a/f"], tmp_path / "f", md5=None, label="MNIST", where=tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_named_datasets_state_their_facts_as_fields_that_match_the_data(shapes):
    """The window reads these fields (never the description text), so they must be what loading gives."""
    info = {d.name: d for d in list_datasets()}
    assert info["shapes"].spec == shapes.spec
    assert (info["shapes"].train_size, info["shapes"].val_size) == (len(shapes.train), len(shapes.val))
    assert info["synthetic"].spec is None and info["shapes"].download_bytes is None
    assert info["cifar10"].spec.channels == 3 and info["cifar10"].download_bytes > 100e6
    assert "163 MiB download" in info["cifar10"].description


def test_a_folder_report_gives_the_spec_it_will_decode_to(tmp_path):
    from PIL import Image

    from mpsstudio.engine.data.folder import inspect_folder

    for c in ("cats", "dogs", "owls"):
        (tmp_path / c).mkdir()
        for i in range(2):
            Image.new("L", (40, 30)).save(tmp_path / c / f"{i}.png")
    report = inspect_folder(tmp_path)
    assert report.spec() == DataSpec("image", 3, channels=1, height=30, width=40)
    assert report.spec(64) == DataSpec("image", 3, channels=1, height=64, width=64)
