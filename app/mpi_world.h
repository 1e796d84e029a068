#pragma once
// The MPI world of `lossbound-cli analyze --mpi`, behind a plain C++ interface: no <mpi.h> here,
// so the CLI compiles and links without MPI. app/mpi_world_mpi.cpp implements it on MPI (built
// only when CMake finds MPI and LOSSBOUND_MPI is on); app/mpi_world_none.cpp is the stand-in that
// says the build has no MPI. Only the thread that started MPI may call it (MPI_THREAD_FUNNELED):
// the analysis itself runs on the thread pool, the main thread talks to the other ranks.

#include <memory>
#include <optional>
#include <string>

namespace lossbound::app {

/// One message between ranks: its sender, its tag and its bytes.
struct MpiMessage {
  int source = -1;
  int tag = 0;
  std::string data;
};

/// The ranks of one MPI job (MPI_COMM_WORLD); destroying it finalizes MPI.
class MpiWorld {
 public:
  virtual ~MpiWorld() = default;

  /// Returns this process's rank, 0 <= rank() < size().
  virtual int rank() const = 0;
  /// Returns the number of ranks.
  virtual int size() const = 0;
  /// Returns the number of ranks on this machine (sharing its memory), including this one.
  virtual int localSize() const = 0;
  /// Returns the name of this machine as MPI knows it.
  virtual std::string hostName() const = 0;

  /// Sends `data` to rank `dest` with `tag` (>= 0); returns once the buffer may be reused.
  virtual void send(int dest, int tag, const std::string& data) = 0;
  /// Returns the next message waiting from any rank, or nothing; never blocks.
  virtual std::optional<MpiMessage> poll() = 0;
  /// Waits for the next message from rank `source` (any tag) and returns it.
  virtual MpiMessage receive(int source) = 0;
  /// Returns true on every rank when `ok` is true on every rank (every rank must call it).
  virtual bool allTrue(bool ok) = 0;
  /// Returns rank 0's `data` on every rank (every rank must call it; the others' data is unused).
  virtual std::string broadcast(const std::string& data) = 0;
};

/// Returns true when this build can run `analyze --mpi`.
bool mpiCompiledIn();

/// Starts MPI for this process (MPI_Init_thread, funneled) and returns the world; returns null
/// and sets `why` when the build has no MPI or MPI cannot start. Call it once, before any other
/// thread exists, and keep the world until the end of main.
std::unique_ptr<MpiWorld> startMpi(int& argc, char**& argv, std::string* why);

}  // namespace lossbound::app
