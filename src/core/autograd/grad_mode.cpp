#include "mantissa/autograd/grad_mode.h"

namespace mantissa {
namespace {
thread_local bool t_grad_enabled = true;
}  // namespace
bool GradMode::is_enabled() { return t_grad_enabled; }
void GradMode::set_enabled(bool enabled) { t_grad_enabled = enabled; }

namespace detail {
template class ScopedSetting<GradModeSetting>;
}  // namespace detail
}  // namespace mantissa
