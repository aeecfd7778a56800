"""Reads a safetensors file into its parts and writes edited copies (Python standard library only).

A file is an 8-byte little-endian header length N, N bytes of JSON header (padded with spaces
to a multiple of 8), then the tensors' data. The sweep edits the header as a Python object and
writes it back compactly, as mantissa does, so that an unedited round trip gives a file that
loads to the same tensors (the sweep's control case checks this).
"""

import json
import math
import struct

# Bytes per element of each safetensors dtype mantissa reads.
DTYPE_SIZE = {
    "F64": 8, "F32": 4, "F16": 2, "BF16": 2, "F8_E4M3": 1, "F8_E5M2": 1,
    "I64": 8, "I32": 4, "I8": 1, "U8": 1, "BOOL": 1,
}


class Safetensors:
    """The header (tensor entries in file order), the metadata strings and the data buffer."""

    def __init__(self, raw: bytes):
        (length,) = struct.unpack("<Q", raw[:8])
        header = json.loads(raw[8:8 + length])
        self.metadata = header.pop("__metadata__", None)
        self.tensors = header  # name -> {"dtype", "shape", "data_offsets"}; insertion order kept
        self.data = bytearray(raw[8 + length:])

    def header_bytes(self, pad=b" ") -> bytes:
        header = {}
        if self.metadata is not None:
            header["__metadata__"] = self.metadata
        header.update(self.tensors)
        text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode()
        return text + pad * ((-len(text)) % 8)

    def to_bytes(self, pad=b" ") -> bytes:
        header = self.header_bytes(pad)
        return struct.pack("<Q", len(header)) + header + bytes(self.data)

    def copy(self) -> "Safetensors":
        return Safetensors(self.to_bytes())

    # Tensor data access -------------------------------------------------------------------
    def span(self, name):
        begin, end = self.tensors[name]["data_offsets"]
        return begin, end

    def numel(self, name):
        n = 1
        for d in self.tensors[name]["shape"]:
            n *= d
        return n

    def set_element(self, name, index, value):
        """Writes the float VALUE into element INDEX of a float tensor (F64/F32/F16/BF16)."""
        dtype = self.tensors[name]["dtype"]
        begin, _ = self.span(name)
        size = DTYPE_SIZE[dtype]
        at = begin + index * size
        self.data[at:at + size] = encode_float(dtype, value)

    def get_element(self, name, index):
        dtype = self.tensors[name]["dtype"]
        begin, _ = self.span(name)
        size = DTYPE_SIZE[dtype]
        return decode_float(dtype, bytes(self.data[begin + index * size:begin + (index + 1) * size]))


def encode_float(dtype, value) -> bytes:
    if dtype == "F64":
        return struct.pack("<d", value)
    if dtype == "F32":
        return struct.pack("<f", value)
    if dtype == "F16":
        return struct.pack("<e", value) if math.isfinite(value) and abs(value) < 65504 else \
            struct.pack("<H", 0x7E00 if math.isnan(value) else (0x7C00 if value > 0 else 0xFC00))
    if dtype == "BF16":
        return struct.pack("<f", value)[2:]  # the upper half of the float32 (truncation)
    raise ValueError(f"not a float dtype: {dtype}")


def decode_float(dtype, raw: bytes) -> float:
    if dtype == "F64":
        return struct.unpack("<d", raw)[0]
    if dtype == "F32":
        return struct.unpack("<f", raw)[0]
    if dtype == "F16":
        return struct.unpack("<e", raw)[0]
    if dtype == "BF16":
        return struct.unpack("<f", b"\0\0" + raw)[0]
    raise ValueError(f"not a float dtype: {dtype}")


def load(path) -> Safetensors:
    with open(path, "rb") as f:
        return Safetensors(f.read())
