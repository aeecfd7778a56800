#include "mantissa/fp8/autocast.h"

#include <algorithm>
#include <utility>

#include "mantissa/autograd/grad_mode.h"
#include "mantissa/nn/checkpoint.h"

namespace mantissa::fp8 {
namespace {

// What one outermost enabled scope collects.
struct Region {
  std::vector<std::shared_ptr<ScalingState>> forward_states;
  std::shared_ptr<BackwardUpdateGroup> backward;
  // A checkpoint's replay: its casts recompute the first forward's, whose amaxes the forward
  // region's update took already, so its exit updates no scale.
  bool replay = false;
};

struct ThreadState {
  int depth = 0;
  bool enabled = false;
  DelayedScaling recipe;
  std::shared_ptr<Region> region;
};

ThreadState& tls() {
  thread_local ThreadState s;
  return s;
}

void add_unique(std::vector<std::shared_ptr<ScalingState>>& v,
                const std::shared_ptr<ScalingState>& s) {
  if (std::find(v.begin(), v.end(), s) == v.end()) v.push_back(s);
}

// Records the GPU casts' deferred statistics of every state in one transfer.
void resolve_deferred(const std::vector<std::shared_ptr<ScalingState>>& states) {
  std::vector<const ScalingState*> raw;
  raw.reserve(states.size());
  for (const auto& st : states) raw.push_back(st.get());
  ScalingState::resolve_deferred(raw);
}

AmaxReducer& amax_reducer() {
  static AmaxReducer reducer;
  return reducer;
}

// H[0] of `roles` in every state, reduced across ranks by the installed reducer.
void reduce_current_amaxes(const std::vector<std::shared_ptr<ScalingState>>& states,
                           std::initializer_list<Role> roles) {
  const AmaxReducer& reduce = amax_reducer();
  if (!reduce || states.empty()) return;
  std::vector<float> amaxes;
  for (const auto& st : states)
    for (Role r : roles) amaxes.push_back(st->current_amax(static_cast<int>(r)));
  reduce(amaxes.data(), static_cast<int64_t>(amaxes.size()));
  size_t i = 0;
  for (const auto& st : states)
    for (Role r : roles) st->record_amax(static_cast<int>(r), amaxes[i++]);
}

// The forward scales (input, weight) a state's casts used in a checkpointed first forward.
struct SavedScales {
  std::shared_ptr<ScalingState> state;
  float input;
  float weight;
};

// The FP8 state of a checkpointed first forward (nn/checkpoint.h, register_replay_state): the
// region and recipe it ran in and, under delayed scaling, the scales of the states it cast
// with (TransformerEngine's fp8_meta saved for the recompute), which the region's exit updates
// before backward replays the forward.
struct CheckpointedForward {
  bool enabled;
  DelayedScaling recipe;
  std::vector<SavedScales> scales;
};

// The checkpointed first forward running on this thread, which register_fp8_forward adds the
// scales of its states to; null outside one.
constinit thread_local CheckpointedForward* t_first_forward = nullptr;

// Entered around a checkpointed first forward; a nested one ends before its outer one.
class FirstForward {
 public:
  explicit FirstForward(CheckpointedForward* f) : outer_(std::exchange(t_first_forward, f)) {}
  ~FirstForward() { t_first_forward = outer_; }
  FirstForward(const FirstForward&) = delete;
  FirstForward& operator=(const FirstForward&) = delete;

 private:
  CheckpointedForward* outer_;
};

void save_forward_scales(CheckpointedForward& f, const std::shared_ptr<ScalingState>& state) {
  for (const SavedScales& s : f.scales)
    if (s.state == state) return;
  f.scales.push_back({state, state->scale_of(static_cast<int>(Role::kInput)),
                      state->scale_of(static_cast<int>(Role::kWeight))});
}

// Sets the saved forward scales for the replay and puts back those of backward time after it.
// The grad_output scales are backward time's in both runs and are left alone.
class ForwardScalesReplay {
 public:
  explicit ForwardScalesReplay(const std::vector<SavedScales>& saved) {
    for (const SavedScales& s : saved) {
      now_.push_back(swap_in(s));
    }
  }
  ~ForwardScalesReplay() {
    while (!now_.empty()) {
      swap_in(now_.back());
      now_.pop_back();
    }
  }
  ForwardScalesReplay(const ForwardScalesReplay&) = delete;
  ForwardScalesReplay& operator=(const ForwardScalesReplay&) = delete;

 private:
  // Sets s's scales in its state and returns the ones it replaced.
  static SavedScales swap_in(const SavedScales& s) {
    float* scale = s.state->scale.data<float>();
    float& input = scale[static_cast<int>(Role::kInput)];
    float& weight = scale[static_cast<int>(Role::kWeight)];
    const SavedScales replaced{s.state, input, weight};
    input = s.input;
    weight = s.weight;
    return replaced;
  }
  std::vector<SavedScales> now_;
};

// Entered around the replay: the first forward's region and recipe, as a region of its own (the
// forward's has closed by the time backward runs, and a backward run inside another region
// must not join it), with the first forward's scales and no statistics counted a second time.
// The recipe whose casts differ between a forward and its replay refuses to run inside a
// checkpoint (fp8_linear, Recipe::checkpoint_refusal).
class CheckpointReplay {
 public:
  explicit CheckpointReplay(const CheckpointedForward& f)
      : outer_(std::exchange(tls(), ThreadState{})),
        scales_(f.scales),
        autocast_(f.enabled, f.recipe) {
    tls().region->replay = true;
  }
  CheckpointReplay(const CheckpointReplay&) = delete;
  CheckpointReplay& operator=(const CheckpointReplay&) = delete;

 private:
  // Puts back the thread's FP8 state of backward time.
  struct Outer {
    explicit Outer(ThreadState s) : saved(std::move(s)) {}
    ~Outer() { tls() = std::move(saved); }
    Outer(const Outer&) = delete;
    Outer& operator=(const Outer&) = delete;
    ThreadState saved;
  };
  // Destroyed in reverse: the region closes while the scales and the pause hold, then the
  // scales and the thread's state of backward time come back.
  Outer outer_;
  ForwardScalesReplay scales_;
  CastStatsPause no_stats_;
  Fp8Autocast autocast_;
};

void register_checkpoint_replay() {
  nn::register_replay_state(
      {.capture = []() -> std::shared_ptr<void> {
         return std::make_shared<CheckpointedForward>(
             CheckpointedForward{fp8_enabled(), fp8_recipe(), {}});
       },
       .first_forward = [](const std::shared_ptr<void>& captured) -> std::shared_ptr<void> {
         return std::make_shared<FirstForward>(static_cast<CheckpointedForward*>(captured.get()));
       },
       .replay = [](const std::shared_ptr<void>& captured) -> std::shared_ptr<void> {
         return std::make_shared<CheckpointReplay>(
             *static_cast<const CheckpointedForward*>(captured.get()));
       }});
}

// Registered as the program starts, before any checkpoint runs a first forward: one outside
// every FP8 region must replay outside one too, even when backward runs inside a region.
const bool kReplayRegistered = (register_checkpoint_replay(), true);

}  // namespace

void set_amax_reducer(AmaxReducer reducer) { amax_reducer() = std::move(reducer); }

void reduce_amaxes_across_ranks(float* amaxes, int64_t count) {
  const AmaxReducer& reduce = amax_reducer();
  if (reduce && count > 0) reduce(amaxes, count);
}

void BackwardUpdateGroup::run() {
  resolve_deferred(states);
  if (recipe.kind != RecipeKind::kDelayed) return;
  reduce_current_amaxes(states, {Role::kGradOutput});
  const float max = fp8_max(recipe.dtype_of(Role::kGradOutput));
  for (const auto& s : states) s->update(static_cast<int>(Role::kGradOutput), max, recipe);
}

void update_forward_scales(ScalingState& state, const DelayedScaling& recipe) {
  for (Role r : {Role::kInput, Role::kWeight}) {
    state.update(static_cast<int>(r), fp8_max(recipe.dtype_of(r)), recipe);
  }
}

struct Fp8Autocast::Saved {
  bool enabled;
  DelayedScaling recipe;
};

Fp8Autocast::Fp8Autocast(bool enabled, DelayedScaling recipe) {
  recipe.validate();
  ThreadState& s = tls();
  saved_ = std::make_unique<Saved>(Saved{s.enabled, s.recipe});
  if (s.depth == 0) s.region = std::make_shared<Region>();
  ++s.depth;
  s.enabled = enabled;
  s.recipe = recipe;
}

Fp8Autocast::~Fp8Autocast() {
  ThreadState& s = tls();
  const bool was_enabled = s.enabled;
  const DelayedScaling recipe = s.recipe;
  s.enabled = saved_->enabled;
  s.recipe = saved_->recipe;
  if (--s.depth > 0) return;
  // Outermost exit: the forward update, only after a training forward (as TE: enabled and
  // grad mode on). An eval forward's amaxes stay in H[0] and feed the next update.
  std::shared_ptr<Region> region = std::move(s.region);
  // A GPU forward's amaxes are read here, once per scope, updated or not: the history buffer
  // is what checkpoints save.
  // A failure of the GPU surfaces here, in a destructor: it is left for the next read of these
  // states to report (the statistics stay deferred) rather than terminating the program.
  if (region) {
    try {
      resolve_deferred(region->forward_states);
    } catch (const std::exception&) {
      return;
    }
  }
  if (!was_enabled || !GradMode::is_enabled() || !region || region->replay) return;
  if (recipe.kind != RecipeKind::kDelayed) return;  // current scaling: nothing to update
  reduce_current_amaxes(region->forward_states, {Role::kInput, Role::kWeight});
  for (const auto& st : region->forward_states) update_forward_scales(*st, recipe);
}

bool fp8_enabled() { return tls().depth > 0 && tls().enabled; }

const Recipe& fp8_recipe() { return tls().recipe; }

std::shared_ptr<BackwardUpdateGroup> register_fp8_forward(
    const std::shared_ptr<ScalingState>& state) {
  ThreadState& s = tls();
  if (!s.region) return nullptr;
  add_unique(s.region->forward_states, state);
  if (t_first_forward != nullptr && s.recipe.kind == RecipeKind::kDelayed)
    save_forward_scales(*t_first_forward, state);
  if (!GradMode::is_enabled()) return nullptr;
  const bool first = s.region->backward == nullptr;
  if (first) {
    s.region->backward = std::make_shared<BackwardUpdateGroup>();
    s.region->backward->recipe = s.recipe;
  }
  add_unique(s.region->backward->states, state);
  return first ? s.region->backward : nullptr;
}

}  // namespace mantissa::fp8
