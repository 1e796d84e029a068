// Op family placeholder: the rules are being written; until then no op of this family is
// registered, so programs using them fail with "unsupported op" naming the op.
#include "core/ops/families.h"
#include "core/ops/registry.h"

namespace lossbound {

void registerCreationOps(OpRegistry& /*r*/) {}

}  // namespace lossbound
