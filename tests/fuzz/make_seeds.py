#!/usr/bin/env python3
"""Small seed inputs for the fuzz targets (scripts/fuzz.sh), made from the committed fixtures.

A fuzzer runs the faster the shorter its inputs, and the fixtures are tens of KB, mostly vocabulary
and tensor data that exercise nothing the first kilobyte does not. So each fixture is shrunk and
keeps its structure:
  tokenizer OUT FILE...   every tokenizer.json with its vocabulary cut to the first ids (and the
                          added tokens), the merges to those of kept tokens, the rest as it is;
  safetensors OUT FILE... every safetensors file with each tensor cut to at most 4 elements
                          (its rank, dtype, name and the metadata kept).
Standard library only.
"""
import json
import os
import struct
import sys

VOCAB_KEPT = 300  # ids below this stay: the byte alphabet of byte-level BPE and a few merges
ITEM_SIZE = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "F8_E4M3": 1, "F8_E5M2": 1, "I64": 8,
             "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1, "U16": 2, "U32": 4, "U64": 8}


def out_name(path):
    return path.strip("./").replace("/", "_")


def shrink_tokenizer(path, out):
    with open(path, encoding="utf-8") as f:
        tok = json.load(f)
    model = tok["model"]
    added = {t["id"] for t in tok.get("added_tokens") or []}
    vocab = {k: v for k, v in model["vocab"].items() if v < VOCAB_KEPT or v in added}
    merges = []
    for m in model.get("merges") or []:
        a, b = m.split(" ", 1) if isinstance(m, str) else m
        if a in vocab and b in vocab and a + b in vocab:
            merges.append(m)
    model["vocab"] = vocab
    model["merges"] = merges
    with open(os.path.join(out, out_name(path)), "w", encoding="utf-8") as f:
        json.dump(tok, f, ensure_ascii=False, separators=(",", ":"))


def shrink_safetensors(path, out):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    body = data[8 + n:]
    new_header, chunks, offset = {}, [], 0
    entries = [(k, v) for k, v in header.items() if k != "__metadata__"]
    for name, info in sorted(entries, key=lambda kv: kv[1]["data_offsets"][0]):
        size = ITEM_SIZE[info["dtype"]]
        count = 1
        shape = []
        for d in info["shape"]:
            keep = min(d, 2) if count * min(d, 2) <= 4 else 1
            shape.append(keep)
            count *= keep
        begin = info["data_offsets"][0]
        chunk = body[begin:begin + count * size]
        new_header[name] = {"dtype": info["dtype"], "shape": shape,
                            "data_offsets": [offset, offset + len(chunk)]}
        chunks.append(chunk)
        offset += len(chunk)
    if "__metadata__" in header:
        new_header["__metadata__"] = header["__metadata__"]
    text = json.dumps(new_header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(os.path.join(out, out_name(path)), "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(chunks))


def main():
    kind, out, files = sys.argv[1], sys.argv[2], sys.argv[3:]
    shrink = {"tokenizer": shrink_tokenizer, "safetensors": shrink_safetensors}[kind]
    for path in files:
        shrink(path, out)


if __name__ == "__main__":
    main()
