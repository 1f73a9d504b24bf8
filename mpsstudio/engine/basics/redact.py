"""A script's arguments and words are the user's: values that look like secrets (an API key, a token, a password)
are replaced before anything is stored, shown, exported or quoted in a report. A value is a secret when its option's
name says so (`--api-key`, `--token`, `--password`, `--secret`, `OPENAI_API_KEY=`, ...) or when it has the shape of a
known credential (OpenAI `sk-`, Hugging Face `hf_`, GitHub `ghp_`/`github_pat_`, AWS `AKIA`, Slack `xox?-`, GitLab
`glpat-`, Google `AIza`, a JSON Web Token). A run made with `--keep-args` keeps its arguments as given. No torch."""

from __future__ import annotations

import re

REDACTED = "[redacted]"

# an option or variable whose value is a secret: the last word of its name is one of these (`--api-key`,
# `OPENAI_API_KEY`, `--hf_token`, `--db-password`), but not a tokenizer's special token (`--pad_token`)
_SECRET_WORDS = {"key", "apikey", "token", "secret", "password", "passwd", "pwd", "passphrase", "credential",
                 "credentials", "auth", "authorization"}
_SPECIAL_TOKENS = {"pad", "eos", "bos", "unk", "sep", "cls", "mask", "start", "end", "special", "max", "num", "min"}
# values shaped like a known credential, wherever they stand
_SHAPES = [r"sk-(?:proj-|ant-)?[A-Za-z0-9_\-]{16,}", r"hf_[A-Za-z0-9]{16,}", r"gh[pousr]_[A-Za-z0-9]{20,}",
           r"github_pat_[A-Za-z0-9_]{20,}", r"(?:AKIA|ASIA)[0-9A-Z]{16}", r"xox[abposr]-[A-Za-z0-9-]{10,}",
           r"glpat-[A-Za-z0-9_\-]{16,}", r"AIza[0-9A-Za-z_\-]{30,}",
           r"eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"]
_SHAPE = re.compile(r"(?<![A-Za-z0-9])(?:" + "|".join(_SHAPES) + r")")
# in text: a name, then `=`, `: ` or a space, then its value (`--api-key=VALUE`, `--token VALUE`, `HF_TOKEN=VALUE`,
# `password: VALUE`): tried at every word, the name's own words decide
_NAMED = re.compile(r"(?<![\w-])(?P<name>-{0,2}[A-Za-z][\w.-]*)(?P<sep>=|:[ \t]*|[ \t]+)"
                    r"(?P<value>\"[^\"]*\"|'[^']*'|[^\s,;]+)")


def _secret_name(name: str) -> bool:
    parts = [p for p in re.split(r"[-_.]+", name.lstrip("-").lower()) if p]
    if not parts or parts[-1] not in _SECRET_WORDS:
        return False
    return not (len(parts) > 1 and parts[-1] == "token" and parts[-2] in _SPECIAL_TOKENS)


def shaped(text: str) -> bool:
    """Whether `text` holds a value shaped like a known credential."""
    return _SHAPE.search(str(text)) is not None


def redact_args(args: list[str]) -> list[str]:
    """A script's arguments with every secret value replaced: `--api-key=X` and `--api-key X` (the option named as
    a secret), `NAME_TOKEN=X`, and any argument shaped like a credential."""
    out: list[str] = []
    hide_next = False
    for arg in [str(a) for a in args]:
        if hide_next:
            hide_next = False
            if not arg.startswith("-") or _number(arg):
                out.append(REDACTED)
                continue
        name, sep, value = arg.partition("=")
        if sep and _secret_name(name):
            out.append(f"{name}={REDACTED}")
        elif arg.startswith("-") and not sep and _secret_name(arg):
            out.append(arg)
            hide_next = True
        else:
            out.append(_SHAPE.sub(REDACTED, arg))
    return out


def redact_text(text: str) -> str:
    """`text` (an error, a line a script printed) with what looks like a secret replaced, by the same rule."""
    text = _SHAPE.sub(REDACTED, str(text))
    out, at = [], 0
    for start in [m.start() for m in re.finditer(r"(?<![\w-])-{0,2}[A-Za-z]", text)]:
        if start < at:
            continue
        match = _NAMED.match(text, start)
        spaced = not match.group("sep").strip() if match else False  # "a token is ...": a word, unless an option
        if match and _secret_name(match.group("name")) and match.group("value") != REDACTED and \
                not (spaced and not match.group("name").startswith("-")):
            out.append(text[at:match.start("value")] + REDACTED)
            at = match.end()
    return "".join(out) + text[at:]


def _number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


KEEP_ARGS = "keep_args"  # options[KEEP_ARGS]: the user asked to keep a script's arguments as given (--keep-args)


def redacted_options(options: dict) -> dict:
    """A run's options with a script's arguments (and those for one device) redacted, unless it keeps them."""
    if not isinstance(options, dict) or options.get(KEEP_ARGS) is True:
        return options
    out = dict(options)
    if isinstance(out.get("script_args"), list):
        out["script_args"] = redact_args(out["script_args"])
    if isinstance(out.get("device_args"), dict):
        out["device_args"] = {k: redact_args(v) if isinstance(v, list) else v for k, v in out["device_args"].items()}
    return out


def keeps_args(options) -> bool:
    return isinstance(options, dict) and options.get(KEEP_ARGS) is True
