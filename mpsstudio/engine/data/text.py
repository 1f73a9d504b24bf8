"""A user's text as examples for a language model folder: `.txt` (paragraphs), `.jsonl` (one JSON object a line:
`{"text": ...}`, chat `{"messages": [{"role", "content"}, ...]}`, or `{"prompt", "completion"}`, the formats mlx-lm's
LoRA and transformers' scripts read) and `.parquet` (the same columns, where pyarrow is installed); a file or a
folder of them (mlx-lm's `train.jsonl` + `valid.jsonl`: its validation split; any other files: all training).

Files are streamed a line at a time (a file larger than memory is read through, never held), and every bad file is
one sentence naming it and, for a bad line, its number: missing, not a regular file, empty, binary, not UTF-8, a
line that is not JSON or not an object, none of the fields, a field of the wrong type, formats mixed in one file.
`check` reads the first lines before anything runs; `examples` reads every line, in the run's process. Nothing here
tokenizes (tokens.py does, with the folder's tokenizer)."""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ..basics.errors import UserError
from ..basics.formatting import error_line, printable
from ..basics.spec import TEXT_SUFFIXES

MAX_LINE_BYTES = 16 * 1024**2  # one JSON line (a long document is a few MB; past this, a file without newlines)
MAX_PARAGRAPH_CHARS = 4 * 1024**2  # a .txt paragraph longer than this is cut into pieces of this size
CHECK_LINES = 64  # lines `check` reads before anything runs
BINARY_PROBE = 8192  # bytes read to tell text from binary (a NUL byte in them: not text)
VALIDATION_NAMES = ("valid", "validation", "val", "dev")  # mlx-lm's valid.jsonl and the usual others
TRAIN_NAMES = ("train", "training")
FORMATS = "text, messages (chat), or prompt and completion"
PYARROW = "reading .parquet needs pyarrow; install it with pip install pyarrow, or give the data as .jsonl"


@dataclass(frozen=True)
class Example:
    """One example: plain `text`; a chat's `messages`; or a `prompt` (not trained on) and its `completion`."""

    text: str | None = None
    messages: tuple[tuple[str, str], ...] | None = None  # (role, content) pairs
    prompt: str | None = None
    completion: str | None = None

    @property
    def kind(self) -> str:
        return "text" if self.text is not None else "chat" if self.messages is not None else "prompt"


@dataclass(frozen=True)
class TextFiles:
    """The files of a text dataset: those that train and those that validate (empty: split from the training)."""

    root: Path
    train: tuple[Path, ...]
    val: tuple[Path, ...]

    @property
    def name(self) -> str:
        return printable(self.root.name or str(self.root))


def _shown(path: Path) -> str:
    return printable(path.name or str(path))


def _regular(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


def find_files(name: str) -> TextFiles:
    """The dataset's files: the file itself, or a folder's text files (its train/valid files where it names them);
    UserError naming what is wrong."""
    path = Path(str(name)).expanduser()
    shown = _shown(path)
    if not (path.exists() or path.is_symlink()):
        raise UserError(f"The text dataset '{printable(str(name))[:200]}' was not found; check the path.")
    if path.is_dir():
        try:
            files = sorted(p for p in path.iterdir() if p.suffix.lower() in TEXT_SUFFIXES)
        except OSError as exc:
            raise UserError(f"The folder '{shown}' cannot be read ({error_line(exc, 120, with_type=False)}).") from None
        if not files:
            raise UserError(f"'{shown}' holds no text files ({', '.join(TEXT_SUFFIXES)}); put the text there, or give "
                            "the file itself.")
        val = tuple(p for p in files if p.stem.lower() in VALIDATION_NAMES)
        named_train = tuple(p for p in files if p.stem.lower() in TRAIN_NAMES)
        test = {"test", "testing"}
        train = named_train or tuple(p for p in files if p not in val and p.stem.lower() not in test)
        if not train:
            held = ", ".join(printable(p.name) for p in files)[:200]
            kind = "validation" if val else "test"
            raise UserError(f"'{shown}' holds {kind} files only ({held}), nothing to train on; add train.jsonl "
                            "(mlx-lm's name) or another text file.")
        found = TextFiles(path, train, val)
    else:
        if path.suffix.lower() not in TEXT_SUFFIXES:
            raise UserError(f"'{shown}' is not a text dataset MPS Studio reads; give a .txt, .jsonl or .parquet file "
                            "(or a folder of them).")
        found = TextFiles(path, (path,), ())
    for file in (*found.train, *found.val):
        if not _regular(file):
            raise UserError(f"'{_shown(file)}' is not a regular file (a pipe, a device or a broken link); give the "
                            "text file itself.")
    return found


def content_hash(files: TextFiles) -> str:
    """sha256 over every file's name, role and bytes (read in pieces): the key of the tokenized cache."""
    digest = hashlib.sha256()
    for role, group in (("train", files.train), ("val", files.val)):
        for file in group:
            digest.update(f"{role}:{file.name}:".encode("utf-8", "surrogatepass"))
            try:
                with open(file, "rb") as f:
                    while chunk := f.read(1 << 20):
                        digest.update(chunk)
            except OSError as exc:
                raise UserError(f"'{_shown(file)}' cannot be read ({error_line(exc, 120, with_type=False)}).") from None
    return digest.hexdigest()


def _lines(file: Path) -> Iterator[tuple[int, str]]:
    """(line number, line) of a UTF-8 file, streamed; UserError for binary, not UTF-8 or a line past the limit."""
    shown = _shown(file)
    try:
        with open(file, "rb") as f:
            head = f.read(BINARY_PROBE)
            if head.startswith((b"\xff\xfe", b"\xfe\xff")):
                raise UserError(f"'{shown}' is UTF-16 text; save it as UTF-8 (MPS Studio reads UTF-8).")
            if b"\0" in head:
                raise UserError(f"'{shown}' is not text (it holds binary data); give a UTF-8 text file.")
            f.seek(0)
            number = 0
            while True:
                raw = f.readline(MAX_LINE_BYTES + 1)
                if not raw:
                    return
                number += 1
                if len(raw) > MAX_LINE_BYTES:
                    raise UserError(f"Line {number:,} of '{shown}' is longer than {MAX_LINE_BYTES // 1024**2} MiB; "
                                    "give one example a line (a JSON line) or break the text into paragraphs.")
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise UserError(f"'{shown}' is not UTF-8 text (line {number:,}, byte {exc.start + 1:,} of it); "
                                    "save it as UTF-8.") from None
                if number == 1:
                    line = line.removeprefix("\ufeff")  # a byte-order mark is not text
                yield number, line
    except OSError as exc:
        raise UserError(f"'{shown}' cannot be read ({error_line(exc, 120, with_type=False)}).") from None


def _paragraphs(file: Path, limit: int | None) -> Iterator[Example]:
    """A .txt file's paragraphs (text between blank lines, their line ends kept) as text examples."""
    lines: list[str] = []
    size = 0
    for number, line in _lines(file):
        if limit is not None and number > limit:
            break
        if line.strip():
            lines.append(line)
            size += len(line)
            if size < MAX_PARAGRAPH_CHARS:
                continue
        elif not lines:  # blank lines before the first paragraph or after another blank line
            continue
        else:
            lines.append(line)  # the paragraph's break is text too
        yield Example(text="".join(lines))
        lines, size = [], 0
    if lines:
        yield Example(text="".join(lines))


def _json_kind(value) -> str:
    """A JSON value's kind in JSON's words: null, true or false, a number, a list, an object."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true or false"
    if isinstance(value, (int, float)):
        return "a number"
    return "a list" if isinstance(value, list) else "an object" if isinstance(value, dict) else "a string"


def _string(value, field: str, where: str) -> str:
    if not isinstance(value, str):
        raise UserError(f"{where} has \"{field}\" = {_json_kind(value)}, not a string of text; write it as a JSON "
                        "string.")
    return value


def _example(record, where: str) -> Example:
    """One JSON record as an example; UserError naming the line and what it lacks."""
    if not isinstance(record, dict):
        raise UserError(f"{where} is {_json_kind(record)}, not a JSON object; give one object a line with a \"text\" field "
                        f"(or {FORMATS}).")
    if "text" in record:
        return Example(text=_string(record["text"], "text", where))
    if "messages" in record:
        messages = record["messages"]
        if not isinstance(messages, list) or not messages:
            raise UserError(f"{where} has \"messages\" that are not a list of messages; give "
                            "[{\"role\": \"user\", \"content\": \"...\"}, ...].")
        pairs = []
        for i, message in enumerate(messages, 1):
            if not (isinstance(message, dict) and isinstance(message.get("role"), str)
                    and isinstance(message.get("content"), str)):
                raise UserError(f"{where}: message {i} is not an object with a \"role\" and a \"content\" string; "
                                "give {\"role\": \"user\", \"content\": \"...\"}.")
            pairs.append((message["role"], message["content"]))
        return Example(messages=tuple(pairs))
    if "prompt" in record or "completion" in record:
        if "prompt" not in record or "completion" not in record:
            missing = "completion" if "prompt" in record else "prompt"
            raise UserError(f"{where} has no \"{missing}\"; give both \"prompt\" and \"completion\".")
        return Example(prompt=_string(record["prompt"], "prompt", where),
                       completion=_string(record["completion"], "completion", where))
    keys = ", ".join(printable(str(k))[:40] for k in list(record)[:6]) or "none"
    raise UserError(f"{where} has no \"text\" field (nor messages, nor prompt and completion; its fields: {keys}); "
                    "give each line a \"text\" string.")


def _json_lines(file: Path, limit: int | None) -> Iterator[Example]:
    shown, first = _shown(file), None
    for number, line in _lines(file):
        if limit is not None and number > limit:
            return
        if not line.strip():
            continue
        where = f"Line {number:,} of '{shown}'"
        try:
            record = json.loads(line)
        except (ValueError, RecursionError) as exc:
            why = "nested too deep" if isinstance(exc, RecursionError) else error_line(exc, 80, with_type=False)
            raise UserError(f"{where} is not JSON ({why}); give one JSON object a line.") from None
        example = _example(record, where)
        if first is None:
            first = example.kind
        elif example.kind != first:
            raise UserError(f"{where} holds {example.kind} where the lines before held {first}; keep one format a "
                            "file.")
        yield example


def _parquet(file: Path, limit: int | None) -> Iterator[Example]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise UserError(f"'{_shown(file)}' is a .parquet file, and {PYARROW}.") from None
    shown = _shown(file)
    try:
        reader = pq.ParquetFile(file)
        columns = set(reader.schema_arrow.names)
        wanted = next((c for c in (["text"], ["messages"], ["prompt", "completion"]) if set(c) <= columns), None)
        if wanted is None:
            raise UserError(f"'{shown}' has no \"text\" column (nor messages, nor prompt and completion; its columns: "
                            f"{', '.join(sorted(map(str, columns)))[:200] or 'none'}); give it a \"text\" column.")
        row = 0
        for batch in reader.iter_batches(batch_size=1024, columns=wanted):
            for record in batch.to_pylist():
                row += 1
                if limit is not None and row > limit:
                    return
                yield _example(record, f"Row {row:,} of '{shown}'")
    except UserError:
        raise
    except Exception as exc:  # pyarrow's errors for a file that is not parquet: one sentence, never a traceback
        raise UserError(f"'{shown}' cannot be read as parquet ({error_line(exc, 120, with_type=False)}).") from None


def read_examples(file: Path, limit: int | None = None) -> Iterator[Example]:
    """A file's examples, streamed (the first `limit` lines or rows only, where given)."""
    suffix = file.suffix.lower()
    if suffix == ".txt":
        return _paragraphs(file, limit)
    if suffix == ".parquet":
        return _parquet(file, limit)
    return _json_lines(file, limit)


def check(name: str) -> TextFiles:
    """The dataset's files found and their first lines read (before anything runs): UserError for a file that is
    missing, empty, not text, not UTF-8, or whose first lines are not the examples it should hold."""
    files = find_files(name)
    for file in (*files.train, *files.val):
        if not any(True for _ in read_examples(file, CHECK_LINES)) and not _has_text_after(file):
            raise UserError(f"'{_shown(file)}' is empty (no text in it); give a file with the text to train on.")
    return files


def _has_text_after(file: Path) -> bool:
    """Whether a file whose first lines held nothing has text later (a .txt starting with blank lines)."""
    return any(True for _ in read_examples(file)) if file.suffix.lower() != ".parquet" else False


def preview(files: TextFiles, chars: int = 400) -> str:
    """The first example's text, cut to `chars` (what the window shows beside the file's token count)."""
    for example in read_examples(files.train[0], CHECK_LINES):
        if example.kind == "text":
            text = example.text or ""
        elif example.kind == "chat":
            text = "\n".join(f"{role}: {content}" for role, content in example.messages or ())
        else:
            text = f"{example.prompt} → {example.completion}"
        return text[:chars]
    return ""
