// ReduceLROnPlateau's load_state_dict adopts the saved options with the running state, as
// torch's does (it updates __dict__): a scheduler built with other options continues the saved
// one. A malformed option or running value is refused, naming it, with nothing changed; a state
// without the options (written by hand) keeps the constructed ones.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "mantissa/core/error.h"
#include "mantissa/optim/lr_scheduler.h"
#include "mantissa/optim/sgd.h"
#include "scheduler_test_util.h"

namespace mantissa::optim {
namespace {

ReduceLROnPlateau::Options max_half_patience_one() {
  ReduceLROnPlateau::Options o;
  o.mode = "max";
  o.factor = 0.5;
  o.patience = 1;
  return o;
}

// The optimizer's lr after each step(metric).
std::vector<double> lrs_after(ReduceLROnPlateau& s, const std::vector<double>& metrics) {
  std::vector<double> out;
  for (double m : metrics) {
    s.step(m);
    out.push_back(s.optimizer().lr());
  }
  return out;
}

TEST(PlateauStateDict, ADefaultSchedulerLoadingASavedOneBehavesLikeIt) {
  SGD a(one_param(), 1.0);
  ReduceLROnPlateau saved(a, max_half_patience_one());
  lrs_after(saved, {1.0, 2.0, 1.5});  // best 2.0, one bad epoch
  const nlohmann::json state = saved.state_dict();

  SGD b(one_param(), 1.0);
  ReduceLROnPlateau loaded(b);  // min, factor 0.1, patience 10
  loaded.load_state_dict(state);
  b.set_lr(a.lr());  // the optimizer's lr comes back with the optimizer's own state
  EXPECT_EQ(loaded.state_dict(), state);
  EXPECT_EQ(loaded.options().mode, "max");
  EXPECT_EQ(loaded.options().factor, 0.5);
  EXPECT_EQ(loaded.options().patience, 1);

  const std::vector<double> metrics = {1.5, 1.0, 1.0, 3.0, 2.0, 2.0};
  const std::vector<double> want = {0.5, 0.5, 0.25, 0.25, 0.25, 0.125};
  EXPECT_EQ(lrs_after(saved, metrics), want);
  EXPECT_EQ(lrs_after(loaded, metrics), want);  // kept its own options: 1.0 throughout
}

// Every malformed option or running value: a wrong JSON type (a number of another kind, a
// boolean, a string) or a value the constructor refuses.
TEST(PlateauStateDict, MalformedValuesAreRefusedNamingThemWithNothingChanged) {
  SGD a(one_param(), 1.0);
  ReduceLROnPlateau source(a, max_half_patience_one());
  lrs_after(source, {1.0, 2.0});
  const nlohmann::json good = source.state_dict();

  SGD b(one_param(), 1.0);
  ReduceLROnPlateau target(b);
  target.step(4.0);
  const nlohmann::json before = target.state_dict();
  const std::vector<std::pair<std::string, nlohmann::json>> bad = {
      {"mode", "median"},
      {"mode", 1},
      {"factor", 1.0},
      {"factor", 0},
      {"factor", -0.5},
      {"factor", "0.5"},
      {"factor", true},
      {"patience", -1},
      {"patience", 1.5},
      {"patience", true},
      {"threshold", -1e-4},
      {"threshold", nullptr},  // how a NaN or infinity is written
      {"threshold_mode", "relative"},
      {"cooldown", -2},
      {"cooldown", 0.5},
      {"min_lr", -1.0},
      {"min_lr", "0"},
      {"eps", -1e-8},
      {"eps", false},
      {"best", "inf"},
      {"best", true},
      {"num_bad_epochs", -1},
      {"num_bad_epochs", 0.5},
      {"cooldown_counter", "x"},
      {"current_lrs", {-1.0}},
      {"current_lrs", {"0.1"}},
      {"current_lrs", {0.1, 0.2}},
      {"current_lrs", 0.1},
  };
  for (const auto& [key, value] : bad) {
    nlohmann::json state = good;
    state[key] = value;
    const std::string what = key + " = " + value.dump();
    try {
      target.load_state_dict(state);
      ADD_FAILURE() << what << " was accepted";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(key == "current_lrs" && value.size() == 2 ? "param groups" : key),
                std::string::npos)
          << what << ": " << msg;
    }
    EXPECT_EQ(target.state_dict(), before) << what;
  }
  for (const char* key : {"best", "num_bad_epochs", "cooldown_counter", "current_lrs"}) {
    nlohmann::json state = good;
    state.erase(key);
    EXPECT_THROW(target.load_state_dict(state), Error) << "without " << key;
    EXPECT_EQ(target.state_dict(), before) << "without " << key;
  }
  // The constructor refuses the same values.
  ReduceLROnPlateau::Options o;
  o.threshold = -1;
  EXPECT_THROW((ReduceLROnPlateau{b, o}), Error);
  o = {};
  o.eps = -1;
  EXPECT_THROW((ReduceLROnPlateau{b, o}), Error);
  o = {};
  o.min_lr = INFINITY;
  EXPECT_THROW((ReduceLROnPlateau{b, o}), Error);
}

// A state without the option keys (written by hand, or by a version that did not save them)
// still loads: the running state is restored and the constructed options are kept. A null best
// is the initial one of the kept mode.
TEST(PlateauStateDict, AStateWithoutTheOptionsKeepsTheConstructedOnes) {
  SGD a(one_param(), 1.0);
  ReduceLROnPlateau::Options o = max_half_patience_one();
  ReduceLROnPlateau sched(a, o);
  const nlohmann::json old_format = {
      {"name", "ReduceLROnPlateau"}, {"last_epoch", 3},     {"base_lrs", {1.0}},
      {"_last_lr", {0.5}},           {"best", 7.0},         {"num_bad_epochs", 1},
      {"cooldown_counter", 0},       {"current_lrs", {0.5}}};
  sched.load_state_dict(old_format);
  EXPECT_EQ(sched.options().mode, "max");
  EXPECT_EQ(sched.options().factor, 0.5);
  EXPECT_EQ(sched.options().patience, 1);
  EXPECT_EQ(sched.best(), 7.0);
  EXPECT_EQ(sched.num_bad_epochs(), 1);
  EXPECT_EQ(sched.last_epoch(), 3);
  a.set_lr(0.5);    // the optimizer's lr comes back with the optimizer's own state
  sched.step(6.0);  // a second bad epoch in max mode: halved from the restored 0.5
  EXPECT_EQ(a.lr(), 0.25);

  nlohmann::json initial = old_format;
  initial["best"] = nullptr;
  sched.load_state_dict(initial);
  EXPECT_EQ(sched.best(), -INFINITY);
}

}  // namespace
}  // namespace mantissa::optim
