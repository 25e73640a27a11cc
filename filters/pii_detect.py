"""Finding PII and secrets in one document, by rules that read context, so that code, version strings
and manuals are not taken for personal data (issue 46). `find(text)` gives the spans to redact.

What each kind must have besides its shape:

* e-mail: a domain whose last label is a real top-level domain (the public suffix list the `tld`
  package ships), so `x@self.weight` is not one; not an SSH remote (`git@github.com:owner/repo`),
  not the user part of a URL (`https://key@host`);
* IP address: four numbers 0-255 that are not part of a longer dotted number (`1.3.6.1.4.1`,
  `8.6.4.1.2`), not after a version or section word (`GCC 2.7.2.2`, `version 10.0.0.1`, `section
  8.6.4.1`), not a numbered heading (`8.6.4.1. Unicode Objects`), and either near a network word
  (host, server, ssh, inet, ping, address, ...), a port (`:8080`), a prefix length (`/24`), an `@`
  or a URL, or with a number of 100 or more in it (version and section numbers have none);
* phone number: a `+` country code, a parenthesised area code, or dashes or dots in the North
  American 3-3-4 grouping with valid area and exchange digits, and not inside a run of numbers;
  numbers grouped by spaces only, and national numbers with a leading 0, need a phone word nearby
  (phone, tel, call, mobile, fax, Telefon, téléphone, ...): otherwise `256 512 1024` is a phone;
* card number: 13-19 digits that pass the Luhn check, start as a card issuer's numbers do (Visa,
  Mastercard, American Express, Discover, JCB, Diners, UnionPay) at a length it issues, and are
  grouped as cards are printed (4-4-4-4, 4-6-5) or, ungrouped, have a card word nearby (card,
  Visa, payment, ...): a factorial or a 64-bit constant is not a card;
* API key: the issuers' own formats (AWS, GitHub, GitLab, Slack, Stripe, Google, OpenAI,
  Anthropic, Hugging Face, SendGrid, npm, JWTs);
* secret: a value assigned to a name that says it is one (password, secret, api_key, token, ...),
  which is a literal, not an expression: `password = getpass.getpass()`, `password =
  os.environ["PASSWORD"]` and `password: ${DB_PASSWORD}` are not secrets, `password = "hunter2!x"`
  is; also the password of a URL (`postgres://user:pw@host`), of `curl -u user:pw` and of a Go
  MySQL DSN. Names that only may be one (token, key) need a value that looks random;
* private key: a PEM block.

Code (`code_suffix` of a language Pygments lexes) is read by its own rules: e-mails, IPs, phones,
cards and secrets count only inside string literals and comments (`x@self.weight` and a 64-bit
constant are code, `HOST = "10.1.2.3"` is a string), and a secret's value must be a string literal;
API keys and private keys count anywhere. Other files (configuration, shell, YAML) are read as text.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

TYPES = ("private_key", "api_key", "secret", "email", "ip", "phone", "card")
PRIORITY = {kind: i for i, kind in enumerate(TYPES)}  # of overlapping spans, the earlier kind wins
DEFAULT_SKIP_IPS = ("127.0.0.1", "0.0.0.0", "255.255.255.255")


@dataclass(frozen=True)
class Found:
    kind: str
    start: int
    end: int


# ---- shapes ---------------------------------------------------------------------------------------

PRIVATE_KEY = re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----")
API_KEY = re.compile(
    r"(?<![\w-])(?:(?:AKIA|ASIA)[0-9A-Z]{16}|gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{40,}|glpat-[A-Za-z0-9_\-]{20,}"
    r"|xox[abprs]-[A-Za-z0-9-]{10,}|AIza[0-9A-Za-z_\-]{35}|(?:sk|rk)_live_[0-9A-Za-z]{20,}|sk-(?:proj-|ant-)?[A-Za-z0-9_\-]{32,}"
    r"|hf_[A-Za-z]{30,}|SG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}|npm_[A-Za-z0-9]{36}"
    r"|eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,})")
EMAIL = re.compile(r"(?<![\w.%+\-@])[A-Za-z0-9](?:[A-Za-z0-9._%+\-]{0,62}[A-Za-z0-9_%+\-])?"
                   r"@((?:[A-Za-z0-9](?:[A-Za-z0-9\-]{0,61}[A-Za-z0-9])?\.)+([A-Za-z]{2,24}))(?![\w\-]|\.[A-Za-z0-9])")
IP = re.compile(r"(?<![\w.\-])((?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\."
                r"(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d))(?![\w\-]|\.\d)")
PHONE = re.compile(
    r"(?<![\w+\-.])(?:\+\d{1,3}(?:[ .\-]?\(?\d{1,4}\)?){2,5}"  # international
    r"|\(\d{3}\)[ .\-]?\d{3}[ .\-]\d{4}"  # (415) 555-0132
    r"|\d{3}([ .\-])\d{3}\1\d{4}"  # 415-555-0132, 415.555.0132, 415 555 0132
    r"|0\d{1,4}(?:[ \-/]\d{2,4}){1,3})(?![\w\-]|[.,]\d)")  # national, leading 0
CARD = re.compile(r"(?<![\w.,\-])\d(?:[ \-]?\d){12,18}(?![\w\-]|[.,]\d)")

# A version or section word in the last token before a number (`GCC 2.7.2.2`, `__version__ = "1.8.3.1"`,
# `section 8.6.4.1`): letters may not touch the word, underscores and more name may follow it.
SKIP_VERSION = re.compile(
    r"(?i)(?:(?<![a-z])(?:v|versions?|ver|releases?|rel|build|rev|revision|update|patch|gcc|glibc|kernel|linux|python"
    r"|java|firmware|sdk|sections?|sect|sec|chapter|ch|tables?|fig|figure|lemma|theorem|definition|example|exercise"
    r"|equation|eq|paragraph|oid|object identifier|isbn|doi|rfc)(?![a-z])[\w.]*|§|==|>=|<=|~=)[\s:=\"'(]*$")
IP_WORDS = re.compile(
    r"(?i)(?:\bip(?:v4)?\b|ip_|_ip\b|ipaddr|\baddr(?:ess)?(?:es)?\b|\bhosts?\b|host_|_host|hostname|\bservers?\b|\binet\b|inet_"
    r"|\bping\b|\bssh\b|\bscp\b|\btelnet\b|\bftp\b|\bconnect|\bgateway|\bdns\b|nameserver|\bsubnet|netmask|\broute[rs]?\b"
    r"|\blisten|\bbind\b|\bproxy|\bclients?\b|\bpeers?\b|\bremote\b|\bdhcp\b|firewall|whitelist|allowlist|blocklist|\bvpn\b"
    r"|\bmirror|\bendpoint|\bupstream|\bnodes?\b|\bredis\b|\bmysql\b|\bpostgres|\bdatabase\b|\bdb\b|_db\b|\bsmtp\b|\bnginx\b"
    r"|\bforwarded|\blogin\b|\bbanned?\b|\bblocked\b|\breachable\b|\bunreachable\b|\bhttp|\btcp\b|\budp\b|\bport\b)")
PHONE_WORDS = re.compile(
    r"(?i)(?:phone|\btel\b|\btel\.|\bcall\b|\bcalls\b|\bcalling\b|\bmobile|\bcell\b|\bfax\b|whatsapp|\bsms\b|\btext me\b"
    r"|\bhotline|\bring\b|telefon|téléphone|\btél\b|\btél\.|teléfono|telefono|\bhandy\b|\bnumber\b|\bcontact\b|"
    r"電話|携帯|전화|телефон|\bтел\b|\bmob\.?\b)")
CARD_WORDS = re.compile(
    r"(?i)(?:card|\bvisa\b|mastercard|\bamex\b|american express|discover|\bjcb\b|diners|unionpay|\bpayment|\bpay\b|\bpaid\b"
    r"|\bcharged?\b|\bcc_?(?:num|number)?\b|\bpan\b|\brefund|tarjeta|karte|carte|カード|карт)")
SECTION_HEADING = re.compile(r"\.?[ \t]+[A-Z]")

# Names a secret is assigned to: strong ones mean a secret, weak ones only may.
_STRONG = r"pass(?:word|wd|wort|phrase)?|pwd|secret|api_?key|apikey|access_?key|private_?key|client_?secret|signing_?key" \
          r"|encryption_?key|auth_?key|(?:access|auth|refresh|bearer|api|session)_?token|credentials?"
_WEAK = r"token|key|auth|dsn"
# The name's last word, then the value; the rest of the name is read backwards (`_name`): a regex
# that starts with the name's first character backtracks through every identifier of the text.
SECRET = re.compile(
    rf"(?i)(?:{_STRONG}|{_WEAK})(?![\w])(?:[\"'][ \t]*(?:=>|:|,)|[ \t]*(?:=>|:=|=|:))[ \t]*"  # a comma after a quoted name only
    r"(?:(?P<q>[\"'`])(?P<quoted>[^\"'`\s\\]{1,200})(?P=q)|(?P<bare>[^\s\"'`,;(){}\[\]<>]{1,200}))")
NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")
STRONG_NAME = re.compile(rf"(?i)(?:{_STRONG})")
URL_PASSWORD = re.compile(r"(?i)\b[a-z][a-z0-9+.\-]{1,20}://(?!anonymous:|ftp:)[^\s:/@\"'`]*:([^\s/\"'`]{3,}?)@(?=[\w\-\[])")
URL_KEY = re.compile(r"(?i)\b[a-z][a-z0-9+.\-]{1,20}://([0-9a-f]{24,}|[A-Za-z0-9]{32,})@(?=[\w\-])")
CURL_USER = re.compile(r"(?:\s-u|--user)[ \t]+[\"']?[\w.\-]+:([^\s\"']{3,})")
GO_DSN = re.compile(r"[\w.\-]+:([^\s/\"'`]{3,})@(?:tcp|unix)\(")
DEFINE = re.compile(rf"(?i)#[ \t]*define[ \t]+((?:\w*_)?(?:{_STRONG}|{_WEAK}))[ \t]+\"([^\"\s\\]{{1,200}})\"")
PLACEHOLDER = re.compile(
    r"(?i)^(?:x+|\*+|\.+|-+|_+|#+|changeme|change_?me|password\d*|passwd|pass|secret|pw|pwd|token|apikey|api_key|key|none|null"
    r"|nil|true|false|undefined|empty|required|optional|string|str|bytes|int|todo|fixme|tbd|redacted|hidden|masked|default"
    r"|(?:your|my|the|some|example|dummy|fake|test|sample|placeholder)[_\-]?\w*|\w*(?:here|_goes_here))$")
TEMPLATED = re.compile(r"\$\{|\{\{|%\(|%s\b|<[^>]*>|^\$\w+$|^%\w+%$|^ENV\b|^env\b|^os\.|^process\.|^\$[A-Z_]")
IDENTIFIER_PATH = re.compile(r"^[A-Za-z_$][\w$]*(?:(?:\.|::|->)[A-Za-z_$][\w$]*)*$")


def shape(value: str) -> str:
    """What a match looked like, with nothing of it: letters x/X, digits 0, the rest as is."""
    return re.sub(r"[a-z]", "x", re.sub(r"[A-Z]", "X", re.sub(r"\d", "0", value)))


# ---- checks per kind -----------------------------------------------------------------------------

@lru_cache(maxsize=1)
def top_level_domains() -> frozenset[str]:
    """The last label of every rule of the public suffix list that `tld` ships (ICANN and private)."""
    from importlib.resources import files

    names = set()
    for line in (files("tld") / "res" / "effective_tld_names.dat.txt").read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if line and not line.startswith("//"):
            names.add(line.lstrip("*.!").rsplit(".", 1)[-1].casefold())
    return frozenset(n for n in names if n.isascii())


def _before(text: str, at: int, chars: int = 40) -> str:
    start = max(0, at - chars)
    return text[start:at]


def _near(text: str, a: int, b: int, words: re.Pattern, before: int = 40, after: int = 30) -> bool:
    return bool(words.search(text[max(0, a - before):a]) or words.search(text[b:b + after]))


def _line_start(text: str, a: int) -> bool:
    return not text[text.rfind("\n", 0, a) + 1:a].strip(" \t>*-#")


def email_ok(text: str, m: re.Match) -> bool:
    if m.group(2).casefold() not in top_level_domains():
        return False
    a, b = m.start(), m.end()
    if re.match(r":[\w.~\-]*/", text[b:b + 80]) or re.match(r":[\w.\-]+\.git\b", text[b:b + 80]):
        return False  # git@github.com:owner/repo.git
    return not text[max(0, a - 2):a].endswith("//")  # the user part of a URL: https://key@host


def ip_ok(text: str, m: re.Match, skip: frozenset) -> bool:
    value, a, b = m.group(1), m.start(), m.end()
    if value in skip:
        return False
    if SKIP_VERSION.search(_before(text, a, 30)):
        return False
    cue = _near(text, a, b, IP_WORDS) or text[max(0, a - 3):a].endswith(("@", "://")) \
        or re.match(r"(?::\d{2,5}\b|/\d{1,2}\b| - - \[|,? port\b)", text[b:b + 8]) is not None
    if not cue and _line_start(text, a) and SECTION_HEADING.match(text, b):
        return False  # 8.6.4.1. Unicode Objects
    return cue or any(int(part) >= 100 for part in value.split("."))


def phone_ok(text: str, m: re.Match) -> bool:
    value, a, b = m.group(0), m.start(), m.end()
    digits = re.sub(r"\D", "", value)
    cue = _near(text, a, b, PHONE_WORDS, 50, 20)
    if re.search(r"\d[ \t]*$", text[max(0, a - 3):a]) or re.match(r"[ \t]*[\-.]?\d", text[b:b + 3]):
        return False  # inside a run of numbers
    if SKIP_VERSION.search(_before(text, a, 30)):
        return False
    if value.startswith("+"):
        return 8 <= len(digits) <= 15 and (cue or len(re.findall(r"\d+", value)) >= 3)
    if value.startswith("0"):
        return cue and 9 <= len(digits) <= 12
    nanp = digits[-10:]
    if len(digits) != 10 or nanp[0] in "01" or nanp[3] in "01":
        return False
    if value.startswith("(") or m.group(1) in ("-", "."):
        return True
    return cue  # space-separated: 256 512 1024 is not a phone


# (prefix, lengths) of card issuers' numbers
_ISSUERS = [(r"4", (13, 16, 19)), (r"5[1-5]|2(?:2[2-9]|[3-6]\d|7[01]|720)", (16,)), (r"3[47]", (15,)),
            (r"6011|64[4-9]|65", (16, 17, 18, 19)), (r"35(?:2[89]|[3-8]\d)", (16, 17, 18, 19)),
            (r"30[0-5]|36|38|39", (14, 15, 16, 17, 18, 19)), (r"62", (16, 17, 18, 19))]
ISSUERS = [(re.compile(p), lengths) for p, lengths in _ISSUERS]


def luhn_ok(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def card_ok(text: str, m: re.Match) -> bool:
    value = m.group(0)
    digits = re.sub(r"\D", "", value)
    if not (13 <= len(digits) <= 19 and luhn_ok(digits)):
        return False
    if not any(p.match(digits) and len(digits) in lengths for p, lengths in ISSUERS):
        return False
    groups = [len(g) for g in re.split(r"[ \-]", value)]
    if len(groups) > 1:
        if len(set(re.findall(r"[ \-]", value))) > 1:
            return False
        return groups in ([4, 4, 4, 4], [4, 4, 4, 4, 3], [4, 6, 5], [4, 6, 4], [4, 4, 4, 1]) or \
            (groups[:-1] == [4] * (len(groups) - 1) and 1 <= groups[-1] <= 4)
    return _near(text, m.start(), m.end(), CARD_WORDS, 50, 20)


def _name(text: str, m: re.Match) -> str | None:
    """The whole name a SECRET match's last word ends (`DB_PASSWORD`, `config.password`), or None
    when the word is inside another word (`bypass`)."""
    start = m.start()
    if start and text[start - 1] not in "_.-" and text[start - 1] in NAME_CHARS:
        return None
    at = start
    while at and text[at - 1] in NAME_CHARS:
        at -= 1
    if at and text[at - 1] == "$" and not text[at - 2:at - 1].isalnum():
        at -= 1  # $password (PHP, shell): the name is still a name
    word = re.match(r"(?i)[a-z_]+", text[start:m.end()]).group(0)
    return text[at:start] + word


def secret_value_ok(name: str, value: str, quoted: bool, following: str) -> bool:
    if PLACEHOLDER.match(value) or TEMPLATED.search(value):
        return False
    strong = bool(STRONG_NAME.search(name))
    if not quoted:
        if following.startswith(("(", "[", ".")):
            return False  # a call, an index, a chain: an expression
        if IDENTIFIER_PATH.match(value) and (not re.search(r"\d", value) or "." in value):
            return False  # another variable, settings.SECRET_KEY, getpass.getpass
    if len(value) < (8 if strong else 16):
        return False
    if not strong:  # token = "...", key: ...: only a value that looks random
        classes = sum(bool(re.search(p, value)) for p in (r"[a-z]", r"[A-Z]", r"\d"))
        return classes >= 2 and len(set(value)) >= 8
    return True


# ---- code -----------------------------------------------------------------------------------------

LEXERS = {".py": "python", ".pyi": "python", ".pyw": "python", ".js": "javascript", ".mjs": "javascript",
          ".cjs": "javascript", ".jsx": "javascript", ".ts": "typescript", ".tsx": "typescript", ".java": "java",
          ".kt": "kotlin", ".kts": "kotlin", ".c": "c", ".h": "c", ".cc": "cpp", ".cpp": "cpp", ".cxx": "cpp",
          ".hpp": "cpp", ".hh": "cpp", ".cs": "csharp", ".go": "go", ".rs": "rust", ".rb": "ruby", ".php": "php",
          ".swift": "swift", ".scala": "scala", ".lua": "lua"}


@lru_cache(maxsize=64)
def _lexer(name: str):
    from pygments.lexers import get_lexer_by_name

    options = {"stripnl": False, "stripall": False, "ensurenl": False}
    if name == "php":
        options["startinline"] = True
    return get_lexer_by_name(name, **options)


def code_language(suffix: str | None) -> str | None:
    return LEXERS.get((suffix or "").casefold())


def literal_regions(text: str, language: str) -> list[tuple[int, int]]:
    """[start, end) of the string literals and comments of `text` in `language`, merged."""
    from pygments.token import Comment, String

    regions: list[tuple[int, int]] = []
    # a final newline: some lexers end a comment only at one (Rust's //!); offsets stay those of `text`
    for at, ttype, value in _lexer(language).get_tokens_unprocessed(text + "\n"):
        if value and (ttype in String or ttype in Comment):
            if regions and regions[-1][1] == at:
                regions[-1] = (regions[-1][0], at + len(value))
            else:
                regions.append((at, at + len(value)))
    return regions


def _inside(regions: list[tuple[int, int]], a: int, b: int) -> bool:
    import bisect

    i = bisect.bisect_right(regions, (a, float("inf"))) - 1
    return i >= 0 and regions[i][0] <= a and b <= regions[i][1]


# ---- all together ---------------------------------------------------------------------------------

def find(text: str, types=TYPES, skip_ips=DEFAULT_SKIP_IPS, code_suffix: str | None = None) -> list[Found]:
    """The spans of `text` to redact, sorted, not overlapping (of two overlapping spans, the kind
    earlier in TYPES wins). `code_suffix`: the file suffix of a code document (its own rules)."""
    language = code_language(code_suffix)
    lexed: list = []  # lexing is most of the cost: only for a document with a candidate to place

    def in_code_literal(a: int, b: int) -> bool:
        if language is None:
            return True
        if not lexed:
            lexed.append(literal_regions(text, language))
        return _inside(lexed[0], a, b)

    wanted = set(types)
    found: list[Found] = []
    if "private_key" in wanted:
        found += [Found("private_key", m.start(), m.end()) for m in PRIVATE_KEY.finditer(text)]
    if "api_key" in wanted:
        found += [Found("api_key", m.start(), m.end()) for m in API_KEY.finditer(text)]
    if "secret" in wanted:
        for m in SECRET.finditer(text):
            name = _name(text, m)
            quoted = m.group("quoted") is not None
            group = "quoted" if quoted else "bare"
            a, b = m.span(group)
            if name is None or not secret_value_ok(name, m.group(group), quoted, text[b:b + 1]):
                continue
            if language is None or quoted and in_code_literal(a - 1, b + 1):  # in code, a string literal
                found.append(Found("secret", a, b))
        for m in DEFINE.finditer(text):  # C: #define DB_PASSWORD "..."
            if secret_value_ok(m.group(1), m.group(2), True, ""):
                found.append(Found("secret", *m.span(2)))
        for pattern in (URL_PASSWORD, URL_KEY, CURL_USER, GO_DSN):
            for m in pattern.finditer(text):
                a, b = m.span(1)
                if in_code_literal(a, b) and not PLACEHOLDER.match(m.group(1)) and not TEMPLATED.search(m.group(1)):
                    found.append(Found("secret", a, b))
    if "email" in wanted:
        found += [Found("email", m.start(), m.end()) for m in EMAIL.finditer(text)
                  if in_code_literal(m.start(), m.end()) and email_ok(text, m)]
    if "ip" in wanted:
        skip = frozenset(skip_ips)
        found += [Found("ip", m.start(), m.end()) for m in IP.finditer(text)
                  if in_code_literal(m.start(), m.end()) and ip_ok(text, m, skip)]
    if "phone" in wanted:
        found += [Found("phone", m.start(), m.end()) for m in PHONE.finditer(text)
                  if in_code_literal(m.start(), m.end()) and phone_ok(text, m)]
    if "card" in wanted:
        found += [Found("card", m.start(), m.end()) for m in CARD.finditer(text)
                  if in_code_literal(m.start(), m.end()) and card_ok(text, m)]
    return _resolve(found)


def _resolve(found: list[Found]) -> list[Found]:
    kept: list[Found] = []
    for f in sorted(found, key=lambda f: (PRIORITY[f.kind], f.start, -f.end)):
        if not any(k.start < f.end and f.start < k.end for k in kept):
            kept.append(f)
    return sorted(kept, key=lambda f: f.start)
