"""Bad command lines and configs, generated from each command's --help.

Every flag that a command's --help lists gets each bad value that fits its type, on a base
command line of that command that is valid and quick. Each case says whether the value must be
refused ("reject") or may be taken ("either": a negative count that means "none", a text that
is any text); either way it must not crash or run without bound, and a refusal must name the
flag as typed.
"""

import json
import re
import subprocess
from dataclasses import dataclass, field

# Commands whose flags the sweep walks, and their help's subcommand name.
COMMANDS = ["train", "eval", "bench", "compare", "plan", "finetune", "generate", "info"]

# Text flags whose value is parsed (a number, a size, a list or one of fixed words): nonsense
# in them must be refused.
PARSED_TEXT = {
    "model", "pool", "precision", "accelerator", "float32-matmul-precision", "amp-backend",
    "amp-level", "amp-loss-scale", "fp8-format", "fp8-amax-history-len", "fp8-amax-compute-algo",
    "fp8-margin", "quant-dtype", "optimizer", "lr-schedule", "gradient-clip-algorithm", "logger",
    "profiler", "early-stopping-mode", "checkpoint-mode", "strategy", "precisions", "memory",
    "memory-limit", "max-time", "limit-train-batches", "limit-val-batches", "limit-test-batches",
    "val-check-interval", "overfit-batches", "hidden", "lr-find-range", "devices",
    "early-stopping-monitor", "checkpoint-monitor", "quant-ignore", "fp8-exclude",
    "optim-bits-32", "lora-targets",
}
# Text flags for which an empty value is a value (an empty prompt starts the sample from a newline).
EMPTY_OK = {"sample-prompt"}
# Parsed text flags whose value may be negative (TransformerEngine's margin is any integer).
SIGNED_TEXT = {"fp8-margin"}
# Counts of work: int-max there asks for a run that takes for ever, which is no fault as long
# as its memory stays bounded ("long-as-asked").
WORK_COUNTS = {"epochs", "max-steps", "min-epochs", "min-steps", "steps", "rounds", "timed-steps",
               "untimed-steps", "warmup-steps", "sample-tokens", "max-new-tokens", "lr-find-steps",
               "accumulate-grad-batches", "fast-dev-run", "overfit-batches", "eval-interval"}
# Text flags naming a file or directory that is read.
READ_PATHS = {"config", "text", "data-dir", "init-from", "resume", "checkpoint", "model-dir", "data",
              "adapter"}
DIR_OK = {"text", "data-dir", "model-dir", "adapter"}  # a directory is a valid value
# Text flags naming a file or directory that is written.
WRITE_FILES = {"metrics-json", "save-weights", "lr-find-plot", "json", "html", "predictions"}
WRITE_DIRS = {"checkpoint-dir", "log-dir", "output-dir", "merge-to"}
# Flags left out: the help flag, and switches that start other processes (ddp runs under mpirun).
SKIP = {"help", "version"}


@dataclass
class Flag:
    name: str  # without the dashes
    kind: str  # INT, UINT, FLOAT, TEXT, N|auto or SWITCH
    help: str


@dataclass
class Case:
    group: str  # flag-value, repeated, unknown-flag, precision, config
    argv: list  # after the binary
    expect: str  # reject or either
    names: list  # what a refusal must name (one of them)
    note: str
    stdin: bytes = None
    files: dict = field(default_factory=dict)  # path -> bytes written before the run
    work_count: bool = False  # a huge count of work: a long run is what was asked


def parse_help(binary, command):
    text = subprocess.run([binary, command, "--help"], capture_output=True, text=True,
                          timeout=30).stdout
    flags = []
    for line in text.splitlines():
        m = re.match(r"^  (?:-\w,)?--([\w-]+)(?:,--[\w-]+)*(?:\s+(INT|UINT\S*|FLOAT|TEXT|N\|auto))?"
                     r"(?:=\S+)?(?:\s+(?:REQUIRED\s+)?(.*))?$", line)
        if not m or m.group(1) in SKIP:
            continue
        kind = m.group(2) or "SWITCH"
        kind = "UINT" if kind.startswith("UINT") else kind
        flags.append(Flag(m.group(1), kind, m.group(3) or ""))
    return flags


class Bases:
    """Valid, quick command lines per command and per flag family (gpt:, vit:, fp8, quantized)."""

    def __init__(self, fixtures, corpus, eval_checkpoint, gpt_checkpoint, vit_checkpoint, scratch,
                 lora_checkpoint):
        fx = f"{fixtures}/hf/finetune"
        self.scratch = scratch
        self.corpus = corpus
        self.vit_checkpoint = vit_checkpoint
        # eval's LoRA flags are tried on a checkpoint that has adapters (nf4-dq, rank 4).
        self.lora_eval = f"eval --checkpoint {lora_checkpoint} --threads 1 --limit-test-batches 1"
        self.mlp = ("train --model mlp --hidden 16 --train-subset 256 --batch-size 128 --threads 1 "
                    "--no-progress-bar --max-steps 2 --limit-val-batches 1 --limit-test-batches 1")
        self.gpt = ("train --model gpt --layers 1 --width 32 --heads 2 --context 16 --batch-size 4 "
                    f"--text {corpus} --sample-tokens 0 --max-steps 2 --eval-interval 1 "
                    "--limit-val-batches 1 --limit-test-batches 1 --threads 1 --no-progress-bar")
        self.vit = ("train --model vit --train-subset 64 --batch-size 32 --threads 1 --max-steps 1 "
                    "--no-progress-bar --limit-val-batches 1 --limit-test-batches 1")
        self.by_command = {
            "eval": f"eval --checkpoint {eval_checkpoint} --threads 1 --limit-test-batches 1",
            "bench": ("bench --model mlp --hidden 16 --precisions 32-true --steps 2 --rounds 1 "
                      "--untimed-steps 0 --threads 1 --batch-size 32"),
            "compare": ("compare --model mlp --hidden 16 --precisions 32-true --epochs 1 "
                        "--train-subset 256 --rounds 1 --untimed-steps 0 --timed-steps 1 --threads 1 "
                        "--quiet"),
            "plan": ("plan --model mlp --memory 64MiB --precisions 32-true --hidden 16 "
                     "--max-batch 64 --verify-up-to 64 --threads 1"),
            "finetune": (f"finetune --model-dir {fx}/llama --data {fx}/qa.jsonl --output-dir "
                         f"{scratch}/ft --block-size 16 --batch-size 2 --max-steps 1 "
                         "--eval-interval 1 --threads 1 --no-progress-bar --limit-val-batches 1"),
            "generate": f"generate --model-dir {fx}/llama --prompt hi --max-new-tokens 2 --threads 1",
            "info": "info",
        }
        self.gpt_eval = (f"eval --checkpoint {gpt_checkpoint} --model gpt --text {corpus} "
                         "--threads 1 --limit-test-batches 1 --batch-size 4")

    def for_flag(self, command, flag):
        """The base command line on which FLAG is tried, as a list."""
        h = flag.help
        if command == "train":
            base = self.mlp
            if h.startswith("gpt:") or flag.name in ("sample-prompt", "eval-interval",
                                                     "warmup-steps", "activation-checkpointing"):
                base = self.gpt
            elif h.startswith("vit:"):
                base = self.vit
            elif h.startswith("transformer-engine:"):
                base += " --precision transformer-engine"
            elif h.startswith("nf4/fp4/int8:"):
                base += " --precision nf4"
            elif h.startswith("apex:"):
                base += " --precision 16-mixed --amp-backend apex"
            elif h.startswith("16-true/bf16-true:"):
                base += " --precision bf16-true"
            elif h.startswith("8-bit optimizers:"):
                base += " --optimizer adamw8bit"
            elif flag.name.startswith("lr-find-"):
                base += " --lr-find --lr-find-steps 3"
            base += self.enabling(flag)
            return base.split()
        if command == "eval" and h.startswith("gpt:"):
            return self.gpt_eval.split()
        if command == "eval" and flag.name.startswith("lora-"):
            return self.lora_eval.split()
        base = self.by_command[command]
        if command in ("bench", "compare", "plan", "finetune") and h.startswith("nf4/fp4/int8:"):
            # bench, compare and plan take --precisions; finetune takes --precision.
            base += " --precision nf4 --lora-rank 2" if command == "finetune" else ""
            base = base.replace("--precisions 32-true", "--precisions nf4")
        if command == "plan" and h.startswith("vit:"):
            base = base.replace("--model mlp", "--model vit").replace(" --hidden 16", "")
        if command == "eval" and h.startswith("vit:"):
            base = f"eval --checkpoint {self.vit_checkpoint} --threads 1 --limit-test-batches 1"
        return (base + self.enabling(flag)).split()

    def enabling(self, flag):
        """The flag that FLAG needs to be used at all (unused flags are not all checked)."""
        n = flag.name
        if n in ("lora-alpha", "lora-dropout", "lora-targets"):
            return " --lora-rank 2"
        if n.startswith("early-stopping-") and n != "early-stopping-monitor":
            return " --early-stopping-monitor val_loss"
        if n == "checkpoint-mode" or n == "save-top-k":
            return f" --checkpoint-monitor val_loss --checkpoint-dir {self.scratch}/ck"
        if n in ("log-dir", "log-every-n-steps"):
            return " --logger csv"
        return ""


def with_value(base, flag, value):
    """BASE with --FLAG VALUE (replacing its value when BASE has the flag)."""
    argv = list(base)
    opt = "--" + flag.name
    if flag.kind == "SWITCH":
        argv = [a for a in argv if a != opt]
        return argv + [f"{opt}={value}"]
    if opt in argv:
        i = argv.index(opt)
        argv[i + 1] = value
        return argv
    return argv + [opt, value]


def bad_values(flag, paths):
    """(label, value, expectation) for FLAG's type."""
    long_digits = "1" * 5000
    out = []
    k, n = flag.kind, flag.name
    if k == "SWITCH":
        return [("switch-value", "abc", "reject"), ("switch-number", "2", "reject"),
                ("switch-empty", "", "reject")]
    if k in ("INT", "UINT", "FLOAT", "N|auto"):
        out += [("empty", "", "reject"), ("hex", "0x10", "reject"), ("non-numeric", "abc", "reject"),
                ("nan", "nan", "reject"), ("unicode-digit", "\uff13", "reject"),
                ("long-digits", long_digits, "reject"), ("space-inside", "1 2", "reject"),
                ("comma-decimal", "1,5", "reject")]
        out += [("negative", "-7", "reject" if k == "UINT" else "either"),
                ("inf", "inf", "reject" if k != "FLOAT" else "either")]
        if k in ("INT", "UINT", "N|auto"):
            out += [("fraction", "1.5", "reject"), ("overflow", "99999999999999999999999", "reject"),
                    ("int-max", "2147483647", "either")]
        else:
            out += [("overflow", "1e400", "reject"), ("huge", "1e30", "either"),
                    ("neg-inf", "-inf", "either")]
        return out
    # TEXT
    out.append(("empty", "", "either" if n in EMPTY_OK else "reject"))
    if n in READ_PATHS:
        out += [("missing-file", paths["missing"], "reject"),
                ("directory", paths["dir"], "either" if n in DIR_OK else "reject"),
                ("binary-file", paths["binary"], "reject"),
                ("dev-zero", "/dev/zero", "reject"),
                ("unicode-missing", paths["missing"] + "\u00e9\u20ac", "reject")]
    elif n in WRITE_FILES:
        out += [("directory", paths["dir"], "reject"), ("unwritable", "/proc/nonexistent/x", "reject"),
                ("dev-full", "/dev/full", "reject")]
    elif n in WRITE_DIRS:
        out += [("a-file", paths["binary"], "reject"), ("unwritable", "/proc/nonexistent/x", "reject")]
    elif n in PARSED_TEXT:
        out += [("nonsense", "abc", "reject"), ("unicode", "\u00fc\u20ac\u2603", "reject"),
                ("hex", "0x10", "reject"), ("negative", "-7", "either" if n in SIGNED_TEXT else "reject"),
                ("very-long", "a" * 5000, "reject"), ("nan", "nan", "reject")]
    else:  # free text (a prompt)
        out += [("unicode", "\u00fc\u20ac\u2603", "either"), ("very-long", "a" * 5000, "either"),
                ("control-chars", "a\x01\x7fb", "either")]
    return out


def flag_cases(binary, bases, paths):
    cases = []
    for command in COMMANDS:
        for flag in parse_help(binary, command):
            base = bases.for_flag(command, flag)
            for label, value, expect in bad_values(flag, paths):
                cases.append(Case("flag-value", with_value(base, flag, value), expect,
                                  ["--" + flag.name], f"{command} --{flag.name} {label}",
                                  work_count=flag.name in WORK_COUNTS and label in ("int-max", "huge")))
            if flag.kind != "SWITCH" and ("--" + flag.name) not in base:
                good = {"INT": "1", "UINT": "1", "FLOAT": "1", "N|auto": "1"}.get(flag.kind)
                if good:
                    argv = base + ["--" + flag.name, good, "--" + flag.name, good]
                    cases.append(Case("repeated", argv, "reject", ["--" + flag.name],
                                      f"{command} --{flag.name} given twice"))
    return cases


def unknown_flag_cases(bases):
    cases = []
    for command in COMMANDS:
        base = bases.by_command.get(command, bases.mlp).split()
        for bad in ("--bogus", "--lr-rate=1", "-x", "---max-steps", "stray-positional",
                    "--precision-", "--MAX-STEPS"):
            cases.append(Case("unknown-flag", base + [bad], "reject", [bad.split("=")[0].lstrip("-") or bad],
                              f"{command} unknown {bad}"))
    return cases


BAD_PRECISIONS = ["fp7", "32-truee", "BF16-MIXED", "bf16-mixed ", " 32-true", "nf3", "int4", "fp8",
                  "mixed", "transformer-engine-fp8", "16-mixed,bf16-mixed", "32-true\x00",
                  "te", "float8", "nf4-dq-dq", "int8-inference", "-32-true", "32_true", "bf16_mixed",
                  "\u0033\u0032-true\u200b"]


def precision_cases(bases):
    cases = []
    for p in BAD_PRECISIONS:
        if "\x00" in p:
            continue  # an argument cannot hold a NUL
        for command, base in (("train", bases.mlp), ("eval", bases.by_command["eval"]),
                              ("plan", bases.by_command["plan"]), ("generate", bases.by_command["generate"])):
            argv = base.split()
            flag = "--precisions" if command == "plan" else "--precision"
            if flag == "--precisions" and "," in p:
                continue  # a list of two valid precisions
            if flag in argv:
                argv[argv.index(flag) + 1] = p
            else:
                argv += [flag, p]
            cases.append(Case("precision", argv, "reject", [flag], f"{command} {flag} {p!r}"))
    return cases


def config_cases(binary, bases, scratch):
    """train --config FILE with bad JSON: wrong types for each flag, unknown keys, huge numbers."""
    cases = []
    base = bases.mlp.split()
    n = 0

    def add(content, expect, names, note, extra=(), override=False):
        nonlocal n
        n += 1
        path = f"{scratch}/config-{n}.json"
        argv = list(base)
        if not override:  # the command line would win over the file: leave its flags out
            try:
                keys = json.loads(content) if isinstance(content, str) else {}
            except (ValueError, RecursionError):
                keys = {}
            for key in keys if isinstance(keys, dict) else ():
                if ("--" + key) in argv:
                    i = argv.index("--" + key)
                    del argv[i:i + 2]
        if "config" in names:  # an error in the file as a whole names the file
            names = names + [path]
        cases.append(Case("config", argv + list(extra) + ["--config", path], expect, names, note,
                          files={path: content if isinstance(content, bytes) else content.encode()}))

    for flag in parse_help(binary, "train"):
        if flag.name in ("config",):
            continue
        key = flag.name
        if flag.kind in ("INT", "UINT", "FLOAT"):
            add(json.dumps({key: "abc"}), "reject", [key], f"config {key}: a string")
            add(json.dumps({key: [1]}), "reject", [key], f"config {key}: a list")
            add(json.dumps({key: {"a": 1}}), "reject", [key], f"config {key}: an object")
            add(json.dumps({key: True}), "reject", [key], f"config {key}: a bool")
            add(f'{{"{key}": 1e400}}', "reject", [key, "overflow"], f"config {key}: 1e400")
            if flag.kind != "FLOAT":
                add(json.dumps({key: 1.5}), "reject", [key], f"config {key}: 1.5 for a whole number")
                add(f'{{"{key}": 99999999999999999999999}}', "reject", [key], f"config {key}: beyond int64")
            # Overridden on the command line: the config's value is still checked.
            add(json.dumps({key: "1.5x"}), "reject", [key], f"config {key}: bad, overridden",
                extra=() if ("--" + key) in base else ("--" + key, "1"), override=True)
        elif flag.kind == "SWITCH":
            add(json.dumps({key: "yes"}), "reject", [key], f"config {key}: a string for a switch")
            add(json.dumps({key: 2}), "reject", [key], f"config {key}: 2 for a switch")
        elif flag.kind == "TEXT":
            add(json.dumps({key: [1, 2]}), "reject", [key], f"config {key}: a list")
            add(json.dumps({key: {"a": 1}}), "reject", [key], f"config {key}: an object")
            add(json.dumps({key: None}), "either", [key], f"config {key}: null")
    add(json.dumps({"bogus": 1}), "reject", ["bogus"], "config: unknown key")
    add(json.dumps({"max_steps": 1}), "either", ["max_steps"], "config: snake_case key (docs/cli.md takes it)")
    add(json.dumps({"--lr": 0.1}), "reject", ["--lr"], "config: key with dashes")
    add("[1, 2]", "reject", ["config", "object"], "config: a list, not an object")
    add('{"lr": 0.1', "reject", ["config"], "config: truncated JSON")
    add("", "reject", ["config"], "config: empty file")
    add(b'{"lr": 0.1}\x00\x00', "reject", ["config"], "config: NUL bytes after the object")
    add("[" * 200000 + "]" * 200000, "reject", ["config"], "config: nested 200000 deep")
    add('{"a":' * 100000 + "1" + "}" * 100000, "reject", ["config"], "config: objects nested 100000 deep")
    add('{"lr": 0.1, "lr": 0.2}', "reject", ["lr"], "config: duplicate key")
    add(b'\xef\xbb\xbf{"lr": 0.001}', "either", ["config"], "config: UTF-8 BOM")
    add(b'{"text": "\xff\xfe"}', "reject", ["config"], "config: invalid UTF-8")
    add(json.dumps({"precision": "fp7"}), "reject", ["precision"], "config: bad precision")
    add(json.dumps({"max-steps": 1e30}), "reject", ["max-steps"], "config: max-steps 1e30")
    add(json.dumps({"layers": 100000000, "model": "gpt", "text": bases.corpus}), "reject", ["layers"],
        "config: huge GPT")
    add(json.dumps({"hidden": "100000000"}), "reject", ["hidden"], "config: huge MLP")
    add(json.dumps({"config": "/etc/passwd"}), "reject", ["config"], "config: config inside config")
    return cases


def model_size_cases(bases):
    """Sizes whose model cannot fit: each must be refused before it is built, naming the flag."""
    cases = []
    gpt = bases.gpt.split()
    for flag, value, expect in (("--layers", "100000000", "reject"), ("--width", "10000000", "reject"),
                                ("--context", "100000000", "reject"), ("--heads", "100000000", "reject"),
                                ("--batch-size", "100000000", "either")):
        argv = list(gpt)
        argv[argv.index(flag) + 1] = value
        cases.append(Case("model-size", argv, expect, [flag], f"train gpt {flag} {value}"))
    mlp = bases.mlp.split()
    for value, expect in (("100000000", "reject"), ("100000,100000", "reject"), ("16," * 2000 + "16", "either")):
        argv = list(mlp)
        argv[argv.index("--hidden") + 1] = value
        cases.append(Case("model-size", argv, expect, ["--hidden"], f"train mlp --hidden {value[:30]}"))
    argv = list(mlp)
    argv[argv.index("--batch-size") + 1] = "100000000"
    cases.append(Case("model-size", argv, "either", ["--batch-size"], "train mlp --batch-size 100000000"))
    for cmd in ("plan", "bench"):
        base = bases.by_command[cmd].split()
        bench_gpt = [a if a != "mlp" else "gpt" for a in base if a not in ("--hidden", "16")]
        cases.append(Case("model-size", bench_gpt + ["--layers", "100000000", "--text", bases.corpus]
                          if cmd == "bench" else base[:1] + ["--model", "gpt", "--memory", "1TiB", "--layers",
                                                                "100000000", "--threads", "1"],
                          "either", ["--layers"], f"{cmd} gpt --layers 100000000"))
    return cases
