#pragma once
// An error that every rank of a data-parallel job throws together, after the ranks agreed on it
// in a collective (in one process: always). Such a job ends as one process does: each rank leaves
// fit, rank 0 writes the run's outputs and says why once, and every rank returns the same exit
// status. An error that one rank throws alone must abort the job instead (DDPStrategy::
// on_exception, apps/main.cpp), or the other ranks would wait for it in their next collective.
#include <string>

#include "mantissa/core/error.h"

namespace mantissa::train {

class RankAgreedError : public Error {
 public:
  explicit RankAgreedError(const std::string& message, bool every_rank = false)
      : Error(message), every_rank_(every_rank) {}
  bool every_rank() const { return every_rank_; }

 private:
  bool every_rank_;
};

}  // namespace mantissa::train
