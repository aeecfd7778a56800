#pragma once
// The MPI communicator's factory (mpi_communicator.cpp). Without MPI in the build it throws
// the message naming what to install.
#include <memory>

#include "mantissa/dist/communicator.h"

namespace mantissa::dist {
std::shared_ptr<Communicator> make_mpi_communicator();
}
