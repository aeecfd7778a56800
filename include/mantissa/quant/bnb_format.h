#pragma once
// bitsandbytes' serialized form of a 4-bit tensor (QuantState.as_dict(packed=True), what
// Linear4bit writes into a state dict): next to the packed `weight` (uint8 [(n+1)/2, 1]),
// `weight.absmax`, `weight.quant_map`, with double quantization `weight.nested_absmax` and
// `weight.nested_quant_map`, and `weight.quant_state.bitsandbytes__nf4` (or __fp4): a uint8
// tensor holding the UTF-8 bytes of Python's json.dumps of {quant_type, blocksize, dtype,
// shape[, nested_blocksize, nested_dtype, nested_offset]}. docs/quantization.md.
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "mantissa/core/quantized_tensor.h"

namespace mantissa::quant {

using NamedTensorList = std::vector<std::pair<std::string, Tensor>>;

// The JSON text exactly as Python's json.dumps writes it (", " and ": " separators, floats as
// repr()).
std::string quant_state_json(const QuantizedTensor& q);
// The state-dict suffix of that entry: "quant_state.bitsandbytes__nf4" or "...__fp4".
std::string quant_state_key(FormatId f);
// Whether a state-dict name is such an entry ("<prefix>.quant_state.bitsandbytes__nf4"). Its
// length is that of the JSON text (nested_offset's digits), so it may differ between two files
// of the same layer; Linear4bit takes any length on load.
bool is_quant_state_key(std::string_view name);

// The entries for `prefix` (e.g. "fc.weight"), in bitsandbytes' order: prefix, prefix.absmax,
// prefix.quant_map, [prefix.nested_absmax, prefix.nested_quant_map,]
// prefix.quant_state.bitsandbytes__<type>. The tensors share memory with q.
NamedTensorList to_bnb_tensors(const std::string& prefix, const QuantizedTensor& q);

// Rebuilds a QuantizedTensor from those entries (`lookup(name)` returns an undefined Tensor
// when absent). Throws naming the key for a missing entry, a wrong dtype or size, an
// unreadable or inconsistent quant state, or a quant_map that is not the format's table.
QuantizedTensor from_bnb_tensors(const std::string& prefix,
                                 const std::function<Tensor(const std::string&)>& lookup);

// Python's repr() of a double ("0.1", "1e-05", "2.0", "inf"): json.dumps writes floats so.
std::string python_float_repr(double v);

}  // namespace mantissa::quant
