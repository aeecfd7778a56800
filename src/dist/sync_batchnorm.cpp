#include "mantissa/dist/sync_batchnorm.h"

#include <fmt/format.h>

#include "core/inplace.h"
#include "mantissa/autograd/grad_mode.h"
#include "mantissa/autograd/node.h"
#include "mantissa/nn/replace.h"
#include "mantissa/ops/batch_norm.h"
#include "mantissa/ops/elementwise.h"
#include "mantissa/ops/reduce.h"

namespace mantissa::dist {

Tensor all_reduce_sum(const Tensor& x, std::shared_ptr<Communicator> comm) {
  Tensor y = x.detach().to(kFloat32).contiguous().clone();
  comm->all_reduce(y, ReduceOp::kSum);
  if (!autograd::needs_grad(x)) return y;
  return autograd::record(y, {x}, "AllReduceSumBackward", [comm](const Tensor& g) {
    Tensor total = g.to(kFloat32).contiguous().clone();
    comm->all_reduce(total, ReduceOp::kSum);
    return std::vector<Tensor>{total};
  });
}

SyncBatchNorm2d::SyncBatchNorm2d(const nn::BatchNorm2d& bn, std::shared_ptr<Communicator> comm)
    : Module("SyncBatchNorm2d"),
      num_features_(bn.num_features()),
      options_(bn.options()),
      comm_(std::move(comm)) {
  if (bn.weight.defined()) {
    weight = register_parameter("weight", bn.weight, bn.weight.requires_grad());
    bias = register_parameter("bias", bn.bias, bn.bias.requires_grad());
  }
  if (bn.running_mean.defined()) {
    running_mean = register_buffer("running_mean", bn.running_mean, true);
    running_var = register_buffer("running_var", bn.running_var, true);
    num_batches_tracked = register_buffer("num_batches_tracked", bn.num_batches_tracked);
  }
}

Tensor SyncBatchNorm2d::forward(const Tensor& input) {
  MANTISSA_CHECK(input.dim() == 4 && input.size(1) == num_features_, "SyncBatchNorm2d",
                 "expected an input [N, {}, H, W], got shape {}", num_features_,
                 shape_str(input.shape()));
  if (!is_training() && options_.track_running_stats) {
    return batch_norm(input, running_mean, running_var, weight, bias, false, options_.momentum,
                      options_.eps);
  }
  const int64_t c = num_features_;
  const Tensor x = input.to(kFloat32);
  const double local = static_cast<double>(input.size(0) * input.size(2) * input.size(3));
  const double count = comm_->all_reduce(local, ReduceOp::kSum);
  const Tensor mean = div(all_reduce_sum(sum(x, {0, 2, 3}), comm_), count);
  const Tensor mean_sq = div(all_reduce_sum(sum(mul(x, x), {0, 2, 3}), comm_), count);
  const Tensor var = sub(mean_sq, mul(mean, mean));  // biased, as normalisation uses
  Tensor y =
      mul(sub(x, mean.reshape({1, c, 1, 1})), rsqrt(add(var, options_.eps)).reshape({1, c, 1, 1}));
  if (weight.defined()) {
    y = add(mul(y, weight.to(kFloat32).reshape({1, c, 1, 1})),
            bias.to(kFloat32).reshape({1, c, 1, 1}));
  }
  if (is_training() && options_.track_running_stats) {
    NoGradGuard no_grad;
    const double m = options_.momentum;
    const double unbias = count > 1 ? count / (count - 1) : 1.0;
    mantissa::detail::copy_unchecked(running_mean,
                                     add(mul(running_mean, 1.0 - m), mul(mean.detach(), m)));
    mantissa::detail::copy_unchecked(running_var,
                                     add(mul(running_var, 1.0 - m), mul(var.detach(), m * unbias)));
    mantissa::detail::fill_unchecked(num_batches_tracked, num_batches_tracked.item() + 1);
  }
  return input.dtype() == kFloat32 ? y : y.to(input.dtype());
}

std::string SyncBatchNorm2d::extra_repr() const {
  return fmt::format("{}, eps={}, momentum={}, world_size={}", num_features_, options_.eps,
                     options_.momentum, comm_->world_size());
}

int convert_sync_batchnorm(nn::Module& root, std::shared_ptr<Communicator> comm) {
  return nn::replace_modules(
      root, nn::match_type<nn::BatchNorm2d>(),
      [comm](const std::string&, std::shared_ptr<nn::Module> m) -> std::shared_ptr<nn::Module> {
        return std::make_shared<SyncBatchNorm2d>(static_cast<nn::BatchNorm2d&>(*m), comm);
      });
}

}  // namespace mantissa::dist
