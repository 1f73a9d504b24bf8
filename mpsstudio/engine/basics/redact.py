"""A script's arguments and words are the user's: values that look like secrets (an API key, a token, a password)
are replaced before anything is stored, shown, exported or quoted in a report. A value is a secret when its option's
name says so (`--api-key`, `--token`, `--password`, `--secret`, `OPENAI_API_KEY=`, ...) or when it has the shape of a
known credential (OpenAI `sk-`, Hugging Face `hf_`, GitHub `ghp_`/`github_pat_`, AWS `AKIA`, Slack `xox?-`, GitLab
`glpat-`, Google `AIza`, npm `npm_`, a JSON Web Token, a PEM block, a URL's password, an HTTP authorization's
credentials, a bare AWS secret key). A run made with `--keep-args` keeps its arguments as given. No torch."""

from __future__ import annotations

import re

REDACTED = "[redacted]"

# an option or variable whose value is a secret: the last word of its name is one of these (`--api-key`,
# `OPENAI_API_KEY`, `--hf_token`, `--db-password`, `MY_PASS`, `--npm-authToken`), or a word of it says so whole
# (`PGPASSWORD`, `--cookie-jar`, `--client-secret-file`), but not a tokenizer's special token (`--pad_token`)
_SECRET_WORDS = {"key", "apikey", "token", "secret", "password", "passwd", "pwd", "pass", "passphrase", "credential",
                 "credentials", "auth", "authorization", "cookie", "cookies", "pat", "authtoken", "sessionid"}
_STRONG = ("password", "passwd", "secret", "credential", "cookie", "passphrase", "apikey", "authtoken")
_SPECIAL_TOKENS = {"pad", "eos", "bos", "unk", "sep", "cls", "mask", "start", "end", "special", "max", "num", "min"}
# values shaped like a known credential, wherever they stand
_SHAPES = [r"sk-(?:proj-|ant-)?[A-Za-z0-9_\-]{16,}", r"hf_[A-Za-z0-9]{16,}", r"gh[pousr]_[A-Za-z0-9]{20,}",
           r"github_pat_[A-Za-z0-9_]{20,}", r"(?:AKIA|ASIA)[0-9A-Z]{16}", r"xox[abposr]-[A-Za-z0-9-]{10,}",
           r"glpat-[A-Za-z0-9_\-]{16,}", r"AIza[0-9A-Za-z_\-]{30,}", r"npm_[A-Za-z0-9]{30,}",
           r"eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"]
_SHAPE = re.compile(r"(?<![A-Za-z0-9])(?:" + "|".join(_SHAPES) + r")")
# a PEM block (a private key, a certificate's key): the whole block
_PEM = re.compile(r"-----BEGIN [A-Z0-9 ]+-----.*?(?:-----END [A-Z0-9 ]+-----|$)", re.S)
# a URL's password (`postgres://user:pass@host`): the password alone, the URL kept
_URL_PASSWORD = re.compile(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.-]*://[^\s:/@]+:)(?P<value>[^\s@/]+)(?=@)")
# an HTTP authorization's credentials (`Authorization: Bearer TOKEN`, `Basic ...`): the credentials
_BEARER = re.compile(r"(?i)(?P<head>\b(?:bearer|basic|token)\s+)(?P<value>[A-Za-z0-9._~+/=\-]{8,})")
# a bare AWS secret access key's shape: 40 characters of base64 with upper and lower case and a digit (a git hash,
# lower-case hexadecimal, is not one)
_AWS_SECRET = re.compile(r"(?<![A-Za-z0-9/+])(?=[A-Za-z0-9/+]*[a-z])(?=[A-Za-z0-9/+]*[A-Z])(?=[A-Za-z0-9/+]*[0-9])"
                         r"[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])")
# a JSON member whose name says it is a secret: `"api_key": "VALUE"`
_JSON_NAMED = re.compile(r"\"(?P<name>[A-Za-z][\w.-]*)\"\s*:\s*(?P<value>\"(?:[^\"\\]|\\.)*\"|[^\s,}\]]+)")
# in text: a name, then `=`, `: ` or a space, then its value (`--api-key=VALUE`, `--token VALUE`, `HF_TOKEN=VALUE`,
# `password: VALUE`): tried at every word, the name's own words decide
_NAMED = re.compile(r"(?<![\w-])(?P<name>-{0,2}[A-Za-z][\w.-]*)(?P<sep>=|:[ \t]*|[ \t]+)"
                    r"(?P<value>\"[^\"]*\"|'[^']*'|[^\s,;]+)")
_OPTION = re.compile(r"--[A-Za-z][\w.-]*|-[A-Za-z]")  # what a next argument is when it is an option, not a value


def _words(name: str) -> list[str]:
    """A name's words: split at - _ . and where camelCase turns (`npm-authToken` -> npm, auth, token)."""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name.lstrip("-"))
    return [p for p in re.split(r"[-_.]+", spaced.lower()) if p]


def _secret_name(name: str) -> bool:
    parts = _words(name)
    if not parts:
        return False
    if parts[-1] == "token" and len(parts) > 1 and parts[-2] in _SPECIAL_TOKENS:
        return False
    if parts[-1] in _SECRET_WORDS:
        return True
    if parts[-2:] == ["private", "key"] or (len(parts) > 1 and parts[-2] == "auth" and parts[-1] in ("token", "key")):
        return True
    return any(strong in part for part in parts for strong in _STRONG)


def shaped(text: str) -> bool:
    """Whether `text` holds a value shaped like a known credential."""
    text = str(text)
    return any(p.search(text) is not None for p in (_SHAPE, _PEM, _URL_PASSWORD, _AWS_SECRET))


def _shapes_out(text: str) -> str:
    """Every value shaped like a secret replaced, wherever it stands: known credentials, PEM blocks, a URL's
    password, an authorization header's credentials, a bare AWS secret key."""
    text = _PEM.sub(REDACTED, _SHAPE.sub(REDACTED, text))
    text = _URL_PASSWORD.sub(lambda m: m.group("head") + REDACTED, text)
    text = _BEARER.sub(lambda m: m.group("head") + REDACTED if m.group("value") != REDACTED else m.group(0), text)
    return _AWS_SECRET.sub(REDACTED, text)


def redact_args(args: list[str]) -> list[str]:
    """A script's arguments with every secret value replaced: `--api-key=X` and `--api-key X` (the option named as
    a secret; X whatever it starts with, unless it is the next option), `NAME_TOKEN=X`, and anything shaped like a
    secret (redact_text's shapes) in any argument."""
    out: list[str] = []
    hide_next = False
    for arg in [str(a) for a in args]:
        if hide_next:
            hide_next = False
            if not _OPTION.fullmatch(arg):
                out.append(REDACTED)
                continue
        name, sep, value = arg.partition("=")
        if sep and _secret_name(name) and re.fullmatch(r"-{0,2}[A-Za-z][\w.-]*", name):
            out.append(f"{name}={REDACTED}")
        elif arg.startswith("-") and not sep and _secret_name(arg):
            out.append(arg)
            hide_next = True
        else:
            out.append(redact_text(arg))
    return out


def redact_text(text: str) -> str:
    """`text` (an error, a line a script printed, an argument) with what looks like a secret replaced: the shapes
    (_shapes_out), then every value after a name that says it is a secret (`--token X`, `password: X`, `"api_key":
    "X"`)."""
    text = _shapes_out(str(text))
    text = _JSON_NAMED.sub(lambda m: m.group(0)[:m.start("value") - m.start()] + f'"{REDACTED}"'
                           if _secret_name(m.group("name")) and REDACTED not in m.group("value") else m.group(0), text)
    out, at = [], 0
    for start in [m.start() for m in re.finditer(r"(?<![\w-])-{0,2}[A-Za-z]", text)]:
        if start < at:
            continue
        match = _NAMED.match(text, start)
        spaced = not match.group("sep").strip() if match else False  # "a token is ...": a word, unless an option
        if match and _secret_name(match.group("name")) and REDACTED not in match.group("value") and \
                not (spaced and not match.group("name").startswith("-")) and \
                not (match.group("name").lower() == "authorization" and match.group("value").lower() in
                     ("bearer", "basic", "token")):
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
