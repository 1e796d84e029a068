// Placeholder CPU backend until the Eigen implementation lands.
#include <stdexcept>

#include "core/backend.h"

namespace lossbound {

std::unique_ptr<Backend> createCpuBackend() { throw std::logic_error("CPU backend not built yet"); }

}  // namespace lossbound
