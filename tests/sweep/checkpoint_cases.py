"""Mutated checkpoints: small clean checkpoints of several kinds, and systematic edits of each.

A kind is a tiny training run (a precision, an optimizer, adapters); its step-2 checkpoint is
the clean file. Each mutation is a function of a parsed file that returns the edited bytes and
its group: header (structure, dtypes, shapes, offsets, names, padding, length), metadata (each
leaf of the trainer state, hyper-parameters, counters, the RNG state), state (values of FP8
scales and amax histories, optimizer state, quantization state, the loss history) or
weight-data (bit flips in a weight's data) and state-plausible (state values that training could
have written: a 0 in a first moment, any 8-bit code), which only a checksum could detect.
"""

import json
import math
import random
import struct
from dataclasses import dataclass

from safetensors_edit import DTYPE_SIZE, Safetensors

MLP = ("--model mlp --hidden 16 --train-subset 256 --batch-size 128 --threads 1 --no-progress-bar "
       "--limit-val-batches 1 --limit-test-batches 1 --seed 1")


@dataclass
class Kind:
    name: str
    flags: str  # the training flags; the clean run adds --max-steps 2, the resume --max-steps 3


def kinds(corpus):
    gpt = ("--model gpt --layers 1 --width 32 --heads 2 --context 16 --batch-size 4 --threads 1 "
           f"--text {corpus} --sample-tokens 0 --eval-interval 1 --warmup-steps 1 "
           "--limit-val-batches 1 --limit-test-batches 1 --no-progress-bar --seed 1")
    return [
        Kind("32-true-adamw", f"{MLP} --precision 32-true --optimizer adamw"),
        Kind("bf16-mixed-adam", f"{MLP} --precision bf16-mixed --optimizer adam"),
        Kind("16-mixed-sgd-scaler", f"{MLP} --precision 16-mixed --optimizer sgd"),
        Kind("transformer-engine", f"{MLP} --precision transformer-engine --optimizer adamw"),
        Kind("nf4-dq-qlora", f"{MLP} --precision nf4-dq --lora-rank 4 --optimizer adamw"),
        Kind("adamw8bit", f"{MLP} --precision 32-true --optimizer adamw8bit"),
        Kind("int8-lora", f"{MLP} --precision int8 --lora-rank 4 --optimizer adam"),
        Kind("bf16-true-master", f"{MLP} --precision bf16-true --master-weights --optimizer adamw"),
        Kind("fp4-lora-adam8bit", f"{MLP} --precision fp4 --lora-rank 4 --optimizer adam8bit"),
        Kind("gpt-bf16-mixed", f"{gpt} --precision bf16-mixed --optimizer adamw"),
    ]


@dataclass
class Mutation:
    group: str  # control, header, metadata, state, weight-data
    label: str
    data: bytes


TRAINER_KEY = "mantissa.trainer"
ALL_DTYPES = list(DTYPE_SIZE) + ["F17", ""]


def _role(name):
    if name.startswith("optimizer."):
        return "optimizer-state"
    if "fp8_" in name:
        return "fp8-state"
    if any(s in name for s in ("absmax", "quant_map", "quant_state", "SCB", "nested")):
        return "quant-state"
    if name.startswith("trainer."):
        return "trainer-state"
    if "lora_" in name:
        return "adapter"
    return "weight"


def _picked_tensors(st):
    """One or two tensors of each role: the header edits are tried on these."""
    picked, seen = [], {}
    for name in st.tensors:
        role = _role(name)
        if seen.get(role, 0) < 2:
            seen[role] = seen.get(role, 0) + 1
            picked.append(name)
    return picked


def header_mutations(st: Safetensors):
    out = [Mutation("control", "unchanged, written again", st.to_bytes())]
    raw = st.to_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = st.header_bytes()
    text_len = len(header.rstrip(b" "))
    nul = header[:text_len] + b"\0" * (len(header) - text_len)
    if nul == header:  # no padding was needed: pad with 8 NULs
        nul = header + b"\0" * 8
    out.append(Mutation("header", "header padded with NUL bytes",
                        struct.pack("<Q", len(nul)) + nul + bytes(st.data)))
    for delta in (-1, 1, 8, -8):
        out.append(Mutation("header", f"header length {delta:+d}", struct.pack("<Q", n + delta) + raw[8:]))
    for value, label in ((0, "0"), (2**63, "2^63"), (len(raw), "the file size")):
        out.append(Mutation("header", f"header length {label}", struct.pack("<Q", value) + raw[8:]))
    for cut, label in ((4, "inside the length"), (8 + n // 2, "inside the header"), (8 + n, "after the header"),
                       (8 + n + len(st.data) // 2, "inside the data"), (len(raw) - 1, "one byte short")):
        out.append(Mutation("header", f"truncated {label}", raw[:cut]))
    out.append(Mutation("header", "8 bytes appended", raw + b"\0" * 8))
    body = raw[8:8 + n]
    out.append(Mutation("header", "header object made a list", raw[:8] + b"[" + body[1:] + raw[8 + n:]))
    i = body.find(b'"dtype"')
    out.append(Mutation("header", "invalid UTF-8 in the header",
                        raw[:8] + body[:i + 1] + b"\xff" + body[i + 2:] + raw[8 + n:]))
    e = st.copy()
    e.metadata = None
    out.append(Mutation("header", "no __metadata__", e.to_bytes()))
    e = st.copy()
    e.metadata = dict(e.metadata or {}, extra="1")
    out.append(Mutation("header", "an extra metadata key", e.to_bytes()))
    return out


def tensor_header_mutations(st: Safetensors, rng: random.Random, limit: int):
    """Header edits of single tensors: the same-size dtype relabels and the same-size reshapes
    (which no size check catches) first, then a sample of the rest, LIMIT in all."""
    every = []
    for name in _picked_tensors(st):
        every += _tensor_header_mutations(st, name)
    subtle = [m for m in every if "transposed" in m.label or "aliasing" in m.label or _same_size_relabel(m.label)]
    rest = [m for m in every if m not in subtle]
    rng.shuffle(rest)
    return (subtle + rest)[:max(limit, len(subtle))]


def _same_size_relabel(label):
    if " relabelled " not in label:
        return False
    a, b = label.split("dtype ", 1)[1].split(" relabelled ")
    return a in DTYPE_SIZE and b in DTYPE_SIZE and DTYPE_SIZE[a] == DTYPE_SIZE[b]


def _tensor_header_mutations(st, name):
    out = []
    entry = st.tensors[name]
    dtype, shape = entry["dtype"], entry["shape"]
    begin, end = entry["data_offsets"]

    def edit(label, fn):
        e = st.copy()
        fn(e)
        out.append(Mutation("header", f"{name}: {label}", e.to_bytes()))

    for d in ALL_DTYPES:
        if d != dtype:
            edit(f"dtype {dtype} relabelled {d or 'empty'}", lambda e, d=d: e.tensors[name].update(dtype=d))
    shapes = {"flattened": [st.numel(name)], "extra dim 1": shape + [1], "scalar": [],
              "first dim +1": [shape[0] + 1] + shape[1:] if shape else [2],
              "dim 0": [0] + shape[1:], "dim -1": [-1] + shape[1:], "huge dims": [2**40, 2**40]}
    if len(shape) == 2 and shape[0] != shape[1]:
        shapes["transposed"] = [shape[1], shape[0]]
    for label, s in shapes.items():
        if s != shape:
            edit(f"shape {shape} made {s}", lambda e, s=s: e.tensors[name].update(shape=s))
    size = end - begin
    others = [t for t in st.tensors if t != name and st.span(t)[1] - st.span(t)[0] == size]
    offsets = {"shifted by one element": [begin + DTYPE_SIZE.get(dtype, 1), end + DTYPE_SIZE.get(dtype, 1)],
               "begin and end swapped": [end, begin], "past the buffer": [len(st.data), len(st.data) + size],
               "negative": [-size, 0], "end short by one": [begin, end - 1], "fractional": [begin + 0.5, end]}
    if others:
        ob, oe = st.span(others[0])
        offsets[f"aliasing {others[0]}"] = [ob, oe]
    for label, o in offsets.items():
        if o != [begin, end]:
            edit(f"data_offsets {label}", lambda e, o=o: e.tensors[name].update(data_offsets=o))

    def rename(e):
        e.tensors = {(k + "x" if k == name else k): v for k, v in e.tensors.items()}

    edit("renamed", rename)
    edit("removed", lambda e: e.tensors.pop(name))
    edit("duplicated under another name", lambda e: e.tensors.update({name + ".extra": dict(entry)}))
    return out


def _leaves(obj, path=()):
    """(path, value) of each scalar in a JSON value; long lists give their first two entries."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _leaves(v, path + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj[:2]):
            yield from _leaves(v, path + (i,))
    else:
        yield path, obj


def _set(obj, path, value, delete=False):
    for p in path[:-1]:
        obj = obj[p]
    if delete:
        del obj[path[-1]]
    else:
        obj[path[-1]] = value


TIMING_KEYS = ("seconds", "samples_per_second")
# Leaves that only a person reads (timings, the paths of the run that wrote the file): an edit
# there cannot change a result, so it is not worth a case.
SKIP_LEAVES = ("epoch_seconds", "epoch_samples_per_second", "epoch_seconds_so_far", "best_model_path",
               "last_model_path", "dirpath", "best_k_models", "version", "run")


def metadata_mutations(st: Safetensors, rng: random.Random, limit: int):
    if not st.metadata or TRAINER_KEY not in st.metadata:
        return []
    state = json.loads(st.metadata[TRAINER_KEY])
    out = []

    def emit(label, new_state, raw_text=None):
        e = st.copy()
        e.metadata[TRAINER_KEY] = raw_text if raw_text is not None else json.dumps(new_state, separators=(",", ":"))
        out.append(Mutation("metadata", label, e.to_bytes()))

    edits = []
    for path, value in _leaves(state):
        if any(str(p) in SKIP_LEAVES for p in path) or path == ("rng",):
            continue
        where = ".".join(str(p) for p in path)
        if isinstance(value, bool):
            candidates = [(not value, "negated"), ("true", "a string")]
        elif isinstance(value, (int, float)):
            candidates = [(value + 1, "+1"), (-1, "-1"), (0, "0"), (1e308, "1e308"), (-value - 0.5, "negative"),
                          (str(value), "a string"), (value * 2 + 0.25, "doubled")]
        elif isinstance(value, str):
            candidates = [("", "empty"), ("bogus", "bogus"), (value + "x", "suffixed")]
            if value in ("bf16", "fp16", "fp32", "bfloat16", "float16", "float32"):
                candidates += [("fp8", "fp8"), ("fp16" if value != "fp16" else "bf16", "other dtype")]
        else:
            candidates = [(0, "null made 0")]
        candidates.append((None, "deleted"))
        for new, how in candidates:
            edits.append((path, where, new, how))
    # Prefer the fields a result depends on; sample the rest down to LIMIT.
    key = ("hyper_parameters", "precision_plugin", "optimizers", "global_step", "epoch", "precision",
           "lr_schedulers", "batches_in_epoch", "accumulate_grad_batches", "module")
    primary = [x for x in edits if str(x[0][0]) in key and x[3] in ("+1", "-1", "0", "bogus", "deleted", "fp8",
                                                                      "other dtype", "negated", "1e308", "a string")]
    rest = [x for x in edits if x not in primary]
    rng.shuffle(rest)
    chosen = (primary + rest)[:limit]
    for path, where, new, how in chosen:
        s = json.loads(st.metadata[TRAINER_KEY])
        try:
            _set(s, path, new, delete=new is None)
        except (KeyError, IndexError, TypeError):
            continue
        emit(f"{where} {how}" + ("" if new is None else f" ({json.dumps(new)})"), s)
    # The RNG state: one digit changed, a number dropped, a word inside.
    if "rng" in state and isinstance(state["rng"], str):
        words = state["rng"].split()
        for i in (1, len(words) // 2, len(words) - 1):
            w = list(words)
            w[i] = str(int(w[i]) ^ 1) if w[i].isdigit() else "1"
            s = dict(state, rng=" ".join(w))
            emit(f"rng word {i} with its lowest bit flipped", s)
        emit("rng last word dropped", dict(state, rng=" ".join(words[:-1])))
        emit("rng with a word that is no number", dict(state, rng=" ".join(words[:-1] + ["x"])))
    text = st.metadata[TRAINER_KEY]
    emit("trainer state truncated", None, raw_text=text[: len(text) // 2])
    emit("trainer state not JSON", None, raw_text="not json")
    emit("trainer state an empty object", {})
    return out


STATE_VALUES = [(float("nan"), "NaN"), (float("inf"), "+inf"), (float("-inf"), "-inf"), (0.0, "0"),
                (-1.0, "-1"), (1e30, "1e30")]


def _impossible(name, value):
    """Whether VALUE cannot be in tensor NAME of a trained file: NaN and inf nowhere but in the
    loss history (which records NaN for a step without a loss), a scale is above 0, a second
    moment, an amax and an absmax are not negative. Other values (0 in a first moment, 1e30
    anywhere) could have been trained, and only a checksum could tell."""
    if "step_losses" in name:
        return math.isinf(value)  # NaN: a step without a loss; a custom module's loss may be < 0
    if math.isnan(value) or math.isinf(value):
        return True
    if "fp8_scale" in name:
        return value <= 0
    if any(s in name for s in ("exp_avg_sq", "amax", "absmax")):
        return value < 0
    return False


def _family(name):
    """A tensor's name without its indices: optimizer.0.state.3.exp_avg -> optimizer.state.exp_avg."""
    return ".".join(p for p in name.split(".") if not p.isdigit())


def state_mutations(st: Safetensors, rng: random.Random, limit: int, plausible_limit: int):
    """Values written into state tensors: the impossible ones (LIMIT, each family of tensors
    first) and a sample of plausible ones (PLAUSIBLE_LIMIT)."""
    impossible, plausible, per_family = [], [], {}
    for name, entry in st.tensors.items():
        role = _role(name)
        if role not in ("optimizer-state", "fp8-state", "quant-state", "trainer-state"):
            continue
        dtype = entry["dtype"]
        if st.numel(name) == 0:
            continue
        rank = per_family.get(_family(name), 0)
        per_family[_family(name)] = rank + 1
        if dtype in ("F64", "F32", "F16", "BF16"):
            for value, label in STATE_VALUES:
                e = st.copy()
                e.set_element(name, 0, value)
                m = Mutation("state", f"{name}[0] = {label}", e.to_bytes())
                if _impossible(name, value):
                    impossible.append((rank, m))
                else:
                    m.group = "state-plausible"
                    plausible.append(m)
        else:
            # 8-bit codes: any byte is a code that training could have written, but a serialized
            # quantization state (a JSON blob stored as U8) must parse.
            begin, _ = st.span(name)
            for byte in (0x00, 0xFF, 0x80, 0x7F):
                e = st.copy()
                e.data[begin] = byte
                m = Mutation("state", f"{name} byte 0 = 0x{byte:02x}", e.to_bytes())
                if "quant_state" in name:
                    impossible.append((rank, m))
                else:
                    m.group = "state-plausible"
                    plausible.append(m)
    impossible.sort(key=lambda x: x[0])  # stable: the first tensor of each family first
    rng.shuffle(plausible)
    return [m for _, m in impossible[:limit]] + plausible[:plausible_limit]


def weight_flip_mutations(st: Safetensors, rng: random.Random, count: int):
    out = []
    weights = [n for n in st.tensors if _role(n) in ("weight", "adapter") and st.numel(n) > 0]
    for i in range(count):
        name = weights[i % len(weights)]
        begin, end = st.span(name)
        at = rng.randrange(begin, end)
        bit = rng.choice((7, 6, 0))  # sign or top exponent bit of a byte's value, or the lowest bit
        e = st.copy()
        e.data[at] ^= 1 << bit
        out.append(Mutation("weight-data", f"{name}: bit {bit} of data byte {at - begin} flipped", e.to_bytes()))
    return out


def all_mutations(st: Safetensors, seed: int, header_limit=25, metadata_limit=25, state_limit=25,
                  plausible_limit=6, weight_flips=4):
    """Every structural header edit, and up to the given number of each other group."""
    rng = random.Random(seed)
    return (header_mutations(st) + tensor_header_mutations(st, rng, header_limit)
            + metadata_mutations(st, rng, metadata_limit) + state_mutations(st, rng, state_limit, plausible_limit)
            + weight_flip_mutations(st, rng, weight_flips))


def comparable(metrics: dict):
    """The part of a metrics JSON that must not change: everything but timings, memory and paths."""
    out = {}
    for k, v in metrics.items():
        if any(s in k for s in ("second", "memory", "time", "checkpoint", "path")):
            continue
        if isinstance(v, float) and math.isnan(v):
            v = "nan"
        out[k] = v
    return out


CHECKSUMS_KEY = "mantissa.checksums"


def without_checksums(raw: bytes) -> bytes:
    """RAW without its 'mantissa.checksums' metadata entry (a file from before checksums)."""
    try:
        st = Safetensors(raw)
    except (ValueError, struct.error, UnicodeDecodeError):
        return raw  # a mutation that broke the header: nothing to strip
    if not isinstance(st.metadata, dict) or CHECKSUMS_KEY not in st.metadata:
        return raw
    del st.metadata[CHECKSUMS_KEY]
    return st.to_bytes()
