#include "train/tensor_list_bytes.h"

#include <cstdint>
#include <cstring>

#include "mantissa/core/error.h"

namespace mantissa::train::detail {
namespace {

// Layout: the count, then per tensor a defined flag and, when defined, the dtype id, the rank,
// each size and the data bytes (sizes and counts as little-endian int64, as the host writes).
void put(std::string& out, int64_t v) { out.append(reinterpret_cast<const char*>(&v), sizeof v); }

class Reader {
 public:
  explicit Reader(std::string_view bytes) : bytes_(bytes) {}
  int64_t next() {
    int64_t v = 0;
    std::memcpy(&v, take(sizeof v), sizeof v);
    return v;
  }
  const char* take(size_t n) {
    MANTISSA_CHECK(n <= bytes_.size() - pos_, "predict",
                   "a rank's gathered predictions end early ({} of {} bytes read, {} more "
                   "wanted)",
                   pos_, bytes_.size(), n);
    const char* p = bytes_.data() + pos_;
    pos_ += n;
    return p;
  }
  bool done() const { return pos_ == bytes_.size(); }
  size_t remaining() const { return bytes_.size() - pos_; }

 private:
  std::string_view bytes_;
  size_t pos_ = 0;
};

}  // namespace

std::string tensor_list_to_bytes(const std::vector<Tensor>& tensors) {
  std::string out;
  put(out, static_cast<int64_t>(tensors.size()));
  for (const Tensor& t : tensors) {
    put(out, t.defined() ? 1 : 0);
    if (!t.defined()) continue;
    const Tensor c = t.cpu().contiguous();
    put(out, static_cast<int64_t>(c.dtype().id()));
    put(out, c.dim());
    for (int64_t s : c.shape()) put(out, s);
    out.append(static_cast<const char*>(c.data_ptr()), c.nbytes());
  }
  return out;
}

std::vector<Tensor> tensor_list_from_bytes(std::string_view bytes) {
  Reader r(bytes);
  const int64_t count = r.next();
  MANTISSA_CHECK(count >= 0 && static_cast<uint64_t>(count) <= bytes.size(), "predict",
                 "a rank's gathered predictions claim {} tensors in {} bytes", count, bytes.size());
  std::vector<Tensor> tensors;
  tensors.reserve(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    if (r.next() == 0) {
      tensors.emplace_back();
      continue;
    }
    const int64_t id = r.next(), dims = r.next();
    MANTISSA_CHECK(id >= 0 && id < DType::kCount && dims >= 0 && dims <= 64, "predict",
                   "a rank's gathered prediction {} has dtype id {} and {} dims", i, id, dims);
    const DType dtype(static_cast<DType::Id>(id));
    // Checked against the bytes left before anything is allocated.
    Shape shape;
    uint64_t bytes_wanted = dtype.itemsize();
    for (int64_t d = 0; d < dims; ++d) {
      shape.push_back(r.next());
      MANTISSA_CHECK(shape.back() >= 0, "predict", "a negative size in prediction {}", i);
      if (bytes_wanted != 0)
        bytes_wanted = static_cast<uint64_t>(shape.back()) <= r.remaining() / bytes_wanted
                           ? bytes_wanted * static_cast<uint64_t>(shape.back())
                           : r.remaining() + 1;
    }
    MANTISSA_CHECK(bytes_wanted <= r.remaining(), "predict",
                   "a rank's gathered prediction {} (shape {}) is larger than the bytes left", i,
                   shape_str(shape));
    Tensor t = empty(shape, dtype);
    // An empty tensor has no storage (a null data pointer, which memcpy must not be given
    // even for 0 bytes: UBSan).
    const char* bytes = r.take(t.nbytes());
    if (t.nbytes() > 0) std::memcpy(t.data_ptr(), bytes, t.nbytes());
    tensors.push_back(std::move(t));
  }
  MANTISSA_CHECK(r.done(), "predict", "a rank's gathered predictions have bytes left over");
  return tensors;
}

}  // namespace mantissa::train::detail
