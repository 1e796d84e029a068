// libFuzzer target: parseProgram() on arbitrary bytes must either return a valid Program or
// throw ProgramError — never crash, hang or throw anything else.
#include "core/ir/program_parser.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const lossbound::Program p = lossbound::parseProgram(text, "fuzz");
    lossbound::validateProgram(p);  // a parsed program must also pass the validator on its own
  } catch (const lossbound::ProgramError&) {
  }
  return 0;
}
