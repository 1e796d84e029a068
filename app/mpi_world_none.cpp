// The stand-in MPI world of a build without MPI: `analyze --mpi` is refused with what to install.
#include "app/mpi_world.h"

namespace lossbound::app {

bool mpiCompiledIn() { return false; }

std::unique_ptr<MpiWorld> startMpi(int&, char**&, std::string* why) {
  *why =
      "this build has no MPI support (expected CMake to find MPI with LOSSBOUND_MPI=ON; on "
      "Debian: apt-get install openmpi-bin libopenmpi-dev, then configure again)";
  return nullptr;
}

}  // namespace lossbound::app
