"""amd_isa against LLVM's own MC tests: every assembler input line and every disassembler input word of LLVM's
`llvm/test/MC/AMDGPU` and `llvm/test/MC/Disassembler/AMDGPU` files for gfx11, gfx12, gfx90a, gfx940/942 and gfx950.

    uv run --frozen python benchmarks/llvm_mc_conformance.py fetch            # once: the test files into a cache
    uv run --frozen python benchmarks/llvm_mc_conformance.py run [--files 'gfx11_asm_vop1*'] [--show 5] [--json F]

`fetch` downloads the LLVM source tarball Debian publishes (`llvm-toolchain-21_21.1.8.orig.tar.xz` from
deb.debian.org, a package registry this machine reaches; `--url` names another) and keeps only the two MC test folders,
under `~/.cache/amd-isa/llvm-mc-tests/<version>/` (`--cache`). Nothing of it enters the repository.

`run` reads each file's RUN lines (target, `-mattr`, FileCheck prefixes, whether errors are checked) and, for every
configuration amd_isa models, compares:
- assembler files: each input line assembled by `amd_isa.assemble` against the `encoding: [...]` LLVM's CHECK line
  gives, or against LLVM's rejection where an error prefix's CHECK names that line;
- disassembler files: each input word decoded by `amd_isa.decode_one` and printed, against LLVM's CHECK text (or,
  for an input of several instructions, the one the CHECK names).

Configurations: wave32 with fake16 16-bit syntax on RDNA (`-mattr` empty, `+wavefrontsize32`, `-real-true16`), wave64
on CDNA. Wave64 RDNA and real-true16 runs are counted and reported as not modelled. Lines without an expectation for a
configuration (no CHECK of its prefixes) are not counted. Results per file and overall, the differences grouped by
kind and mnemonic, and a JSON summary line at the end.
"""

from __future__ import annotations

import argparse
import collections
import fnmatch
import json
import os
import re
import shlex
import sys
import tarfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from amd_isa import TARGETS, AmdIsaError, assemble, decode, decode_one

DEFAULT_URL = "http://deb.debian.org/debian/pool/main/l/llvm-toolchain-21/llvm-toolchain-21_21.1.8.orig.tar.xz"
DEFAULT_CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "amd-isa" / "llvm-mc-tests"
FOLDERS = ("llvm/test/MC/AMDGPU/", "llvm/test/MC/Disassembler/AMDGPU/")
FILE_PATTERNS = ("gfx11_*", "gfx12_*", "gfx90a_*", "gfx940_*", "gfx942_*", "gfx950_*",
                 # the CDNA matrix, scratch and DPP files named the other way round
                 "mai-gfx90a*", "mai-gfx94*", "mai-gfx950*", "mai-err-gfx94*", "flat-scratch-gfx94*", "gfx90a-*", "gfx950.txt",
                 "mimg-gfx90a*", "mimg-err-gfx94*")
# -mattr features each architecture family runs in: the rest (wave64 RDNA, real true16) is reported as not modelled
MODELLED_FEATURES = {"rdna": {"+wavefrontsize32", "-wavefrontsize64", "-real-true16"}, "cdna": {"+wavefrontsize64", "-wavefrontsize32"}}


class ConformanceError(Exception):
    """The corpus cannot be fetched or read."""


# ---------------------------------------------------------------------------------------------------------- fetching


def fetch(url: str, cache: Path) -> Path:
    """Download the LLVM source tarball at `url` and keep its AMDGPU MC test folders under cache/<version>/."""
    version = re.search(r"(\d+\.\d+\.\d+)", url.rsplit("/", 1)[-1])
    dest = cache / (version.group(1) if version else "custom")
    if (dest / "done").exists():
        print(f"already fetched: {dest}")
        return dest
    tmp = dest.with_name(dest.name + ".partial")
    tmp.mkdir(parents=True, exist_ok=True)
    kept = 0
    start = time.perf_counter()
    try:
        with urllib.request.urlopen(url, timeout=60) as response, tarfile.open(fileobj=response, mode="r|*") as tar:
            for member in tar:
                name = member.name.split("/", 1)[-1]  # drop the tarball's top folder
                if not member.isfile() or not name.startswith(FOLDERS):
                    continue
                target = tmp / name
                target.parent.mkdir(parents=True, exist_ok=True)
                source = tar.extractfile(member)
                if source is not None:
                    target.write_bytes(source.read())
                    kept += 1
    except (OSError, tarfile.TarError) as e:
        raise ConformanceError(f"could not fetch {url}: {e}") from None
    if kept == 0:
        raise ConformanceError(f"{url} holds no {FOLDERS[0]} files")
    (tmp / "done").write_text(url + "\n")
    tmp.rename(dest)
    print(f"kept {kept} test files from {url} in {time.perf_counter() - start:.0f} s: {dest}")
    return dest


def corpus_dir(cache: Path) -> Path:
    """The newest fetched corpus under cache."""
    found = sorted(p for p in cache.glob("*") if (p / "done").exists()) if cache.exists() else []
    if not found:
        raise ConformanceError(f"no LLVM MC tests under {cache}: run `{Path(__file__).name} fetch` first")
    return found[-1]


# ----------------------------------------------------------------------------------------------------------- parsing


@dataclass
class Config:
    """One target + feature set of a test file: the FileCheck prefixes of its output runs and of its error runs."""

    target: str
    features: frozenset
    disassemble: bool = False
    output_prefixes: list = field(default_factory=list)
    error_prefixes: list = field(default_factory=list)

    @property
    def family(self) -> str:
        return "cdna" if TARGETS[self.target] == "cdna" else "rdna"

    @property
    def modelled(self) -> bool:
        return self.features <= MODELLED_FEATURES[self.family]

    @property
    def name(self) -> str:
        return self.target + ("" if not self.features else " " + ",".join(sorted(self.features)))


_CHECK = re.compile(r"^\s*(?://|;|#)\s*([A-Za-z0-9_-]+?)(-NEXT|-SAME|-NOT|-EMPTY|-DAG|-LABEL)?:(.*)$")
_LINE_REF = re.compile(r"\[\[@LINE([+-]\d+)?\]\]")
_ENCODING = re.compile(r"encoding:\s*\[([^\]]*)\]")
_BARE_ENCODING = re.compile(r"^\[((?:0x[0-9a-fA-F]{1,2},?\s*)+)\]$")  # `// GFX11: [0x00,0x01]`: bytes without text
# a disassembler input: bytes, bare (`0x08 0x40`) or bracketed as newer files write them (`[0x08,0x40]`)
_HEX_WORDS = re.compile(r"^\s*\[?\s*(0x[0-9a-fA-F]{1,2}[\s,]*)+\]?\s*$")


def run_lines(text: str) -> list[str]:
    """The RUN commands of a test file, continuation lines joined."""
    runs, pending = [], ""
    for line in text.splitlines():
        m = re.match(r"^\s*(?://|;|#)\s*RUN:(.*)$", line)
        if not m:
            continue
        part = m.group(1).strip()
        if part.endswith("\\"):
            pending += part[:-1] + " "
            continue
        runs.append(pending + part)
        pending = ""
    return runs


def parse_configs(text: str) -> dict[tuple, Config]:
    """The configurations of a test file's RUN lines (llvm-mc piped to FileCheck; other pipelines are skipped)."""
    configs: dict[tuple, Config] = {}
    for run in run_lines(text):
        stages = [s.strip() for s in run.split("|")]
        if len(stages) != 2 or "llvm-mc" not in stages[0] or not stages[1].startswith("FileCheck"):
            continue
        try:
            mc, check = shlex.split(stages[0]), shlex.split(stages[1])
        except ValueError:
            continue
        target, features, triple = None, [], None
        for tok in mc:
            if tok.startswith(("-mcpu=", "--mcpu=")):
                target = tok.split("=", 1)[1]
            elif tok.startswith(("-mattr=", "--mattr=")):
                features += [f for f in tok.split("=", 1)[1].split(",") if f]
            elif tok.startswith(("-triple=", "--triple=", "-arch=")):
                triple = tok.split("=", 1)[1]
        if target not in TARGETS or (triple or "amdgcn").split("-")[0] != "amdgcn":
            continue
        prefixes = []
        for tok in check:
            if tok.startswith(("--check-prefix=", "-check-prefix=", "--check-prefixes=", "-check-prefixes=")):
                prefixes += tok.split("=", 1)[1].split(",")
        prefixes = prefixes or ["CHECK"]
        errors = "2>&1" in stages[0] or stages[0].endswith("2>&1")
        shows = "-show-encoding" in mc or "--show-encoding" in mc or "-disassemble" in mc or "--disassemble" in mc
        # +wavefrontsize32 restates RDNA's default; both spellings of the same run are one configuration
        feats = frozenset(f for f in features if not (TARGETS[target] != "cdna" and f == "+wavefrontsize32"))
        key = (target, feats)
        config = configs.setdefault(key, Config(target, feats))
        config.disassemble |= "-disassemble" in mc or "--disassemble" in mc
        if errors:
            config.error_prefixes += [p for p in prefixes if p not in config.error_prefixes]
        if shows:
            config.output_prefixes += [p for p in prefixes if p not in config.output_prefixes]
    return configs


@dataclass
class Case:
    """One input line of a test file with the CHECK lines that belong to it (prefix -> texts)."""

    lineno: int
    text: str
    checks: dict = field(default_factory=lambda: collections.defaultdict(list))


def parse_cases(text: str, prefixes: set[str], disassembler: bool) -> list[Case]:
    """The input lines (instructions, or hex words for the disassembler) and their CHECK lines. Files put a line's
    CHECKs after it (update_mc_test_checks.py) or, in older files, before it: whichever comes first in the file
    decides. A CHECK naming [[@LINE+-N]] belongs to that line; -SAME lines continue the previous CHECK."""
    items: list = []  # Case, or (prefix, kind, body) in file order
    by_line: dict[int, Case] = {}
    for lineno, raw in enumerate(text.splitlines(), 1):
        m = _CHECK.match(raw)
        if m and m.group(1) in prefixes:
            prefix, kind, body = m.group(1), m.group(2), m.group(3).strip()
            if kind in ("-NOT", "-EMPTY", "-DAG", "-LABEL"):
                continue
            if ref := _LINE_REF.search(body):
                items.append((prefix, "@", body, lineno + int(ref.group(1) or 0)))
            else:
                items.append((prefix, kind, body, None))
            continue
        stripped = raw.strip()
        if not stripped or stripped.startswith(("//", ";", "#")):
            continue
        if disassembler:
            words = re.split(r"#|//", stripped, maxsplit=1)[0].strip()
            if not _HEX_WORDS.match(words):
                continue
            case = Case(lineno, words.strip("[] "))
        elif stripped.startswith(".") or re.match(r"^[A-Za-z_.$][\w.$]*:\s*$", stripped):
            continue
        else:
            case = Case(lineno, re.split(r"//|;", stripped, maxsplit=1)[0].strip())
        items.append(case)
        by_line[lineno] = case
    first_case = next((i for i, x in enumerate(items) if isinstance(x, Case)), None)
    first_check = next((i for i, x in enumerate(items) if not isinstance(x, Case) and x[1] != "@"), None)
    checks_before = first_case is not None and first_check is not None and first_check < first_case
    cases = [x for x in items if isinstance(x, Case)]
    current: Case | None = None
    last: tuple[Case, str] | None = None
    upcoming = iter(cases)
    next_case = next(upcoming, None)
    for x in items:
        if isinstance(x, Case):
            current = x
            if checks_before:
                next_case = next(upcoming, None)
            continue
        prefix, kind, body, ref_line = x
        if kind == "@":
            if ref_line in by_line:
                by_line[ref_line].checks[prefix].append(body)
            continue
        if kind == "-SAME" and last is not None and last[1] == prefix:
            last[0].checks[prefix][-1] += " " + body
            continue
        owner = next_case if checks_before else current
        if owner is not None:
            owner.checks[prefix].append(body)
            last = (owner, prefix)
    return cases


# ------------------------------------------------------------------------------------------------------- comparing


@dataclass
class Outcome:
    # "agree", "explained" (a difference with a reason, see EXPLAINED), "differ" (other bytes / text), "rejected" (LLVM
    # accepts), "accepted" (LLVM rejects), "crash"
    kind: str
    line: str
    expected: str = ""
    got: str = ""
    reason: str = ""

    @property
    def mnemonic(self) -> str:
        return self.line.split()[0] if self.line.split() else ""

    @property
    def llvm_rejects(self) -> bool:
        return self.expected in ("error", "invalid")


def _hex(data: bytes) -> str:
    return "[" + ",".join(f"0x{b:02x}" for b in data) + "]"


def _expected_encoding(case: Case, config: Config) -> bytes | None:
    for p in config.output_prefixes:
        for body in case.checks.get(p, ()):
            if m := (_ENCODING.search(body) or _BARE_ENCODING.match(body.strip())):
                try:
                    return bytes(int(x, 16) for x in m.group(1).replace(",", " ").split())
                except ValueError:
                    return None
    return None


def _expects_error(case: Case, config: Config) -> bool:
    return any("error:" in body for p in config.error_prefixes for body in case.checks.get(p, ()))


def check_asm(case: Case, config: Config) -> Outcome | None:
    expected = _expected_encoding(case, config)
    rejects = expected is None and _expects_error(case, config)
    if expected is None and not rejects:
        return None
    try:
        got = assemble(case.text, config.target)
    except AmdIsaError as e:
        return Outcome("agree" if rejects else "rejected", case.text, _hex(expected) if expected else "error", str(e).splitlines()[0])
    except Exception as e:  # noqa: BLE001 - a crash is a finding, reported with its type
        return Outcome("crash", case.text, _hex(expected) if expected else "error", f"{type(e).__name__}: {e}")
    if rejects:
        return Outcome("accepted", case.text, "error", _hex(got))
    return Outcome("agree" if got == expected else "differ", case.text, _hex(expected), _hex(got))


def _normalize(text: str) -> str:
    text = _ENCODING.sub("", text).split(";")[0]
    return re.sub(r"\s+", " ", re.sub(r"\s*,\s*", ", ", text)).strip()


def _matches(expected: str, got: str) -> bool:
    if "{{" not in expected:
        return expected == got
    parts = re.split(r"\{\{(.*?)\}\}", expected)
    pattern = "".join(re.escape(p) if i % 2 == 0 else f"(?:{p})" for i, p in enumerate(parts))
    return re.fullmatch(pattern, got) is not None


_INVALID_OPERAND = re.compile(r"/\*Invalid immediate\*/|/\*Invalid register, operand has '(?![^']*_Lo128')")


def check_disasm(case: Case, config: Config) -> Outcome | None:
    bodies = [body for p in config.output_prefixes for body in case.checks.get(p, ())]
    if not bodies:
        return None
    expected = _normalize(bodies[0])
    # LLVM also flags a word it prints but whose operand the instruction cannot take (an SGPR or a constant where only
    # VGPRs go): such text does not assemble, so the word counts as one LLVM rejects. Its fake16 printer's
    # `/*Invalid register, operand has 'VGPR_32_Lo128' ...*/` is a printer limitation instead (see _high_half)
    invalid = "invalid instruction encoding" in bodies[0] or bool(_INVALID_OPERAND.search(bodies[0]))
    data = bytes(int(x, 16) for x in case.text.replace(",", " ").split())
    try:
        got = _normalize(str(decode_one(data, config.target)))
        if not _matches(expected, got) and (rest := _later_instructions(data, config.target)):
            # an input of several instructions prints several lines; the CHECK may name a later one (FileCheck skips
            # the lines before it)
            got = next((text for text in rest if _matches(expected, text)), got)
    except AmdIsaError as e:
        if invalid:
            return Outcome("agree", case.text, "invalid", str(e).splitlines()[0])
        return Outcome("rejected", case.text, expected, str(e).splitlines()[0])
    except Exception as e:  # noqa: BLE001
        return Outcome("crash", case.text, expected, f"{type(e).__name__}: {e}")
    if invalid:
        return Outcome("accepted", case.text, "invalid", got)
    if _matches(expected, got):
        return Outcome("agree", case.text, expected, got)
    if (real := _skipped_dpp_word(case, config, bodies[0], data)) is not None:
        if _matches(real, got):
            return Outcome("explained", case.text, expected, got, SKIPPED_DPP)
        return Outcome("differ", case.text, real, got)
    reasons = []
    e, g = expected, got
    for reason, rewrite in EXPLAINED:
        e2, g2 = rewrite(e, g, config)
        if (e2, g2) != (e, g):
            reasons.append(reason)
            e, g = e2, g2
    if reasons and _matches(e, g):
        return Outcome("explained", case.text, expected, got, "; ".join(reasons))
    return Outcome("differ", case.text, expected, got)


def _later_instructions(data: bytes, target: str) -> list[str]:
    """The texts of the instructions after the first in `data` (empty when it is one instruction or does not decode)."""
    try:
        insts = decode(data, target)
    except AmdIsaError:
        return []
    return [_normalize(str(i)) for i in insts[1:]]


_F16_INLINE_BITS = {"0x3800": "0.5", "0xb800": "-0.5", "0x3c00": "1.0", "0xbc00": "-1.0", "0x4000": "2.0", "0xc000": "-2.0",
                    "0x4400": "4.0", "0xc400": "-4.0"}


def _fake16(config: Config) -> bool:
    return "-real-true16" in config.features


def _high_half(e: str, g: str, config: Config) -> tuple[str, str]:
    if not _fake16(config):
        return e, g
    return re.sub(r"v(\d+)/\*Invalid register[^*]*\*/", lambda m: f"v{int(m.group(1)) - 128}.h" if int(m.group(1)) >= 128 else m.group(0), e), g


def _dropped_op_sel(e: str, g: str, config: Config) -> tuple[str, str]:
    if not _fake16(config) or "op_sel:" in e:
        return e, g
    return e, re.sub(r" op_sel:\[[^\]]*\]", "", g)


def _f16_bits(e: str, g: str, config: Config) -> tuple[str, str]:
    return re.sub(r"(?<![\w.])0x[0-9a-f]{4}\b", lambda m: _F16_INLINE_BITS.get(m.group(0), m.group(0)), e), g


SKIPPED_DPP = ("LLVM's fake16 decoder does not decode a DPP word that names a high half; it decodes the word's last dword "
               "alone. Ours prints the word as LLVM's real-true16 run of the same file does (compared with that CHECK line)")


def _skipped_dpp_word(case: Case, config: Config, body: str, data: bytes) -> str | None:
    """When a fake16 CHECK line decodes only the tail of the input word (its encoding is not the input's), the same
    file's real-true16 text for the word (low halves unsuffixed, as fake16 syntax writes them), else None."""
    if not _fake16(config) or not (m := _ENCODING.search(body)):
        return None
    encoding = bytes(int(x, 16) for x in m.group(1).replace(",", " ").split())
    if encoding == data or not data.endswith(encoding):
        return None
    real = next((texts[0] for prefix, texts in case.checks.items() if "REAL16" in prefix and texts), None)
    return None if real is None else re.sub(r"(v\d+)\.l\b", r"\1", _normalize(real))


def _r128_descriptor(e: str, g: str, config: Config) -> tuple[str, str]:
    if " r128" not in e:
        return e, g
    return re.sub(r"s\[(\d+):(\d+)\]", lambda m: m.group(0) if int(m.group(2)) - int(m.group(1)) != 7 or
                  f"s[{m.group(1)}:{int(m.group(1)) + 3}]" not in g else f"s[{m.group(1)}:{int(m.group(1)) + 3}]", e, count=1), g


def _untyped_format(e: str, g: str, config: Config) -> tuple[str, str]:
    if not e.startswith("buffer_") or " format:" in e:
        return e, g
    return e, re.sub(r" format:\[[^\]]*\]", "", g)


# Differences with a reason: LLVM's text is lossy or not re-assemblable there, ours names the same bits and
# re-assembles to the same bytes. Each rewrites LLVM's text or ours; a line counts as explained only if the rewritten
# texts then agree.
EXPLAINED = [
    ("LLVM's fake16 printer cannot name a high half (prints v<N+128> /*Invalid register*/; ours v<N>.h)", _high_half),
    ("LLVM's fake16 printer drops op_sel on 16-bit operands (ours prints it; the bits are in the encoding)", _dropped_op_sel),
    ("LLVM prints an f16 inline constant of a 16-bit integer operand as its bits (0x3800), which its assembler then "
     "encodes as a literal; ours prints 0.5, which re-assembles to the same bytes", _f16_bits),
    ("LLVM prints an r128 image's resource as 8 SGPRs (its own test says FIXME: r128 assumes a 128-bit RSRC); ours names "
     "the 4 it reads, and both assemble to the same bytes", _r128_descriptor),
    ("LLVM leaves out the format field of an untyped gfx12 buffer op (its assembler writes format 1 there); ours prints it "
     "when it is not 1, so the text re-assembles to the same bytes", _untyped_format),
]


@dataclass
class FileResult:
    path: str
    config: str
    modelled: bool
    outcomes: list


def run_file(path: Path) -> list[FileResult]:
    text = path.read_text(errors="replace")
    disassembler = "Disassembler" in path.parts
    configs = parse_configs(text)
    prefixes = {p for c in configs.values() for p in c.output_prefixes + c.error_prefixes}
    cases = parse_cases(text, prefixes, disassembler)
    results = []
    for config in configs.values():
        if config.disassemble != disassembler:
            continue
        if not config.modelled:
            count = sum(1 for c in cases if any(c.checks.get(p) for p in config.output_prefixes + config.error_prefixes))
            results.append(FileResult(str(path), config.name, False, [Outcome("not-modelled", "")] * count))
            continue
        check = check_disasm if disassembler else check_asm
        outcomes = [o for c in cases if (o := check(c, config)) is not None]
        results.append(FileResult(str(path), config.name, True, outcomes))
    return results


def select_files(root: Path, patterns: list[str]) -> list[Path]:
    files = []
    for folder in FOLDERS:
        for p in sorted((root / folder).glob("*")):
            if p.suffix in (".s", ".txt") and any(fnmatch.fnmatch(p.name, pat) for pat in FILE_PATTERNS) and \
                    (not patterns or any(fnmatch.fnmatch(p.name, pat) for pat in patterns)):
                files.append(p)
    return files


def report(results: list[FileResult], root: Path, show: int) -> dict:
    print(f"{'file':<48s} {'configuration':<34s} {'lines':>6s} {'agree':>6s} {'%':>6s}  explained differ rejected accepted crash")
    classes = collections.Counter()
    examples: dict[tuple, list] = collections.defaultdict(list)
    reasons = collections.Counter()
    outcomes: dict[str, list] = {"asm": [], "dasm": []}
    not_modelled = 0
    for r in results:
        name = str(Path(r.path).relative_to(root / "llvm/test/MC"))
        if not r.modelled:
            not_modelled += len(r.outcomes)
            continue
        n = len(r.outcomes)
        c = collections.Counter(o.kind for o in r.outcomes)
        side = "dasm" if "Disassembler" in r.path else "asm"
        outcomes[side] += r.outcomes
        pct = 100.0 * c["agree"] / n if n else 100.0
        counts = f"{c['explained']:9d} {c['differ']:6d} {c['rejected']:8d} {c['accepted']:8d} {c['crash']:5d}"
        print(f"{name:<48s} {r.config:<34s} {n:6d} {c['agree']:6d} {pct:6.1f}  {counts}")
        for o in r.outcomes:
            if o.kind == "explained":
                reasons[(side, o.reason)] += 1
            elif o.kind != "agree":
                key = (side, o.kind, o.mnemonic)
                classes[key] += 1
                if len(examples[key]) < show:
                    examples[key].append((name, o))
    print()
    summary: dict = {"bench": "llvm_mc_conformance"}
    for side, title in (("asm", "assembler"), ("dasm", "disassembler")):
        valid = [o for o in outcomes[side] if not o.llvm_rejects]
        invalid = [o for o in outcomes[side] if o.llvm_rejects]
        c = collections.Counter(o.kind for o in valid)
        agree_invalid = sum(o.kind == "agree" for o in invalid)
        if not valid and not invalid:
            continue
        print(f"{title}: lines LLVM accepts: {c['agree']}/{len(valid)} agree ({100.0 * c['agree'] / max(len(valid), 1):.2f}%), "
              f"{c['explained']} differ with a reason ({100.0 * (c['agree'] + c['explained']) / max(len(valid), 1):.2f}% together), "
              f"{c['differ']} differ, {c['rejected']} rejected by us, {c['crash']} crashes")
        if invalid:
            print(f"{title}: lines LLVM rejects: {agree_invalid}/{len(invalid)} rejected by us too")
        summary.update({f"{side}_valid": len(valid), f"{side}_agree": c["agree"], f"{side}_explained": c["explained"],
                        f"{side}_differ": c["differ"], f"{side}_rejected": c["rejected"], f"{side}_crashes": c["crash"],
                        f"{side}_invalid": len(invalid), f"{side}_invalid_rejected": agree_invalid})
    print(f"{not_modelled} lines in configurations not modelled (wave64 RDNA, real-true16)")
    if reasons:
        print("\ndifferences with a reason:")
        for (side, reason), count in reasons.most_common():
            print(f"  {count:6d}  {side:4s} {reason}")
    if show:
        print("\ndifferences by kind and mnemonic (most frequent first):")
        for (side, kind, mnemonic), count in classes.most_common(60):
            print(f"  {count:6d}  {side:4s} {kind:8s} {mnemonic}")
            for name, o in examples[(side, kind, mnemonic)]:
                print(f"          {name}: {o.line!r}\n            llvm: {o.expected}\n            ours: {o.got}")
    summary.update({"not_modelled": not_modelled, "corpus": str(root)})
    print(json.dumps(summary))
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    f = sub.add_parser("fetch", help="download LLVM's AMDGPU MC tests into the cache")
    f.add_argument("--url", default=DEFAULT_URL)
    f.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    r = sub.add_parser("run", help="compare amd_isa with the cached tests")
    r.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    r.add_argument("--files", nargs="*", default=[], help="file-name patterns (default: every gfx11/12/90a/940/942/950 file and the mai-gfx9* ones)")
    r.add_argument("--show", type=int, default=0, help="examples to print per class of difference")
    r.add_argument("--json", type=Path, help="also write every non-agreeing line here")
    args = parser.parse_args(argv)
    try:
        if args.command == "fetch":
            fetch(args.url, args.cache)
            return 0
        root = corpus_dir(args.cache)
        results = [res for path in select_files(root, args.files) for res in run_file(path)]
        if not results:
            raise ConformanceError(f"no test file under {root} matches {args.files}")
        report(results, root, args.show)
        if args.json:
            rows = [{"file": r.path, "config": r.config, "kind": o.kind, "line": o.line, "llvm": o.expected, "ours": o.got, "reason": o.reason}
                    for r in results if r.modelled for o in r.outcomes if o.kind != "agree"]
            args.json.write_text("\n".join(json.dumps(row) for row in rows) + "\n")
    except ConformanceError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
