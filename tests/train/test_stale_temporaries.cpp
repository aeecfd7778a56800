// Temporary files left by a save that was killed (kill -9 between write and rename) are
// removed at the next start in that directory, and only those: files a live writer may still
// be writing, and anything else, stay. Also: paths a checkpoint carries for ModelCheckpoint
// must lie in its directory, since kept checkpoints get deleted.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "mantissa/io/stale_temporaries.h"
#include "mantissa/train/checkpoint/checkpoint.h"
#include "mantissa/train/checkpoint/model_checkpoint.h"
#include "support/temp_dir.h"
#include "support/test_util.h"
#include "tiny_module.h"

namespace mantissa::train {
namespace {

namespace fs = std::filesystem;
using mantissa::testing::TempDir;

// A pid that no process holds: a child that has exited and been reaped.
pid_t dead_pid() {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ::waitpid(child, nullptr, 0);
  return child;
}

void touch(const std::string& path) { std::ofstream(path) << "partial"; }

void set_age(const std::string& path, std::chrono::hours age) {
  fs::last_write_time(path, fs::file_time_type::clock::now() - age);
}

TEST(StaleTemporaries, RemovesOnlyFilesWhoseWriterIsGone) {
  TempDir dir;
  const std::string dead = dir.file("last.safetensors.tmp." + std::to_string(dead_pid()));
  const std::string self = "last.safetensors.tmp." + std::to_string(::getpid());
  const std::string ours_old =
      dir.file("epoch=1-step=8.safetensors.tmp." + std::to_string(::getpid()));
  const std::string ours_now = dir.file(self);
  // pid 1 is alive; an old file under its pid predates it: the pid was reused.
  const std::string init_old = dir.file("a.safetensors.tmp.1");
  for (const auto& p : {dead, ours_old, ours_now, init_old}) touch(p);
  set_age(ours_old, std::chrono::hours(24 * 365 * 30));
  set_age(init_old, std::chrono::hours(24 * 365 * 30));
  // Not temporaries of save_safetensors: kept whatever their age.
  const std::vector<std::string> others = {
      dir.file("last.safetensors"), dir.file("notes.txt.tmp.1"),
      dir.file("last.safetensors.tmp.abc"), dir.file("last.safetensors.tmp."),
      dir.file(".safetensors.tmp.1")};
  for (const auto& p : others) {
    touch(p);
    set_age(p, std::chrono::hours(24 * 365 * 30));
  }
  fs::create_directory(dir.file("sub.safetensors.tmp.1"));

  std::vector<std::string> removed = io::remove_stale_safetensors_temporaries(dir.str());
  std::sort(removed.begin(), removed.end());
  std::vector<std::string> expected = {dead, ours_old, init_old};
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(removed, expected);
  for (const auto& p : expected) EXPECT_FALSE(fs::exists(p)) << p;
  EXPECT_TRUE(fs::exists(ours_now)) << "written after this process started: may be in flight";
  for (const auto& p : others) EXPECT_TRUE(fs::exists(p)) << p;
  EXPECT_TRUE(fs::is_directory(dir.file("sub.safetensors.tmp.1")));

  EXPECT_TRUE(io::remove_stale_safetensors_temporaries(dir.file("missing")).empty());
}

TEST(StaleTemporaries, ModelCheckpointCleansItsDirectoryAtFitStart) {
  TempDir dir;
  const std::string orphan = dir.file("last.safetensors.tmp." + std::to_string(dead_pid()));
  touch(orphan);
  ModelCheckpointOptions mc;
  mc.dirpath = dir.str();
  mc.save_last = true;
  TrainerOptions o = testing::quiet_options();
  o.callbacks.push_back(std::make_shared<ModelCheckpoint>(mc));
  Trainer trainer(o);
  testing::TinyModule module;
  data::DataLoader loader(testing::tiny_dataset(16), 8);
  trainer.fit(module, loader);
  EXPECT_FALSE(fs::exists(orphan));
  EXPECT_TRUE(fs::exists(dir.file("last.safetensors")));
  for (const auto& e : fs::directory_iterator(dir.str()))
    EXPECT_EQ(e.path().string().find(".tmp."), std::string::npos) << e.path();
}

TEST(StaleTemporaries, CheckpointedPathsOutsideTheDirectoryAreRefused) {
  // best_k_models entries are deleted when better checkpoints arrive, so a crafted checkpoint
  // naming another file must not be accepted.
  TempDir dir;
  ModelCheckpointOptions mc;
  mc.dirpath = dir.str();
  ModelCheckpoint checkpoint(mc);
  nlohmann::json state = checkpoint.state_dict();
  const std::string in_dir = dir.str() + "/epoch=0-step=4.safetensors";
  state["best_k_models"] = {{in_dir, 1.0}};
  EXPECT_NO_THROW(checkpoint.load_state_dict(state));
  for (const std::string& bad : {std::string("/etc/passwd"), dir.str() + "/../victim.safetensors",
                                 dir.str() + "/x.txt", dir.str() + "x/y.safetensors"}) {
    nlohmann::json s = state;
    s["best_k_models"] = {{bad, 1.0}};
    mantissa::testing::expect_error([&] { ModelCheckpoint(mc).load_state_dict(s); },
                                    {"ModelCheckpoint", "is not a .safetensors file in dirpath"});
    nlohmann::json b = state;
    b["best_model_path"] = bad;
    mantissa::testing::expect_error([&] { ModelCheckpoint(mc).load_state_dict(b); },
                                    {"is not a .safetensors file in dirpath"});
  }
}

}  // namespace
}  // namespace mantissa::train
