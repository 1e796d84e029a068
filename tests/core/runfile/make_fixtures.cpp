// Writes good.h5 and bad.h5 (non-monotonic steps) into the directory (created if needed) given as argument; used by
// the `lossbound-cli info` tests in tests/app.
#include <cstdio>
#include <exception>
#include <filesystem>
#include <string>

#include "tests/core/runfile/run_file_writer.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  try {
    using namespace lossbound::testing;
    const std::string dir = argv[1];
    std::filesystem::create_directories(dir);
    writeRunFile(dir + "/good.h5", RunFixture{});
    RunFixture bad;
    bad.steps = {0, 2, 1};
    writeRunFile(dir + "/bad.h5", bad);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
