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
# (`PGPASSWORD`, `--client-secret-file`); "key", "token" and "pass" only where a word before says whose
# (`--api-key`, `--hf-token`, `DB_PASS`) or where they stand alone (`--token`): `--text_key text`, `--stop_token
# '</s>'` and `--pass 2` are a dataset's column, a tokenizer's special token and a count
_SECRET_WORDS = {"secret", "password", "passwd", "pwd", "passphrase", "credential", "credentials", "auth",
                 "authorization", "cookie", "cookies", "authtoken", "sessionid", "apikey"}
_QUALIFIED = {"key": {"api", "secret", "access", "private", "auth", "encryption", "signing", "client", "ssh",
                      "openai", "license", "master", "session", "account", "service", "subscription", "anthropic",
                      "google", "azure", "aws", "stripe", "wandb", "comet", "neptune", "hf"},
              "token": {"hf", "huggingface", "auth", "access", "api", "github", "gh", "gitlab", "bearer", "refresh",
                        "session", "npm", "slack", "wandb", "openai", "secret", "private", "personal", "bot", "id",
                        "oauth", "jwt", "kaggle", "comet", "discord", "telegram", "pypi", "twine", "registry"},
              "pass": {"db", "user", "admin", "my", "root", "login", "mysql", "pg", "postgres", "redis", "smtp", "ftp",
                       "proxy", "mail", "ldap", "sql"}}
_STRONG = ("password", "passwd", "secret", "credential", "passphrase", "apikey", "authtoken")
# values shaped like a known credential, wherever they stand (a key's body has upper and lower case: an OpenAI,
# Anthropic or Stripe key; "sk-experiment-2024" is a run's name)
_SHAPES = [r"sk-(?:proj-|ant-)?(?=[A-Za-z0-9_\-]*[A-Z])(?=[A-Za-z0-9_\-]*[a-z])[A-Za-z0-9_\-]{20,}",
           r"[rs]k_(?:live|test)_[A-Za-z0-9]{16,}", r"hf_[A-Za-z0-9]{16,}", r"gh[pousr]_[A-Za-z0-9]{20,}",
           r"github_pat_[A-Za-z0-9_]{20,}", r"(?:AKIA|ASIA)[0-9A-Z]{16}", r"xox[abposr]-\d+-[A-Za-z0-9-]{8,}",
           r"glpat-[A-Za-z0-9_\-]{16,}", r"AIza[0-9A-Za-z_\-]{30,}", r"ya29\.[A-Za-z0-9_\-]{20,}", r"npm_[A-Za-z0-9]{30,}",
           r"hooks\.slack\.com/services/[A-Za-z0-9/]{16,}",
           r"eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"]
_SHAPE = re.compile(r"(?<![A-Za-z0-9])(?:" + "|".join(_SHAPES) + r")")
# a PEM block (a private key, a certificate's key): the whole block
_PEM = re.compile(r"-----BEGIN [A-Z0-9 ]+-----.*?(?:-----END [A-Z0-9 ]+-----|$)", re.S)
# a URL's password (`postgres://user:pass@host`, `redis://:pass@host`, a password holding "@"): the password alone
_URL_PASSWORD = re.compile(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.-]*://[^\s:/@]*:)(?P<value>[^\s/]+)(?=@[^\s@/]+)")
# an HTTP authorization's credentials (`Authorization: Bearer TOKEN`, `Authorization: Basic ...`, `Bearer TOKEN`):
# the credentials, never the words after "basic" or "token" in a sentence
_BEARER = re.compile(r"(?P<head>(?i:\bauthorization\b[\"']?\s*[:=]\s*[\"']?(?:bearer|basic|token)\s+)|\bBearer\s+)"
                     r"(?P<value>[A-Za-z0-9._~+/=\-]{4,})")
# a bare AWS secret access key's shape: a whole argument or word of 40 base64 characters with upper and lower case and
# a digit (a git hash, lower-case hexadecimal, is not one; nor a part of a path)
_AWS_SECRET = re.compile(r"(?<![^\s=:\"'])(?=[A-Za-z0-9/+]*[a-z])(?=[A-Za-z0-9/+]*[A-Z])(?=[A-Za-z0-9/+]*[0-9])"
                         r"[A-Za-z0-9/+]{40}(?![^\s,;\"'])")
# a JSON (or Python dict) member whose name says it is a secret: `"api_key": "VALUE"`, `'token': 'VALUE'` (a nested
# object's own members are looked at one by one)
_JSON_NAMED = re.compile(r"(?P<q>[\"'])(?P<name>[A-Za-z][\w.-]*)(?P=q)\s*:\s*(?P<value>\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*'|"
                         r"[^\s,{}\[\]]+)")
# in text: a name, then `=`, `: ` or a space, then its value (`--api-key=VALUE`, `--token VALUE`, `HF_TOKEN=VALUE`,
# `password: VALUE`): tried at every word, the name's own words decide
_NAMED = re.compile(r"(?<![\w-])(?P<name>-{0,2}[A-Za-z][\w.-]*)(?P<sep>[ \t]*=[ \t]*|:[ \t]*|[ \t]+)"
                    r"(?P<value>\"[^\"]*\"|'[^']*'|[^\s,;]+)")
_OPTION = re.compile(r"--[A-Za-z][\w.-]*|-[A-Za-z]")  # what a next argument is when it is an option, not a value


def _words(name: str) -> list[str]:
    """A name's words: split at - _ . and where camelCase turns (`npm-authToken` -> npm, auth, token)."""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name.lstrip("-"))
    return [p for p in re.split(r"[-_.]+", spaced.lower()) if p]


def _secret_name(name: str) -> bool:
    bare = name.lstrip("-")
    parts = _words(name)
    if not parts:
        return False
    last, before = parts[-1], parts[:-1]
    if last in _QUALIFIED:
        env_style = bare.isupper() and last == "pass"  # MY_PASS, PGPASS
        return (not before and last != "pass") or env_style or bool(set(before) & _QUALIFIED[last]) or (
            last == "key" and before[-1:] == ["private"])
    if last in _SECRET_WORDS:
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
    text = _JSON_NAMED.sub(lambda m: m.group(0)[:m.start("value") - m.start()] + f'{m.group("q")}{REDACTED}{m.group("q")}'
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
